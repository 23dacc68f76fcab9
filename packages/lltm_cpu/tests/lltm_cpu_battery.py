"""lltm_cpu's ops as the test battery sees them: the LLTM's one declaration, shared with
lltm_cuda (lltm_common/tests/lltm_common/battery.py), on the CPU."""

from lltm_common.battery import lltm_ops

import lltm_cpu

OPS = lltm_ops(lltm_cpu, "cpu")

"""lltm_cuda's ops as the test battery sees them: the LLTM's one declaration, shared with
lltm_cpu (lltm_common/tests/lltm_common/battery.py), on CUDA."""

from lltm_common.battery import lltm_ops

import lltm_cuda

OPS = lltm_ops(lltm_cuda, "cuda")

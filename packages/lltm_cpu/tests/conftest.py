"""lltm_cpu's tests: the LLTM ops' battery declaration and suite of lltm_common/tests, run on
the CPU."""

import sys
from pathlib import Path

# shared_build (the markers, the CUDA skip, the battery, the suite's path): vendored into
# the sdist, at the repository root in a checkout.
_package = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(_package / "_vendor"), str(_package.parents[1] / "shared_build" / "src")]
from shared_build.testing import *  # noqa: E402, F403
from shared_build.testing import common_tests  # noqa: E402

# lltm_common.battery (the ops as the battery sees them), .suite and .reference.
common_tests(_package, "lltm_common")
sys.path.append(str(_package / "tests"))  # lltm_cpu_battery.py
from lltm_common.suite import conftest  # noqa: E402

impl = conftest("lltm_cpu", "cpu")

"""warp_perspective's tests: the cuda/slow markers and the CUDA skip, from shared_build."""

import sys
from pathlib import Path

# shared_build: vendored into the sdist (no repository conftest.py above it there), at the
# repository root in a checkout.
_package = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(_package / "_vendor"), str(_package.parents[1] / "shared_build" / "src")]
# warp_perspective_battery.py (the ops as the battery sees them), warp_reference.py and
# warp_inputs.py.
sys.path.append(str(_package / "tests"))
from shared_build.testing import *  # noqa: E402, F403

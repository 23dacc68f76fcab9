"""The LLTM suite's ``impl`` fixture: lltm_cpu on the CPU; the cuda/slow markers and the
CUDA skip from shared_build.testing."""

import sys
from pathlib import Path

# The suite is one source with lltm_common/ and the hooks live in shared_build: both are
# vendored into the sdist (_vendor/), beside us in a checkout. The suite's folder goes first:
# _vendor/ also holds lltm_common's sources, a folder of the same name.
_package = Path(__file__).resolve().parents[1]
_vendor, _repo = _package / "_vendor", _package.parents[1]
_common = (_vendor if (_vendor / "lltm_common").is_dir() else _repo) / "lltm_common"
sys.path[:0] = [str(_common / "tests"), str(_vendor), str(_repo / "shared_build" / "src")]
from lltm_common.suite import conftest  # noqa: E402

from shared_build.testing import (  # noqa: E402, F401
    pytest_collection_modifyitems,
    pytest_configure,
)

impl = conftest("lltm_cpu", "cpu")

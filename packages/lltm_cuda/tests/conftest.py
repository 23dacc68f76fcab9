"""The LLTM suite's ``impl`` fixture: lltm_cuda on the CUDA."""

import sys
from pathlib import Path

# The suite is one source with lltm_common/: vendored into the sdist, beside us in a checkout.
_here = Path(__file__).resolve().parents[1]
_common = _here / "_vendor" / "lltm_common"
sys.path.insert(
    0, str((_common if _common.is_dir() else _here.parents[1] / "lltm_common") / "tests")
)
from lltm_common.suite import conftest  # noqa: E402

impl, pytest_collection_modifyitems = conftest("lltm_cuda", "cuda")

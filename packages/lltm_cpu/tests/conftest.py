"""The ``impl`` fixture of the LLTM suite: lltm_cpu on the CPU."""

import sys
from pathlib import Path

# The suite is one source with lltm_common/: vendored into the sdist, beside us in a checkout.
_root = Path(__file__).resolve().parents[1]
_common = next(p for p in (_root / "_vendor", _root.parents[1]) if (p / "lltm_common").is_dir())
sys.path.insert(0, str(_common / "lltm_common" / "tests"))

from lltm_common.suite import impl_fixture, skip_cuda_tests_without_gpu  # noqa: E402

impl = impl_fixture("lltm_cpu", "cpu")


def pytest_collection_modifyitems(items):
    skip_cuda_tests_without_gpu(items)

"""Fixtures and markers shared by every test suite in the repository.

pytest finds this file for any test under the repository root, so the package suites
(packages/*/tests) and the cross-package suite (tests/) share one definition of the CUDA
skip and of the device parametrisation.
"""

from __future__ import annotations

import pytest
import torch

from shared_build.testing import file_scope

# Test functions whose cases pytest-xdist may hand to different workers, where a file's tests
# otherwise run on one (--dist loadfile): each case is long (30-120 s) and works in its own
# folder, and these files would be the runs' long tails on one worker.
SPREAD = frozenset(
    {
        "tests/test_examples.py::test_example_runs",
        "shared_build/tests/test_cli.py::test_scaffolded_package_builds_and_passes_its_tests",
    }
)


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """--dist loadfile, with the cases of the SPREAD tests as work units of their own."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class SpreadFileScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return file_scope(nodeid, SPREAD)

    return SpreadFileScheduling(config, log)


try:
    from hypothesis import HealthCheck, settings
except ImportError:  # the property tests skip themselves without it
    pass
else:
    # The property tests (the test battery's). "ci", the default, draws the same
    # examples on every run (a red CI is reproducible); --hypothesis-profile=thorough draws
    # new ones, ten times as many.
    _SLOW_DRAWS = [HealthCheck.too_slow, HealthCheck.data_too_large]
    settings.register_profile(
        "ci",
        max_examples=200,
        deadline=None,
        derandomize=True,
        print_blob=True,
        suppress_health_check=_SLOW_DRAWS,
    )
    settings.register_profile(
        "thorough",
        max_examples=2000,
        deadline=None,
        print_blob=True,
        suppress_health_check=_SLOW_DRAWS,
    )
    settings.load_profile("ci")


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)

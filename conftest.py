"""What every suite of the repository shares in its runs: xdist's scheduling of the long
tests, the hypothesis profiles, the seed (the markers and the CUDA skip: shared_build.testing)."""

from __future__ import annotations

import pytest
import torch

from shared_build.testing import file_scope

# Test functions whose cases pytest-xdist may hand to different workers, where a file's tests
# otherwise run on one (--dist loadfile): each case is long (30-120 s) and works in its own
# folder, and these files would be the runs' long tails on one worker.
SPREAD = (
    "tests/test_examples.py::test_example_runs",
    "shared_build/tests/test_cli.py::test_scaffolded_package_builds_and_passes_its_tests",
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
    slow_draws = [HealthCheck.too_slow, HealthCheck.data_too_large]
    settings.register_profile("thorough", max_examples=2000, deadline=None, print_blob=True,
                              suppress_health_check=slow_draws)  # fmt: skip
    settings.register_profile("ci", settings.get_profile("thorough"), max_examples=200,
                              derandomize=True)  # fmt: skip
    settings.load_profile("ci")


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)

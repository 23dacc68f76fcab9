"""pytest hooks every package's test suite needs, from a checkout as from its sdist.

In a checkout the repository's conftest.py registers the ``cuda`` and ``slow`` markers and
skips the cuda-marked tests when no GPU is visible. An extracted sdist has no repository
around it, so each package's ``tests/conftest.py`` takes the same hooks from here (the sdist
vendors shared_build):

    from shared_build.testing import pytest_collection_modifyitems, pytest_configure
"""

from __future__ import annotations

import pytest

MARKERS = {
    "cuda": "needs a CUDA GPU (skipped with the reason shown when none is visible)",
    "slow": "takes more than a few seconds (torch.compile with Inductor, builds, examples)",
}
NO_CUDA_REASON = (
    "no CUDA GPU visible (torch.cuda.is_available() is False); run on a GPU machine, "
    "e.g. `nox -s gpu`"
)


def pytest_configure(config: pytest.Config) -> None:
    registered = "\n".join(config.getini("markers"))
    for name, help_text in MARKERS.items():
        if f"{name}:" not in registered:
            config.addinivalue_line("markers", f"{name}: {help_text}")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason=NO_CUDA_REASON)
    for item in items:
        if "cuda" in item.keywords and not item.get_closest_marker("skip"):
            item.add_marker(skip)

"""pytest hooks every package's test suite needs, from a checkout as from its sdist.

In a checkout the repository's conftest.py registers the ``cuda``, ``slow`` and ``once``
markers, skips the cuda-marked tests when no GPU is visible, and skips the once-marked tests
under every torch but the one REPO_ONCE_TORCH names. An extracted sdist has no repository
around it, so each package's ``tests/conftest.py`` takes the same hooks from here (the sdist
vendors shared_build):

    from shared_build.testing import *  # pytest_configure, pytest_collection_modifyitems
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# What a conftest.py takes with ``from shared_build.testing import *``: pytest's hooks.
__all__ = ["pytest_collection_modifyitems", "pytest_configure"]

MARKERS = {
    "cuda": "needs a CUDA GPU (skipped with the reason shown when none is visible)",
    "slow": "takes more than a few seconds (torch.compile with Inductor, builds, examples)",
    "once": (
        "checks builds and packaging (pip, sdists, build variants, shared_build), not torch: where REPO_ONCE_TORCH "
        "is set (nox -s tests sets it to the newest torch of the run), it runs under that "
        "torch only"
    ),
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

    skips = []
    if not torch.cuda.is_available():
        skips.append(("cuda", pytest.mark.skip(reason=NO_CUDA_REASON)))
    once_torch = os.environ.get("REPO_ONCE_TORCH", "")
    if once_torch and once_torch != torch.__version__.split("+")[0]:
        reason = f"runs once per nox run, under torch {once_torch} (REPO_ONCE_TORCH)"
        skips.append(("once", pytest.mark.skip(reason=reason)))
    for marker, skip in skips:
        for item in items:
            if marker in item.keywords and not item.get_closest_marker("skip"):
                item.add_marker(skip)


def common_tests(package: Path, common: str) -> None:
    """Put the tests/ folder of the common source folder ``common`` (``[tool.shared_build]
    common``) first on sys.path: the sdist's vendored copy (``_vendor/<common>``), else the
    checkout's. First, because _vendor/ itself, where shared_build comes from, also holds a
    folder of that name (the common sources)."""
    vendored = package / "_vendor" / common
    folder = vendored if vendored.is_dir() else package.parents[1] / common
    sys.path.insert(0, str(folder / "tests"))

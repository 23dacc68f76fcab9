"""The cuda/slow markers and the CUDA skip, from shared_build: in an extracted sdist (no
repository conftest.py above it) from its vendored copy, in a checkout from the repository."""

import sys
from pathlib import Path

_package = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(_package / "_vendor"), str(_package.parents[1] / "shared_build" / "src")]
from shared_build.testing import pytest_collection_modifyitems, pytest_configure  # noqa: E402

__all__ = ["pytest_collection_modifyitems", "pytest_configure"]

"""The ``impl`` fixture of the shared LLTM suite (tests/lltm_common): lltm_cpu on the CPU."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# The shared reference and suite live at the repository root, beside the cross-package tests.
sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tests"))

from lltm_common.suite import Impl

import lltm_cpu


@pytest.fixture(scope="session")
def impl() -> Impl:
    return Impl(name="lltm_cpu", package=lltm_cpu, device="cpu")

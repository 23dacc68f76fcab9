"""Fixtures of shared_build's own tests."""

from __future__ import annotations

import os
import shutil
import sys

import pytest


@pytest.fixture(scope="session")
def shared_cxx() -> str:
    """A C++ compiler here that links the shared libstdc++ by default (CXX, c++, g++,
    g++-real, g++-N, as shared_build's doctor tries them), for the tests that wrap one in a
    wrapper that links statically: on the lent GPU machines ``c++`` was itself such a
    wrapper."""
    if not sys.platform.startswith("linux") or shutil.which("readelf") is None:
        pytest.skip("needs ELF and readelf")
    from shared_build import doctor

    chosen, tried = doctor.pick_cxx(dict(os.environ))
    if chosen is None:
        names = ", ".join(name for name, _ in tried) or "none found"
        pytest.skip(f"no C++ compiler here links the shared libstdc++ by default ({names})")
    program, *rest = chosen.split()
    return " ".join([shutil.which(program) or program, *rest])  # callable from any PATH

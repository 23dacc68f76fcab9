"""The repository's conftest.py: the pytest-xdist scheduler's spread tests exist."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_every_spread_test_names_a_test_function(request: pytest.FixtureRequest) -> None:
    """A renamed test would silently go back to running on its file's one worker."""
    conftest = request.config.pluginmanager.get_plugin(str(ROOT / "conftest.py"))
    assert conftest is not None and conftest.SPREAD
    for entry in conftest.SPREAD:
        path, _, function = entry.partition("::")
        tree = ast.parse((ROOT / path).read_text())
        names = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        assert function in names, f"conftest.SPREAD names {entry}, which does not exist"

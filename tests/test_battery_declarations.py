"""Every op of every package is declared for the test battery (shared_build.battery), or
named in its declaration's NOT_DECLARED with why.

The packages are discovered from packages/*, their ops from the dispatcher: an op added to
a package and left out of its tests/<package>_battery.py fails here, so no op goes
without the battery's checks (fuzzing, properties, threads, memory ...)."""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = sorted(p.parent.name for p in ROOT.glob("packages/*/pyproject.toml"))
SKIPPED = dict(
    item.split("=", 1)
    for item in os.environ.get("REPO_SKIPPED_PACKAGES", "").split(",")
    if "=" in item  # a reason may hold commas: only name=reason items start an entry
)


def declaration(package: str):
    tests = ROOT / "packages" / package / "tests"
    path = tests / f"{package}_battery.py"
    assert path.exists(), f"{package} declares its ops for the battery in {path.relative_to(ROOT)}"
    # What a declaration imports beside it: its package's test helpers (pytest puts a suite's
    # folder on sys.path when it collects it; this test may run without that suite).
    if str(tests) not in sys.path:
        sys.path.insert(0, str(tests))
    spec = importlib.util.spec_from_file_location(f"{package}_battery", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("package", PACKAGES)
def test_every_op_of_the_package_is_declared(package):
    if package in SKIPPED:
        pytest.skip(f"{package} not built here: {SKIPPED[package]}")
    if importlib.util.find_spec(package) is None:
        pytest.skip(f"{package} is not installed here")
    importlib.import_module(package)
    registered = {n for n in torch._C._dispatch_get_all_op_names() if n.startswith(f"{package}::")}
    module = declaration(package)
    declared = {op.op._schema.name for op in module.OPS if hasattr(op.op, "_schema")}
    exempt = getattr(module, "NOT_DECLARED", {})  # op -> why the battery does not run it
    assert registered, f"no op of {package} is registered"
    assert sorted(registered - declared - set(exempt)) == [], (
        f"ops of {package} the battery does not check"
    )
    assert all(reason.strip() for reason in exempt.values())


@pytest.mark.parametrize("package", PACKAGES)
def test_the_package_suite_runs_the_battery(package):
    suites = (ROOT / "packages" / package / "tests").glob("test_*.py")
    assert any(re.search(r"^test_battery = battery\(", p.read_text(), re.M) for p in suites)

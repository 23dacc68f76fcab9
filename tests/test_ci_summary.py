""".ci/summary.py, CI's closing table, on reports made here in the format of the sessions'
reports (shared_build.workspace.reports)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _load():
    spec = importlib.util.spec_from_file_location("ci_summary", ROOT / ".ci" / "summary.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


summary = _load()


def _report(folder: Path, session: str, status: str = "passed", **counts: int) -> None:
    record = {
        "session": session,
        "status": status,
        "wall_s": 120.4,
        "pytest_s": 100.0,
        "builds_s": {"add_ext @ 2.13.0": 20.2},
        "passed": counts.get("passed", 10),
        "failed": counts.get("failed", 0),
        "skipped": counts.get("skipped", 2),
    }
    name = "".join(c if c.isalnum() else "_" for c in session)
    (folder / f"{name}.json").write_text(json.dumps(record))


def test_rows_in_the_order_named_and_a_closing_total(tmp_path, capsys):
    _report(tmp_path, "tests(torch='2.13.0')", passed=5, skipped=1)
    _report(tmp_path, "sanitize", passed=7, skipped=3)
    assert summary.main([str(tmp_path), "sanitize", "tests(torch='2.13.0')"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = [line for line in lines if line.startswith("| ") and "---" not in line]
    assert rows[1].startswith("| sanitize | passed | 120 | 20 | 100 | 7 | 3 | 0 |")
    assert rows[2].startswith("| tests(torch='2.13.0') | passed |")
    assert lines[-1] == "total: 12 passed, 0 failed, 4 skipped"


def test_a_failed_or_missing_session_fails_the_summary(tmp_path, capsys):
    _report(tmp_path, "sanitize", status="failed", failed=1)
    assert summary.main([str(tmp_path), "sanitize"]) == 1
    _report(tmp_path, "sanitize")
    assert summary.main([str(tmp_path), "sanitize", "tests(torch='2.15.0')"]) == 1
    out = capsys.readouterr().out
    assert "| tests(torch='2.15.0') | no report (did not run) |" in out
    # Failed tests in a session that nox counted as passed still fail the summary.
    _report(tmp_path, "sanitize", failed=2)
    assert summary.main([str(tmp_path), "sanitize"]) == 1

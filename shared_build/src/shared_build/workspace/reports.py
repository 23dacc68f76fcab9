"""Each session's wall time, build times and test counts, written to .nox/reports/<session>.json
when the session ends (passed or not), for CI's closing table (.ci/summary.py)."""

from __future__ import annotations

import contextlib
import json
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from .repo import Repo

if TYPE_CHECKING:
    import nox

    from .envs import TorchEnv


def junit_counts(xml_files: list[Path]) -> dict[str, int]:
    """Passed, failed (failures and errors) and skipped tests of pytest's JUnit XML files
    (a missing file counts nothing)."""
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for xml in xml_files:
        if not xml.is_file():
            continue
        for suite in ET.parse(xml).getroot().iter("testsuite"):
            for key in totals:
                totals[key] += int(suite.get(key, 0))
    failed = totals["failures"] + totals["errors"]
    return {
        "passed": totals["tests"] - failed - totals["skipped"],
        "failed": failed,
        "skipped": totals["skipped"],
    }


class Report:
    """One session's wall time, builds and test counts, written to .nox/reports/<name>.json
    when the session ends (passed or not) for CI's closing table (.ci/summary.py)."""

    def __init__(self, session: nox.Session, repo: Repo) -> None:
        self.session = session
        self.repo = repo
        self.name = session.name
        self.start = time.perf_counter()
        self.xml_files: list[Path] = []
        self.envs: list[TorchEnv] = []
        self.pytest_seconds = 0.0
        repo.reports_dir.mkdir(parents=True, exist_ok=True)
        slug = "".join(c if c.isalnum() or c in "._-" else "_" for c in self.name).strip("_")
        self.path = repo.reports_dir / f"{slug}.json"
        self.path.unlink(missing_ok=True)
        for old in repo.reports_dir.glob(f"{slug}-*.xml"):
            old.unlink()

    def pytest(self, torch_env: TorchEnv, *args: str, **kwargs) -> None:
        """torch_env's pytest with args, its results in a JUnit XML file this report counts."""
        xml = self.path.with_name(f"{self.path.stem}-{len(self.xml_files)}.xml")
        self.xml_files.append(xml)
        start = time.perf_counter()
        try:
            torch_env.run(torch_env.python, "-m", "pytest", f"--junitxml={xml}", *args, **kwargs)
        finally:
            self.pytest_seconds += time.perf_counter() - start

    def counts(self) -> dict[str, int]:
        return junit_counts(self.xml_files)

    def write(self, status: str) -> None:
        builds = {
            f"{name} @ {env.version}": round(seconds, 1)
            for env in self.envs
            for name, seconds in env.build_seconds.items()
            if name != "shared_build"
        }
        builds.update(
            {name: round(seconds, 1) for name, seconds in self.repo.stable_build_seconds.items()}
        )
        record = {
            "session": self.name,
            "status": status,
            "wall_s": round(time.perf_counter() - self.start, 1),
            "pytest_s": round(self.pytest_seconds, 1),
            "builds_s": builds,
            **self.counts(),
        }
        self.path.write_text(json.dumps(record, indent=1))
        self.session.log(
            f"{self.name}: {status} in {record['wall_s']:.0f} s (pytest {record['pytest_s']:.0f} s): "
            f"{record['passed']} passed, {record['failed']} failed, {record['skipped']} skipped"
        )


@contextlib.contextmanager
def reported(session: nox.Session, repo: Repo) -> Iterator[Report]:
    """Record the session's Report whether it passes or fails."""
    report = Report(session, repo)
    status = "failed"
    try:
        yield report
        status = "passed"
    finally:
        report.write(status)

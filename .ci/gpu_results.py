"""What one pytest run of the GPU check recorded, as it happened, and what it proves. As a
pytest plugin (``-p gpu_results``, GPU_RESULTS naming a file) it appends one JSON line per
event, flushed as written, so a run the deadline kills keeps every result before the kill.
"""

from __future__ import annotations

import json
import os
import re
import signal
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

# Skip reasons that mean the machine lacks what the GPU check exists to exercise.
FORBIDDEN_SKIP = re.compile(
    r"(?i:no CUDA GPU visible|CUDA is not available|is not installed|no module named)"
    r"|could not import '[^']+'"  # pytest.importorskip's message
)
# "needs 21 GB of free GPU memory": a failure on a GPU with that much memory in all.
MEMORY_SKIP = re.compile(r"needs (\d+(?:\.\d+)?) GB of free GPU memory")

PASSED, FAILED, CUT = "passed", "FAILED", "NOT REACHED"


class _Recorder:
    def __init__(self, path: str) -> None:
        self.file = open(path, "a", encoding="utf-8")  # noqa: SIM115 (open for the session)
        self.collected = False

    def write(self, **record) -> None:
        self.file.write(json.dumps(record) + "\n")
        self.file.flush()

    def pytest_collection_finish(self, session) -> None:
        self._collected([item.nodeid for item in session.items])

    def pytest_xdist_node_collection_finished(self, node, ids) -> None:
        self._collected(list(ids))  # every worker collects the same tests: the first is written

    def _collected(self, ids: list[str]) -> None:
        if not self.collected:
            self.collected = True
            self.write(event="collected", ids=ids)

    def pytest_collectreport(self, report) -> None:
        if not report.passed:
            self.write(event="collect", **_outcome(report))

    def pytest_runtest_logstart(self, nodeid, location) -> None:
        self.write(event="start", id=nodeid)

    def pytest_runtest_logreport(self, report) -> None:
        if report.when == "call" or not report.passed:
            seconds = round(report.duration, 3)
            self.write(event="result", when=report.when, seconds=seconds, **_outcome(report))

    def pytest_sessionfinish(self, session, exitstatus) -> None:
        self.write(event="finish", exitstatus=int(exitstatus))
        self.file.close()


def _outcome(report) -> dict[str, str]:
    """A report's test id, outcome and reason: a skip's, or the last lines of a failure."""
    found = {"id": report.nodeid, "outcome": report.outcome}
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return found | {"reason": str(longrepr[2]).removeprefix("Skipped: ")}
    text = getattr(report, "longreprtext", "") or str(longrepr or "")
    lines = [line for line in text.splitlines() if line.strip()]
    return found | {"reason": " | ".join(lines[-3:])[-400:]}


def pytest_configure(config) -> None:
    path = os.environ.get("GPU_RESULTS")
    if path and not hasattr(config, "workerinput"):  # xdist workers report to the controller
        config.pluginmanager.register(_Recorder(path), "gpu_results_recorder")


@dataclass
class Run:
    """One pytest run, read back from its records."""

    collected: list[str] | None = None
    started: list[str] = field(default_factory=list)
    outcomes: dict[str, str] = field(default_factory=dict)  # id -> passed/failed/skipped
    seconds: dict[str, float] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)
    collect_problems: list[tuple[str, str, str]] = field(default_factory=list)
    exitstatus: int | None = None

    @classmethod
    def read(cls, path: Path) -> Run:
        run = cls()
        if not path.exists():
            return run
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue  # the last line of a process killed while writing
            event = record.get("event")
            if event == "collected":
                run.collected = record["ids"]
            elif event == "start":
                run.started.append(record["id"])
            elif event == "collect":
                run.collect_problems.append((record["id"], record["outcome"], record["reason"]))
            elif event == "result":
                test, outcome = record["id"], record["outcome"]
                run.seconds[test] = run.seconds.get(test, 0.0) + record.get("seconds", 0.0)
                # A failed setup or teardown fails the test; a skip at setup is its outcome.
                if run.outcomes.get(test) != "failed":
                    run.outcomes[test] = outcome
                if outcome != "passed":
                    run.reasons[test] = record.get("reason", "")
            elif event == "finish":
                run.exitstatus = record["exitstatus"]
        return run

    def count(self, outcome: str) -> int:
        return sum(o == outcome for o in self.outcomes.values())

    def not_reached(self) -> list[str]:
        return [t for t in self.collected or [] if t not in self.outcomes]

    def running_at_the_end(self) -> str | None:
        """The last test started and never reported: where a crash or a cut hit."""
        for test in reversed(self.started):
            if test not in self.outcomes:
                return test
        return None


def forbidden_skip(reason: str, gpu_memory_gb: float | None) -> bool:
    if FORBIDDEN_SKIP.search(reason):
        return True
    need = MEMORY_SKIP.search(reason)
    return bool(need and gpu_memory_gb is not None and gpu_memory_gb >= float(need.group(1)))


def describe_exit(rc: int | None) -> str:
    if rc is None:
        return "no exit status"
    if rc < 0 or rc > 128:
        number = -rc if rc < 0 else rc - 128
        try:
            return f"killed by {signal.Signals(number).name}"
        except ValueError:
            return f"killed by signal {number}"
    return f"exit {rc}"


def verdict(
    step: str, run: Run, rc: int | None, *, cut: bool = False, gpu_memory_gb: float | None = None
) -> tuple[str, str]:
    """(summary line, status): status is PASSED, FAILED (a defect: failures, a crash, no
    test run, a forbidden skip) or NOT REACHED (the deadline cut the run and nothing in what
    ran failed: which tests it did not reach is in the line)."""
    passed, failed, skipped = run.count("passed"), run.count("failed"), run.count("skipped")
    line = f"{step}: {passed} passed, {failed} failed, {skipped} skipped"
    skips = Counter(run.reasons[t] for t, o in run.outcomes.items() if o == "skipped")
    skips.update(f"{r} (collection of {t})" for t, o, r in run.collect_problems if o == "skipped")
    problems = []
    if failed:
        failing = [t for t, o in run.outcomes.items() if o == "failed"]
        problems.append(f"{failed} failed: {', '.join(failing[:5])}{' ...' if failed > 5 else ''}")
    errors = [(t, r) for t, o, r in run.collect_problems if o == "failed"]
    if errors:
        problems.append(f"{len(errors)} collection errors: {errors[0][0]}: {errors[0][1]}")
    forbidden = {r: n for r, n in skips.items() if forbidden_skip(r, gpu_memory_gb)}
    if forbidden:
        wanted = "; ".join(f"{n} x {r!r}" for r, n in sorted(forbidden.items()))
        problems.append(f"skipped for want of what this machine must have: {wanted}")
    not_reached = run.not_reached()
    if not cut and run.exitstatus is None:
        where = run.running_at_the_end()
        problems.append(
            f"crashed ({describe_exit(rc)})"
            + (f" in {where}" if where else "")
            + (f"; {len(not_reached)} tests not run" if not_reached else "")
        )
    elif not cut and not problems and passed == 0:
        problems.append("no test ran")
    elif not cut and not problems and rc not in (0, None):
        problems.append(f"pytest {describe_exit(rc)}")
    allowed = {r: n for r, n in skips.items() if r not in forbidden}
    if allowed and not problems:
        line += " (" + "; ".join(f"{n} x {r}" for r, n in sorted(allowed.items())) + ")"
    if problems:
        return f"{line}: FAILED ({'; '.join(problems)})", FAILED
    if cut:
        if run.collected is None:
            return f"{line}: NOT REACHED (cut by the deadline before its tests were collected)", CUT
        files = Counter(t.split("::", 1)[0] for t in not_reached)  # 'a.py (3), b.py (1)'
        where = ", ".join(f"{f} ({n})" for f, n in sorted(files.items()))
        return (
            f"{line}: NOT REACHED (cut by the deadline: {len(not_reached)} of "
            f"{len(run.collected)} tests not run: {where})",
            CUT,
        )
    return line, PASSED

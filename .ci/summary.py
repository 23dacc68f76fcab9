"""CI's closing table: each nox session's wall time, build times and test counts.

    python3 .ci/summary.py .nox/reports [SESSION ...]

Reads the .nox/reports/<session>.json files that the noxfile's sessions write when they
end (shared_build.workspace.reports.Report), prints one row per session in the order
named (every report when none is named), then a closing line `total: N passed, N failed,
N skipped`. Exits 1 when a named session left no report (it never got to run) or any
report says failed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def load(folder: Path, sessions: list[str]) -> tuple[list[dict], list[str]]:
    """The reports of the named sessions (all when none is named), and those missing."""
    reports = {}
    for path in sorted(folder.glob("*.json")):
        record = json.loads(path.read_text())
        reports[record["session"]] = record
    if not sessions:
        return list(reports.values()), []
    return [reports[s] for s in sessions if s in reports], [s for s in sessions if s not in reports]


def table(reports: list[dict], missing: list[str]) -> list[str]:
    lines = [
        "| session | result | wall (s) | builds (s) | pytest (s) | passed | skipped | failed |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in reports:
        builds = sum(r.get("builds_s", {}).values())
        lines.append(
            f"| {r['session']} | {r['status']} | {r['wall_s']:.0f} | {builds:.0f} | "
            f"{r['pytest_s']:.0f} | {r['passed']} | {r['skipped']} | {r['failed']} |"
        )
    lines += [f"| {name} | no report (did not run) | | | | | | |" for name in missing]
    for r in reports:
        for build, seconds in r.get("builds_s", {}).items():
            lines.append(f"  {r['session']}: built {build} in {seconds:.0f} s")
    total = {k: sum(r[k] for r in reports) for k in ("passed", "failed", "skipped")}
    lines.append(
        f"total: {total['passed']} passed, {total['failed']} failed, {total['skipped']} skipped"
    )
    return lines


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    reports, missing = load(Path(argv[0]), argv[1:])
    print("\n".join(table(reports, missing)))
    failed = missing or any(r["status"] != "passed" or r["failed"] for r in reports)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

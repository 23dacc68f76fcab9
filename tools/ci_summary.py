"""CI's closing table: each nox session's result, time and test counts, and the source lines.

    python3 tools/ci_summary.py .nox/report.json

Reads nox's --report JSON and the JUnit XML files the sessions' pytest runs wrote
(.nox/junit/<session>-<n>.xml); prints a row per session, the non-blank source lines per
area (the ops, the library, the machinery: where growth happens), and last the line
`total: N passed, N failed, N skipped`. Exits 1 when a session failed or ran no test.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The areas of the source, by path (tests, examples, templates and results are not counted).
AREAS = {
    "ops": r"^packages/[^/]+/(csrc|src)/|^lltm_common/(csrc|python)/",
    "library": r"^shared_build/src/",
}


def counts(xml_files: list[Path]) -> Counter[str]:
    """passed, failed (failures and errors) and skipped, summed over the files' test suites."""
    total: Counter[str] = Counter()
    for suite in (s for xml in xml_files for s in ET.parse(xml).getroot().iter("testsuite")):
        tests, skipped = int(suite.get("tests", 0)), int(suite.get("skipped", 0))
        failed = int(suite.get("failures", 0)) + int(suite.get("errors", 0))
        total.update(passed=tests - failed - skipped, failed=failed, skipped=skipped)
    return total


def source_lines() -> dict[str, int]:
    files = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True
    ).stdout.split()
    lines = {"ops": 0, "library": 0, "machinery": 0}
    for name in files:
        if re.search(r"(^|/)(tests|examples|templates)/|^benchmarks/results/", name) or not (
            re.search(r"\.(py|cpp|h|cu|cuh|c|sh)$", name) or name == ".ci/run"
        ):
            continue
        area = next((a for a, pattern in AREAS.items() if re.search(pattern, name)), "machinery")
        text = (ROOT / name).read_text(errors="replace") if (ROOT / name).is_file() else ""
        lines[area] += sum(1 for line in text.splitlines() if line.strip())
    return lines


def main(report: Path) -> int:
    sessions = json.loads(report.read_text())["sessions"] if report.exists() else []
    rows = [
        "| session | result | wall (s) | passed | skipped | failed |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    total: Counter[str] = Counter()
    bad = not sessions
    for s in sessions:
        name = (s.get("signatures") or [s["name"]])[0]  # tests(torch='2.13.0'), not tests
        slug = "".join(c if c.isalnum() else "_" for c in name).strip("_")
        c = counts(sorted((report.parent / "junit").glob(f"{slug}-*.xml")))
        total += c
        rows.append(f"| {name} | {s['result']} | {s.get('duration') or 0:.0f} | "
                    f"{c['passed']} | {c['skipped']} | {c['failed']} |")  # fmt: skip
        bad |= s["result"] not in ("success", "skipped") or bool(c["failed"])
    lines = source_lines()
    print("\n".join(rows))
    areas = ", ".join(f"{k} {v}" for k, v in lines.items())
    print(f"source lines (non-blank): {areas}, total {sum(lines.values())}")
    print(f"total: {total['passed']} passed, {total['failed']} failed, {total['skipped']} skipped")
    return 1 if bad else 0


if __name__ == "__main__":
    if sys.argv[1:] in (["-h"], ["--help"]):
        sys.exit(print(__doc__))
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else ".nox/report.json")))

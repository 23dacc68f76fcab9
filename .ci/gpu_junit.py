"""One line for a pytest JUnit XML file of the GPU check, and whether the step passed.

    python3 .ci/gpu_junit.py STEP tests.xml [--rc N]

Prints `gpu_check: STEP: N passed, N failed, N skipped (why: count, ...)` and exits 1 when
the step failed: a failure or error, no test run at all, pytest's exit status (--rc) other
than 0, or a test skipped for a reason that a GPU machine must not have: no GPU visible, or
a test dependency missing (pytest.importorskip). Such a skip would let the check pass
without running what it is for.
"""

from __future__ import annotations

import argparse
import re
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

# Skip reasons that mean the machine lacks what the GPU check exists to exercise.
FORBIDDEN_SKIPS = (
    re.compile(r"no CUDA GPU visible", re.I),
    re.compile(r"CUDA is not available", re.I),
    re.compile(r"could not import '([^']+)'"),  # pytest.importorskip's message
    re.compile(r"is not installed", re.I),
)


def counts(xml_text: str) -> tuple[int, int, int, Counter[str]]:
    """(passed, failed (errors included), skipped, skip reasons) of a JUnit XML report."""
    root = ET.fromstring(xml_text)
    passed = failed = skipped = 0
    reasons: Counter[str] = Counter()
    for case in root.iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            failed += 1
        elif (skip := case.find("skipped")) is not None:
            skipped += 1
            reasons[skip.get("message", "").removeprefix("SKIPPED ").strip()] += 1
        else:
            passed += 1
    return passed, failed, skipped, reasons


def verdict(step: str, xml_text: str | None, rc: int) -> tuple[str, bool]:
    """The step's summary line and whether it passed."""
    if xml_text is None:
        return f"gpu_check: {step}: FAILED, pytest wrote no report (exit {rc})", False
    passed, failed, skipped, reasons = counts(xml_text)
    line = f"gpu_check: {step}: {passed} passed, {failed} failed, {skipped} skipped"
    forbidden = {r: n for r, n in reasons.items() if any(p.search(r) for p in FORBIDDEN_SKIPS)}
    problems = []
    if failed:
        problems.append(f"{failed} failed")
    if passed == 0:
        problems.append("no test ran")
    if forbidden:
        problems.append(
            "skipped for want of what this machine must have: "
            + "; ".join(f"{n} x {r!r}" for r, n in sorted(forbidden.items()))
        )
    if rc not in (0,) and not problems:
        problems.append(f"pytest exited {rc}")
    if problems:
        return f"{line}: FAILED ({', '.join(problems)})", False
    return line, True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step")
    parser.add_argument("xml", type=Path)
    parser.add_argument("--rc", type=int, default=0, help="pytest's exit status")
    args = parser.parse_args(argv)
    text = args.xml.read_text() if args.xml.exists() else None
    line, ok = verdict(args.step, text, args.rc)
    print(line)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

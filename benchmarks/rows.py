"""The rows file: a benchmark run written down as it happens, so that a run killed at any
second leaves every row measured before (``benchmarks/run.py --rows PATH``).

JSON Lines, one object per line, each with a ``kind``, appended and flushed one at a time:

    {"kind": "run", "format": 1, "torch": "2.11.0+cu130", "cuda": "13.0", "machine": {...},
     "quick": false, "headline": true, "argv": [...],
     "packages": ["add_ext", ...]}            # first, once per run; the packages it will run
    {"kind": "package", "package": "add_ext", "goals": [...], "size_label": "...",
     "headline": [["add", "n=1e+07", "cuda"], ...]}                       # before its rows
    {"kind": "measurement", "package": "add_ext", "op": "add", "case": "n=1e+07", ...}
                                  # one per implementation timed: benchmarks.harness.Measurement
    {"kind": "note", "package": "warp_perspective", "text": "kornia is not installed ..."}
    {"kind": "failure", "package": "lltm_cuda", "error": "ImportError: ..."}
    {"kind": "missing", "package": "lltm_cuda", "rows": [[op, case, device], ...]}
                                  # headline rows the package's run did not measure
    {"kind": "build", "package": "add_ext", "clean_build_s": 30.1, ...}
    {"kind": "end", "seconds": 61.2, "load_after": 1.5}                   # last, once per run

A file may hold several runs (each starts with a "run" line). ``read`` turns each into the
dictionary ``benchmarks/run.py --output`` writes, plus ``complete`` (its "end" line was
written), ``seconds``, ``packages`` (those it was to run), ``started`` (those it reached) and
``headline_rows`` ({package: [(op, case, device)]}); a last line cut mid-write is dropped.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

FORMAT = 1


class RowsFile:
    """Appends one JSON line per event, flushed to the operating system before returning:
    a process killed afterwards loses nothing of it."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._file = open(path, "a", encoding="utf-8")  # noqa: SIM115 (closed in close())

    def write(self, kind: str, **fields: Any) -> None:
        self._file.write(json.dumps({"kind": kind, **fields}) + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        self._file.close()


def _empty_run(line: dict[str, Any]) -> dict[str, Any]:
    return {
        "machine": line.get("machine", {}),
        "torch": line.get("torch", "?"),
        "cuda": line.get("cuda"),
        "quick": line.get("quick", False),
        "headline": line.get("headline", False),
        "measurements": [],
        "goals": [],
        "notes": [],
        "skipped": {},
        "builds": {},
        "failures": {},
        "missing": {},
        "size_labels": {},
        "packages": line.get("packages", []),
        "started": [],
        "headline_rows": {},
        "complete": False,
        "seconds": None,
    }


def read(path: Path) -> list[dict[str, Any]]:
    """The runs of a rows file, each as benchmarks/run.py's JSON report (see above)."""
    runs: list[dict[str, Any]] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    for number, text in enumerate(lines, 1):
        if not text.strip():
            continue
        try:
            line = json.loads(text)
        except json.JSONDecodeError:
            if number == len(lines):  # the process died while writing it
                break
            raise ValueError(f"{path}:{number}: not a JSON line: {text[:80]!r}") from None
        kind = line.pop("kind", None)
        if kind == "run":
            runs.append(_empty_run(line))
            continue
        if not runs:
            raise ValueError(f"{path}:{number}: a {kind!r} line before any 'run' line")
        run = runs[-1]
        package = line.get("package")
        if package is not None and package not in run["started"]:
            run["started"].append(package)
        if kind == "package":
            run["goals"] += [{"package": package, **goal} for goal in line.get("goals", [])]
            run["size_labels"][package] = line.get("size_label", "size")
            if line.get("headline"):
                run["headline_rows"][package] = [tuple(row) for row in line["headline"]]
        elif kind == "measurement":
            run["measurements"].append(line)
        elif kind == "note":
            run["notes"].append(f"{package}: {line['text']}")
        elif kind == "failure":
            run["failures"][package] = line["error"]
        elif kind == "skipped":
            run["skipped"][package] = line["reason"]
        elif kind == "missing":
            run["missing"][package] = [tuple(row) for row in line["rows"]]
        elif kind == "build":
            run["builds"][package] = {k: v for k, v in line.items() if k != "package"}
        elif kind == "end":
            run["complete"] = True
            run["seconds"] = line.get("seconds")
            run["machine"]["load_after"] = line.get("load_after")
    return runs

"""The goal rows of lltm_cpu from the raw files here: speedup [range within the IQRs],
computed as the report computes them (benchmarks/report.py).

python table.py    # with torch installed (benchmarks.report imports the harness)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))
from benchmarks.report import fmt_range, speedup, speedup_interval

RAW = Path(__file__).parent / "raw"
ROWS = [  # (op, case, peer)
    ("lltm forward+backward", "B=16 in=32 state=128", "GEMM floor + autograd.grad"),
    ("lltm forward+backward", "B=64 in=256 state=1024", "eager"),
    ("lltm forward+backward", "B=64 in=256 state=1024", "torch.compile"),
    ("lltm ops forward+backward", "B=16 in=32 state=128", "GEMM floor"),
]


def times(path: Path) -> dict:
    data = json.loads(path.read_text())
    return {
        (m["op"], m["case"], m["impl"]): m
        for m in data["measurements"]
        if m["package"] == "lltm_cpu" and m["device"] == "cpu"
    }


def cell(t: dict, op: str, case: str, peer: str) -> str:
    ours, other = t[(op, case, "lltm_cpu")], t[(op, case, peer)]
    return fmt_range(speedup(ours, other), speedup_interval(ours, other))


def main() -> None:
    runs = [
        ("before the flush, 2 threads", "before-flush-torch-{}-2threads.json"),
        ("before the flush, 1 thread", "before-flush-torch-{}-1thread.json"),
        ("after the flush, 1 thread", "after-flush-torch-{}-1thread.json"),
    ]
    versions = ["2.13.0", "2.14.1", "2.15.0"]
    print("| run | case | peer | " + " | ".join(versions) + " |")
    print("| --- | --- | --- | " + " | ".join("---" for _ in versions) + " |")
    for label, pattern in runs:
        tables = [times(RAW / pattern.format(v)) for v in versions]
        for op, case, peer in ROWS:
            cells = [cell(t, op, case, peer) for t in tables]
            print(f"| {label} | {op}, {case} | {peer} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()

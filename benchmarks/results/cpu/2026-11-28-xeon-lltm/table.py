"""The goal rows of lltm_cpu from the raw files here: speedup [range within the IQRs].

python table.py
"""

from __future__ import annotations

import json
from pathlib import Path

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
        (m["op"], m["case"], m["impl"]): (m["seconds"], m["iqr"])
        for m in data["measurements"]
        if m["package"] == "lltm_cpu" and m["device"] == "cpu"
    }


def cell(t: dict, op: str, case: str, peer: str) -> str:
    ours, ours_iqr = t[(op, case, "lltm_cpu")]
    other, other_iqr = t[(op, case, peer)]
    low = (other - other_iqr / 2) / (ours + ours_iqr / 2)
    high = (other + other_iqr / 2) / (ours - ours_iqr / 2)
    return f"{other / ours:.2f}x [{low:.2f}, {high:.2f}]"


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

"""The README's table from this folder's raw files: the tutorial step against its fresh floor,
and how many of each run's times have an IQR over 10 % of their median (flagged)."""

import json
from pathlib import Path

HERE = Path(__file__).parent
CASE, OP = "B=16 in=32 state=128", "lltm forward+backward"
PEER = "GEMM floor (fresh inputs) + autograd.grad"

for name in ("plain-1", "fifo-2", "plain-2", "fifo-3", "plain-3"):
    times = json.loads((HERE / f"{name}.json").read_text())["measurements"]
    by_impl = {m["impl"]: m for m in times if (m["case"], m["op"]) == (CASE, OP)}
    ours, floor = by_impl["lltm_cpu"], by_impl[PEER]
    flagged = sum(m["iqr"] / m["seconds"] > 0.10 for m in times)
    print(
        f"| {name} | {ours['seconds'] * 1e6:.1f} us | {100 * ours['iqr'] / ours['seconds']:.1f} % "
        f"| {floor['seconds'] * 1e6:.1f} us | {100 * floor['iqr'] / floor['seconds']:.1f} % "
        f"| {ours['seconds'] / floor['seconds']:.3f} | {flagged} |"
    )

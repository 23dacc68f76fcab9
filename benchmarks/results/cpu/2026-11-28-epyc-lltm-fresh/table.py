"""The goal rows of issue 63 (and issue 47's large step) from the raw files run.sh wrote:
median times, the IQR over the median, and each ratio with the report's range (a time may lie
from median / r to median * r, r = 1 + IQR / 2 / median)."""

import json
import sys
from pathlib import Path

HERE = Path(__file__).parent
TUTORIAL, LARGE = "B=16 in=32 state=128", "B=64 in=256 state=1024"
ROWS = [  # (case, ours, peer, goal: ours at least this fraction of the peer's speed)
    (TUTORIAL, "lltm_cpu", "GEMM floor (fresh inputs) + autograd.grad", 1 / 1.10),
    (TUTORIAL, "lltm_cpu", "GEMM floor + autograd.grad", 1 / 1.15),
    (LARGE, "lltm_cpu", "eager", 0.97),
    (LARGE, "lltm_cpu", "torch.compile", 1.0),
]


def main() -> None:
    print("| torch | threads | case | peer | ours | peer's | ours/peer (x) | range | goal |")
    print("|---|---|---|---|---|---|---|---|---|")
    for raw in sorted(HERE.glob("torch-*.json")):
        data = json.loads(raw.read_text())
        times = {(m["case"], m["impl"]): m for m in data["measurements"]
                 if m["op"] == "lltm forward+backward"}  # fmt: skip
        threads = raw.stem.split("threads-")[1]
        for case, ours, peer, goal in ROWS:
            a, b = times[(case, ours)], times[(case, peer)]
            ra = 1 + a["iqr"] / 2 / a["seconds"]
            rb = 1 + b["iqr"] / 2 / b["seconds"]
            speed = b["seconds"] / a["seconds"]
            low, high = speed / (ra * rb), speed * ra * rb
            verdict = "met" if low >= goal else "missed" if high < goal else "inconclusive"
            print(f"| {data['torch']} | {threads} | {case} | {peer} | "
                  f"{a['seconds'] * 1e6:.1f} us ({100 * a['iqr'] / a['seconds']:.0f}%) | "
                  f"{b['seconds'] * 1e6:.1f} us ({100 * b['iqr'] / b['seconds']:.0f}%) | "
                  f"{a['seconds'] / b['seconds']:.3f} | [{1 / high:.3f}, {1 / low:.3f}] | "
                  f"<= {1 / goal:.2f}x: {verdict} |")  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())

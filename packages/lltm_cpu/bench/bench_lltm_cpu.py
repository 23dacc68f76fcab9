"""lltm_cpu against the eager Python LLTM and torch.compile of it, on the CPU.

The cases, peers and GEMM floor are lltm_common/bench/lltm_bench.py's, shared with lltm_cuda.
"""

from __future__ import annotations

import sys
from pathlib import Path

import lltm_cpu
from benchmarks.harness import Context, Goal

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lltm_common" / "bench"))
import lltm_bench

PACKAGE = "lltm_cpu"
GOALS = [
    *lltm_bench.goals(PACKAGE, "cpu", "issue 3", {"eager": 3.0, "torch.compile": 3.0}),
    # Issue 17: the step at the tutorial shape within 1.3x of its GEMMs alone (the "GEMM
    # floor" row of the table), and never slower than eager or torch.compile at any shape.
    Goal(
        op="lltm forward+backward",
        ours=PACKAGE,
        peer="GEMM floor",
        min_speedup=1 / 1.3,
        device="cpu",
        case=lltm_bench.case_name(lltm_bench.TUTORIAL),
        note="issue 17: within 1.3x of the GEMMs alone at the tutorial shape",
    ),
    *(
        Goal(
            op=op,
            ours=PACKAGE,
            peer=peer,
            min_speedup=1.0,
            device="cpu",
            note=f"issue 17: never slower than {peer}, at every shape",
        )
        for op in ("lltm forward", "lltm forward+backward")
        for peer in ("eager", "torch.compile")
    ),
]


def run(ctx: Context) -> None:
    lltm_bench.run(ctx, lltm_cpu, "cpu")

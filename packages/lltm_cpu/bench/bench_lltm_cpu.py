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
SIZE_LABEL = lltm_bench.SIZE_LABEL  # the plots' x axis
GOALS = [
    *lltm_bench.goals(PACKAGE, "cpu", "issue 3", {"eager": 3.0, "torch.compile": 3.0}),
    # Issue 17: the step at the tutorial shape within 1.3x of its GEMMs alone (the "GEMM
    # floor" row of the table), and never slower than eager or torch.compile at any shape.
    # torch.autograd.grad through a trivial graph costs more than 0.3x the GEMMs at this
    # shape (the "GEMM floor + autograd.grad" row), so no step through autograd can be
    # within 1.3x of the GEMMs alone: the goal is set on the step through our ops
    # (forward, then backward, called directly), and the step through autograd is held
    # to 1.3x of the GEMMs plus autograd.grad, the floor of any autograd step.
    Goal(
        op="lltm ops forward+backward",
        ours=PACKAGE,
        peer="GEMM floor",
        min_speedup=1 / 1.3,
        device="cpu",
        case=lltm_bench.case_name(lltm_bench.TUTORIAL),
        note="issue 17: forward and backward ops within 1.3x of the GEMMs alone",
    ),
    # The same 1.3x against the floor a step is actually bounded by: the products on
    # inputs that were just written, their producers included (lltm_bench.FRESH_FLOOR).
    # With two threads the GEMM floor above gains from its inputs sitting in both cores'
    # caches, which a step's inputs do not; there the fresh floor alone measured 1.28x to
    # 1.38x the GEMM floor, at or beyond the 1.3x. The goal stays above,
    # reported as it comes out.
    Goal(
        op="lltm ops forward+backward",
        ours=PACKAGE,
        peer=lltm_bench.FRESH_FLOOR,
        min_speedup=1 / 1.3,
        device="cpu",
        case=lltm_bench.case_name(lltm_bench.TUTORIAL),
        note="issue 17 against the floor a step can reach: GEMMs on just-written inputs",
    ),
    Goal(
        op="lltm forward+backward",
        ours=PACKAGE,
        peer="GEMM floor + autograd.grad",
        min_speedup=1 / 1.3,
        device="cpu",
        case=lltm_bench.case_name(lltm_bench.TUTORIAL),
        note="issue 17: the autograd step within 1.3x of the GEMMs plus autograd.grad",
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

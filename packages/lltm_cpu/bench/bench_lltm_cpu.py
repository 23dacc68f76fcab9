"""lltm_cpu against the eager Python LLTM and torch.compile of it, on the CPU.

The cases, peers and GEMM floor are benchmarks/lltm_bench.py's, shared with lltm_cuda.
"""

from __future__ import annotations

import lltm_cpu
from benchmarks import lltm_bench
from benchmarks.harness import Context, Goal

PACKAGE = "lltm_cpu"
SIZE_LABEL = lltm_bench.SIZE_LABEL  # the plots' x axis
# Issue 47's goals (issue 32's, with the large shape's eager goal made a tie): the autograd
# step at the tutorial shape within 1.15x of the GEMMs plus torch.autograd.grad through a
# trivial graph (the "GEMM floor + autograd.grad" row: the floor of any step through
# autograd, whose engine costs about as much as the GEMMs at this shape); at the large
# shape, where the same GEMMs are about nine tenths of every step, a tie with eager and
# never slower than torch.compile.
GOALS = [
    Goal(
        op="lltm forward+backward",
        ours=PACKAGE,
        peer="GEMM floor + autograd.grad",
        min_speedup=1 / 1.15,
        device="cpu",
        case=lltm_bench.case_name(lltm_bench.TUTORIAL),
        note="issue 47: the autograd step within 1.15x of the GEMMs plus autograd.grad",
    ),
    *(
        Goal(
            op="lltm forward+backward",
            ours=PACKAGE,
            peer=peer,
            min_speedup=min_speedup,
            device="cpu",
            case=lltm_bench.case_name(lltm_bench.LARGE),
            note=f"issue 47: {what} at the large shape",
            tie=min_speedup < 1,
        )
        for peer, min_speedup, what in (
            ("eager", 0.97, "a tie with eager"),
            ("torch.compile", 1.0, "never slower than torch.compile"),
        )
    ),
]


def run(ctx: Context) -> None:
    lltm_bench.run(ctx, lltm_cpu, "cpu")

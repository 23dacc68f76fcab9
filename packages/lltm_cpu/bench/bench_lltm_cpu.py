"""lltm_cpu against the eager Python LLTM and torch.compile of it (benchmarks/lltm_bench.py)."""

from __future__ import annotations

from benchmarks import lltm_bench
from benchmarks.harness import Context, Goal

PACKAGE = "lltm_cpu"
TUTORIAL, LARGE = lltm_bench.case_name(lltm_bench.TUTORIAL), lltm_bench.case_name(lltm_bench.LARGE)
# Issue 47: the tutorial step within 1.15x of the GEMMs plus autograd.grad (the engine costs
# about as much as the GEMMs there); at the large shape, nine tenths GEMMs, a tie with eager
# and never slower than torch.compile.
GOALS = [
    Goal(op="lltm forward+backward", ours=PACKAGE, peer="GEMM floor + autograd.grad",
         min_speedup=1 / 1.15, case=TUTORIAL, note="issue 47"),
    Goal(op="lltm forward+backward", ours=PACKAGE, peer="eager", min_speedup=0.97, case=LARGE,
         note="issue 47: a tie with eager", tie=True),
    Goal(op="lltm forward+backward", ours=PACKAGE, peer="torch.compile", min_speedup=1.0,
         case=LARGE, note="issue 47"),
]  # fmt: skip


def run(ctx: Context) -> None:
    lltm_bench.run(ctx, PACKAGE, "cpu")

"""lltm_cuda against the eager Python LLTM and torch.compile of it (benchmarks/lltm_bench.py).

Without a GPU it notes so and times nothing; lltm_cuda is imported only to time a row, so
a plan lists its rows where it is not built.
"""

from __future__ import annotations

from benchmarks import lltm_bench
from benchmarks.harness import Context, Goal

PACKAGE = "lltm_cuda"
TUTORIAL, LARGE, BUSY = map(
    lltm_bench.case_name, (lltm_bench.TUTORIAL, lltm_bench.LARGE, lltm_bench.BUSY)
)
STEP = "lltm forward+backward"
# Issues 4 and 58 at the tutorial shape (launch-bound: host time, and against the CUDA-graph
# compile); issue 44 at the large ones; issue 58 at the busy one, where the GEMMs keep the
# GPU busy: floors in GPU time of their own kernels (at the launch-bound shapes the "floor"
# was launch cost).
GOALS = [
    Goal(op=STEP, ours=PACKAGE, peer="eager", min_speedup=2.0, device="cuda", case=TUTORIAL),
    *(Goal(op=STEP, ours=PACKAGE, peer=peer, min_speedup=1.0, device="cuda", case=case)
      for case in (TUTORIAL, LARGE, BUSY) for peer in ("torch.compile", lltm_bench.REDUCE_OVERHEAD)),
    *(Goal(op=STEP, ours=PACKAGE, peer="eager", min_speedup=1.0, device="cuda", case=case)
      for case in (LARGE, BUSY)),
    *(Goal(op=op, ours=PACKAGE, peer="GEMM floor", min_speedup=0.9, device="cuda",
           case=BUSY, note="at least 0.9x the GEMMs alone", clock="cuda-events")
      for op in ("lltm forward", STEP)),
]  # fmt: skip
# benchmarks.run --headline: the GPU check's
HEADLINE = [(STEP, TUTORIAL), (STEP, LARGE), ("lltm forward", BUSY), (STEP, BUSY)]


def run(ctx: Context) -> None:
    if "cuda" not in ctx.devices:
        ctx.note("no CUDA GPU visible, nothing timed")
        return
    lltm_bench.run(ctx, PACKAGE, "cuda")

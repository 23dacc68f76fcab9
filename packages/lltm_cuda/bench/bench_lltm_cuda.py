"""lltm_cuda against the eager Python LLTM and torch.compile of it, on a GPU.

The cases, peers and GEMM floor are benchmarks/lltm_bench.py's, shared with lltm_cpu.
Without a GPU it records a note and times nothing. lltm_cuda is imported when a row is
timed, so that a plan (benchmarks/run.py --plan) lists its rows where it is not built.
"""

from __future__ import annotations

from benchmarks import lltm_bench
from benchmarks.harness import Context, Goal

PACKAGE = "lltm_cuda"
SIZE_LABEL = lltm_bench.SIZE_LABEL  # the plots' x axis
TUTORIAL = lltm_bench.case_name(lltm_bench.TUTORIAL)
LARGE = lltm_bench.case_name(lltm_bench.LARGE)
# Issue 4 at the tutorial shape, where launches dominate; issue 44 at the large one, where the
# GEMMs do: never slower than eager or torch.compile.
GOALS = [
    *lltm_bench.goals(PACKAGE, "cuda", "issue 4", {"eager": 2.0, "torch.compile": 1.0}),
    *(
        Goal(
            op="lltm forward+backward",
            ours=PACKAGE,
            peer=peer,
            min_speedup=1.0,
            device="cuda",
            case=LARGE,
            note=f"issue 44: never slower than {peer} at the large shape",
        )
        for peer in ("eager", "torch.compile")
    ),
]
# The rows of benchmarks/run.py --headline, on CUDA (issue 44, goal 6).
HEADLINE = [("lltm forward+backward", TUTORIAL), ("lltm forward+backward", LARGE)]


def run(ctx: Context) -> None:
    if "cuda" not in ctx.devices:
        ctx.note("no CUDA GPU visible, nothing timed")
        return
    lltm_bench.run(ctx, PACKAGE, "cuda")

"""lltm_cuda against the eager Python LLTM and torch.compile of it, on a GPU.

The cases, peers and GEMM floor are lltm_common/bench/lltm_bench.py's, shared with lltm_cpu.
Without a GPU it records a note and times nothing.
"""

from __future__ import annotations

import sys
from pathlib import Path

import lltm_cuda
from benchmarks.harness import Context

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lltm_common" / "bench"))
import lltm_bench

PACKAGE = "lltm_cuda"
SIZE_LABEL = lltm_bench.SIZE_LABEL  # the plots' x axis
GOALS = lltm_bench.goals(PACKAGE, "cuda", "issue 4", {"eager": 2.0, "torch.compile": 1.0})


def run(ctx: Context) -> None:
    if "cuda" not in ctx.devices:
        ctx.note("no CUDA GPU visible, nothing timed")
        return
    lltm_bench.run(ctx, lltm_cuda, "cuda")

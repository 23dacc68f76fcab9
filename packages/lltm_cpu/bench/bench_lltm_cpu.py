"""lltm_cpu against the eager Python LLTM and torch.compile of it, on the CPU.

The cases, peers and GEMM floor are lltm_common/bench/lltm_bench.py's, shared with lltm_cuda.
"""

from __future__ import annotations

import sys
from pathlib import Path

import lltm_cpu
from benchmarks.harness import Context

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lltm_common" / "bench"))
import lltm_bench

PACKAGE = "lltm_cpu"
GOALS = lltm_bench.goals(PACKAGE, "cpu", "issue 3", {"eager": 3.0, "torch.compile": 3.0})


def run(ctx: Context) -> None:
    lltm_bench.run(ctx, lltm_cpu, "cpu")

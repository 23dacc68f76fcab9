"""The cases of bench_lltm_cpu.py timed by thread CPU time, for busy machines.

    python benchmarks/results/cpu/2026-11-21-lltm-thread-time/thread_time.py [--repeats 7]

On one thread, each implementation runs in blocks of calls; a block's time is the calling
thread's CPU time (time.thread_time_ns), which does not count the time the thread waits
while another process has the core, and the minimum over the blocks is kept. The harness
(benchmarks/run.py) measures wall time, which is what a user sees on a quiet machine but
swings by 2x on a shared one; this script gives the figures to compare implementations
with there. Not collected by the harness (its name does not start with bench_).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[4]
sys.path[:0] = [str(ROOT / "packages" / "lltm_cpu" / "bench"), str(ROOT)]
import bench_lltm_cpu as bench  # noqa: E402

import lltm_cpu  # noqa: E402


def thread_time(fn, repeats: int, block_seconds: float = 0.05) -> float:
    """Minimum over `repeats` blocks of the mean thread CPU seconds per call."""
    for _ in range(3):
        fn()
    calls = 1
    while True:
        start = time.thread_time_ns()
        for _ in range(calls):
            fn()
        elapsed = time.thread_time_ns() - start
        if elapsed > block_seconds * 1e9:
            break
        calls *= 2
    best = elapsed / calls
    for _ in range(repeats - 1):
        start = time.thread_time_ns()
        for _ in range(calls):
            fn()
        best = min(best, (time.thread_time_ns() - start) / calls)
    return best / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, 1 thread, thread CPU time, min of {args.repeats} blocks")
    for shape in (bench.lltm_bench.TUTORIAL, bench.lltm_bench.LARGE):
        batch, features, state = shape
        torch.manual_seed(0)
        ours = lltm_cpu.LLTM(features, state)
        eager = bench.lltm_bench.EagerLLTM(features, state)
        eager.load_state_dict(ours.state_dict())
        compiled = torch.compile(eager, fullgraph=True, dynamic=False)
        x = torch.randn(batch, features)
        h = torch.randn(batch, state, requires_grad=True)
        c = torch.randn(batch, state, requires_grad=True)
        grad_h, grad_c = torch.randn(batch, state), torch.randn(batch, state)
        weights, bias = ours.weights.detach(), ours.bias.detach()
        X = torch.cat([h.detach(), x], dim=1)
        d_gates = torch.randn(batch, 3 * state)

        def step(model):
            wanted = [*model.parameters(), h, c]
            return lambda: torch.autograd.grad(list(model(x, (h, c))), wanted, [grad_h, grad_c])

        def gemms():
            torch.addmm(bias, X, weights.t())
            torch.mm(d_gates.t(), X)
            torch.mm(d_gates, weights[:, :state])

        cases = {
            "lltm forward": {
                "lltm_cpu": lambda: ours(x, (h, c)),
                "eager": lambda: eager(x, (h, c)),
                "torch.compile": lambda: compiled(x, (h, c)),
                "GEMM floor": lambda: torch.addmm(bias, X, weights.t()),
            },
            "lltm forward+backward": {
                "lltm_cpu": step(ours),
                "eager": step(eager),
                "torch.compile": step(compiled),
                "GEMM floor": gemms,
            },
        }
        for op, impls in cases.items():
            times = {name: thread_time(fn, args.repeats) for name, fn in impls.items()}
            mine = times["lltm_cpu"]
            line = "  ".join(
                f"{name} {t * 1e6:.1f} us ({t / mine:.2f}x)" for name, t in times.items()
            )
            print(f"{op:<22} {bench.lltm_bench.case_name(shape):<24} {line}")


if __name__ == "__main__":
    main()

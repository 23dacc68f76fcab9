"""gc_cpp.graph_conv minus eager torch.addmm (the same GEMMs) at N = 1024, in microseconds:
medians of seven interleaved blocked_autorange rounds. `python gap_n1024.py THREADS` in an
environment with gc_cpp installed (ab.sh runs it for two builds, alternating)."""

from __future__ import annotations

import statistics
import sys

import torch
import torch.utils.benchmark as benchmark

import gc_cpp


def measure(n: int, f_in: int, f_out: int, threads: int) -> None:
    a, x = torch.rand(n, n), torch.randn(n, f_in)
    w, b = torch.randn(f_in, f_out), torch.randn(f_out)
    if f_out < f_in:

        def peer():
            return torch.addmm(b, a, x @ w)
    else:

        def peer():
            return torch.addmm(b, a @ x, w)

    impls = {
        "addmm": peer,
        "gc_cpp": lambda: gc_cpp.graph_conv(a, x, w, b),
        "op": lambda: torch.ops.gc_cpp.graph_conv.default(a, x, w, b),
    }
    times = {name: [] for name in impls}
    for _ in range(7):
        for name, fn in impls.items():
            timer = benchmark.Timer("fn()", globals={"fn": fn}, num_threads=threads)
            times[name].append(timer.blocked_autorange(min_run_time=0.4).median * 1e6)
    med = {name: statistics.median(t) for name, t in times.items()}
    print(
        f"N={n} {f_in}->{f_out} threads={threads}",
        {name: f"{t:.1f}" for name, t in med.items()},
        "gc-addmm",
        f"{med['gc_cpp'] - med['addmm']:.1f}",
        "op-addmm",
        f"{med['op'] - med['addmm']:.1f}",
        "spread gc",
        f"{min(times['gc_cpp']):.0f}-{max(times['gc_cpp']):.0f}",
        "addmm",
        f"{min(times['addmm']):.0f}-{max(times['addmm']):.0f}",
    )


if __name__ == "__main__":
    threads = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    for shape in ((1024, 512, 64), (1024, 64, 512)):
        measure(*shape, threads)

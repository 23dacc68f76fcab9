"""Focused timings behind the README's reading of the benchmark (not part of nox -s bench).

    OMP_NUM_THREADS=1 python benchmarks/results/cpu/2026-11-21-gc-probe/probe_gc_cpp.py

1. Per-call cost: gc_cpp.graph_conv against torch.addmm(b, a, x @ w) on 16 nodes, where
   the products cost nothing and what is left is dispatch (and the autograd node).
2. The sparse backward's adj.T @ grad at N = 4096, 1% dense, 64 columns: ATen's
   adj.t() @ grad (a CSC view, converted on every call) against gc_cpp's counting-sort
   transpose plus a CSR product.
3. The sparse forward, gc_cpp against torch.sparse.mm in the same association, alternated
   15 times (medians), for the cases where one benchmark run swung.
"""

from __future__ import annotations

import statistics
import warnings

import torch
from torch.utils import benchmark

import gc_cpp


def median_us(fn, repeats: int = 5, min_run_time: float = 0.2) -> float:
    times = [
        benchmark.Timer(stmt="fn()", globals={"fn": fn})
        .blocked_autorange(min_run_time=min_run_time)
        .median
        for _ in range(repeats)
    ]
    return statistics.median(times) * 1e6


def alternate(fns: dict, rounds: int = 15) -> dict[str, float]:
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            samples[name].append(median_us(fn, repeats=1, min_run_time=0.1))
    return {name: statistics.median(times) for name, times in samples.items()}


def main() -> None:
    warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s)")

    n = 16
    a, x, w, b = torch.rand(n, n), torch.randn(n, 8), torch.randn(8, 4), torch.randn(4)
    xg = x.clone().requires_grad_(True)
    print("1. per call, 16 nodes (us)")
    print(
        f"   torch.addmm(b, a, x @ w)          {median_us(lambda: torch.addmm(b, a, x @ w)):8.2f}"
    )
    print(
        f"   gc_cpp.graph_conv(a, x, w, b)     {median_us(lambda: gc_cpp.graph_conv(a, x, w, b)):8.2f}"
    )
    print(
        f"   same, x requires grad: addmm     {median_us(lambda: torch.addmm(b, a, xg @ w)):8.2f}"
    )
    print(
        f"   same, x requires grad: gc_cpp    {median_us(lambda: gc_cpp.graph_conv(a, xg, w, b)):8.2f}"
    )

    n = 4096
    csr = ((torch.rand(n, n) < 0.01) * torch.rand(n, n)).to_sparse_csr()
    grad = torch.randn(n, 64)
    parts = (csr.crow_indices(), csr.col_indices(), csr.values(), n)
    transposed = torch.sparse_csr_tensor(
        *torch.ops.gc_cpp._csr_transpose(*parts), (n, n), check_invariants=False
    )
    print(f"2. adj.T @ grad, N = {n}, {csr._nnz()} nonzeros, 64 columns (ms)")
    print(f"   ATen adj.t() @ grad               {median_us(lambda: csr.t() @ grad) / 1e3:8.2f}")
    print(
        f"   gc_cpp _csr_transpose            {median_us(lambda: torch.ops.gc_cpp._csr_transpose(*parts)) / 1e3:8.2f}"
    )
    print(f"   CSR(adj.T) @ grad                 {median_us(lambda: transposed @ grad) / 1e3:8.2f}")

    print("3. sparse forward, 1% dense, medians of 15 alternations (ms)")
    for n, f_in, f_out in ((4096, 512, 64), (1024, 64, 512)):
        csr = ((torch.rand(n, n) < 0.01) * torch.rand(n, n)).to_sparse_csr()
        x, w, b = torch.randn(n, f_in), torch.randn(f_in, f_out), torch.randn(f_out)
        if f_out < f_in:
            peer = lambda: torch.sparse.mm(csr, x @ w) + b  # noqa: E731
        else:
            peer = lambda: torch.sparse.mm(csr, x) @ w + b  # noqa: E731
        times = alternate(
            {"torch.sparse.mm": peer, "gc_cpp": lambda: gc_cpp.graph_conv(csr, x, w, b)}
        )
        print(
            f"   N={n} {f_in}->{f_out}: torch.sparse.mm {times['torch.sparse.mm'] / 1e3:.2f}, gc_cpp {times['gc_cpp'] / 1e3:.2f}"
        )


if __name__ == "__main__":
    main()

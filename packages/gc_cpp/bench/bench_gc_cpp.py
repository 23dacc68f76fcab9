"""gc_cpp.graph_conv against the seed formula and the best plain-PyTorch expressions.

Dense adjacency, N in {1024, 4096}, F 512 -> 64 (where the association matters) and
64 -> 512 (where the seed's order is already the cheap one):
  seed                 a.mm(x).mm(w) + b, the seed's formula in eager
  eager a@(x@w)+b      the cheaper association written out (a @ (x @ w) or (a @ x) @ w)
  eager addmm          the same with the bias fused into the last GEMM: the best eager
                       expression, and the peer of the >= 1.0x goal
  gc_cpp               gc_cpp.graph_conv(a, x, w, b)
Sparse adjacency (1% density, same sizes):
  torch.sparse.mm CSR  torch.sparse.mm(csr, x @ w) + b in the cheaper association
  torch.sparse.mm COO  the same with a COO adjacency
  gc_cpp CSR / COO     gc_cpp.graph_conv on the same CSR / COO adjacency
Each also as forward + backward (gradients of x, w and b through torch.autograd.grad).
float32, timed round-robin by the harness.
"""

from __future__ import annotations

import warnings

import torch

import gc_cpp
from benchmarks.harness import Context, Goal

PACKAGE = "gc_cpp"
# What `size` counts in this package's measurements: the plots' x axis.
SIZE_LABEL = "N, graph nodes"
SHAPES = [(512, 64), (64, 512)]
DENSITY = 0.01
# Round-robin rounds per case (the harness's default is 3): the >= 1.0x goals compare
# equal work, so the medians need every round the time allows on a shared 2-core VM.
ROUNDS = 5

SEED = "seed a.mm(x).mm(w)+b"
EAGER = "eager a@(x@w)+b"
EAGER_BEST = "eager addmm"
SPARSE_CSR = "torch.sparse.mm CSR"
SPARSE_COO = "torch.sparse.mm COO"


def _case(n: int, f_in: int, f_out: int) -> str:
    return f"N={n} {f_in}->{f_out}"


# The goals of the open issues. CPU (issue 32): dense graph_conv at N=1024 and 4096 ties
# eager addmm, forward and forward+backward: the same GEMMs, so ">= 0.97x" states a tie.
# CUDA: the targets a GPU run is judged against (not measured yet).
_TIES = tuple(
    Goal(
        op=op,
        ours="gc_cpp",
        peer=EAGER_BEST,
        min_speedup=0.97,
        device=device,
        case=_case(n, f_in, f_out),
        note="issue 32: a tie with addmm",
        tie=True,
    )
    for device in ("cpu", "cuda")
    for op in ("graph_conv dense", "graph_conv dense fwd+bwd")
    for n in (1024, 4096)
    for f_in, f_out in ((512, 64), (64, 512))
)
# Issue 47: at N = 1024 the tie is out of reach by what the stable ABI's call path costs
# (a Python autograd kernel, the boxed dispatcher calls), paid cold after each product
# has flushed the caches; a budget in microseconds holds it instead. The issue sets it
# against the full-ABI build of the same op, which `nox -s abi_overhead` measures hot
# (that build's call costs 0.2-0.3 us over addmm's, hot); the bench has no full-ABI build, so
# its peer is eager addmm, the same GEMMs.
_BUDGETS = tuple(
    Goal(
        op=op,
        ours="gc_cpp",
        peer=EAGER_BEST,
        min_speedup=0.0,
        device="cpu",
        case=_case(1024, f_in, f_out),
        note="issue 47: the stable ABI's call cost, cold",
        max_extra_us=budget,
    )
    for op, budget in (("graph_conv dense", 9.0), ("graph_conv dense fwd+bwd", 45.0))
    for f_in, f_out in ((512, 64), (64, 512))
)
GOALS = [
    *_TIES,
    *_BUDGETS,
    *(
        Goal(
            op="graph_conv dense",
            ours="gc_cpp",
            peer=SEED,
            min_speedup=5.0,
            device="cuda",
            case=_case(n, 512, 64),
            note="where the association helps (F_out < F_in)",
        )
        for n in (1024, 4096)
    ),
    # Issue 44: CSR ties torch.sparse.mm on CUDA (the same cuSPARSE product); COO and the
    # backward keep the first bench's >= 1.0x.
    Goal(
        op="graph_conv sparse 1%",
        ours="gc_cpp CSR",
        peer=SPARSE_CSR,
        min_speedup=0.97,
        device="cuda",
        note="issue 44: a tie with torch.sparse.mm",
        tie=True,
    ),
    *(
        Goal(op=op, ours=f"gc_cpp {fmt}", peer=peer, min_speedup=1.0, device="cuda")
        for op, fmt, peer in (
            ("graph_conv sparse 1%", "COO", SPARSE_COO),
            ("graph_conv sparse 1% fwd+bwd", "CSR", SPARSE_CSR),
            ("graph_conv sparse 1% fwd+bwd", "COO", SPARSE_COO),
        )
    ),
]
# The rows of benchmarks/run.py --headline, on CUDA (issue 44, goal 6): the forward, dense
# and sparse, where the association matters (F_out < F_in).
HEADLINE = [
    (op, _case(n, 512, 64))
    for n in (1024, 4096)
    for op in ("graph_conv dense", "graph_conv sparse 1%")
]
OPS = ("graph_conv dense", "graph_conv sparse 1%", "graph_conv dense fwd+bwd",
       "graph_conv sparse 1% fwd+bwd")  # fmt: skip


def _eager(a, x, w, b):
    return a @ (x @ w) + b if w.shape[1] < w.shape[0] else (a @ x) @ w + b


def _eager_addmm(a, x, w, b):
    return torch.addmm(b, a, x @ w) if w.shape[1] < w.shape[0] else torch.addmm(b, a @ x, w)


def _sparse_mm(a, x, w, b):
    if w.shape[1] < w.shape[0]:
        return torch.sparse.mm(a, x @ w) + b
    return torch.sparse.mm(a, x) @ w + b


def _fwd_bwd(fn, grad, inputs):
    return lambda: torch.autograd.grad(fn(), inputs, grad)


def run(ctx: Context) -> None:
    warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
    sizes = [1024] if ctx.quick else [1024, 4096]
    # A full run takes ROUNDS; a quick one, or one limited to some rows (the headline, on a
    # GPU, in a minute), the run's own.
    rounds = ctx.rounds if ctx.quick or ctx.only is not None else ROUNDS
    dtype = torch.float32
    for device in ctx.devices:
        for n in sizes:
            # Every row asked (a plan lists them all), not only up to the first wanted.
            wanted = [ctx.wants(op, _case(n, *shape), device) for shape in SHAPES for op in OPS]
            if not any(wanted):
                continue
            # Of the rows below, ctx.compare times only those selected (ctx.only); their
            # inputs cost little next to the adjacency.
            generator = torch.Generator().manual_seed(n)
            a = torch.rand(n, n, generator=generator).to(device)
            mask = torch.rand(n, n, generator=generator) < DENSITY
            sparse = (torch.rand(n, n, generator=generator) * mask).to(device)
            csr, coo = sparse.to_sparse_csr(), sparse.to_sparse().coalesce()
            for f_in, f_out in SHAPES:
                case = _case(n, f_in, f_out)
                x = torch.randn(n, f_in, generator=generator).to(device)
                w = (torch.randn(f_in, f_out, generator=generator) / f_in**0.5).to(device)
                b = torch.randn(f_out, generator=generator).to(device)
                flops = 2 * (n * n * min(f_in, f_out) + n * f_in * f_out)

                ctx.compare(
                    op="graph_conv dense",
                    case=case,
                    size=n,
                    device=device,
                    dtype=dtype,
                    impls={
                        SEED: lambda: a.mm(x).mm(w) + b,
                        EAGER: lambda: _eager(a, x, w, b),
                        EAGER_BEST: lambda: _eager_addmm(a, x, w, b),
                        "gc_cpp": lambda: gc_cpp.graph_conv(a, x, w, b),
                    },
                    ours="gc_cpp",
                    extra=lambda s, f=flops: {"GFLOP/s (cheap order)": f / s / 1e9},
                    rounds=rounds,
                )
                ctx.compare(
                    op="graph_conv sparse 1%",
                    case=case,
                    size=n,
                    device=device,
                    dtype=dtype,
                    impls={
                        SPARSE_CSR: lambda: _sparse_mm(csr, x, w, b),
                        SPARSE_COO: lambda: _sparse_mm(coo, x, w, b),
                        "gc_cpp CSR": lambda: gc_cpp.graph_conv(csr, x, w, b),
                        "gc_cpp COO": lambda: gc_cpp.graph_conv(coo, x, w, b),
                    },
                    ours=["gc_cpp CSR", "gc_cpp COO"],
                    rounds=rounds,
                )

                xg, wg, bg = (t.clone().requires_grad_(True) for t in (x, w, b))
                inputs = (xg, wg, bg)
                grad = torch.randn(n, f_out, generator=generator).to(device)
                ctx.compare(
                    op="graph_conv dense fwd+bwd",
                    case=case,
                    size=n,
                    device=device,
                    dtype=dtype,
                    impls={
                        SEED: _fwd_bwd(lambda: a.mm(xg).mm(wg) + bg, grad, inputs),
                        EAGER_BEST: _fwd_bwd(lambda: _eager_addmm(a, xg, wg, bg), grad, inputs),
                        "gc_cpp": _fwd_bwd(lambda: gc_cpp.graph_conv(a, xg, wg, bg), grad, inputs),
                    },
                    ours="gc_cpp",
                    rounds=rounds,
                )
                ctx.compare(
                    op="graph_conv sparse 1% fwd+bwd",
                    case=case,
                    size=n,
                    device=device,
                    dtype=dtype,
                    impls={
                        SPARSE_CSR: _fwd_bwd(lambda: _sparse_mm(csr, xg, wg, bg), grad, inputs),
                        SPARSE_COO: _fwd_bwd(lambda: _sparse_mm(coo, xg, wg, bg), grad, inputs),
                        "gc_cpp CSR": _fwd_bwd(
                            lambda: gc_cpp.graph_conv(csr, xg, wg, bg), grad, inputs
                        ),
                        "gc_cpp COO": _fwd_bwd(
                            lambda: gc_cpp.graph_conv(coo, xg, wg, bg), grad, inputs
                        ),
                    },
                    ours=["gc_cpp CSR", "gc_cpp COO"],
                    rounds=rounds,
                )

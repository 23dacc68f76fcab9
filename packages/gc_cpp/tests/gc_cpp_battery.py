"""gc_cpp's ops as the test battery sees them (shared_build.battery): samples, references,
bad calls, fuzzing and properties. test_gc_cpp.py adds what only gc_cpp has (the
multiplication order, one check for every path, the seed API, normalize_adjacency).

The ops that take an adjacency are declared once per layout of it (dense, sparse COO,
sparse CSR): torch.library.opcheck, torch.compile and torch.export take no sparse tensor,
so the sparse declarations skip them, and each layout gets its own threads case."""

from __future__ import annotations

import dataclasses
import warnings

import torch

import gc_cpp
from shared_build.battery import CHECKS, Bad, OpTest, Sample, as_view

# Sparse CSR construction warns once per process that the layout is in beta.
warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")

LAYOUTS = ("dense", "coo", "csr")
HALF = (torch.float16, torch.bfloat16)
# (N, F_in, F_out): F_out < F_in multiplies x @ weight first; otherwise adj @ x first
# (equal widths included: both orders cost the same there and the kernel takes adj @ x).
# The rule flips between equal widths and an F_out one narrower than F_in.
ORDERS = {
    "x@w-first": (13, 9, 4),
    "adj@x-first": (13, 4, 9),
    "equal-widths": (11, 5, 5),
    "x@w-first-by-one": (11, 5, 4),
}
# The float64 samples serve gradcheck and gradgradcheck too, whose cost grows with the
# sizes: with a sparse adj, seconds per sample at the sizes above.
ORDERS_F64 = {"x@w-first": (7, 5, 2), "adj@x-first": (7, 2, 5), "equal-widths": (6, 3, 3)}
EMPTY_AND_TINY = ((0, 3, 2), (4, 0, 3), (4, 3, 0), (1, 1, 1))
# Large enough for several threads (the threads check takes each op's largest sample).
BIG = (300, 40, 20)


# ---- references, from the definitions ---------------------------------------------------


def dense(adj: torch.Tensor) -> torch.Tensor:
    return adj.to_dense() if adj.layout != torch.strided else adj


def exact_graph_conv(adj, x, weight, bias=None) -> torch.Tensor:
    """adj @ x @ weight + bias in float64, adj densified."""
    out = dense(adj).double() @ x.double() @ weight.double()
    return out if bias is None else out + bias.double()


def graph_conv_reference(adj, x, weight, bias=None) -> torch.Tensor:
    return exact_graph_conv(adj, x, weight, bias).to(x.dtype)


def graph_conv_forward_reference(adj, x, weight, bias=None) -> tuple[torch.Tensor, torch.Tensor]:
    """graph_conv's result and the intermediate of the order the package's cost rule
    picks: x @ weight where F_out < F_in, else adj @ x."""
    a = dense(adj).double()
    if weight.shape[1] < weight.shape[0]:
        intermediate = x.double() @ weight.double()
    else:
        intermediate = a @ x.double()
    return graph_conv_reference(adj, x, weight, bias), intermediate.to(x.dtype)


def weight_grad_reference(adj, x, grad) -> torch.Tensor:
    """The gradient of graph_conv w.r.t. weight: (adj @ x).T @ grad."""
    return ((dense(adj).double() @ x.double()).T @ grad.double()).to(x.dtype)


def csr_transpose_reference(crow, col, values, num_cols):
    """The CSR arrays of the transposed matrix: the entries sorted by column, then row."""
    rows = crow.numel() - 1
    row = torch.repeat_interleave(
        torch.arange(rows, device=crow.device), crow.diff().long(), output_size=col.numel()
    )
    order = torch.argsort(col.long() * max(rows, 1) + row, stable=True)
    counts = torch.bincount(col.long(), minlength=num_cols)
    t_crow = torch.cat([counts.new_zeros(1), counts.cumsum(0)])
    return t_crow.to(crow.dtype), row[order].to(col.dtype), values[order]


def tolerance(dtype) -> dict[str, float]:
    return {
        torch.float64: {"atol": 1e-10, "rtol": 1e-10},
        torch.float32: {"atol": 1e-4, "rtol": 1e-4},
        torch.bfloat16: {"atol": 0.15, "rtol": 0.05},
        torch.float16: {"atol": 0.05, "rtol": 0.02},
    }[dtype]


def exact(dtype) -> dict[str, float]:
    return {"atol": 0.0, "rtol": 0.0}


# ---- inputs -----------------------------------------------------------------------------


def random_adjacency(n, generator=None, density=0.3) -> torch.Tensor:
    """A weighted directed graph in float64 (not symmetric: transposes must be done right)."""
    mask = torch.rand(n, n, generator=generator) < density
    return torch.rand(n, n, generator=generator, dtype=torch.float64) * mask


def as_layout(adj: torch.Tensor, layout: str) -> torch.Tensor:
    return {"dense": lambda: adj, "coo": adj.to_sparse, "csr": adj.to_sparse_csr}[layout]()


class _Inputs:
    """Seeded inputs on a device in a dtype: every call of samples() makes the same ones."""

    def __init__(self, device, dtype, seed=0):
        self.device, self.dtype = device, dtype
        self.g = torch.Generator().manual_seed(seed)

    def randn(self, *shape, view="contiguous") -> torch.Tensor:
        t = torch.randn(shape, generator=self.g, dtype=torch.float64)
        return as_view(t.to(self.device, self.dtype), view)

    def adjacency(self, n, layout, view="contiguous", density=0.3) -> torch.Tensor:
        a = as_view(random_adjacency(n, self.g, density).to(self.device, self.dtype), view)
        return as_layout(a, layout)


def _uncoalesced(coo: torch.Tensor) -> torch.Tensor:
    # Every entry split in two halves at the same position: coalescing sums them back.
    idx, vals = coo.coalesce().indices(), coo.coalesce().values()
    with torch.sparse.check_sparse_tensor_invariants(False):
        return torch.sparse_coo_tensor(
            torch.cat([idx, idx], 1), torch.cat([vals / 2, vals / 2]), coo.shape
        )


def _int32_csr(csr: torch.Tensor) -> torch.Tensor:
    return torch.sparse_csr_tensor(
        csr.crow_indices().int(), csr.col_indices().int(), csr.values(), csr.shape
    )


def _requiring_grad(args, which=None):
    """args with the strided floating tensors (those named by position in which, or all)
    requiring grad: float64 samples serve gradcheck."""
    return tuple(
        a.requires_grad_()
        if isinstance(a, torch.Tensor)
        and a.layout == torch.strided
        and (which is None or i in which)
        else a
        for i, a in enumerate(args)
    )


def graph_conv_samples(layout: str):
    """graph_conv's good calls with an adjacency in layout: the three product orders,
    with and without bias, transposed and sliced (storage offset, stride 2) views, empty
    and tiny sizes, an all-zero adjacency, the layout's own forms (uncoalesced COO, int32
    CSR indices) and, in float32, one large call. In float64 fewer and smaller calls, with
    every input requiring grad (but one: x alone)."""

    def samples(device, dtype) -> list[Sample]:
        made = _Inputs(device, dtype)
        grad = dtype == torch.float64
        orders = ORDERS_F64 if grad else ORDERS
        cases = []

        def call(n, f_in, f_out, bias=True, view="contiguous", density=0.3):
            # A strided bias (storage offset, stride 2) with the views.
            b = made.randn(f_out, view="contiguous" if view == "contiguous" else "sliced")
            return (
                made.adjacency(n, layout, view, density),
                made.randn(n, f_in, view=view),
                made.randn(f_in, f_out, view=view),
                b if bias else None,
            )

        def add(name, args, which=None):
            args = _requiring_grad(args, which) if grad else args
            cases.append(Sample(args, name=f"{layout} adj, {name}"))

        for order, sizes in orders.items():
            add(f"{order} {sizes}, bias", call(*sizes))
            if not grad:
                add(f"{order} {sizes}, no bias", call(*sizes, bias=False))
        if grad:  # x alone requires grad: the autograd kernel's partial paths
            sizes = orders["x@w-first"]
            add(f"x@w-first {sizes}, no bias, x requires grad", call(*sizes, bias=False), {1})
        if not grad:
            views, tiny = [(o, v) for o in orders for v in ("transposed", "sliced")], EMPTY_AND_TINY
        elif layout == "dense":
            views, tiny = (
                [("x@w-first", "transposed"), ("adj@x-first", "sliced")],
                ((0, 3, 2), (1, 1, 1)),
            )
        else:  # gradgradcheck with a sparse adj takes seconds a call: float32 checks these
            views, tiny = [], ()
        for order, view in views:
            add(f"{order} {orders[order]}, {view} views", call(*orders[order], view=view))
        if layout == "coo":
            adj, x, weight, _ = call(*orders["x@w-first"])
            add("uncoalesced", (_uncoalesced(adj), x, weight, None))
        if layout == "csr":
            adj, x, weight, _ = call(*orders["x@w-first"])
            add("int32 indices", (_int32_csr(adj), x, weight, None))
        for sizes in tiny:
            add(f"sizes {sizes}", call(*sizes, density=1.0))
        if not grad:
            add("all zero", call(6, 4, 2, density=0.0))
        if dtype == torch.float32:
            add(f"large {BIG}", call(*BIG, density=0.05))
        if layout == "dense":  # a NaN in x reaches every row (0 * NaN is NaN in a dense product)
            adj, x, weight, bias = call(*orders["x@w-first"])
            x[3, 2] = float("nan")
            cases.append(Sample((adj, x, weight, bias), name="NaN in x", special=True))
        return cases

    return samples


def graph_conv_forward_samples(layout: str):
    """_graph_conv_forward's good calls: the three orders with and without bias, views,
    empty and tiny sizes."""

    def samples(device, dtype) -> list[Sample]:
        made = _Inputs(device, dtype, seed=1)
        cases = []
        for order, (n, f_in, f_out) in ORDERS.items():
            for bias in (True, False):
                args = (
                    made.adjacency(n, layout),
                    made.randn(n, f_in),
                    made.randn(f_in, f_out),
                    made.randn(f_out) if bias else None,
                )
                cases.append(Sample(args, name=f"{layout} adj, {order}, bias={bias}"))
            args = (
                made.adjacency(n, layout, "transposed"),
                made.randn(n, f_in, view="sliced"),
                made.randn(f_in, f_out, view="transposed"),
                None,
            )
            cases.append(Sample(args, name=f"{layout} adj, {order}, views"))
        for n, f_in, f_out in EMPTY_AND_TINY:
            args = (
                made.adjacency(n, layout, density=1.0),
                made.randn(n, f_in),
                made.randn(f_in, f_out),
                made.randn(f_out),
            )
            cases.append(Sample(args, name=f"{layout} adj, sizes {(n, f_in, f_out)}"))
        return cases

    return samples


def weight_grad_samples(layout: str):
    """weight_grad's good calls: both orders of its product (grad narrower than x or
    not), views, empty and tiny sizes, the layout's own forms and one large call."""

    def samples(device, dtype) -> list[Sample]:
        made = _Inputs(device, dtype, seed=2)
        cases = []

        def call(n, f_in, f_out, view="contiguous", density=0.3):
            return (
                made.adjacency(n, layout, view, density),
                made.randn(n, f_in, view=view),
                made.randn(n, f_out, view=view),
            )

        for order, sizes in ORDERS.items():
            for view in ("contiguous", "transposed", "sliced"):
                cases.append(Sample(call(*sizes, view), name=f"{layout} adj, {order}, {view}"))
        if layout == "coo":
            adj, x, grad = call(9, 6, 3)
            cases.append(Sample((_uncoalesced(adj), x, grad), name="uncoalesced COO adj"))
        if layout == "csr":
            adj, x, grad = call(10, 2, 7)
            cases.append(Sample((_int32_csr(adj), x, grad), name="CSR adj with int32 indices"))
        # (1, 2, 1), the smallest call (the memory check's), multiplies by adj.T, through
        # _csr_transpose where adj is sparse.
        for sizes in ((0, 3, 2), (4, 0, 3), (4, 3, 0), (1, 2, 1)):
            cases.append(Sample(call(*sizes, density=1.0), name=f"{layout} adj, sizes {sizes}"))
        cases.append(Sample(call(6, 4, 2, density=0.0), name=f"all-zero {layout} adj"))
        if dtype == torch.float32:
            cases.append(Sample(call(*BIG, density=0.05), name=f"{layout} adj, large {BIG}"))
        return cases

    return samples


def csr_transpose_samples(device, dtype) -> list[Sample]:
    """Matrices wider and taller than square, square, without rows or columns, with empty
    rows, under int32 and int64 indices."""
    g = torch.Generator().manual_seed(3)
    cases = []
    for shape in ((7, 11), (11, 7), (5, 5), (0, 3), (3, 0), (40, 300)):
        m = random_adjacency(max(shape), g, density=0.3 if shape != (40, 300) else 0.05)
        m = m[: shape[0], : shape[1]].contiguous()
        m[1 % max(shape[0], 1) :: 3] = 0  # some empty rows
        csr = m.to(device, dtype).to_sparse_csr()
        for index in (torch.int32, torch.int64):
            # Copies: the sparse tensor's own arrays are views of it, which opcheck cannot
            # make fake on their own.
            args = (
                csr.crow_indices().to(index, copy=True),
                csr.col_indices().to(index, copy=True),
                csr.values().clone(),
                shape[1],
            )
            cases.append(Sample(args, name=f"{list(shape)}, {index}"))
    return cases


# ---- bad calls --------------------------------------------------------------------------


def f64(*shape, **kwargs) -> torch.Tensor:
    return torch.randn(*shape, dtype=torch.float64, **kwargs)


# graph_conv's bad calls: the sentence each raises after "gc_cpp.graph_conv: ", in its
# check in ops.py (test_gc_cpp.py makes them through every path a call can take).
BAD_INPUTS = {
    "adj-not-square": (
        lambda: (f64(4, 5), f64(5, 3), f64(3, 2), f64(2)),
        r"adj must be square \(N, N\), got shape \[4, 5\]",
    ),
    "adj-3d": (
        lambda: (f64(2, 4, 4), f64(4, 3), f64(3, 2), None),
        r"adj must be 2-D \(N, N\), got a 3-D tensor of shape \[2, 4, 4\]",
    ),
    "adj-cols-vs-x-rows": (
        lambda: (f64(4, 4), f64(5, 3), f64(3, 2), f64(2)),
        r"adj has 4 columns but x has 5 rows \(adj \[4, 4\], x \[5, 3\]\)",
    ),
    "weight-rows-vs-x-cols": (
        lambda: (f64(4, 4), f64(4, 3), f64(7, 2), f64(2)),
        r"weight has 7 rows but x has 3 columns \(x \[4, 3\], weight \[7, 2\]\)",
    ),
    "bias-length": (
        lambda: (f64(4, 4), f64(4, 3), f64(3, 2), f64(5)),
        r"bias has 5 elements but weight has 2 columns \(weight \[3, 2\], bias \[5\]\)",
    ),
    "bias-2d": (
        lambda: (f64(4, 4), f64(4, 3), f64(3, 2), f64(1, 2)),
        r"bias must be 1-D \(F_out,\), got a 2-D tensor of shape \[1, 2\]",
    ),
    "x-1d": (
        lambda: (f64(4, 4), f64(4), f64(1, 2), None),
        r"x must be 2-D \(N, F_in\), got a 1-D tensor of shape \[4\]",
    ),
    "weight-1d": (
        lambda: (f64(4, 4), f64(4, 3), f64(3), None),
        r"weight must be 2-D \(F_in, F_out\), got a 1-D tensor of shape \[3\]",
    ),
    "mixed-dtypes": (
        lambda: (f64(4, 4), f64(4, 3).float(), f64(3, 2), f64(2)),
        "adj, x, weight and bias must have the same dtype, got adj Double, x Float, weight Double, bias Double",
    ),
    "integer-dtype": (
        lambda: (*(torch.ones(s, dtype=torch.int64) for s in ((4, 4), (4, 3), (3, 2))), None),
        "dtype must be float16, bfloat16, float32 or float64, got Long",
    ),
    "adj-none": (
        lambda: (None, f64(4, 3), f64(3, 2), None),
        "adj must be a tensor, got None",
    ),
}

# Layouts: what a sparse adj may and may not be.
BAD_LAYOUTS = {
    "csc": (
        lambda: (f64(4, 4).to_sparse_csc(), f64(4, 3), f64(3, 2)),
        r"adj must be a dense \(strided\), sparse COO or sparse CSR tensor, got layout SparseCsc",
    ),
    "sparse-x": (
        lambda: (f64(4, 4), f64(4, 3).to_sparse(), f64(3, 2)),
        r"x must be a dense \(strided\) tensor, got layout Sparse",
    ),
    "hybrid-coo": (
        lambda: (f64(4, 4).to_sparse(1), f64(4, 3), f64(3, 2)),
        "a sparse COO adj must have 2 sparse dimensions and no dense ones, got sparse_dim 1 and dense_dim 1",
    ),
    "sparse-not-square": (
        lambda: (f64(4, 5).to_sparse_csr(), f64(5, 3), f64(3, 2)),
        r"adj must be square \(N, N\), got shape \[4, 5\]",
    ),
    "sparse-vs-x": (
        lambda: (f64(4, 4).to_sparse(), f64(5, 3), f64(3, 2)),
        r"adj has 4 columns but x has 5 rows",
    ),
    **{
        f"{layout}-{name}": (
            lambda layout=layout, dtype=dtype: tuple(
                t.to(dtype) for t in (as_layout(f64(4, 4), layout), f64(4, 3), f64(3, 2))
            ),
            f"a sparse adj on the CPU must be float32 or float64, got {name}",
        )
        for layout in ("coo", "csr")
        for dtype, name in ((torch.float16, "Half"), (torch.bfloat16, "BFloat16"))
    },
}


def graph_conv_bad(op: str = "gc_cpp.graph_conv"):
    """graph_conv's bad calls; _graph_conv_forward shares its check, and its sentences."""

    def bad() -> list[Bad]:
        calls = [
            Bad(make(), f"^gc_cpp.graph_conv: {message}", name=name)
            for name, (make, message) in (BAD_INPUTS | BAD_LAYOUTS).items()
        ]
        # The fake (meta) kernel runs the same check: no GPU needed for a device mismatch.
        calls.append(
            Bad(
                (f64(4, 4), f64(4, 3, device="meta"), f64(3, 2), f64(2)),
                "same device, got adj on cpu, x on meta, weight on cpu, bias on cpu",
                name="mixed-devices",
            )
        )
        if op == "gc_cpp.graph_conv":  # a sparse adj has no gradient
            for layout in ("coo", "csr"):
                adj = as_layout(f64(4, 4), layout).requires_grad_()
                calls.append(
                    Bad(
                        (adj, f64(4, 3), f64(3, 2)),
                        "gradient w.r.t. a sparse adj is not supported",
                        name=f"{layout}-adj-requiring-grad",
                    )
                )
        return calls

    return bad


WEIGHT_GRAD_BAD = {
    "grad-rows": (
        ((4, 4), (4, 3), (5, 2)),
        r"grad has 5 rows but adj has 4 \(adj \[4, 4\], grad \[5, 2\]\)",
    ),
    "adj-not-square": (
        ((4, 3), (3, 3), (4, 2)),
        r"adj must be square \(N, N\), got shape \[4, 3\]",
    ),
    "x-rows": (((4, 4), (5, 3), (4, 2)), r"adj has 4 columns but x has 5 rows"),
    "grad-1d": (((4, 4), (4, 3), (4,)), r"grad must be 2-D \(N, F_out\), got a 1-D tensor"),
}


def weight_grad_bad() -> list[Bad]:
    """Each on the CPU and on the meta device (the fake kernel): one sentence."""
    return [
        Bad(
            tuple(f64(*s, device=device) for s in shapes),
            f"^gc_cpp.weight_grad: {message}",
            name=f"{name}-{device}",
        )
        for name, (shapes, message) in WEIGHT_GRAD_BAD.items()
        for device in ("cpu", "meta")
    ]


def csr_transpose_bad() -> list[Bad]:
    def call(crow, col, values=None, num_cols=3, index=torch.int64):
        values = torch.ones(len(col)) if values is None else values
        return (torch.tensor(crow, dtype=index), torch.tensor(col), values, num_cols)

    return [
        # The structure, checked by the kernels (their loops read it).
        Bad(call([0, 1, 2], [0, 5]), r"col_indices\[1\] = 5 is out of range for num_cols = 3"),
        Bad(call([0, 1, 2], [0, -1]), r"col_indices\[1\] = -1 is out of range"),
        Bad(
            call([1, 1, 2], [0, 1]), "crow_indices must start at 0 and end at nnz = 2, got 1 and 2"
        ),
        Bad(
            call([0, 2, 1, 2], [0, 1]), "crow_indices must be non-decreasing, got 2 then 1 at row 1"
        ),
        # The arguments, checked in ops.py.
        Bad(
            call([0, 1], [0], num_cols=1, index=torch.int32),
            "must both be int32 or both int64, got Int and Long",
        ),
        Bad(call([0, 1], [0], torch.ones(2), 1), "col_indices has 1 elements but values has 2"),
    ]


# ---- properties -------------------------------------------------------------------------

FLOATING = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
# Relative rounding of one result per dtype (a few ulp), for results scaled to about 1.
EPS = {torch.float64: 1e-12, torch.float32: 4e-6, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}
VIEWS = ("contiguous", "transposed", "sliced", "expanded")


def _drawn_adjacency(draw, n, dtype, device):
    """(adj in a drawn layout and density, its layout)."""
    from hypothesis import strategies as st

    # Sparse products exist for float32 and float64 on the CPU; dense for every dtype.
    layout = draw(st.sampled_from(LAYOUTS)) if dtype not in HALF else "dense"
    density = draw(st.sampled_from([0.0, 0.05, 0.3, 1.0]))
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    adj = random_adjacency(n, g, density).to(device, dtype)
    return as_layout(adj, layout), layout


def _nodes_and_widths(draw):
    from hypothesis import strategies as st

    n = draw(st.one_of(st.integers(0, 40), st.sampled_from([1, 17, 33])))
    return n, draw(st.integers(0, 20)), draw(st.integers(0, 20))


def graph_conv_properties(device):
    """Any adjacency layout and density, 0 to 40 nodes, 0 to 20 features in and out, every
    dtype (sparse: float32 and float64), x and weight in any memory layout, bias or not."""
    from hypothesis import strategies as st

    from shared_build import battery

    @st.composite
    def draw(draw):
        n, f_in, f_out = _nodes_and_widths(draw)
        dtype = draw(st.sampled_from(FLOATING))
        adj, layout = _drawn_adjacency(draw, n, dtype, device)
        x = draw(battery.tensors((n, f_in), dtype, device, VIEWS))
        w = draw(battery.tensors((f_in, f_out), dtype, device, VIEWS))
        b = draw(battery.tensors((f_out,), dtype, device)) if draw(st.booleans()) else None
        name = (
            f"{layout} adj {n}x{n} nnz {int(dense(adj).count_nonzero())} {dtype}, x strides "
            f"{x.stride()}, weight {list(w.shape)} strides {w.stride()}, bias {b is not None}"
        )
        return Sample((adj, x, w, b), name=name)

    return draw()


def _scaled_tolerance(dtype, length) -> float:
    # Rounding grows with the length of the sums.
    return EPS[dtype] * max(1, length) ** 0.5 * (4 if dtype in HALF else 1)


def _close_scaled(got, expected, scale, tol) -> None:
    scale = max(1.0, scale.max().item() if scale.numel() else 1.0)
    torch.testing.assert_close(got.double(), expected, rtol=tol, atol=tol * scale)


def graph_conv_check(sample: Sample, got, expected) -> None:
    """Within a few roundings of the sum of |terms|; in float64, on small calls, the
    gradients of x, weight and bias equal autograd's through the reference."""
    adj, x, w, b = sample.args
    n, f_in, f_out = x.shape[0], x.shape[1], w.shape[1]
    a = dense(adj).double()
    assert got.shape == (n, f_out) and got.dtype == x.dtype and got.is_contiguous()
    tol = _scaled_tolerance(x.dtype, max(f_in, n))
    _close_scaled(
        got, exact_graph_conv(adj, x, w, b), a.abs() @ x.double().abs() @ w.double().abs(), tol
    )
    if x.dtype == torch.float64 and n * max(f_in, f_out) <= 400:
        g = torch.Generator().manual_seed(n * 441 + f_in * 21 + f_out)
        grad = torch.randn(n, f_out, generator=g, dtype=x.dtype).to(x.device)
        leaves = [t.detach().requires_grad_() for t in (x, w, b) if t is not None]
        gc_cpp.graph_conv(adj, *leaves[:2], *leaves[2:]).backward(grad)
        ref = [t.detach().clone().requires_grad_() for t in leaves]
        (a @ ref[0] @ ref[1] + (ref[2] if b is not None else 0)).backward(grad)
        for ours, theirs in zip(leaves, ref, strict=True):
            torch.testing.assert_close(ours.grad, theirs.grad, rtol=1e-10, atol=1e-10)


def weight_grad_properties(device):
    """graph_conv_properties' adjacencies and sizes, with x and grad in any layout."""
    from hypothesis import strategies as st

    from shared_build import battery

    @st.composite
    def draw(draw):
        n, f_in, f_out = _nodes_and_widths(draw)
        dtype = draw(st.sampled_from(FLOATING))
        adj, layout = _drawn_adjacency(draw, n, dtype, device)
        x = draw(battery.tensors((n, f_in), dtype, device, VIEWS))
        grad = draw(battery.tensors((n, f_out), dtype, device, VIEWS))
        name = (
            f"{layout} adj {n}x{n} {dtype}, x strides {x.stride()}, grad {list(grad.shape)} "
            f"strides {grad.stride()}"
        )
        return Sample((adj, x, grad), name=name)

    return draw()


def weight_grad_check(sample: Sample, got, expected) -> None:
    adj, x, grad = sample.args
    a = dense(adj).double()
    assert got.shape == (x.shape[1], grad.shape[1]) and got.dtype == x.dtype
    want = (a @ x.double()).T @ grad.double()
    scale = (a.abs() @ x.double().abs()).T @ grad.double().abs()
    _close_scaled(got, want, scale, _scaled_tolerance(x.dtype, max(x.shape[1], x.shape[0])))


def csr_transpose_properties(device):
    """Matrices of 0 to 40 rows and columns, of any density, any values dtype, int32 or
    int64 indices."""
    from hypothesis import strategies as st

    @st.composite
    def draw(draw):
        rows, cols = draw(st.integers(0, 40)), draw(st.integers(0, 40))
        density = draw(st.sampled_from([0.0, 0.1, 0.5, 1.0]))
        index = draw(st.sampled_from([torch.int32, torch.int64]))
        dtype = draw(st.sampled_from(FLOATING))
        g = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
        m = torch.rand(rows, cols, generator=g, dtype=torch.float64)
        m = torch.where(torch.rand(rows, cols, generator=g) < density, m, 0.0)
        csr = m.to(device, dtype).to_sparse_csr()
        args = (csr.crow_indices().to(index), csr.col_indices().to(index), csr.values(), cols)
        return Sample(args, name=f"{rows}x{cols} density {density} {index} {dtype}")

    return draw()


def csr_transpose_check(sample: Sample, got, expected) -> None:
    """The arrays of the transposed matrix, exactly, in the dtypes that came in; equal to
    torch's own conversion of the transposed dense matrix."""
    crow, col, values, num_cols = sample.args
    t_crow, t_col, t_values = got
    assert t_crow.dtype == t_col.dtype == crow.dtype and t_values.dtype == values.dtype
    m = torch.sparse_csr_tensor(crow, col, values, (crow.numel() - 1, num_cols))
    theirs = m.to_dense().T.contiguous().to_sparse_csr()
    assert torch.equal(t_crow.long(), theirs.crow_indices())
    assert torch.equal(t_col.long(), theirs.col_indices())
    assert torch.equal(t_values, theirs.values())
    assert all(map(torch.equal, got, expected))


# ---- the declarations -------------------------------------------------------------------

# Why the sparse declarations skip a check.
SPARSE_CANNOT = {
    "opcheck": "torch.library.opcheck takes no sparse tensor (its test_schema cannot "
    "access a sparse tensor's storage; its test_faketensor does not make a CSR tensor fake)",
    "compile": "torch.compile takes no sparse tensor (Dynamo: 'Attempted to wrap sparse Tensor')",
    "export": "torch.export traces with Dynamo, which takes no sparse tensor",
    "torchscript": "one TorchScript round trip per op, with a dense adj",
}
SPARSE_ELSEWHERE = {
    "bad": "the dense declaration's bad calls include the sparse ones",
    "properties": "the dense declaration's strategy draws every layout",
}
# Where declarations share a path, one runs the check (each case of the fuzzer and the
# memory check costs seconds).
VIA_CSR = "a COO adj is converted to CSR first: the CSR declaration checks it"
VIA_GRAPH_CONV = "graph_conv of the same layout runs the same kernel path"
ONE_CHECK = "the op's argument check is one function for every layout (ops.py): {} fuzzes it"
# A sparse call makes every ATen call a dense one makes, on a sparse adj (and a COO one
# its CSR conversion).
ONE_MEMORY = "{} checks the memory of the op's kernel path, which a dense adj's call shares"


def per_layout(dense_op: OpTest, samples, skip: dict[str, dict[str, str]]) -> list[OpTest]:
    """dense_op, and its COO and CSR declarations: samples(layout) for each, float32 and
    float64 only (no sparse product in half precision on the CPU), skipping what
    SPARSE_CANNOT, SPARSE_ELSEWHERE and skip[layout] say."""
    ops = [dense_op]
    for layout in ("coo", "csr"):
        ops.append(
            dataclasses.replace(
                dense_op,
                name=f"{dense_op.name}-{layout}",
                samples=samples(layout),
                dtypes=("float32", "float64"),
                skip=SPARSE_CANNOT | SPARSE_ELSEWHERE | skip.get(layout, {}),
            )
        )
    assert all(c in CHECKS for op in ops for c in op.skip), "skip names an unknown check"
    return ops


GRAPH_CONV_FUZZ = dict(
    fuzz_extra=(
        ("adj", "adj.to_sparse_csc()"),
        ("adj", "adj.to_sparse_bsr((2, 2))"),
        ("adj", "adj.to_sparse(1)"),  # COO with a dense dimension
        ("adj", "adj[:, :5]"),  # not square
        ("weight", "weight.to(torch.bfloat16)"),  # a bf16 weight with fp32 x
        ("x", "x.to_sparse_csr()"),
    ),
    # bias may be None, adj sparse COO.
    fuzz_valid=frozenset({("bias", "none"), ("adj", "sparse_coo")}),
)

# A sparse adjacency's products on CUDA (cuSPARSE) may differ in the last bits between two
# calls: an H200 run saw a CSR float64 property sample's second call differ (2026-11-27).
CUSPARSE = ("cuda",)

GRAPH_CONV = per_layout(
    OpTest(
        name="gc_cpp.graph_conv",
        fn=gc_cpp.graph_conv,
        op=torch.ops.gc_cpp.graph_conv.default,
        samples=graph_conv_samples("dense"),
        reference=graph_conv_reference,
        tolerance=tolerance,
        gradgrad=True,
        torchscript=True,
        bad=graph_conv_bad(),
        **GRAPH_CONV_FUZZ,
        properties=graph_conv_properties,
        check=graph_conv_check,
        skip={"memory": ONE_MEMORY.format("gc_cpp.graph_conv-csr")},
        nondeterministic=CUSPARSE,
    ),
    graph_conv_samples,
    {
        "coo": {"fuzz": VIA_CSR, "memory": VIA_CSR},
        "csr": {"fuzz": ONE_CHECK.format("the dense declaration")},
    },
)

GRAPH_CONV_FORWARD = per_layout(
    OpTest(
        name="gc_cpp._graph_conv_forward",
        fn=torch.ops.gc_cpp._graph_conv_forward,
        op=torch.ops.gc_cpp._graph_conv_forward.default,
        samples=graph_conv_forward_samples("dense"),
        reference=graph_conv_forward_reference,
        tolerance=tolerance,
        differentiable=False,  # graph_conv's autograd kernel calls it; a backward raises
        bad=graph_conv_bad("gc_cpp._graph_conv_forward"),
        **GRAPH_CONV_FUZZ,
        skip={
            "memory": VIA_GRAPH_CONV,
            "fuzz": "it shares graph_conv's argument check (ops.py), which graph_conv's fuzzing "
            "covers",
        },
    ),
    graph_conv_forward_samples,
    {
        layout: {"threads": VIA_GRAPH_CONV, "fuzz": VIA_GRAPH_CONV, "memory": VIA_GRAPH_CONV}
        for layout in ("coo", "csr")
    },
)

WEIGHT_GRAD = per_layout(
    OpTest(
        name="gc_cpp.weight_grad",
        fn=gc_cpp.weight_grad,
        op=torch.ops.gc_cpp.weight_grad.default,
        samples=weight_grad_samples("dense"),
        reference=weight_grad_reference,
        tolerance=tolerance,
        differentiable=False,  # a backward through it raises (test_gc_cpp.py)
        bad=weight_grad_bad,
        fuzz_extra=(("adj", "adj.to_dense()[:5]"), ("adj", "adj.to_sparse_csc()")),
        # A COO adj is still a valid adj; F_in (x) and F_out (grad) are free sizes.
        fuzz_valid=frozenset({("adj", "sparse_coo"), ("x", "size+1"), ("grad", "size+1")}),
        properties=weight_grad_properties,
        check=weight_grad_check,
        nondeterministic=CUSPARSE,
        skip={
            "fuzz": ONE_CHECK.format("gc_cpp.weight_grad-csr"),
            "memory": ONE_MEMORY.format("gc_cpp.weight_grad-coo"),
        },
    ),
    weight_grad_samples,
    {
        "coo": {"fuzz": VIA_CSR},
        "csr": {"memory": "the COO declaration checks it, its CSR conversion too"},
    },
)

CSR_TRANSPOSE = OpTest(
    name="gc_cpp._csr_transpose",
    fn=torch.ops.gc_cpp._csr_transpose,
    op=torch.ops.gc_cpp._csr_transpose.default,
    samples=csr_transpose_samples,
    reference=csr_transpose_reference,
    tolerance=exact,  # a permutation of the values: nothing rounds
    differentiable=False,
    bad=csr_transpose_bad,
    fuzz_extra=(
        ("num_cols", "-1"),
        ("num_cols", "3"),  # a column index past the end
        ("crow_indices", "crow_indices.flip(0)"),
        ("crow_indices", "crow_indices + 1"),
        ("crow_indices", "crow_indices[:0]"),
        ("col_indices", "col_indices - 100"),
        ("col_indices", "col_indices + 2**30"),
    ),
    # other_float on values: float64 values are valid.
    fuzz_valid=frozenset({("values", "other_float")}),
    properties=csr_transpose_properties,
    check=csr_transpose_check,
    skip={"memory": "gc_cpp.weight_grad-coo's memory call transposes its adj with it"},
)

OPS = [*GRAPH_CONV, *GRAPH_CONV_FORWARD, *WEIGHT_GRAD, CSR_TRANSPOSE]

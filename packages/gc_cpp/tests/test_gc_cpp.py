"""gc_cpp against the plain-PyTorch reference adj @ x @ weight + bias, in float64, and the
test battery (shared_build.battery) on the ops as gc_cpp_battery.py declares them."""

from __future__ import annotations

import contextlib
import os
import traceback
import warnings

import pytest
import torch
from gc_cpp_battery import OPS
from torch.testing import assert_close

import gc_cpp
from shared_build.battery import battery

# Sparse CSR construction warns once per process that the layout is in beta.
warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)]
LAYOUTS = ["dense", "coo", "csr"]
# (N, F_in, F_out): F_out < F_in multiplies x @ weight first; otherwise adj @ x first
# (equal widths included: both orders cost the same there and the kernel takes adj @ x).
ORDERS = {
    "x@w-first": (13, 9, 4),
    "adj@x-first": (13, 4, 9),
    "equal-widths": (11, 5, 5),
}

graph_conv_op = torch.ops.gc_cpp.graph_conv.default
forward_op = torch.ops.gc_cpp._graph_conv_forward.default
transpose_op = torch.ops.gc_cpp._csr_transpose.default

test_battery = battery(OPS)


def reference(adj, x, weight, bias=None):
    """adj @ x @ weight + bias from the definition, in float64, adj densified."""
    dense = adj.to_dense() if adj.layout != torch.strided else adj
    out = dense.double() @ x.double() @ weight.double()
    return out if bias is None else out + bias.double()


def tolerance(dtype):
    return {
        torch.float64: {"atol": 1e-10, "rtol": 1e-10},
        torch.float32: {"atol": 1e-4, "rtol": 1e-4},
        torch.bfloat16: {"atol": 0.15, "rtol": 0.05},
        torch.float16: {"atol": 0.05, "rtol": 0.02},
    }[dtype]


def random_adjacency(n, *, density=0.3, dtype=torch.float64, device="cpu"):
    """A weighted directed graph (not symmetric: transposes must be done right)."""
    mask = torch.rand(n, n, device=device) < density
    return torch.rand(n, n, dtype=dtype, device=device) * mask


def as_layout(adj, layout):
    return {"dense": adj, "coo": adj.to_sparse(), "csr": adj.to_sparse_csr()}[layout]


def make_inputs(order, *, dtype=torch.float64, device="cpu", layout="dense", bias=True):
    n, f_in, f_out = ORDERS[order]
    adj = as_layout(random_adjacency(n, dtype=dtype, device=device), layout)
    x = torch.randn(n, f_in, dtype=dtype, device=device)
    weight = torch.randn(f_in, f_out, dtype=dtype, device=device)
    b = torch.randn(f_out, dtype=dtype, device=device) if bias else None
    return adj, x, weight, b


# ---- values ------------------------------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
def test_matches_reference(device, dtype, layout, order, bias):
    adj, x, weight, b = make_inputs(order, dtype=dtype, device=device, layout=layout, bias=bias)
    out = gc_cpp.graph_conv(adj, x, weight, b)
    assert out.shape == (x.shape[0], weight.shape[1])
    assert out.dtype == dtype and out.device == x.device and out.is_contiguous()
    assert_close(out.double(), reference(adj, x, weight, b), **tolerance(dtype))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_half_precision_dense(dtype):
    adj, x, weight, b = make_inputs("x@w-first", dtype=dtype)
    out = gc_cpp.graph_conv(adj, x, weight, b)
    assert out.dtype == dtype
    assert_close(out.double(), reference(adj, x, weight, b), **tolerance(dtype))


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("order", ORDERS)
def test_any_strides(layout, order):
    n, f_in, f_out = ORDERS[order]
    dense = random_adjacency(n).t()  # a transposed view
    adj = dense if layout == "dense" else as_layout(dense, layout)
    x = torch.randn(f_in, n, dtype=torch.float64).t().requires_grad_(True)
    weight = torch.randn(f_out, f_in, dtype=torch.float64).t().requires_grad_(True)
    b = torch.randn(2 * f_out, dtype=torch.float64)[::2].requires_grad_(True)
    assert not (dense.is_contiguous() or x.is_contiguous() or weight.is_contiguous())
    out = gc_cpp.graph_conv(adj, x, weight, b)
    assert_close(out, reference(adj, x, weight, b))
    grad = torch.randn_like(out).t().contiguous().t()  # a column-major gradient
    ours = torch.autograd.grad(out, (x, weight, b), grad)
    theirs = torch.autograd.grad(reference(adj, x, weight, b), (x, weight, b), grad)
    for got, want in zip(ours, theirs, strict=True):
        assert_close(got, want)


@pytest.mark.parametrize("order", ORDERS)
def test_views_with_a_storage_offset(order):
    # Sliced views whose first element is not their storage's first: the kernels make
    # transposed views of x, weight and the products themselves, which must keep it.
    adj, x, weight, b = make_inputs(order)

    def offset_view(t):
        big = torch.randn(t.shape[0] + 2, t.shape[1] + 3, dtype=t.dtype)
        big[2:, 3:] = t
        return big[2:, 3:]

    adj_v, x_v, weight_v = offset_view(adj), offset_view(x), offset_view(weight)
    assert x_v.storage_offset() > 0 and weight_v.storage_offset() > 0
    assert_close(gc_cpp.graph_conv(adj_v, x_v, weight_v, b), reference(adj, x, weight, b))
    grad = torch.randn(x.shape[0], weight.shape[1], dtype=torch.float64)
    assert_close(gc_cpp.weight_grad(adj_v, x_v, grad), (adj @ x).T @ grad)


def test_uncoalesced_coo():
    adj = random_adjacency(9)
    # Every entry split in two halves at the same position: coalescing sums them back.
    idx = adj.to_sparse().indices()
    vals = adj.to_sparse().values()
    coo = torch.sparse_coo_tensor(
        torch.cat([idx, idx], 1), torch.cat([vals / 2, vals / 2]), adj.shape
    )
    assert not coo.is_coalesced()
    x, weight = torch.randn(9, 6, dtype=torch.float64), torch.randn(6, 3, dtype=torch.float64)
    assert_close(gc_cpp.graph_conv(coo, x, weight), reference(adj, x, weight))


def test_int32_csr_indices():
    adj = random_adjacency(10)
    csr = torch.sparse_csr_tensor(
        adj.to_sparse_csr().crow_indices().int(),
        adj.to_sparse_csr().col_indices().int(),
        adj.to_sparse_csr().values(),
        adj.shape,
    )
    x = torch.randn(10, 7, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(7, 2, dtype=torch.float64, requires_grad=True)
    out = gc_cpp.graph_conv(csr, x, weight)
    assert_close(out, reference(adj, x, weight))
    out.sum().backward()
    assert_close(x.grad, adj.t() @ torch.ones(10, 2, dtype=torch.float64) @ weight.t())


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize(
    ("n", "f_in", "f_out"), [(0, 3, 2), (4, 0, 3), (4, 3, 0), (1, 1, 1)], ids=str
)
def test_empty_and_tiny(layout, n, f_in, f_out):
    adj = as_layout(random_adjacency(n), layout)
    x = torch.randn(n, f_in, dtype=torch.float64)
    weight = torch.randn(f_in, f_out, dtype=torch.float64)
    b = torch.randn(f_out, dtype=torch.float64)
    out = gc_cpp.graph_conv(adj, x, weight, b)
    assert out.shape == (n, f_out)
    assert_close(out, reference(adj, x, weight, b))


def test_empty_sparse_adjacency():
    adj = torch.zeros(6, 6, dtype=torch.float64)
    x, weight = torch.randn(6, 4, dtype=torch.float64), torch.randn(4, 2, dtype=torch.float64)
    b = torch.randn(2, dtype=torch.float64)
    for layout in ("coo", "csr"):
        out = gc_cpp.graph_conv(as_layout(adj, layout), x, weight, b)
        assert_close(out, b.expand(6, 2))


def test_special_values_propagate():
    adj, x, weight, b = make_inputs("x@w-first")
    x[3, 2] = float("nan")
    adj[5, 3] = 1.0  # row 5 reads node 3
    out = gc_cpp.graph_conv(adj, x, weight, b)
    assert out[5].isnan().all()


# ---- gradients ---------------------------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
def test_gradients_match_reference(device, layout, order, bias):
    adj, x, weight, b = make_inputs(order, device=device, layout=layout, bias=bias)
    inputs = [x, weight] + ([b] if bias else [])
    if layout == "dense":
        inputs.insert(0, adj)  # adj is differentiable when it is dense
    for t in inputs:
        t.requires_grad_(True)
    grad = torch.randn(x.shape[0], weight.shape[1], dtype=torch.float64, device=device)
    ours = torch.autograd.grad(gc_cpp.graph_conv(adj, x, weight, b), inputs, grad)
    theirs = torch.autograd.grad(reference(adj, x, weight, b), inputs, grad)
    for got, want in zip(ours, theirs, strict=True):
        assert_close(got, want)


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("which", ["adj", "x", "weight", "bias"])
def test_gradient_only_for_inputs_that_need_it(order, which):
    adj, x, weight, b = make_inputs(order)
    named = {"adj": adj, "x": x, "weight": weight, "bias": b}
    named[which].requires_grad_(True)
    grad = torch.randn(x.shape[0], weight.shape[1], dtype=torch.float64)
    gc_cpp.graph_conv(adj, x, weight, b).backward(grad)
    ref_inputs = {n: t.detach().clone().requires_grad_(n == which) for n, t in named.items()}
    reference(*ref_inputs.values()).backward(grad)
    for name, t in named.items():
        if name == which:
            assert_close(t.grad, ref_inputs[name].grad)
        else:
            assert t.grad is None


def test_no_graph_without_grad():
    adj, x, weight, b = make_inputs("x@w-first")
    assert gc_cpp.graph_conv(adj, x, weight, b).grad_fn is None
    weight.requires_grad_(True)
    assert gc_cpp.graph_conv(adj, x, weight, b).grad_fn is not None
    with torch.no_grad():
        assert gc_cpp.graph_conv(adj, x, weight, b).grad_fn is None
    with torch.inference_mode():
        assert gc_cpp.graph_conv(adj, x, weight, b).grad_fn is None


def test_grad_of_expanded_output_gradient():
    # out.sum().backward() hands backward a gradient with zero strides.
    adj, x, weight, b = make_inputs("adj@x-first")
    x.requires_grad_(True)
    gc_cpp.graph_conv(adj, x, weight, b).sum().backward()
    ones = torch.ones(x.shape[0], weight.shape[1], dtype=torch.float64)
    assert_close(x.grad, adj.t() @ ones @ weight.t())


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("order", ORDERS)
def test_gradcheck_dense(device, order):
    adj, x, weight, b = make_inputs(order, device=device)
    inputs = [t.requires_grad_(True) for t in (adj, x, weight, b)]
    assert torch.autograd.gradcheck(gc_cpp.graph_conv, inputs)
    assert torch.autograd.gradgradcheck(gc_cpp.graph_conv, inputs)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layout", ["coo", "csr"])
@pytest.mark.parametrize("order", ORDERS)
def test_gradcheck_sparse(device, layout, order):
    adj, x, weight, b = make_inputs(order, device=device, layout=layout)
    inputs = [t.requires_grad_(True) for t in (x, weight, b)]

    def fn(x, weight, b):
        return gc_cpp.graph_conv(adj, x, weight, b)

    assert torch.autograd.gradcheck(fn, inputs)
    assert torch.autograd.gradgradcheck(fn, inputs)


@pytest.mark.parametrize("layout", ["coo", "csr"])
def test_sparse_adj_requiring_grad_is_rejected(layout):
    adj, x, weight, b = make_inputs("x@w-first", layout=layout)
    adj.requires_grad_(True)
    with pytest.raises(RuntimeError, match="gradient w.r.t. a sparse adj is not supported"):
        gc_cpp.graph_conv(adj, x, weight, b)
    # Without grad mode nothing is recorded, so there is nothing to refuse.
    with torch.no_grad():
        assert_close(gc_cpp.graph_conv(adj, x, weight, b), reference(adj.detach(), x, weight, b))


# ---- the multiplication order -----------------------------------------------------------


def recorded_products(fn):
    """(name, [operand shapes]) of every aten::mm and aten::addmm that fn() dispatched,
    including those made inside gc_cpp's C++ kernels and its backward (but not the ones
    a product makes inside itself)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        fn()
    products = []
    names = ("aten::mm", "aten::addmm")
    for event in prof.events():
        parent = event.cpu_parent
        while parent is not None and parent.name not in names:
            parent = parent.cpu_parent
        if parent is not None:
            continue  # a product made inside another one (sparse mm calls addmm)
        if event.name == "aten::mm":
            products.append(("mm", [list(s) for s in event.input_shapes[:2]]))
        elif event.name == "aten::addmm":
            products.append(("addmm", [list(s) for s in event.input_shapes[1:3]]))
    return products


def adjacency_products(products, n):
    """The inner (summed-over) width of each product that does N^2 work: an N x N
    operand (adj or adj.T) or an N x N result (adj's gradient)."""
    widths = []
    for _, (a, b) in products:
        (m, k), (_, p) = a, b
        if (m, k) == (n, n):
            widths.append(p)
        elif (k, p) == (n, n):
            widths.append(m)
        elif (m, p) == (n, n):
            widths.append(k)
    return widths


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("order", ["x@w-first", "adj@x-first"])
def test_order_forward_and_backward(layout, order):
    n, f_in, f_out = 40, *ORDERS[order][1:]
    narrow = min(f_in, f_out)
    adj = as_layout(random_adjacency(n), layout)
    x = torch.randn(n, f_in, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(f_in, f_out, dtype=torch.float64, requires_grad=True)
    b = torch.randn(f_out, dtype=torch.float64, requires_grad=True)
    if layout == "dense":
        adj.requires_grad_(True)

    forward = recorded_products(lambda: gc_cpp.graph_conv(adj, x, weight, b))
    assert adjacency_products(forward, n) == [narrow], forward

    out = gc_cpp.graph_conv(adj, x, weight, b)
    grad = torch.randn_like(out)
    backward = recorded_products(lambda: out.backward(grad))
    widths = adjacency_products(backward, n)
    # grad_x and grad_weight share one adj.T product; a dense adj adds its gradient.
    assert widths == [narrow] * (2 if layout == "dense" else 1), backward


def test_order_checker_catches_the_seed():
    # The seed's association, (adj @ x) @ weight with F_out < F_in, is what the test above
    # must reject: its adj product runs over F_in.
    n, f_in, f_out = 40, 9, 4
    adj = random_adjacency(n)
    x, weight = torch.randn(n, f_in, dtype=torch.float64), torch.randn(f_in, f_out).double()
    seed = recorded_products(lambda: adj.mm(x).mm(weight))
    assert adjacency_products(seed, n) == [f_in] != [min(f_in, f_out)]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("order", ORDERS)
def test_intermediate_is_the_chosen_product(layout, order):
    adj, x, weight, b = make_inputs(order, layout=layout)
    out, intermediate = forward_op(adj, x, weight, b)
    assert_close(out, reference(adj, x, weight, b))
    if weight.shape[1] < weight.shape[0]:
        assert intermediate.shape == (x.shape[0], weight.shape[1])
        assert_close(intermediate, x @ weight)
    else:
        assert intermediate.shape == (x.shape[0], x.shape[1])
        assert_close(intermediate, reference(adj, x, torch.eye(x.shape[1]).double()))


# ---- opcheck and torch.compile -----------------------------------------------------------


def opcheck_samples():
    samples = []
    for order in ORDERS:
        adj, x, weight, b = make_inputs(order)
        samples.append((adj, x, weight, b))
        samples.append((adj, x, weight, None))
        samples.append(tuple(t.clone().requires_grad_(True) for t in (adj, x, weight, b)))
        samples.append((adj, x.clone().requires_grad_(True), weight, None))
        samples.append((adj.t(), x.t().contiguous().t(), weight, b))
    f32 = make_inputs("x@w-first", dtype=torch.float32)
    samples.append(tuple(t.requires_grad_(True) for t in f32))
    return samples


@pytest.mark.parametrize("sample", range(len(opcheck_samples())))
def test_opcheck_graph_conv(sample):
    torch.manual_seed(sample)
    torch.library.opcheck(graph_conv_op, opcheck_samples()[sample])


@pytest.mark.parametrize("order", ORDERS)
def test_opcheck_internal_ops(order):
    adj, x, weight, b = make_inputs(order)
    torch.library.opcheck(forward_op, (adj, x, weight, b))
    torch.library.opcheck(forward_op, (adj, x, weight, None))
    csr = adj.to_sparse_csr()
    torch.library.opcheck(
        transpose_op,
        (csr.crow_indices().clone(), csr.col_indices().clone(), csr.values().clone(), adj.shape[1]),
    )


def test_compile_aot_eager_forward_and_backward():
    # AOTAutograd with the fake kernels and the autograd kernel of ops.py, no code generation.
    def fn(adj, x, weight, b):
        return torch.tanh(gc_cpp.graph_conv(adj, x, weight, b)).sum()

    compiled = torch.compile(fn, fullgraph=True, backend="aot_eager", dynamic=True)
    for order in ("x@w-first", "adj@x-first"):
        inputs = [t.requires_grad_(True) for t in make_inputs(order)]
        got = torch.autograd.grad(compiled(*inputs), inputs)
        want = torch.autograd.grad(fn(*inputs), inputs)
        for g, w in zip(got, want, strict=True):
            assert_close(g, w)


@pytest.mark.slow
@pytest.mark.parametrize("device", DEVICES)
def test_compile_inductor_fullgraph(device):
    layer = gc_cpp.GraphConv(9, 4, device=device, dtype=torch.float64)

    def fn(adj, x):
        return torch.relu(layer(gc_cpp.normalize_adjacency(adj), x))

    compiled = torch.compile(fn, fullgraph=True)
    for n in (13, 21):
        adj = random_adjacency(n, device=device)
        x = torch.randn(n, 9, dtype=torch.float64, device=device, requires_grad=True)
        out = compiled(adj, x)
        assert_close(out, fn(adj, x))
        (gx,) = torch.autograd.grad(out.sum(), x)
        (want,) = torch.autograd.grad(fn(adj, x).sum(), x)
        assert_close(gx, want)


# ---- bad input: RuntimeError naming the argument and the sizes, in C++ and in the fake ---


def f64(*shape, **kwargs):
    return torch.randn(*shape, dtype=torch.float64, **kwargs)


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
}


@pytest.mark.parametrize("case", BAD_INPUTS)
def test_bad_inputs_cpp(case):
    make, message = BAD_INPUTS[case]
    with pytest.raises(RuntimeError, match=f"^gc_cpp.graph_conv: {message}"):
        gc_cpp.graph_conv(*make())


def raised_by(excinfo) -> list[str]:
    """The functions of ops.py that the exception passed through, innermost last."""
    return [
        frame.name
        for frame in traceback.extract_tb(excinfo.tb)
        if frame.filename == gc_cpp.ops.__file__
    ]


def raised_by_check(excinfo, check: str) -> bool:
    """Whether ops.py's check function `check` raised it."""
    names = raised_by(excinfo)
    return check in names and names[-1] == "_fail"


def modes():
    """The ways an eager call can reach the kernels: with autograd, or past it."""
    yield "grad", contextlib.nullcontext()
    yield "no_grad", torch.no_grad()
    yield "inference_mode", torch.inference_mode()


@pytest.mark.parametrize("case", [*BAD_INPUTS, "adj-none"])
def test_bad_inputs_one_check_for_every_path(case):
    # Each op's checks live in one Python function (ops.py): the real kernels on CPU, the
    # meta device and FakeTensorMode all raise its sentence, from it, in every mode.
    from torch._subclasses.fake_tensor import FakeTensorMode

    if case == "adj-none":
        make = lambda: (None, f64(4, 3), f64(3, 2), None)  # noqa: E731
        message = "adj must be a tensor, got None"
    else:
        make, message = BAD_INPUTS[case]
    args = make()
    meta = [None if t is None else t.to("meta") for t in args]
    sentences = set()
    for mode, context in modes():
        for device, inputs in (("cpu", args), ("meta", meta)):
            with context, pytest.raises(RuntimeError, match=f"^gc_cpp.graph_conv: {message}") as e:
                graph_conv_op(*inputs)
            assert raised_by_check(e, "_check_graph_conv_inputs"), (
                mode,
                device,
            )
            sentences.add(str(e.value))
    with FakeTensorMode() as fake, pytest.raises(RuntimeError) as e:
        graph_conv_op(*[None if t is None else fake.from_tensor(t) for t in args])
    assert raised_by_check(e, "_check_graph_conv_inputs")
    sentences.add(str(e.value))
    assert len(sentences) == 1, sentences


RAW_CPU = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)


@pytest.mark.parametrize("case", [*BAD_INPUTS, "adj-none"])
def test_kernels_hold_no_copy_of_the_checks(case):
    # The C++ kernels called past ops.py (as a C++ caller would): bad input still raises,
    # ATen's error rather than a crash, and not the sentence of ops.py, which would be a
    # second copy of the check in csrc/.
    none = (None, f64(4, 3), f64(3, 2), None)
    args = none if case == "adj-none" else BAD_INPUTS[case][0]()
    for op, inputs in (
        (graph_conv_op, args),
        (torch.ops.gc_cpp._graph_conv_forward.default, args),
        (torch.ops.gc_cpp.weight_grad.default, (*args[:2], f64(4, 2))),
    ):
        try:
            op.redispatch(RAW_CPU, *inputs)
        except (RuntimeError, IndexError) as e:
            assert not str(e).startswith("gc_cpp."), (op, str(e))


def test_csr_transpose_checks_in_one_place():
    bad = (torch.tensor([0, 1], dtype=torch.int32), torch.tensor([0]), torch.ones(1), 1)
    message = "^gc_cpp._csr_transpose: crow_indices and col_indices must both be int32"
    for _, context in modes():
        with context, pytest.raises(RuntimeError, match=message) as e:
            transpose_op(*bad)
        assert raised_by_check(e, "_check_csr_transpose_inputs")
        with context, pytest.raises(RuntimeError, match=message):
            transpose_op(*[t.to("meta") if isinstance(t, torch.Tensor) else t for t in bad])
    # Past ops.py the CPU kernel keeps the invariants its loops need, in its own words.
    for args in (
        bad,
        (torch.tensor([0, 1]), torch.tensor([0]), torch.ones(2), 1),
        (torch.tensor([], dtype=torch.int64), torch.tensor([0]), torch.ones(1), 1),
        (torch.tensor([0, 1]), torch.tensor([0]), torch.ones(1), -1),
    ):
        with pytest.raises(RuntimeError, match="gc_cpp._csr_transpose: ") as e:
            transpose_op.redispatch(RAW_CPU, *args)
        assert not raised_by(e)


def test_mixed_devices_fake():
    with pytest.raises(
        RuntimeError,
        match="same device, got adj on cpu, x on meta, weight on cpu, bias on cpu",
    ):
        gc_cpp.graph_conv(f64(4, 4), f64(4, 3, device="meta"), f64(3, 2), f64(2))


def test_mixed_devices_cpp():
    # Runs without a GPU: redispatch towards the CPU kernel with a meta x.
    # Through BackendSelect, whose kernel (ops.py) runs the checks where autograd is off.
    keys = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU).add(torch._C.DispatchKey.BackendSelect)
    with pytest.raises(
        RuntimeError,
        match="same device, got adj on cpu, x on meta, weight on cpu, bias on cpu",
    ):
        graph_conv_op.redispatch(keys, f64(4, 4), f64(4, 3, device="meta"), f64(3, 2), f64(2))


@pytest.mark.cuda
def test_mixed_devices_cpu_cuda():
    with pytest.raises(RuntimeError, match="x on cuda:0, weight on cpu"):
        gc_cpp.graph_conv(f64(4, 4), f64(4, 3, device="cuda"), f64(3, 2))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            lambda: (f64(4, 4).to_sparse_csc(), f64(4, 3), f64(3, 2)),
            "adj must be a dense \\(strided\\), sparse COO or sparse CSR tensor, got layout SparseCsc",
        ),
        (
            lambda: (f64(4, 4), f64(4, 3).to_sparse(), f64(3, 2)),
            r"x must be a dense \(strided\) tensor, got layout Sparse",
        ),
        (
            lambda: (f64(4, 4).to_sparse(1), f64(4, 3), f64(3, 2)),
            "a sparse COO adj must have 2 sparse dimensions and no dense ones, got sparse_dim 1 and dense_dim 1",
        ),
        (
            lambda: (f64(4, 5).to_sparse_csr(), f64(5, 3), f64(3, 2)),
            r"adj must be square \(N, N\), got shape \[4, 5\]",
        ),
        (
            lambda: (f64(4, 4).to_sparse(), f64(5, 3), f64(3, 2)),
            r"adj has 4 columns but x has 5 rows",
        ),
    ],
    ids=["csc", "sparse-x", "hybrid-coo", "sparse-not-square", "sparse-vs-x"],
)
def test_bad_layouts(args, message):
    with pytest.raises(RuntimeError, match=message):
        gc_cpp.graph_conv(*args())


# ---- the seed functions ------------------------------------------------------------------


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("order", ORDERS)
def test_seed_forward(layout, order):
    adj, x, weight, b = make_inputs(order, layout=layout)
    assert_close(gc_cpp.forward(adj, x, weight, b), reference(adj, x, weight, b))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("order", ORDERS)
def test_weight_grad(device, layout, order):
    adj, x, weight, _ = make_inputs(order, device=device, layout=layout)
    grad = f64(x.shape[0], weight.shape[1], device=device)
    dense = adj.to_dense() if layout != "dense" else adj
    assert_close(gc_cpp.weight_grad(adj, x, grad), (dense @ x).t() @ grad)


@pytest.mark.parametrize("order", ["x@w-first", "adj@x-first"])
def test_weight_grad_order(order):
    n, f_in, f_out = 40, *ORDERS[order][1:]
    adj, x, grad = random_adjacency(n), f64(n, f_in), f64(n, f_out)
    products = recorded_products(lambda: gc_cpp.weight_grad(adj, x, grad))
    assert adjacency_products(products, n) == [min(f_in, f_out)], products


def test_weight_grad_is_the_weight_gradient_and_backward_its_seed_name():
    adj, x, weight, b = make_inputs("x@w-first")
    weight.requires_grad_(True)
    grad = f64(x.shape[0], weight.shape[1])
    gc_cpp.forward(adj, x, weight, b).backward(grad)
    assert_close(gc_cpp.weight_grad(adj, x, grad), weight.grad)
    assert_close(gc_cpp.backward(adj, x, grad), weight.grad)


@pytest.mark.parametrize(
    ("shapes", "message"),
    [
        (
            ((4, 4), (4, 3), (5, 2)),
            r"grad has 5 rows but adj has 4 \(adj \[4, 4\], grad \[5, 2\]\)",
        ),
        (((4, 3), (3, 3), (4, 2)), r"adj must be square \(N, N\), got shape \[4, 3\]"),
        (((4, 4), (5, 3), (4, 2)), r"adj has 4 columns but x has 5 rows"),
        (((4, 4), (4, 3), (4,)), r"grad must be 2-D \(N, F_out\), got a 1-D tensor"),
    ],
    ids=["grad-rows", "adj-not-square", "x-rows", "grad-1d"],
)
def test_weight_grad_bad_input(shapes, message):
    args = [f64(*s) for s in shapes]
    with pytest.raises(RuntimeError, match=f"^gc_cpp.weight_grad: {message}") as cpp:
        gc_cpp.weight_grad(*args)
    with pytest.raises(RuntimeError) as fake:
        gc_cpp.weight_grad(*[t.to("meta") for t in args])
    assert str(fake.value) == str(cpp.value)


def test_weight_grad_opcheck_and_no_derivative():
    for order in ORDERS:
        adj, x, weight, _ = make_inputs(order)
        grad = f64(x.shape[0], weight.shape[1])
        torch.library.opcheck(torch.ops.gc_cpp.weight_grad.default, (adj, x, grad))
    x.requires_grad_(True)
    out = gc_cpp.weight_grad(adj, x, grad)
    with pytest.raises(RuntimeError, match="derivative for gc_cpp::weight_grad is not implemented"):
        out.sum().backward()


def test_every_op_has_a_fake_kernel():
    ops = [n for n in torch._C._dispatch_get_all_op_names() if n.startswith("gc_cpp::")]
    assert len(ops) == 4, ops
    for op in ops:
        assert torch._C._dispatch_has_kernel_for_dispatch_key(op, "Meta"), op
        assert torch._C._dispatch_has_kernel_for_dispatch_key(op, "Autograd"), op
        assert torch._C._dispatch_has_kernel_for_dispatch_key(op, "BackendSelect"), op


# ---- normalize_adjacency -----------------------------------------------------------------


def normalize_reference(adj, add_self_loops=True):
    """D^-1/2 (A + I) D^-1/2 with explicit diagonal matrices."""
    a = adj + torch.eye(adj.shape[0], dtype=adj.dtype) if add_self_loops else adj
    deg = a.sum(1)
    d = torch.diag(torch.where(deg > 0, deg.clamp_min(1e-300) ** -0.5, torch.zeros_like(deg)))
    return d @ a @ d


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("add_self_loops", [True, False])
def test_normalize_adjacency(layout, add_self_loops):
    adj = random_adjacency(12)
    adj[3] = 0  # a node without out-edges: degree 0 without self-loops
    adj[:, 3] = 0
    adj[5, 5] = 2.0  # an existing self-loop: A + I adds to it
    out = gc_cpp.normalize_adjacency(as_layout(adj, layout), add_self_loops=add_self_loops)
    assert out.layout == as_layout(adj, layout).layout
    if layout == "coo":
        assert out.is_coalesced()
    dense = out.to_dense() if layout != "dense" else out
    assert torch.isfinite(dense).all()
    assert_close(dense, normalize_reference(adj, add_self_loops))


def test_normalize_adjacency_symmetric_rows_sum():
    # For a symmetric graph with self-loops, D^-1/2 A D^-1/2 has spectral radius 1 and
    # its leading eigenvector is sqrt(deg).
    a = random_adjacency(10)
    a = ((a + a.t()) > 0).double()
    out = gc_cpp.normalize_adjacency(a)
    deg = (a + torch.eye(10, dtype=torch.float64)).sum(1)
    assert_close(out @ deg.sqrt(), deg.sqrt())


def test_normalize_adjacency_gradcheck():
    adj = (random_adjacency(7) + 0.1).requires_grad_(True)
    assert torch.autograd.gradcheck(gc_cpp.normalize_adjacency, (adj,))
    # An isolated node without self-loops (degree exactly 0, where the function jumps, so
    # no finite difference applies): its scale is 0 and every gradient stays finite.
    adj = random_adjacency(7)
    adj[2], adj[:, 2] = 0, 0
    adj.requires_grad_(True)
    gc_cpp.normalize_adjacency(adj, add_self_loops=False).sum().backward()
    assert torch.isfinite(adj.grad).all()


def test_normalize_adjacency_bad_input():
    op = "gc_cpp.normalize_adjacency"
    with pytest.raises(
        RuntimeError, match=rf"{op}: adj must be square \(N, N\), got shape \[3, 4\]"
    ):
        gc_cpp.normalize_adjacency(f64(3, 4))
    with pytest.raises(RuntimeError, match=rf"{op}: adj must be 2-D"):
        gc_cpp.normalize_adjacency(f64(3))
    with pytest.raises(RuntimeError, match=rf"{op}: dtype must be .* got Long"):
        gc_cpp.normalize_adjacency(torch.ones(3, 3, dtype=torch.int64))


# ---- GraphConv ---------------------------------------------------------------------------


def test_graph_conv_module():
    layer = gc_cpp.GraphConv(9, 4, dtype=torch.float64)
    assert layer.weight.shape == (9, 4) and layer.bias.shape == (4,)
    assert (layer.bias == 0).all() and layer.weight.abs().max() <= (6 / 13) ** 0.5
    assert "in_features=9, out_features=4, bias=True" in repr(layer)
    adj, x, _, _ = make_inputs("x@w-first")
    out = layer(adj, x)
    assert_close(out, reference(adj, x, layer.weight, layer.bias))
    out.sum().backward()
    assert layer.weight.grad is not None and layer.bias.grad is not None
    assert set(layer.state_dict()) == {"weight", "bias"}


def test_graph_conv_module_without_bias():
    layer = gc_cpp.GraphConv(4, 9, bias=False, dtype=torch.float64)
    assert layer.bias is None and set(layer.state_dict()) == {"weight"}
    adj, x, _, _ = make_inputs("adj@x-first")
    assert_close(layer(adj.to_sparse_csr(), x), reference(adj, x, layer.weight))


# ---- _csr_transpose ----------------------------------------------------------------------


def composite_transpose(*args):
    # The device-independent kernel (the one CUDA tensors get), run on CPU tensors.
    return transpose_op.redispatch(torch._C.DispatchKeySet(torch._C.DispatchKey.CUDA), *args)


@pytest.mark.parametrize("kernel", ["cpu", "composite"])
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64], ids=str)
@pytest.mark.parametrize("shape", [(7, 11), (11, 7), (5, 5), (0, 3), (3, 0)], ids=str)
def test_csr_transpose(kernel, index_dtype, shape):
    adj = random_adjacency(max(shape))[: shape[0], : shape[1]].contiguous()
    adj[1 % max(shape[0], 1) :: 3] = 0  # some empty rows
    csr = adj.to_sparse_csr()
    args = (
        csr.crow_indices().to(index_dtype),
        csr.col_indices().to(index_dtype),
        csr.values(),
        shape[1],
    )
    crow, col, values = (transpose_op if kernel == "cpu" else composite_transpose)(*args)
    assert crow.dtype == col.dtype == index_dtype
    transposed = torch.sparse_csr_tensor(crow, col, values, shape[::-1])
    assert_close(transposed.to_dense(), adj.t())
    # canonical CSR: column indices sorted within each row
    for r in range(shape[1]):
        row = col[crow[r] : crow[r + 1]]
        assert (row[1:] > row[:-1]).all()


@pytest.mark.parametrize(
    ("crow", "col", "message"),
    [
        ([0, 1, 2], [0, 5], r"col_indices\[1\] = 5 is out of range for num_cols = 3"),
        ([0, 1, 2], [0, -1], r"col_indices\[1\] = -1 is out of range"),
        ([1, 1, 2], [0, 1], "crow_indices must start at 0 and end at nnz = 2, got 1 and 2"),
        ([0, 2, 1, 2], [0, 1], "crow_indices must be non-decreasing, got 2 then 1 at row 1"),
    ],
)
def test_csr_transpose_rejects_malformed_structure(crow, col, message):
    with pytest.raises(RuntimeError, match=message):
        transpose_op(torch.tensor(crow), torch.tensor(col), torch.ones(len(col)), 3)


def test_csr_transpose_bad_arguments():
    with pytest.raises(RuntimeError, match="must both be int32 or both int64, got Int and Long"):
        transpose_op(torch.tensor([0, 1], dtype=torch.int32), torch.tensor([0]), torch.ones(1), 1)
    with pytest.raises(RuntimeError, match="col_indices has 1 elements but values has 2"):
        transpose_op(torch.tensor([0, 1]), torch.tensor([0]), torch.ones(2), 1)


# ---- CUDA --------------------------------------------------------------------------------


@pytest.mark.cuda
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("order", ORDERS)
def test_cuda_matches_cpu_forward_and_backward(layout, order):
    adj, x, weight, b = make_inputs(order, layout=layout, dtype=torch.float32)
    cpu_inputs = [t.requires_grad_(True) for t in (x, weight, b)]
    cuda_inputs = [t.detach().cuda().requires_grad_(True) for t in (x, weight, b)]
    out_cpu = gc_cpp.graph_conv(adj, *cpu_inputs)
    out_cuda = gc_cpp.graph_conv(adj.cuda(), *cuda_inputs)
    assert out_cuda.device.type == "cuda"
    assert_close(out_cuda.cpu(), out_cpu, atol=1e-4, rtol=1e-4)
    grad = torch.randn_like(out_cpu)
    for got, want in zip(
        torch.autograd.grad(out_cuda, cuda_inputs, grad.cuda()),
        torch.autograd.grad(out_cpu, cpu_inputs, grad),
        strict=True,
    ):
        assert_close(got.cpu(), want, atol=1e-4, rtol=1e-4)


@pytest.mark.cuda
def test_cuda_normalize_adjacency():
    adj = random_adjacency(9)
    for layout in LAYOUTS:
        out = gc_cpp.normalize_adjacency(as_layout(adj, layout).cuda())
        dense = out.to_dense() if layout != "dense" else out
        assert_close(dense.cpu(), normalize_reference(adj))


# ---- stable ABI ---------------------------------------------------------------------------


def _libraries(package_dir):
    return sorted(str(p) for p in package_dir.iterdir() if p.suffix in (".so", ".pyd", ".dylib"))


def test_built_on_the_stable_abi():
    # 2.13 (the release wheel's target) unless this run built it for an older torch on
    # purpose (.ci/gpu_check.sh under the GPU machine's torch 2.11).
    assert gc_cpp.BUILD_INFO["abi"] == "stable"
    assert gc_cpp.BUILD_INFO["torch_target"] == (
        os.environ.get("SHARED_BUILD_STABLE_TARGET") or "2.13"
    )


def test_libraries_import_no_unstable_symbols():
    # Every shared library of the installed package calls libtorch only through the C
    # shim: no c10::, at::, torch:: symbol, whose layout changes between torch releases.
    from pathlib import Path

    from shared_build.runtime import unstable_symbols

    libraries = _libraries(Path(gc_cpp.__file__).parent)
    assert libraries, "no shared library in the installed gc_cpp"
    for library in libraries:
        assert unstable_symbols(library) == [], library


def test_unstable_symbols_finds_a_full_abi_library():
    # The audit above can fail: torch's own Python bindings import c10:: symbols.
    from pathlib import Path

    from shared_build.runtime import unstable_symbols

    (library,) = Path(torch.__file__).parent.glob("lib/libtorch_python.so")
    assert any(s.startswith("c10::") for s in unstable_symbols(str(library)))

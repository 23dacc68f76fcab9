"""gc_cpp: the test battery (shared_build.battery, declared in gc_cpp_battery.py: every op
against its plain-PyTorch reference in every dtype and adjacency layout, gradients,
gradcheck, opcheck, compile, export, TorchScript, bad input, fuzzing, properties,
threads, memory, CUDA against the CPU), and what only gc_cpp has: the multiplication
order, the autograd kernel's partial paths, one check for every path a call takes, the
seed API, normalize_adjacency, GraphConv and the stable ABI."""

from __future__ import annotations

import contextlib
import os
import traceback

import pytest
import torch
from gc_cpp_battery import (
    BAD_INPUTS,
    LAYOUTS,
    OPS,
    ORDERS,
    as_layout,
    csr_transpose_reference,
    csr_transpose_samples,
    f64,
    random_adjacency,
)
from gc_cpp_battery import exact_graph_conv as reference
from packaging.version import Version
from torch.testing import assert_close

import gc_cpp
from shared_build.battery import battery

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)]

graph_conv_op = torch.ops.gc_cpp.graph_conv.default
transpose_op = torch.ops.gc_cpp._csr_transpose.default

test_battery = battery(OPS)


def make_inputs(order, *, dtype=torch.float64, layout="dense", bias=True):
    n, f_in, f_out = ORDERS[order]
    adj = as_layout(random_adjacency(n).to(dtype), layout)
    x = torch.randn(n, f_in, dtype=dtype)
    weight = torch.randn(f_in, f_out, dtype=dtype)
    b = torch.randn(f_out, dtype=dtype) if bias else None
    return adj, x, weight, b


def test_every_op_is_declared_to_the_battery():
    # An op added to csrc/ without a declaration in gc_cpp_battery.py would go unchecked.
    ops = {n for n in torch._C._dispatch_get_all_op_names() if n.startswith("gc_cpp::")}
    assert {op.op._schema.name for op in OPS} == ops
    for name in ("graph_conv", "_graph_conv_forward", "weight_grad"):  # those taking an adj
        assert {f"gc_cpp.{name}{s}" for s in ("", "-coo", "-csr")} <= {op.name for op in OPS}


# ---- what the battery's reference check does not look at ---------------------------------


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_results_are_contiguous_in_the_inputs_dtype_and_device(dtype):
    # The battery compares values (in float64); the results' dtype, device and layout too.
    for op in OPS:
        if str(dtype).removeprefix("torch.") not in op.dtypes or op.name == "gc_cpp._csr_transpose":
            continue
        for sample in op.samples("cpu", dtype):
            x = sample.args[1]
            results = op.fn(*sample.args)
            for out in results if isinstance(results, tuple) else (results,):
                assert out.dtype == x.dtype and out.device == x.device, (op.name, sample.name)
                assert out.is_contiguous(), (op.name, sample.name)


# ---- gradients ---------------------------------------------------------------------------


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


@pytest.mark.parametrize("device", DEVICES)
def test_autocast_leaves_graph_conv_in_its_inputs_dtype(device):
    # graph_conv computes in its inputs' dtype, as its fake kernel (and so torch.compile)
    # says: under torch.autocast its products stay float32, eager and compiled alike.
    # Before, eager's products were autocast (bfloat16 out of float32 inputs on the CPU).
    adj, x, weight, b = (t.float().to(device) for t in make_inputs("x@w-first"))
    weight.requires_grad_(True)
    plain = gc_cpp.graph_conv(adj, x, weight, b)
    (want,) = torch.autograd.grad(plain.sum(), weight)
    low = torch.bfloat16 if device == "cpu" else torch.float16
    compiled = torch.compile(gc_cpp.graph_conv, fullgraph=True, backend="aot_eager")
    with torch.autocast(device, dtype=low):
        eager = gc_cpp.graph_conv(adj, x, weight, b)
        (got,) = torch.autograd.grad(eager.sum(), weight)
        traced = compiled(adj, x, weight, b)
    assert eager.dtype == traced.dtype == got.dtype == torch.float32
    assert_close(eager, plain)
    assert_close(traced, plain)
    assert_close(got, want)


def test_no_graph_without_grad():
    adj, x, weight, b = make_inputs("x@w-first")
    assert gc_cpp.graph_conv(adj, x, weight, b).grad_fn is None
    weight.requires_grad_(True)
    assert gc_cpp.graph_conv(adj, x, weight, b).grad_fn is not None
    with torch.no_grad():
        assert gc_cpp.graph_conv(adj, x, weight, b).grad_fn is None
    with torch.inference_mode():
        assert gc_cpp.graph_conv(adj, x, weight, b).grad_fn is None


@pytest.mark.parametrize("layout", ["expanded", "column-major"])
def test_backward_takes_any_gradient_layout(layout):
    # The battery's backward check hands backward a contiguous gradient; out.sum().backward()
    # hands it one with zero strides.
    adj, x, weight, b = make_inputs("adj@x-first")
    x.requires_grad_(True)
    out = gc_cpp.graph_conv(adj, x, weight, b)
    if layout == "expanded":
        grad = torch.ones_like(out)
        (got,) = torch.autograd.grad(out.sum(), x)
    else:
        grad = torch.randn_like(out).t().contiguous().t()
        (got,) = torch.autograd.grad(out, x, grad)
    assert_close(got, adj.t() @ grad @ weight.t())


@pytest.mark.parametrize("layout", ["coo", "csr"])
def test_sparse_adj_requiring_grad_is_used_without_grad_mode(layout):
    # With grad mode on it is refused (a bad call of the battery's); without it nothing is
    # recorded, so there is nothing to refuse.
    adj, x, weight, b = make_inputs("x@w-first", layout=layout)
    adj.requires_grad_(True)
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
@pytest.mark.parametrize("order", ["x@w-first", "adj@x-first", "x@w-first-by-one"])
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


@pytest.mark.parametrize("order", ["x@w-first", "adj@x-first", "x@w-first-by-one"])
def test_weight_grad_order(order):
    n, f_in, f_out = 40, *ORDERS[order][1:]
    adj, x, grad = random_adjacency(n), f64(n, f_in), f64(n, f_out)
    products = recorded_products(lambda: gc_cpp.weight_grad(adj, x, grad))
    assert adjacency_products(products, n) == [min(f_in, f_out)], products


# ---- torch.compile with AOTAutograd and around the op ----------------------------------


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
        adj = random_adjacency(n).to(device)
        x = torch.randn(n, 9, dtype=torch.float64, device=device, requires_grad=True)
        out = compiled(adj, x)
        assert_close(out, fn(adj, x))
        (gx,) = torch.autograd.grad(out.sum(), x)
        (want,) = torch.autograd.grad(fn(adj, x).sum(), x)
        assert_close(gx, want)


# ---- one check for every path a call takes, in ops.py -----------------------------------


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


@pytest.mark.parametrize("case", BAD_INPUTS)
def test_bad_inputs_one_check_for_every_path(case):
    # Each op's checks live in one Python function (ops.py): the real kernels on CPU, the
    # meta device and FakeTensorMode all raise its sentence, from it, in every mode.
    from torch._subclasses.fake_tensor import FakeTensorMode

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


@pytest.mark.parametrize("case", BAD_INPUTS)
def test_kernels_hold_no_copy_of_the_checks(case):
    # The C++ kernels called past ops.py (as a C++ caller would): bad input still raises,
    # ATen's error rather than a crash, and not the sentence of ops.py, which would be a
    # second copy of the check in csrc/.
    args = BAD_INPUTS[case][0]()
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
    # Index widths mixed either way round: the loops would read one with the other's width.
    for crow, col in ((torch.int32, torch.int64), (torch.int64, torch.int32)):
        args = (torch.tensor([0, 1], dtype=crow), torch.tensor([0], dtype=col), torch.ones(1), 1)
        with pytest.raises(RuntimeError, match="indices must be both int32 or both int64"):
            transpose_op.redispatch(RAW_CPU, *args)


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


# Regressions the fuzzer found (from tests/test_robustness.py).


@pytest.mark.parametrize(
    ("call", "message"),
    [
        # None for a tensor: "tensor does not have a device", naming nothing.
        (
            lambda a, x, w, g: torch.ops.gc_cpp.graph_conv(None, x, w, None),
            "gc_cpp.graph_conv: adj must be a tensor, got None",
        ),
        (
            lambda a, x, w, g: torch.ops.gc_cpp.weight_grad(a, x, None),
            "gc_cpp.weight_grad: grad must be a tensor, got None",
        ),
    ],
    ids=["graph_conv-adj", "weight_grad-grad"],
)
def test_none_for_a_tensor_names_it(call, message):
    a, x, w, g = torch.eye(3), torch.ones(3, 2), torch.ones(2, 4), torch.ones(3, 4)
    with pytest.raises(RuntimeError, match=message):
        call(a, x, w, g)


def test_csr_transpose_checks_its_values_and_devices():
    crow, col = torch.tensor([0, 1, 2]), torch.tensor([1, 0])
    op = torch.ops.gc_cpp._csr_transpose
    # A meta tensor among CPU ones reached the fake kernel, which returned garbage.
    with pytest.raises(RuntimeError, match="must be on the same device, got cpu, cpu and meta"):
        op(crow, col, torch.ones(2, device="meta"), 2)
    # Sparse values were read as if dense.
    with pytest.raises(RuntimeError, match="values must be a dense .strided. tensor"):
        op(crow, col, torch.ones(2).to_sparse(), 2)
    # Integer values failed in the dtype dispatch, naming the kernel, not the argument.
    with pytest.raises(RuntimeError, match="values must be float16, bfloat16, float32 or float64"):
        op(crow, col, torch.ones(2, dtype=torch.int64), 2)
    with pytest.raises(RuntimeError, match="col_indices must be a dense"):
        op(crow, col.to_sparse(), torch.ones(2), 2)


# ---- the seed functions and the registrations --------------------------------------------


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("order", ORDERS)
def test_seed_forward(layout, order):
    adj, x, weight, b = make_inputs(order, layout=layout)
    assert_close(gc_cpp.forward(adj, x, weight, b), reference(adj, x, weight, b))


def test_weight_grad_is_the_weight_gradient_and_backward_its_seed_name():
    adj, x, weight, b = make_inputs("x@w-first")
    weight.requires_grad_(True)
    grad = f64(x.shape[0], weight.shape[1])
    gc_cpp.forward(adj, x, weight, b).backward(grad)
    assert_close(gc_cpp.weight_grad(adj, x, grad), weight.grad)
    assert_close(gc_cpp.backward(adj, x, grad), weight.grad)


def test_weight_grad_has_no_derivative():
    adj, x, weight, _ = make_inputs("x@w-first")
    x.requires_grad_(True)
    out = gc_cpp.weight_grad(adj, x, f64(x.shape[0], weight.shape[1]))
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


@pytest.mark.parametrize("layout", LAYOUTS)
def test_normalize_adjacency_scale_of_a_node_whose_degree_is_not_positive(layout):
    """ops.py's docstring: "a node whose degree is not positive gets scale 0 instead of
    inf" (the README: "no positive degree"). Negative edge weights give node 2 degree
    -2.5 and node 4 degree exactly 0 (A + I included): their rows and columns are 0,
    never NaN or inf, and every other entry is d_i^-1/2 a_ij d_j^-1/2."""
    adj = random_adjacency(8)
    adj[2], adj[4] = 0, 0
    adj[2, 6], adj[4, 1] = -3.5, -1.0  # with the self-loop's 1: -2.5 and 0
    out = gc_cpp.normalize_adjacency(as_layout(adj, layout))
    dense = out.to_dense() if layout != "dense" else out
    a = adj + torch.eye(8, dtype=adj.dtype)
    assert a.sum(1)[2] == -2.5 and a.sum(1)[4] == 0
    assert torch.isfinite(dense).all()
    for node in (2, 4):
        assert (dense[node] == 0).all() and (dense[:, node] == 0).all(), node
    scale = a.sum(1).clamp_min(1e-300).rsqrt() * (a.sum(1) > 0)
    assert_close(dense, scale[:, None] * a * scale[None, :])


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


# ---- _csr_transpose's device-independent kernel ------------------------------------------


def composite_transpose(*args):
    # The device-independent kernel (the one CUDA tensors get), run on CPU tensors.
    return transpose_op.redispatch(torch._C.DispatchKeySet(torch._C.DispatchKey.CUDA), *args)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_csr_transpose_composite_kernel(dtype):
    # The battery checks the CPU kernel (and, on a GPU, this one with CUDA tensors).
    for sample in csr_transpose_samples("cpu", dtype):
        got = composite_transpose(*sample.args)
        for ours, theirs in zip(got, csr_transpose_reference(*sample.args), strict=True):
            assert ours.dtype == theirs.dtype and torch.equal(ours, theirs), sample.name


# ---- CUDA --------------------------------------------------------------------------------


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
    # 2.13 (the release wheel's target), or the torch of this run where it is older, as
    # nox's STABLE_TARGET (TORCH_VERSIONS=2.11.0 nox -s tests), or the target a build was
    # given on purpose (.ci/gpu_check.sh under the GPU machine's torch 2.11).
    running = ".".join(torch.__version__.split(".")[:2])
    oldest = min("2.13", running, key=Version)
    assert gc_cpp.BUILD_INFO["abi"] == "stable"
    assert gc_cpp.BUILD_INFO["torch_target"] == (
        os.environ.get("SHARED_BUILD_STABLE_TARGET") or oldest
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

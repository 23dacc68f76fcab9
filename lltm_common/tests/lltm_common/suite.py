"""The test cases lltm_cpu and lltm_cuda share, run against the package and device that
the ``impl`` fixture names (each package's tests/conftest.py makes it with conftest()).

A package's test module runs them with ``from lltm_common.suite import *``; pytest then
collects them as that module's tests.
"""

from __future__ import annotations

import importlib
import types
from dataclasses import dataclass

import pytest
import torch
from torch import Tensor, nn

from .reference import (
    BACKWARD_OUTPUT_NAMES,
    FORWARD_OUTPUT_NAMES,
    TOLERANCES,
    assert_close_scaled,
    lltm_forward,
    lltm_gradients,
    make_inputs,
)


@dataclass(frozen=True)
class Impl:
    """The package under test and the device its kernels run on."""

    name: str  # "lltm_cpu" or "lltm_cuda"
    package: types.ModuleType
    device: str  # "cpu" or "cuda"

    @property
    def ops(self):
        return getattr(torch.ops, self.name)

    def inputs(self, *shape: int, dtype=torch.float32, **kwargs) -> list[Tensor]:
        return make_inputs(*shape, dtype=dtype, device=self.device, **kwargs)


def conftest(name: str, device: str):
    """The session fixture ``impl`` (``name`` on ``device``) that a package's conftest.py
    makes; the cuda/slow markers and the CUDA skip come from shared_build.testing."""

    @pytest.fixture(scope="session")
    def impl() -> Impl:
        return Impl(name=name, package=importlib.import_module(name), device=device)

    return impl


# The gradient of each of forward's inputs, in the order of the inputs.
GRAD_NAMES = ("d_input", "d_weights", "d_bias", "d_old_h", "d_old_cell")
DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.float16]
# (batch, input_features, state_size): the tutorial's shape, batch 1, sizes that are no
# multiple of a vector or block width, no input features, and a batch large enough to be
# cut into several CPU tasks.
SHAPES = [(16, 32, 128), (1, 5, 3), (7, 13, 33), (3, 0, 4), (40, 24, 700)]
SHAPE_IDS = [f"B{b}-I{i}-S{s}" for b, i, s in SHAPES]


def _grads(impl: Impl, batch: int, state: int, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
    g = torch.Generator().manual_seed(1)
    return tuple(
        torch.randn(batch, state, dtype=torch.float64, generator=g).to(impl.device, dtype)
        for _ in range(2)
    )


# ---- values ------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
def test_forward_matches_reference(impl, shape, dtype):
    inputs = impl.inputs(*shape, dtype=dtype)
    outputs = impl.package.forward(*inputs)
    expected = lltm_forward(*[t.double().cpu() for t in inputs])
    assert isinstance(outputs, list) and len(outputs) == 7
    for name, out, ref in zip(FORWARD_OUTPUT_NAMES, outputs, expected, strict=True):
        assert out.shape == ref.shape, name
        assert out.dtype == dtype and out.device.type == impl.device, name
        assert_close_scaled(out, ref, dtype, name)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
def test_gradients_of_all_inputs_match_reference(impl, shape, dtype):
    batch, _, state = shape
    inputs = [t.requires_grad_() for t in impl.inputs(*shape, dtype=dtype)]
    grad_h, grad_cell = _grads(impl, batch, state, dtype)
    new_h, new_cell, *_ = impl.package.forward(*inputs)
    torch.autograd.backward([new_h, new_cell], [grad_h, grad_cell])
    expected = lltm_gradients(inputs, grad_h, grad_cell)
    got = dict(zip(GRAD_NAMES, (t.grad for t in inputs), strict=True))
    for name, ref in expected.items():
        assert got[name].dtype == dtype and got[name].shape == ref.shape, name
        assert_close_scaled(got[name], ref, dtype, name)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
def test_backward_op_matches_reference(impl, shape, dtype):
    """The tutorial's backward, called by hand with forward's saved tensors."""
    batch, _, state = shape
    inputs = impl.inputs(*shape, dtype=dtype)
    _, new_cell, input_gate, output_gate, candidate, X, gates = impl.package.forward(*inputs)
    grad_h, grad_cell = _grads(impl, batch, state, dtype)
    outputs = impl.package.backward(
        grad_h, grad_cell, new_cell, input_gate, output_gate, candidate, X, gates, inputs[1]
    )
    assert isinstance(outputs, list) and len(outputs) == 5
    expected = lltm_gradients(inputs, grad_h, grad_cell)
    for name, out in zip(BACKWARD_OUTPUT_NAMES, outputs, strict=True):
        assert out.shape == expected[name].shape, name
        assert_close_scaled(out, expected[name], dtype, name)


@pytest.mark.parametrize("gate_scale", [30.0, 1000.0])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_saturated_gates(impl, dtype, gate_scale):
    """Gates far in the flat tails of sigmoid, elu and tanh: finite, and still the
    reference's values and gradients."""
    inputs = [t.requires_grad_() for t in impl.inputs(6, 9, 10, dtype=dtype, gate_scale=gate_scale)]
    outputs = impl.package.forward(*inputs)
    expected = lltm_forward(*[t.detach().double().cpu() for t in inputs])
    for name, out, ref in zip(FORWARD_OUTPUT_NAMES, outputs, expected, strict=True):
        assert torch.isfinite(out).all(), name
        assert_close_scaled(out, ref, dtype, name)
    grad_h, grad_cell = _grads(impl, 6, 10, dtype)
    torch.autograd.backward(outputs[:2], [grad_h, grad_cell])
    reference = lltm_gradients(inputs, grad_h, grad_cell)
    for name, t in zip(GRAD_NAMES, inputs, strict=True):
        assert torch.isfinite(t.grad).all(), name
        assert_close_scaled(t.grad, reference[name], dtype, name)


def test_nan_propagates(impl):
    inputs = impl.inputs(3, 4, 5)
    inputs[3][1, 2] = float("nan")  # old_h: reaches every gate of row 1 through the GEMM
    new_h, new_cell, *_ = impl.package.forward(*inputs)
    assert torch.isnan(new_h[1]).all() and torch.isnan(new_cell[1]).all()
    assert not torch.isnan(new_h[[0, 2]]).any()


def test_batch_one(impl):
    inputs = [t.requires_grad_() for t in impl.inputs(1, 3, 8, dtype=torch.float64)]
    new_h, new_cell, *_ = impl.package.forward(*inputs)
    assert new_h.shape == (1, 8)
    expected = lltm_forward(*[t.detach().cpu() for t in inputs])
    assert_close_scaled(new_h, expected[0], torch.float64)
    (new_h.sum() + new_cell.sum()).backward()
    reference = lltm_gradients(inputs, torch.ones(1, 8), torch.ones(1, 8))
    assert_close_scaled(inputs[2].grad, reference["d_bias"], torch.float64)
    assert_close_scaled(inputs[1].grad, reference["d_weights"], torch.float64)


def test_empty_batch(impl):
    inputs = [t.requires_grad_() for t in impl.inputs(0, 3, 4)]
    outputs = impl.package.forward(*inputs)
    assert [tuple(t.shape) for t in outputs] == [(0, 4)] * 5 + [(0, 7), (0, 12)]
    (outputs[0].sum() + outputs[1].sum()).backward()
    # No rows: the parameters get zero gradients, not garbage from empty_like.
    assert torch.equal(inputs[1].grad, torch.zeros_like(inputs[1]))
    assert torch.equal(inputs[2].grad, torch.zeros_like(inputs[2]))


# ---- layouts -----------------------------------------------------------------------------


def _non_contiguous(t: Tensor, how: str) -> Tensor:
    """The same values as t in a layout that is not contiguous."""
    if how == "transposed":
        return t.t().contiguous().t() if t.dim() == 2 else t
    if how == "strided":
        wide = torch.zeros(*t.shape[:-1], 2 * t.shape[-1], dtype=t.dtype, device=t.device)
        wide[..., ::2] = t
        return wide[..., ::2]
    if how == "offset":
        flat = torch.zeros(t.numel() + 1, dtype=t.dtype, device=t.device)
        flat[1:] = t.reshape(-1)
        return flat[1:].view(t.shape)
    raise AssertionError(how)


@pytest.mark.parametrize("how", ["transposed", "strided", "offset"])
def test_non_contiguous_inputs(impl, how):
    base = impl.inputs(5, 6, 7, dtype=torch.float64)
    views = [_non_contiguous(t, how) for t in base]
    if how != "offset":
        assert not any(v.is_contiguous() for v in views if v.dim() == 2)
    leaves_a = [t.clone().requires_grad_() for t in base]
    leaves_b = [v.detach().requires_grad_() for v in views]
    out_a = impl.package.forward(*leaves_a)
    out_b = impl.package.forward(*leaves_b)
    for name, a, b in zip(FORWARD_OUTPUT_NAMES, out_a, out_b, strict=True):
        torch.testing.assert_close(b, a, rtol=1e-13, atol=1e-13, msg=name)
    grad_h, grad_cell = _grads(impl, 5, 7, torch.float64)
    torch.autograd.backward(out_a[:2], [grad_h, grad_cell])
    # Gradients in odd layouts too: transposed and expanded (stride 0) ones.
    torch.autograd.backward(out_b[:2], [_non_contiguous(grad_h, how), grad_cell])
    for a, b in zip(leaves_a, leaves_b, strict=True):
        torch.testing.assert_close(b.grad, a.grad, rtol=1e-13, atol=1e-13)


def test_expanded_gradient_from_sum(impl):
    # new_h.sum() hands backward a gradient with stride 0 in both dims.
    inputs = [t.requires_grad_() for t in impl.inputs(4, 3, 6, dtype=torch.float64)]
    new_h, *_ = impl.package.forward(*inputs)
    new_h.sum().backward()
    reference = lltm_gradients(inputs, torch.ones(4, 6), torch.zeros(4, 6))
    for name, t in zip(GRAD_NAMES, inputs, strict=True):
        assert_close_scaled(t.grad, reference[name], torch.float64, name)


# ---- autograd ----------------------------------------------------------------------------


def test_gradcheck_float64(impl):
    inputs = [t.requires_grad_() for t in impl.inputs(3, 4, 5, dtype=torch.float64)]
    assert torch.autograd.gradcheck(lambda *a: tuple(impl.package.forward(*a)[:2]), inputs)


def test_gradcheck_module_over_a_sequence(impl):
    torch.manual_seed(0)
    cell = impl.package.LLTM(3, 4).to(impl.device, torch.float64)
    xs = torch.randn(5, 2, 3, dtype=torch.float64, device=impl.device, requires_grad=True)

    def unroll(xs, weights, bias):
        h = torch.zeros(2, 4, dtype=torch.float64, device=impl.device)
        c = torch.zeros_like(h)
        for x in xs:
            h, c, *_ = impl.package.forward(x, weights, bias, h, c)
        return h, c

    assert torch.autograd.gradcheck(unroll, (xs, cell.weights, cell.bias))


def test_only_one_output_used(impl):
    for used in (0, 1):
        inputs = [t.requires_grad_() for t in impl.inputs(3, 4, 5, dtype=torch.float64)]
        out = impl.package.forward(*inputs)[used]
        grad = torch.randn_like(out)
        out.backward(grad)
        zero = torch.zeros_like(grad)
        reference = lltm_gradients(inputs, *((grad, zero) if used == 0 else (zero, grad)))
        for name, t in zip(GRAD_NAMES, inputs, strict=True):
            assert_close_scaled(t.grad, reference[name], torch.float64, name)


def test_saved_activations_are_not_differentiable(impl):
    inputs = [t.requires_grad_() for t in impl.inputs(2, 3, 4)]
    outputs = impl.package.forward(*inputs)
    assert outputs[0].requires_grad and outputs[1].requires_grad
    assert not any(t.requires_grad for t in outputs[2:])


def test_gradient_only_for_inputs_that_need_it(impl):
    inputs = impl.inputs(3, 4, 5, dtype=torch.float64)
    inputs[1].requires_grad_()
    new_h, *_ = impl.package.forward(*inputs)
    new_h.sum().backward()
    assert inputs[1].grad is not None
    assert all(t.grad is None for i, t in enumerate(inputs) if i != 1)


def test_double_backward_raises(impl):
    inputs = [t.requires_grad_() for t in impl.inputs(2, 3, 4, dtype=torch.float64)]
    new_h, *_ = impl.package.forward(*inputs)
    (d_weights,) = torch.autograd.grad(new_h.sum(), inputs[1], create_graph=True)
    with pytest.raises(RuntimeError, match="differentiable once: double backward"):
        d_weights.sum().backward()


def test_no_grad_and_inference_mode(impl):
    inputs = [t.requires_grad_() for t in impl.inputs(3, 4, 5)]
    with torch.no_grad():
        a = impl.package.forward(*inputs)
    with torch.inference_mode():
        b = impl.package.forward(*inputs)
    assert not a[0].requires_grad and b[0].is_inference()
    torch.testing.assert_close(a[0], b[0])


@pytest.mark.parametrize("op", ["forward", "backward"])
def test_forward_mode_ad_raises_instead_of_dropping_the_tangent(impl, op):
    # The autograd kernels call the op directly when there is nothing to record; a
    # forward-mode tangent must still reach torch::autograd::Function, which raises (C++
    # custom Functions have no jvp): without it the results would carry no tangent, a
    # silent wrong answer for torch.func.jvp and friends.
    import torch.autograd.forward_ad as fwAD

    inputs = impl.inputs(3, 4, 5)
    args = inputs
    if op == "backward":
        outputs = impl.package.forward(*inputs)
        args = [*_grads(impl, 3, 5, torch.float32), *outputs[1:], inputs[1]]
    with fwAD.dual_level():
        args = [fwAD.make_dual(args[0], torch.randn_like(args[0])), *args[1:]]
        with pytest.raises(RuntimeError, match="jvp is not implemented"):
            getattr(impl.package, op)(*args)


def test_results_are_separate_tensors(impl):
    inputs = impl.inputs(3, 4, 5)
    outputs = impl.package.forward(*inputs)
    grads = impl.package.backward(*_grads(impl, 3, 5, torch.float32), *outputs[1:], inputs[1])
    pointers = {t.untyped_storage().data_ptr() for t in [*outputs, *grads, *inputs]}
    assert len(pointers) == len(outputs) + len(grads) + len(inputs)


# ---- the module --------------------------------------------------------------------------


def test_module_parameters_and_init(impl):
    torch.manual_seed(0)
    cell = impl.package.LLTM(32, 128).to(impl.device)
    assert cell.weights.shape == (384, 160) and cell.bias.shape == (384,)
    bound = 1 / 128**0.5
    for p in (cell.weights, cell.bias):
        assert p.abs().max() <= bound and p.abs().max() > 0.9 * bound
    assert "input_features=32, state_size=128" in repr(cell)
    x = torch.randn(16, 32, device=impl.device)
    h = torch.randn(16, 128, device=impl.device)
    c = torch.randn(16, 128, device=impl.device)
    new_h, new_cell = cell(x, (h, c))
    expected = lltm_forward(
        x.cpu().double(),
        cell.weights.cpu().double(),
        cell.bias.cpu().double(),
        h.cpu().double(),
        c.cpu().double(),
    )
    assert_close_scaled(new_h, expected[0], torch.float32)
    assert_close_scaled(new_cell, expected[1], torch.float32)


def test_module_factory_kwargs_and_bad_sizes(impl):
    cell = impl.package.LLTM(3, 4, device=impl.device, dtype=torch.float64)
    assert cell.weights.dtype == torch.float64 and cell.weights.device.type == impl.device
    with pytest.raises(ValueError, match="state_size must be >= 1, got 0"):
        impl.package.LLTM(3, 0)
    with pytest.raises(ValueError, match="input_features must be >= 0, got -1"):
        impl.package.LLTM(-1, 4)


def test_module_trains(impl):
    """A few Adam steps on one batch lower the loss: the gradients point downhill."""
    torch.manual_seed(0)
    cell = impl.package.LLTM(4, 8).to(impl.device)
    x = torch.randn(10, 4, device=impl.device)
    target = torch.randn(10, 8, device=impl.device).tanh()
    optimizer = torch.optim.Adam(cell.parameters(), lr=0.05)
    losses = []
    for _ in range(30):
        h = c = torch.zeros(10, 8, device=impl.device)
        for _ in range(3):
            h, c = cell(x, (h, c))
        loss = nn.functional.mse_loss(h, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0], losses


# ---- opcheck, fake kernels, torch.compile ------------------------------------------------


def test_opcheck_forward(impl):
    samples = [
        impl.inputs(16, 32, 128),
        impl.inputs(7, 13, 33, dtype=torch.float64),
        [t.requires_grad_() for t in impl.inputs(4, 3, 5, dtype=torch.float64)],
        [_non_contiguous(t, "transposed") for t in impl.inputs(5, 6, 7)],
        impl.inputs(1, 0, 2),
    ]
    for args in samples:
        torch.library.opcheck(impl.ops.forward.default, tuple(args))


def test_opcheck_backward(impl):
    for shape, dtype in [((16, 32, 128), torch.float32), ((3, 5, 7), torch.float64)]:
        inputs = impl.inputs(*shape, dtype=dtype)
        _, new_cell, i, o, c, X, gates = impl.package.forward(*inputs)
        grads = _grads(impl, shape[0], shape[2], dtype)
        torch.library.opcheck(
            impl.ops.backward.default, (*grads, new_cell, i, o, c, X, gates, inputs[1])
        )


def test_fake_kernels_give_the_shapes(impl):
    from torch._subclasses.fake_tensor import FakeTensorMode

    real = impl.inputs(6, 5, 4)
    with FakeTensorMode(allow_non_fake_inputs=False) as mode:
        inputs = [mode.from_tensor(t) for t in real]
        outputs = impl.ops.forward(*inputs)
        grads = impl.ops.backward(*_fake_grads(mode, impl, 6, 4), *outputs[1:], inputs[1])
    assert [tuple(t.shape) for t in outputs] == [(6, 4)] * 5 + [(6, 9), (6, 12)]
    assert [tuple(t.shape) for t in grads] == [(6, 4), (6, 5), (12, 9), (12,), (6, 4)]
    assert all(t.device.type == impl.device for t in [*outputs, *grads])


def _fake_grads(mode, impl, batch, state):
    return [mode.from_tensor(t) for t in _grads(impl, batch, state, torch.float32)]


def test_compile_aot_eager_no_graph_break(impl):
    """Dynamo and AOTAutograd (fake kernels, C++ autograd) without Inductor's compile time:
    fullgraph=True fails on any graph break."""
    torch.manual_seed(0)
    cell = impl.package.LLTM(3, 5).to(impl.device, torch.float64)

    def step(x, h, c):
        new_h, new_cell = cell(x, (h, c))
        return (new_h * 2).sum() + new_cell.mean()

    compiled = torch.compile(step, fullgraph=True, backend="aot_eager", dynamic=True)
    for batch in (4, 7):
        x, h, c = (
            torch.randn(batch, n, dtype=torch.float64, device=impl.device) for n in (3, 5, 5)
        )
        loss = compiled(x, h, c)
        grads = torch.autograd.grad(loss, list(cell.parameters()))
        expected_loss = step(x, h, c)
        expected = torch.autograd.grad(expected_loss, list(cell.parameters()))
        torch.testing.assert_close(loss, expected_loss)
        for a, b in zip(grads, expected, strict=True):
            torch.testing.assert_close(a, b)


@pytest.mark.slow
def test_torch_compile_inductor_fullgraph(impl):
    """A model around LLTM under torch.compile(fullgraph=True) with Inductor: same loss and
    gradients as eager, over a sequence."""
    torch.manual_seed(0)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.cell = impl.package.LLTM(4, 16)
            self.head = nn.Linear(16, 1)

        def forward(self, xs):
            h = xs.new_zeros(xs.shape[1], 16)
            c = torch.zeros_like(h)
            for x in xs:
                h, c = self.cell(torch.relu(x), (h, c))
            return self.head(h).squeeze(-1)

    model = Model().to(impl.device)
    compiled = torch.compile(model, fullgraph=True)
    xs = torch.randn(3, 8, 4, device=impl.device)
    target = torch.randn(8, device=impl.device)
    loss = nn.functional.mse_loss(compiled(xs), target)
    loss.backward()
    got = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    expected_loss = nn.functional.mse_loss(model(xs), target)
    expected_loss.backward()
    torch.testing.assert_close(loss, expected_loss, rtol=1e-5, atol=1e-6)
    for a, p in zip(got, model.parameters(), strict=True):
        torch.testing.assert_close(a, p.grad, rtol=1e-4, atol=1e-6)


# ---- bad input: RuntimeError with a sentence naming the argument and the sizes -----------

B, I, S = 16, 32, 128  # noqa: E741  (batch, input_features, state_size)


def bad_forward_args(mutate):
    """A function of the device that returns forward's arguments, by name, at the tutorial
    shape with mutate(args, device) applied."""

    def build(device):
        args = dict(
            zip(
                ("input", "weights", "bias", "old_h", "old_cell"),
                make_inputs(B, I, S, device=device),
                strict=True,
            )
        )
        mutate(args, device)
        return args

    return build


def _set(name, factory):
    return lambda args, device: args.__setitem__(name, factory(args, device))


FORWARD_BAD = {
    "input-1d": (
        _set("input", lambda a, d: torch.randn(I, device=d)),
        r"input must be 2-D \(batch, input_features\), got a 1-D tensor of shape \[32\]",
    ),
    "input-3d": (
        _set("input", lambda a, d: torch.randn(2, B, I, device=d)),
        r"input must be 2-D .*got a 3-D tensor of shape \[2, 16, 32\]",
    ),
    "weights-shape": (
        _set("weights", lambda a, d: torch.randn(3 * S, I + S - 10, device=d)),
        r"weights must have shape \[384, 160\] \(3 \* state_size, input_features \+ state_size; .*\), got \[384, 150\]",
    ),
    "weights-transposed": (
        _set("weights", lambda a, d: a["weights"].t()),
        r"weights must have shape \[384, 160\] .*got \[160, 384\]",
    ),
    "bias-length": (
        _set("bias", lambda a, d: torch.randn(3 * S - 1, device=d)),
        r"bias must have shape \[384\] \(3 \* state_size; state_size is old_h.size\(1\)\), got \[383\]",
    ),
    "bias-2d": (
        _set("bias", lambda a, d: a["bias"][None]),
        r"bias must be 1-D \(3 \* state_size,\), got a 2-D tensor of shape \[1, 384\]",
    ),
    "old_h-batch": (
        _set("old_h", lambda a, d: torch.randn(8, S, device=d)),
        r"old_h must have the batch size of input, 16, got old_h of shape \[8, 128\] and input of shape \[16, 32\]",
    ),
    "old_cell-state": (
        _set("old_cell", lambda a, d: torch.randn(B, S // 2, device=d)),
        r"old_cell must have shape \[16, 128\] \(the shape of old_h\), got \[16, 64\]",
    ),
    "old_cell-broadcast": (
        _set("old_cell", lambda a, d: torch.randn(1, S, device=d)),
        r"old_cell must have shape \[16, 128\] \(the shape of old_h\), got \[1, 128\]",
    ),
    "state-mismatch": (
        lambda a, d: (
            a.__setitem__("old_h", torch.randn(B, 64, device=d)),
            a.__setitem__("old_cell", torch.randn(B, 64, device=d)),
        ),
        r"weights must have shape \[192, 96\] .*got \[384, 160\]",
    ),
    "dtype-mismatch": (
        _set("weights", lambda a, d: a["weights"].double()),
        "all tensors must have the same dtype, got input Float and weights Double",
    ),
    "integer-dtype": (
        lambda a, d: a.update({k: v.long() for k, v in a.items()}),
        "dtype must be float32, float64, bfloat16 or float16, got Long",
    ),
    "complex-dtype": (
        lambda a, d: a.update({k: v.to(torch.complex64) for k, v in a.items()}),
        "dtype must be float32, float64, bfloat16 or float16, got ComplexFloat",
    ),
}


@pytest.mark.parametrize("where", ["kernel", "fake"])
@pytest.mark.parametrize("case", list(FORWARD_BAD), ids=list(FORWARD_BAD))
def test_forward_bad_inputs(impl, case, where):
    """The C++ kernel and the fake kernel (meta device) reject bad input alike."""
    mutate, message = FORWARD_BAD[case]
    args = bad_forward_args(mutate)(impl.device if where == "kernel" else "meta")
    with pytest.raises(RuntimeError, match=f"{impl.name}.forward: {message}"):
        impl.package.forward(*args.values())


def test_forward_mixed_devices(impl):
    args = make_inputs(3, 4, 5, device=impl.device)
    args[4] = args[4].to("meta")
    with pytest.raises(
        RuntimeError, match=f"same device, got input on {impl.device}.* and old_cell on meta"
    ):
        impl.package.forward(*args)


def backward_args(device, dtype=torch.float32):
    """backward's nine arguments, by name, with valid shapes at the tutorial shape."""
    inputs = make_inputs(B, I, S, device=device, dtype=dtype)
    g = torch.randn(B, S, device=device, dtype=dtype)
    z = torch.randn(B, 3 * S, device=device, dtype=dtype)
    x = torch.randn(B, S + I, device=device, dtype=dtype)
    names = ("grad_h", "grad_cell", "new_cell", "input_gate", "output_gate", "candidate_cell")
    return {**{n: g.clone() for n in names}, "X": x, "gate_weights": z, "weights": inputs[1]}


BACKWARD_BAD = {
    "grad_h-1d": (
        "grad_h",
        lambda a, d: torch.randn(S, device=d),
        r"grad_h must be 2-D \(batch, state_size\), got a 1-D tensor of shape \[128\]",
    ),
    "grad_cell-shape": (
        "grad_cell",
        lambda a, d: torch.randn(B, S + 1, device=d),
        r"grad_cell must have shape \[16, 128\] \(the shape of grad_h\), got \[16, 129\]",
    ),
    "candidate-batch": (
        "candidate_cell",
        lambda a, d: torch.randn(B - 1, S, device=d),
        r"candidate_cell must have shape \[16, 128\] \(the shape of grad_h\), got \[15, 128\]",
    ),
    "X-narrow": (
        "X",
        lambda a, d: torch.randn(B, S - 1, device=d),
        r"X must have shape \(batch, state_size \+ input_features\) with batch 16 and at least state_size = 128 columns .*got \[16, 127\]",
    ),
    "gate_weights-shape": (
        "gate_weights",
        lambda a, d: torch.randn(B, 2 * S, device=d),
        r"gate_weights must have shape \[16, 384\] .*got \[16, 256\]",
    ),
    "weights-shape": (
        "weights",
        lambda a, d: torch.randn(3 * S, S + I + 1, device=d),
        r"weights must have shape \[384, 160\] \(3 \* state_size, X.size\(1\); .*\), got \[384, 161\]",
    ),
    "dtype-mismatch": (
        "X",
        lambda a, d: a["X"].double(),
        "all tensors must have the same dtype, got grad_h Float and X Double",
    ),
}


@pytest.mark.parametrize("where", ["kernel", "fake"])
@pytest.mark.parametrize("case", list(BACKWARD_BAD), ids=list(BACKWARD_BAD))
def test_backward_bad_inputs(impl, case, where):
    name, factory, message = BACKWARD_BAD[case]
    device = impl.device if where == "kernel" else "meta"
    args = backward_args(device)
    args[name] = factory(args, device)
    with pytest.raises(RuntimeError, match=f"{impl.name}.backward: {message}"):
        impl.package.backward(*args.values())


def test_tolerances_cover_every_dtype():
    assert set(DTYPES) <= set(TOLERANCES)


__all__ = ["Impl", *sorted(name for name in dir() if name.startswith("test_"))]

"""The test cases lltm_cpu and lltm_cuda share beyond the test battery (battery.py: values,
gradients, opcheck, compile, export, bad calls, fuzzing, properties, threads, memory): the
Python API and the LLTM module, the C++ autograd's own behaviour (an unused output, inputs
that need no gradient, no double backward, no forward-mode AD) and results in the thousands.
They run against the package and device that the ``impl`` fixture names (each package's
tests/conftest.py makes it with conftest()).

A package's test module runs them with ``from lltm_common.suite import *`` (lltm_cuda: with
``on_the_gpu()``, each marked cuda); pytest then collects them as that module's tests.
"""

from __future__ import annotations

import importlib
import types
from collections.abc import Callable
from dataclasses import dataclass

import pytest
import torch
from torch import Tensor, nn

from .battery import backward_args
from .reference import (
    BACKWARD_OUTPUT_NAMES,
    FORWARD_OUTPUT_NAMES,
    INPUT_NAMES,
    assert_close_scaled,
    lltm_backward,
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


def _grads(impl: Impl, batch: int, state: int, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
    g = torch.Generator().manual_seed(1)
    return tuple(
        torch.randn(batch, state, dtype=torch.float64, generator=g).to(impl.device, dtype)
        for _ in range(2)
    )


# ---- the Python API ----------------------------------------------------------------------


def test_forward_and_backward_return_lists(impl):
    """The tutorial's API: forward returns a list of seven tensors, backward of five."""
    inputs = impl.inputs(3, 4, 5)
    outputs = impl.package.forward(*inputs)
    assert isinstance(outputs, list) and len(outputs) == 7
    grads = impl.package.backward(*_grads(impl, 3, 5, torch.float32), *outputs[1:], inputs[1])
    assert isinstance(grads, list) and len(grads) == 5


# ---- values ------------------------------------------------------------------------------


def test_backward_reference_is_autograd_through_the_forward_reference():
    """The battery checks the backward ops against reference.lltm_backward (the chain rule
    from backward's own arguments): it equals autograd through reference.lltm_forward."""
    g = torch.Generator().manual_seed(2)
    for shape in [(5, 7, 6), (3, 0, 4), (0, 3, 4)]:
        inputs = make_inputs(*shape, dtype=torch.float64, gate_scale=8.0, generator=g)
        grads = [torch.randn(shape[0], shape[2], dtype=torch.float64, generator=g) for _ in "hc"]
        _, *saved = lltm_forward(*inputs)
        got = lltm_backward(*grads, *saved, inputs[1])
        want = lltm_gradients(inputs, *grads)
        for name, ours in zip(BACKWARD_OUTPUT_NAMES, got, strict=True):
            torch.testing.assert_close(ours, want[name], rtol=1e-12, atol=1e-12, msg=name)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_saturated_gates(impl, dtype):
    """Gates far in the flat tails of sigmoid, elu and tanh, with results in the thousands:
    finite, and the reference's values and gradients within a tolerance scaled to each
    result's own magnitude (the battery's, per dtype, takes gates scaled by 30)."""
    gate_scale = 1000.0
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


def test_the_node_saves_four_tensors_and_no_activation(impl):
    """forward's autograd node saves new_cell, X, the gates and weights; its backward
    recomputes the activations from the gates, so a module that drops them frees them."""
    inputs = [t.requires_grad_() for t in impl.inputs(2, 3, 4)]
    saved = []

    def pack(t):
        saved.append(t)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        outputs = impl.package.forward(*inputs)
    new_cell, activations, X, gates = outputs[1], outputs[2:5], outputs[5], outputs[6]
    same = [[t.data_ptr() == s.data_ptr() for s in saved] for t in (new_cell, X, gates, inputs[1])]
    assert len(saved) == 4 and all(map(any, same)), [tuple(t.shape) for t in saved]
    assert not any(a.data_ptr() == s.data_ptr() for a in activations for s in saved)


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


@pytest.mark.parametrize("op", ["forward", "backward"])
def test_none_is_named_also_beside_inputs_that_need_gradients(impl, op):
    """None for any tensor argument raises the sentence naming it, whether or not the other
    arguments need gradients (the autograd kernel reads no device or flag of it first)."""
    for needs_grad in (False, True):
        if op == "forward":
            args = dict(zip(INPUT_NAMES, impl.inputs(3, 4, 5, dtype=torch.float64), strict=True))
        else:
            args = backward_args(impl.device, torch.float64)
        for name in args:
            called = {n: t.clone().requires_grad_(needs_grad) for n, t in args.items()}
            called[name] = None
            with pytest.raises(
                RuntimeError, match=rf"^{impl.name}\.{op}: {name} is an undefined tensor$"
            ):
                getattr(impl.package, op)(*called.values())


def test_autocast_leaves_the_ops_in_their_inputs_dtype(impl):
    # The ops compute in their inputs' dtype, as their Meta kernels (and so torch.compile)
    # say: under torch.autocast their GEMMs stay float32. Before, the forward's addmm was
    # autocast and its lower-precision gates stopped the fused pass with "expected scalar
    # type Float but found BFloat16".
    inputs = [t.requires_grad_() for t in impl.inputs(3, 4, 5)]
    plain = impl.package.forward(*inputs)
    want = torch.autograd.grad(plain[:2], inputs, [torch.ones_like(plain[0])] * 2)
    low = torch.bfloat16 if impl.device == "cpu" else torch.float16
    with torch.autocast(impl.device, dtype=low):
        under = impl.package.forward(*inputs)
        got = torch.autograd.grad(under[:2], inputs, [torch.ones_like(under[0])] * 2)
    assert [t.dtype for t in under] == [torch.float32] * len(under)
    for a, b in zip([*plain, *want], [*under, *got], strict=True):
        torch.testing.assert_close(b, a)


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


def on_the_gpu() -> dict[str, Callable]:
    """The suite's tests, each a copy marked cuda, for lltm_cuda's test module
    (``globals().update(on_the_gpu())``). Its battery's CPU and meta cases (the bad calls,
    the fuzzer) run without a GPU, so a module-wide cuda mark would skip them; copies, so
    that lltm_cpu's tests, collected in the same session, keep their marks."""
    tests = {}
    for name in __all__[1:]:
        test = globals()[name]
        copy = types.FunctionType(
            test.__code__, test.__globals__, name, test.__defaults__, test.__closure__
        )
        copy.__dict__.update(test.__dict__)  # the parametrize marks; cuda goes to a new list
        copy.__kwdefaults__, copy.__qualname__ = test.__kwdefaults__, test.__qualname__
        copy.__module__ = test.__module__
        tests[name] = pytest.mark.cuda(copy)
    return tests


__all__ = ["Impl", *sorted(name for name in dir() if name.startswith("test_"))]

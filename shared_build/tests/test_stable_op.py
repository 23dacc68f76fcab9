"""shared_build.stable_op, the Python side of a stable-ABI op, on ops defined here in Python
(their CPU kernels stand in for a stable-ABI library's). Runs under every torch of the
matrix: the helper is where the stable-ABI packages use private torch API."""

from __future__ import annotations

import contextlib

import pytest

torch = pytest.importorskip("torch")

from shared_build import stable_op  # noqa: E402

NS = "sb_stable_op_test"
_lib = torch.library.Library(NS, "DEF")
_lib.define("scale_add(Tensor x, Tensor? y=None, float alpha=1.0) -> Tensor")
_lib.define("split(Tensor x) -> (Tensor, Tensor)")
_lib.define("checked_in_cpp(Tensor x) -> Tensor")
_lib.define("stack_of(Tensor[] xs) -> Tensor")

CALLS: list[str] = []


def _scale_add_cpu(x, y=None, alpha=1.0):
    CALLS.append("kernel")
    return x * alpha if y is None else x * alpha + y


def _split_cpu(x):
    return x[: x.shape[0] // 2].clone(), x[x.shape[0] // 2 :].clone()


def _checked_in_cpp_cpu(x):
    # Stands in for a C++ kernel that checks its own arguments.
    if x.dim() != 1:
        raise RuntimeError(f"{NS}.checked_in_cpp: x must be 1-D, got {x.dim()}-D")
    return x * 2


_lib.impl("scale_add", _scale_add_cpu, "CPU")
_lib.impl("split", _split_cpu, "CPU")
_lib.impl("checked_in_cpp", _checked_in_cpp_cpu, "CPU")


def check_scale_add(x, y, alpha):
    CALLS.append(f"check alpha={alpha}")
    if x.dtype not in (torch.float32, torch.float64):
        raise RuntimeError(f"{NS}.scale_add: x must be float32 or float64, got {x.dtype}")
    if y is not None and y.shape != x.shape:
        raise RuntimeError(f"{NS}.scale_add: y must have x's shape {list(x.shape)}")


def _scale_add_fake(x, y=None, alpha=1.0):
    check_scale_add(x, y, alpha)
    return x.new_empty(x.shape)


class _ScaleAdd(torch.autograd.Function):
    @staticmethod
    def forward(ctx, keyset, x, y, alpha):
        ctx.alpha = alpha
        ctx.has_y = y is not None
        return stable_op.below_autograd(scale_add_op, keyset, x, y, alpha)

    @staticmethod
    def backward(ctx, grad):
        return None, grad * ctx.alpha, grad if ctx.has_y else None, None


scale_add_op = getattr(torch.ops, NS).scale_add.default
split_op = getattr(torch.ops, NS).split.default
checked_in_cpp_op = getattr(torch.ops, NS).checked_in_cpp.default

stable_op.register(
    f"{NS}::scale_add", fake=_scale_add_fake, autograd=_ScaleAdd.apply, check=check_scale_add
)
stable_op.register(
    f"{NS}::split",
    fake=lambda x: (x.new_empty((x.shape[0] // 2,)), x.new_empty((x.shape[0] - x.shape[0] // 2,))),
    autograd=None,
)
stable_op.register(f"{NS}::checked_in_cpp", fake=lambda x: x.new_empty(x.shape), autograd=None)


MODES = {
    "grad": contextlib.nullcontext,
    "no_grad": torch.no_grad,
    "inference_mode": torch.inference_mode,
}


@pytest.fixture(autouse=True)
def _calls():
    CALLS.clear()
    yield


@pytest.mark.parametrize("requires_grad", [False, True])
@pytest.mark.parametrize("mode", MODES)
def test_check_runs_once_per_eager_call_then_the_kernel(mode, requires_grad):
    x = torch.randn(3, requires_grad=requires_grad)
    with MODES[mode]():
        out = scale_add_op(x, alpha=2.0)
    assert CALLS == ["check alpha=2.0", "kernel"]
    torch.testing.assert_close(out, x.detach() * 2)


@pytest.mark.parametrize("mode", MODES)
def test_bad_input_raises_the_check_before_any_kernel(mode):
    with MODES[mode](), pytest.raises(RuntimeError, match="x must be float32 or float64"):
        scale_add_op(torch.ones(3, dtype=torch.int64))
    assert CALLS == ["check alpha=1.0"]


def test_fake_kernel_checks_and_shapes():
    with pytest.raises(RuntimeError, match=r"y must have x's shape \[3\]"):
        scale_add_op(torch.ones(3, device="meta"), torch.ones(4, device="meta"))
    assert scale_add_op(torch.ones(5, device="meta")).shape == (5,)


def test_defaults_filled_in_from_the_schema():
    # The dispatcher leaves trailing arguments equal to their defaults out.
    scale_add_op(torch.ones(2))
    scale_add_op(torch.ones(2), None, 3.0)
    scale_add_op(torch.ones(2), alpha=4.0)
    assert [c for c in CALLS if c.startswith("check")] == [
        "check alpha=1.0",
        "check alpha=3.0",
        "check alpha=4.0",
    ]


def test_completer_names_what_is_missing():
    complete = stable_op._completer(scale_add_op)
    assert complete((1,), {}) == (1, None, 1.0)
    assert complete((1,), {"alpha": 5.0}) == (1, None, 5.0)
    with pytest.raises(TypeError, match=r"takes 3 arguments \(x, y, alpha\)"):
        complete((), {})


def test_no_graph_without_grad():
    x = torch.randn(3)
    assert scale_add_op(x, torch.randn(3)).grad_fn is None
    with torch.no_grad():
        assert scale_add_op(x.requires_grad_()).grad_fn is None


def test_gradients_through_the_function():
    x = torch.randn(4, dtype=torch.float64, requires_grad=True)
    y = torch.randn(4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, b: scale_add_op(a, b, 3.0), (x, y))
    # Only y requires grad: still recorded.
    out = scale_add_op(x.detach(), y, 3.0)
    (grad_y,) = torch.autograd.grad(out.sum(), y)
    torch.testing.assert_close(grad_y, torch.ones_like(y))


@pytest.mark.parametrize("op", ["scale_add", "split"])
@pytest.mark.parametrize("mode", ["grad", "no_grad"])
def test_forward_mode_raises_instead_of_dropping_the_tangent(op, mode):
    """A tangent reaches the autograd.Function, which has no jvp and raises; the kernels
    below autograd would return results without one (gc_cpp's dense graph_conv returned
    a wrong tangent, torch.func.jvp zeros, a CSR one and warp_perspective none at all)."""
    import torch.autograd.forward_ad as fwAD

    call = {"scale_add": lambda x, y: scale_add_op(x, y, 2.0), "split": lambda x, y: split_op(y)}
    x, y = torch.randn(4), torch.randn(4)
    with MODES[mode](), fwAD.dual_level(), pytest.raises((RuntimeError, NotImplementedError)):
        call[op](x, fwAD.make_dual(y, torch.ones(4)))
    with pytest.raises((RuntimeError, NotImplementedError)):
        torch.func.jvp(lambda y: call[op](x, y), (y,), (torch.ones(4),))
    with fwAD.dual_level():  # a dual level with no tangent on the arguments: no graph
        assert scale_add_op(x, y).grad_fn is None


def test_opcheck():
    x = torch.randn(3, requires_grad=True)
    torch.library.opcheck(scale_add_op, (x, torch.randn(3)), {"alpha": 2.0})
    torch.library.opcheck(split_op, (torch.randn(6),))


def test_compile_fullgraph():
    def f(x, y):
        return scale_add_op(x, y, 2.0).sin()

    x, y = torch.randn(5, requires_grad=True), torch.randn(5)
    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    torch.testing.assert_close(compiled(x, y), f(x, y))


def test_not_differentiable_outputs_raise_in_backward():
    x = torch.randn(6, requires_grad=True)
    first, second = split_op(x)
    assert first.requires_grad
    torch.testing.assert_close(second, x.detach()[3:])
    with pytest.raises(RuntimeError, match=f"derivative for {NS}::split is not implemented"):
        first.sum().backward()
    # Nothing requires grad: no node at all.
    assert split_op(torch.randn(6))[0].grad_fn is None


def test_without_a_python_check_the_kernel_checks_in_every_mode():
    assert not torch._C._dispatch_has_kernel_for_dispatch_key(
        f"{NS}::checked_in_cpp", "BackendSelect"
    )
    assert torch._C._dispatch_has_kernel_for_dispatch_key(f"{NS}::scale_add", "BackendSelect")
    for mode in MODES.values():
        with mode(), pytest.raises(RuntimeError, match="x must be 1-D, got 2-D"):
            checked_in_cpp_op(torch.ones(2, 2))


def test_tensor_positions_from_the_schema():
    assert stable_op._tensor_positions(scale_add_op) == (0, 1)
    assert stable_op._tensor_positions(split_op) == (0,)


def test_a_list_of_tensors_is_refused_with_a_sentence():
    with pytest.raises(NotImplementedError, match="list-of-tensors argument 'xs'"):
        stable_op.register(f"{NS}::stack_of", fake=lambda xs: xs[0], autograd=None)
    # Refused before anything was registered.
    assert not torch._C._dispatch_has_kernel_for_dispatch_key(f"{NS}::stack_of", "Meta")

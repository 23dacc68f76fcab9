"""add_ext.add: the test battery (shared_build.battery, declared in add_ext_battery.py: the
reference alpha * x + y, gradients, opcheck, compile, bad input, fuzzing, properties,
threads, memory, CUDA against the CPU), and what only this op has: its autograd fast path,
the direct entry, the CUDA stream, graph capture and 2^31 elements."""

from __future__ import annotations

import sys
from typing import ClassVar

import pytest
import torch
from add_ext_battery import OPS, tolerance
from torch.testing import assert_close

import add_ext
from shared_build.battery import battery
from shared_build.testing import need_free_gpu_memory, on_a_busy_side_stream

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)]

test_battery = battery(OPS)


@pytest.mark.parametrize("device", DEVICES)
def test_output_is_a_new_tensor(device):
    x = torch.randn(100, device=device)
    y = torch.randn(100, device=device)
    out = add_ext.add(x, y)
    assert out.data_ptr() not in (x.data_ptr(), y.data_ptr())
    # Same tensor for both arguments is allowed: 2x when alpha is 1.
    assert_close(add_ext.add(x, x), 2 * x)


@pytest.mark.parametrize("device", DEVICES)
def test_gradient_only_for_inputs_that_need_it(device):
    x = torch.randn(8, device=device, requires_grad=True)
    y = torch.randn(8, device=device)
    add_ext.add(x, y, 4.0).sum().backward()
    assert_close(x.grad, torch.full_like(x, 4.0))
    assert y.grad is None


@pytest.mark.parametrize("device", DEVICES)
def test_graph_recorded_only_when_needed(device):
    """The autograd kernel skips the graph node when nothing needs it (the fast path) and
    records it otherwise; forward mode still reports that it is unsupported."""
    x = torch.randn(8, device=device, requires_grad=True)
    y = torch.randn(8, device=device)
    for op in (add_ext.add, torch.ops.add_ext.add.default):
        plain = op(x.detach(), y, 2.0)
        assert plain.grad_fn is None and not plain.requires_grad
        with torch.no_grad():
            no_grad = op(x, y, 2.0)
        assert no_grad.grad_fn is None and not no_grad.requires_grad
        assert torch.equal(no_grad, plain)
        recorded = op(x, y, 2.0)
        assert recorded.requires_grad and recorded.grad_fn is not None
        assert torch.equal(recorded.detach(), plain)
    with torch.autograd.forward_ad.dual_level():
        dual = torch.autograd.forward_ad.make_dual(y, torch.ones_like(y))
        with pytest.raises(RuntimeError, match="jvp is not implemented"):
            add_ext.add(dual, y, 2.0)


# ---- bad input the battery cannot make without a GPU --------------------------------


@pytest.mark.cuda
def test_mixed_devices_cpu_cuda():
    with pytest.raises(RuntimeError, match="same device, got x on cpu and y on cuda:0"):
        add_ext.add(torch.randn(3), torch.randn(3, device="cuda"))


# ---- CUDA only --------------------------------------------------------------------------


@pytest.mark.cuda
def test_cuda_runs_on_current_stream_and_graph_capture():
    x = torch.randn(4096, device="cuda")
    y = torch.randn(4096, device="cuda")
    new_x = torch.randn_like(x)
    out = on_a_busy_side_stream(lambda: x.copy_(new_x), lambda: add_ext.add(x, y, 2.0))
    assert_close(out, 2 * new_x + y)  # the old x's sum: launched on another stream

    static_out = add_ext.add(x, y, 2.0)  # warm-up outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = add_ext.add(x, y, 2.0)
    x.copy_(torch.randn_like(x))
    graph.replay()
    torch.cuda.synchronize()
    assert_close(static_out, 2 * x + y)


@pytest.mark.cuda
def test_cuda_on_second_device_if_present():
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    x = torch.randn(1000, device="cuda:1")
    assert_close(add_ext.add(x, x, 1.0), 2 * x)


# ---- the direct entry (add_ext._C.add) keeps the op's semantics -------------------------


class LoggingTensor(torch.Tensor):
    """A subclass whose __torch_function__ records what it sees."""

    seen: ClassVar[list] = []

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        cls.seen.append(func)
        return super().__torch_function__(func, types, args, kwargs or {})


def test_subclass_torch_function_is_honoured():
    LoggingTensor.seen.clear()
    x = torch.randn(4).as_subclass(LoggingTensor)
    out = add_ext.add(x, torch.randn(4), 2.0)
    assert torch.ops.add_ext.add.default in LoggingTensor.seen
    assert isinstance(out, LoggingTensor)


def test_torch_function_mode_sees_the_call():
    seen = []

    class Mode(torch.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            seen.append(func)
            return func(*args, **(kwargs or {}))

    with Mode():
        add_ext.add(torch.randn(3), torch.randn(3))
    assert torch.ops.add_ext.add.default in seen


def test_torch_dispatch_mode_sees_the_op():
    from torch.utils._python_dispatch import TorchDispatchMode

    seen = []

    class Mode(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(func)
            return func(*args, **(kwargs or {}))

    with Mode():
        add_ext.add(torch.randn(3), torch.randn(3))
    assert torch.ops.add_ext.add.default in seen


def test_parameters_and_integer_alpha():
    w = torch.nn.Parameter(torch.randn(5))
    out = add_ext.add(w, w, 3)
    assert_close(out, 4 * w.detach())
    out.sum().backward()
    assert_close(w.grad, torch.full_like(w, 4.0))


def test_direct_entry_matches_the_op():
    x, y = torch.randn(50), torch.randn(50)
    assert_close(add_ext._C.add(x, y, 0.25), torch.ops.add_ext.add(x, y, 0.25))
    assert_close(add_ext._C.add(x, y), x + y)


def python_calls(fn) -> set[str]:
    """The Python functions fn runs outside this file (sys.setprofile sees those that C calls
    into too)."""
    seen: set[str] = set()

    def profile(frame, event, _arg):
        if event == "call" and frame.f_code.co_filename != __file__:
            seen.add(frame.f_code.co_qualname)

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return seen


def test_direct_entry_takes_the_direct_path_for_plain_calls():
    """Two plain tensors and an int or float alpha (or none) run no Python: the op is called
    from C++. A keyword goes through the torch.ops overload (OpOverload.__call__)."""
    x, y = torch.randn(5), torch.randn(5)
    for args in ((x, y), (x, y, 0.5), (x, y, 3)):
        assert python_calls(lambda a=args: add_ext._C.add(*a)) == set(), args
    assert "OpOverload.__call__" in python_calls(lambda: add_ext._C.add(x, y, alpha=0.5))


def test_direct_entry_takes_keywords_and_gives_the_ops_errors():
    """Keywords, and argument counts the op refuses, go to the torch.ops overload."""
    x, y = torch.randn(5), torch.randn(5)
    assert_close(add_ext._C.add(x, y, alpha=2.0), 2 * x + y)
    assert_close(add_ext._C.add(y=y, x=x), x + y)
    with pytest.raises(RuntimeError, match="missing value for argument 'y'"):
        add_ext._C.add(x)
    with pytest.raises(RuntimeError, match="expected at most 3 argument"):
        add_ext._C.add(x, y, 1.0, 2.0)
    with pytest.raises(RuntimeError, match="Expected a value of type 'float' for argument 'alpha'"):
        add_ext._C.add(x, y, 10**400)


def test_direct_entry_raises_the_kernels_error_as_torch_ops_does():
    x = torch.randn(5)
    with pytest.raises(RuntimeError) as direct:
        add_ext._C.add(x, torch.randn(4), 1.0)
    with pytest.raises(RuntimeError) as boxed:
        torch.ops.add_ext.add(x, torch.randn(4), 1.0)
    assert "x and y must have the same shape" in str(direct.value)
    assert str(direct.value) == str(boxed.value)


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (None, "x and y must be tensors, got None for x and a tensor for y"),
        (
            [1.0, 2.0],
            "Expected a value of type 'Tensor' for argument 'x' but instead found type 'list'",
        ),
        ("x", "Expected a value of type 'Tensor' for argument 'x' but instead found type 'str'"),
    ],
)
def test_non_tensor_arguments_get_the_ops_error(bad, message):
    with pytest.raises(RuntimeError, match=message):
        add_ext.add(bad, torch.randn(2))


def test_non_number_alpha_gets_the_ops_error():
    with pytest.raises(RuntimeError, match="Expected a value of type 'float' for argument 'alpha'"):
        add_ext.add(torch.randn(2), torch.randn(2), alpha="2")  # type: ignore[arg-type]


@pytest.mark.cuda
@pytest.mark.slow  # 13 GB on the GPU: not under compute-sanitizer
def test_cuda_past_2_to_the_31_elements():
    """Past 2^31 elements, where a 32-bit index first wraps, in each loop of the kernel:
    n = 2^31 + 1001 float16 elements. Aligned, the 8-wide vector loop covers n - 1 of them
    (its index stays below 2^28) and the scalar tail the last one, at 2^31 + 1000; the
    [1:] views, 2 bytes off 16-byte alignment, take the one-element kernel, whose index runs
    past 2^31. Slices at the start, across 2^31 and at the end equal the float32 reference.
    Needs 13 GB: x and y of n + 1 elements and one output of n, 4.3 GB each."""
    n = 2**31 + 1001
    need_free_gpu_memory(16)  # 13 GB and a margin
    g = torch.Generator(device="cuda").manual_seed(0)
    x_all, y_all = (
        torch.randn(n + 1, device="cuda", dtype=torch.float16, generator=g) for _ in range(2)
    )
    parts = (slice(0, 1000), slice(2**31 - 500, 2**31 + 500), slice(n - 1000, n))
    for start, aligned in ((0, True), (1, False)):
        x, y = x_all[start : start + n], y_all[start : start + n]
        assert (x.data_ptr() % 16 == 0) == aligned and x.is_contiguous()
        out = add_ext.add(x, y, 1.25)
        for part in parts:
            expected = (1.25 * x[part].cpu().float() + y[part].cpu().float()).half()
            assert_close(
                out[part].cpu(), expected, **tolerance(torch.float16),
                msg=lambda m, p=part, a=aligned: f"aligned={a}, elements {p}: {m}",
            )  # fmt: skip
        del out

"""add_ext.add against the plain-PyTorch reference alpha * x + y."""

from __future__ import annotations

from typing import ClassVar

import pytest
import torch
from torch.testing import assert_close

import add_ext
from shared_build.testing import need_free_gpu_memory, on_a_busy_side_stream

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)]
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
# Sizes around the vector width, the CPU grain (32768) and the CUDA tail handling.
SIZES = [1, 7, 1000, 32769, 100_003]


def reference(x: torch.Tensor, y: torch.Tensor, alpha: float) -> torch.Tensor:
    """alpha * x + y computed in float64 and rounded once to the inputs' dtype."""
    return (alpha * x.double() + y.double()).to(x.dtype)


def tolerance(dtype: torch.dtype) -> dict[str, float]:
    # One rounding of the result plus, for reduced precision, the opmath (float32) steps.
    return {
        torch.float64: {"atol": 1e-12, "rtol": 1e-12},
        torch.float32: {"atol": 1e-6, "rtol": 1e-6},
        torch.float16: {"atol": 1e-3, "rtol": 1e-3},
        torch.bfloat16: {"atol": 1e-2, "rtol": 1e-2},
    }[dtype]


def make_pair(shape, dtype, device, layout: str):
    """x, y of the given logical shape laid out as asked: contiguous, transposed, offset
    (a view whose data pointer is not 16-byte aligned), strided (every other element) or
    channels_last."""
    if layout == "contiguous":
        make = lambda: torch.randn(shape, dtype=dtype, device=device)  # noqa: E731
    elif layout == "transposed":
        make = lambda: torch.randn(shape[::-1], dtype=dtype, device=device).t()  # noqa: E731
    elif layout == "offset":
        numel = int(torch.tensor(shape).prod())
        make = lambda: torch.randn(numel + 1, dtype=dtype, device=device)[1:].view(shape)  # noqa: E731
    elif layout == "strided":
        make = lambda: torch.randn(shape[0], shape[1] * 2, dtype=dtype, device=device)[:, ::2]  # noqa: E731
    elif layout == "channels_last":
        make = lambda: torch.randn(2, 3, *shape, dtype=dtype, device=device).to(  # noqa: E731
            memory_format=torch.channels_last
        )
    else:
        raise AssertionError(layout)
    return make(), make()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("numel", SIZES)
def test_matches_reference_1d(device, dtype, numel):
    x = torch.randn(numel, dtype=dtype, device=device)
    y = torch.randn(numel, dtype=dtype, device=device)
    out = add_ext.add(x, y, alpha=-2.5)
    assert out.shape == x.shape and out.dtype == dtype and out.device == x.device
    assert_close(out, reference(x, y, -2.5), **tolerance(dtype))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(
    "layout", ["contiguous", "transposed", "offset", "strided", "channels_last"]
)
def test_any_strides(device, dtype, layout):
    x, y = make_pair((37, 41), dtype, device, layout)
    if layout != "contiguous":
        assert not (x.is_contiguous() and y.is_contiguous()) or layout == "offset"
    out = add_ext.add(x, y, alpha=3.0)
    assert out.is_contiguous()
    assert_close(out, reference(x, y, 3.0), **tolerance(dtype))


@pytest.mark.parametrize("device", DEVICES)
def test_mixed_layouts(device):
    x = torch.randn(64, 48, device=device).t()
    y = torch.randn(48, 64, device=device)
    assert_close(add_ext.add(x, y, 0.5), reference(x, y, 0.5))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("alpha", [1.0, 0.0, -1.0, 1e-3])
def test_alpha(device, alpha):
    x = torch.randn(513, device=device)
    y = torch.randn(513, device=device)
    assert_close(add_ext.add(x, y, alpha), reference(x, y, alpha))


@pytest.mark.parametrize("device", DEVICES)
def test_default_alpha_is_one(device):
    x = torch.randn(10, device=device)
    y = torch.randn(10, device=device)
    assert_close(add_ext.add(x, y), x + y)
    assert_close(torch.ops.add_ext.add(x, y), x + y)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape", [(0,), (3, 0, 5), ()])
def test_empty_and_scalar_tensors(device, shape):
    x = torch.randn(shape, device=device)
    y = torch.randn(shape, device=device)
    out = add_ext.add(x, y, 2.0)
    assert out.shape == torch.Size(shape)
    assert_close(out, reference(x, y, 2.0))


@pytest.mark.parametrize("device", DEVICES)
def test_output_is_a_new_tensor(device):
    x = torch.randn(100, device=device)
    y = torch.randn(100, device=device)
    out = add_ext.add(x, y)
    assert out.data_ptr() not in (x.data_ptr(), y.data_ptr())
    # Same tensor for both arguments is allowed: 2x when alpha is 1.
    assert_close(add_ext.add(x, x), 2 * x)


@pytest.mark.parametrize("device", DEVICES)
def test_special_values_propagate(device):
    x = torch.tensor([float("inf"), float("nan"), 1.0, -0.0], device=device)
    y = torch.tensor([1.0, 1.0, float("-inf"), 0.0], device=device)
    assert_close(add_ext.add(x, y), x + y, equal_nan=True)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_gradients(device, dtype):
    x = torch.randn(33, 5, dtype=dtype, device=device, requires_grad=True)
    y = torch.randn(33, 5, dtype=dtype, device=device, requires_grad=True)
    grad = torch.randn(33, 5, dtype=dtype, device=device)
    add_ext.add(x, y, alpha=1.5).backward(grad)
    assert_close(x.grad, 1.5 * grad, **tolerance(dtype))
    assert_close(y.grad, grad)


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


@pytest.mark.parametrize("device", DEVICES)
def test_gradcheck_float64(device):
    x = torch.randn(6, 7, dtype=torch.float64, device=device, requires_grad=True)
    y = torch.randn(6, 7, dtype=torch.float64, device=device, requires_grad=True)
    fn = lambda a, b: add_ext.add(a, b, alpha=-0.7)  # noqa: E731
    assert torch.autograd.gradcheck(fn, (x, y))
    assert torch.autograd.gradgradcheck(fn, (x, y))


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck(device):
    samples = [
        ((torch.randn(5, 3, device=device), torch.randn(5, 3, device=device)), {"alpha": 2.0}),
        (
            (
                torch.randn(17, device=device, dtype=torch.float64, requires_grad=True),
                torch.randn(17, device=device, dtype=torch.float64, requires_grad=True),
            ),
            {},
        ),
        ((torch.randn(4, 6, device=device).t(), torch.randn(6, 4, device=device)), {"alpha": -1.0}),
        ((torch.randn(0, 2, device=device), torch.randn(0, 2, device=device)), {}),
    ]
    for args, kwargs in samples:
        torch.library.opcheck(torch.ops.add_ext.add.default, args, kwargs)


@pytest.mark.slow
@pytest.mark.parametrize("device", DEVICES)
def test_torch_compile_fullgraph(device):
    def fn(x, y):
        return torch.sin(add_ext.add(x, y, alpha=2.0)) * 3

    compiled = torch.compile(fn, fullgraph=True, dynamic=True)
    for n in (10, 33):
        x = torch.randn(n, device=device, requires_grad=True)
        y = torch.randn(n, device=device, requires_grad=True)
        out = compiled(x, y)
        assert_close(out, torch.sin(2 * x + y) * 3)
        out.sum().backward()
        assert_close(x.grad, 6 * torch.cos(2 * x + y))
        assert_close(y.grad, 3 * torch.cos(2 * x + y))


# ---- bad input: RuntimeError naming the problem and the values ------------------------


@pytest.mark.parametrize(
    ("x", "y", "message"),
    [
        (torch.randn(3, 4), torch.randn(4, 3), r"same shape .* got x \[3, 4\] and y \[4, 3\]"),
        (torch.randn(3), torch.randn(1), r"same shape .* got x \[3\] and y \[1\]"),
        (
            torch.randn(3),
            torch.randn(3, dtype=torch.float64),
            "same dtype, got x Float and y Double",
        ),
        (
            torch.ones(3, dtype=torch.int64),
            torch.ones(3, dtype=torch.int64),
            "dtype must be float16, bfloat16, float32 or float64, got Long",
        ),
        (torch.ones(3, dtype=torch.bool), torch.ones(3, dtype=torch.bool), "got Bool"),
        (
            torch.ones(3, dtype=torch.complex64),
            torch.ones(3, dtype=torch.complex64),
            "got ComplexFloat",
        ),
    ],
    ids=["shape", "no-broadcast", "dtype", "int", "bool", "complex"],
)
def test_bad_inputs(x, y, message):
    with pytest.raises(RuntimeError, match=message):
        add_ext.add(x, y)


def test_mixed_devices_cpu_meta():
    # Runs without a GPU: the dispatcher picks the fake/meta kernel, which repeats the
    # C++ checks.
    with pytest.raises(RuntimeError, match="same device, got x on cpu and y on meta"):
        add_ext.add(torch.randn(3), torch.randn(3, device="meta"))


@pytest.mark.cuda
def test_mixed_devices_cpu_cuda():
    with pytest.raises(RuntimeError, match="same device, got x on cpu and y on cuda:0"):
        add_ext.add(torch.randn(3), torch.randn(3, device="cuda"))


def test_sparse_input_is_rejected():
    x = torch.randn(3, 3).to_sparse()
    with pytest.raises(
        RuntimeError, match="must be dense \\(strided\\) tensors, got x Sparse and y Sparse"
    ):
        add_ext.add(x, x)


# ---- CUDA only --------------------------------------------------------------------------


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_cuda_matches_cpu(dtype):
    x = torch.randn(100_003, dtype=dtype)
    y = torch.randn(100_003, dtype=dtype)
    assert_close(
        add_ext.add(x.cuda(), y.cuda(), 1.25).cpu(), add_ext.add(x, y, 1.25), **tolerance(dtype)
    )


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

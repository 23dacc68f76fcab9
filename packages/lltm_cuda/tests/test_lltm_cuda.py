"""lltm_cuda on a GPU: the test battery of the LLTM ops on CUDA (lltm_common/tests:
battery.py declares them), the shared LLTM suite, agreement with lltm_cpu, and what only the
CUDA kernels have (streams, graph capture, large grids, a second device).

Every test here but the battery's bad calls and fuzzer (CPU and meta tensors, whose checks
lltm_cuda runs before it refuses them) needs a GPU and is marked cuda; without one they are
skipped with the reason shown. test_lltm_cuda_no_gpu.py holds what else runs without a GPU.
"""

from __future__ import annotations

import pytest
import torch
from lltm_common.battery import in_float32_rounded
from lltm_common.reference import (
    FORWARD_OUTPUT_NAMES,
    assert_close_scaled,
    lltm_backward_pointwise,
    lltm_forward,
    lltm_gradients,
    make_inputs,
)
from lltm_common.suite import DTYPES, GRAD_NAMES, on_the_gpu
from lltm_cuda_battery import OPS

import lltm_cuda
from shared_build.battery import battery
from shared_build.testing import need_free_gpu_memory, on_a_busy_side_stream

test_battery = battery(OPS)
# The shared cases, run here against lltm_cuda, each marked cuda.
globals().update(on_the_gpu())


def _run(package, device, inputs, grads):
    # Leaves on the device: a copy made by .to() would be a non-leaf, its .grad None.
    leaves = [t.detach().to(device).requires_grad_() for t in inputs]
    outputs = package.forward(*leaves)
    torch.autograd.backward(outputs[:2], [g.to(device) for g in grads])
    return [t.detach().cpu() for t in outputs], [t.grad.cpu() for t in leaves]


# Float64 on both sides: only the GEMMs' summation order differs.
AGREEMENT = {
    torch.float64: 1e-12,
    torch.float32: 2e-5,
    torch.float16: 1e-2,
    torch.bfloat16: 6e-2,
}


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(16, 32, 128), (5, 3, 257), (64, 256, 1024)])
def test_cuda_agrees_with_lltm_cpu(shape, dtype):
    lltm_cpu = pytest.importorskip("lltm_cpu", reason="lltm_cpu is not installed here")
    inputs = make_inputs(*shape, dtype=dtype)
    grads = [torch.randn(shape[0], shape[2]).to(dtype) for _ in range(2)]
    cpu_out, cpu_grads = _run(lltm_cpu, "cpu", inputs, grads)
    cuda_out, cuda_grads = _run(lltm_cuda, "cuda", inputs, grads)
    tol = AGREEMENT[dtype]
    for name, a, b in zip(
        (*FORWARD_OUTPUT_NAMES, *GRAD_NAMES),
        (*cuda_out, *cuda_grads),
        (*cpu_out, *cpu_grads),
        strict=True,
    ):
        scale = max(1.0, b.double().abs().max().item())
        torch.testing.assert_close(
            a.double(), b.double(), atol=tol * scale, rtol=tol, msg=lambda m, n=name: f"{n}: {m}"
        )


@pytest.mark.cuda
def test_float64_is_exact_double_math():
    """Saturated and tiny gates in float64 against the float64 reference at 1e-12: any
    rounding through float (the tutorial's fmax/fmin on doubles) shows up at 1e-8."""
    inputs = make_inputs(8, 4, 300, dtype=torch.float64, device="cuda", gate_scale=40.0)
    inputs[1][:300, :] *= 1e-6  # input-gate pre-activations near 0
    outputs = lltm_cuda.forward(*inputs)
    expected = lltm_forward(*[t.cpu() for t in inputs])
    for name, out, ref in zip(FORWARD_OUTPUT_NAMES, outputs, expected, strict=True):
        torch.testing.assert_close(out.cpu(), ref, rtol=1e-12, atol=1e-13, msg=name)


# More elements than a GPU holds threads, a state size no multiple of the block, a batch
# beyond a grid's y limit: (batch, input_features, state_size).
GRID_STRIDE_SHAPES = [(4096, 8, 600), (2, 3, 3001), (70_000, 1, 1)]


@pytest.mark.cuda
@pytest.mark.parametrize("shape", GRID_STRIDE_SHAPES)
def test_grid_stride_covers_large_and_odd_sizes(shape):
    """More elements (2.5 million) than a GPU holds threads, a state size that is no
    multiple of the block (weights grow as state squared: 3001 is 108 MB), and a batch
    beyond a grid's y limit (65535): forward and every gradient against the float64
    reference (an element the backward kernel skipped would show in d_bias, its column
    sums, and in every GEMM after it)."""
    inputs = [t.requires_grad_() for t in make_inputs(*shape, device="cuda")]
    outputs = lltm_cuda.forward(*inputs)
    on_cpu = [t.detach().double().cpu() for t in inputs]
    expected = lltm_forward(*on_cpu)
    assert_close_scaled(outputs[0], expected[0], torch.float32, "new_h")
    assert_close_scaled(outputs[1], expected[1], torch.float32, "new_cell")
    (outputs[0].sum() + outputs[1].sum()).backward()
    ones = torch.ones_like(expected[0])
    reference = lltm_gradients(on_cpu, ones, ones)
    for name, leaf in zip(GRAD_NAMES, inputs, strict=True):
        assert_close_scaled(leaf.grad, reference[name], torch.float32, name)


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", GRID_STRIDE_SHAPES)
def test_backward_pointwise_grid_stride_in_every_dtype(shape, dtype):
    """The fused backward kernel at the grid-stride sizes in every dtype: d_gates and
    d_old_cell are the float32 pass rounded by torch, to the bit (float16, bfloat16), or the
    float64 reference's; d_bias the column sums of d_gates. Each output is read whole by an
    elementwise kernel (isfinite), so under initcheck (the GPU check runs this in every
    dtype) an element the kernel left unwritten is reported; the references are computed on
    the CPU. Its inputs come from torch's randn: no GEMM wrote them, whose float16 and
    bfloat16 writes initcheck does not see."""
    batch, _, state = shape
    g = torch.Generator().manual_seed(batch * 10007 + state)
    widths = (state, state, state, 3 * state)  # grad_h, grad_cell, new_cell, gate_weights
    args = [
        torch.randn(batch, w, dtype=torch.float64, generator=g).to("cuda", dtype) for w in widths
    ]
    d_gates, d_bias, d_old_cell = torch.ops.lltm_cuda._backward_pointwise(*args)
    for name, out in (("d_gates", d_gates), ("d_old_cell", d_old_cell)):
        assert torch.isfinite(out).cpu().all(), name
    if dtype in (torch.float16, torch.bfloat16):
        wanted = in_float32_rounded(torch.ops.lltm_cuda._backward_pointwise)(*args)
        for name, ours, exact in (
            ("d_gates", d_gates, wanted[0]),
            ("d_old_cell", d_old_cell, wanted[2]),
        ):
            assert torch.equal(ours.view(torch.int16), exact.view(torch.int16)), name
    else:
        reference = lltm_backward_pointwise(*(a.cpu() for a in args))
        assert_close_scaled(d_gates, reference[0], dtype, "d_gates")
        assert_close_scaled(d_old_cell, reference[2], dtype, "d_old_cell")
    assert_close_scaled(d_bias, d_gates.cpu().double().sum(0), dtype, "d_bias")


def _reference(cell, x, h, c):
    return [t.detach().double().cpu() for t in (x, cell.weights, cell.bias, h, c)]


@pytest.mark.cuda
def test_runs_on_the_current_stream():
    cell = lltm_cuda.LLTM(32, 128).cuda()
    x, h, c = (torch.randn(16, n, device="cuda") for n in (32, 128, 128))
    new_x = torch.randn_like(x)

    def step():
        new_h, new_cell = cell(x, (h, c))
        (new_h.sum() + new_cell.sum()).backward()
        return new_h

    def warm_up():  # the same launches, its gradients dropped
        step()
        cell.zero_grad(set_to_none=True)

    # Forward and backward read x only after the side stream wrote new_x into it.
    new_h = on_a_busy_side_stream(lambda: x.copy_(new_x), step, warm_up)
    inputs = _reference(cell, x, h, c)
    expected = lltm_forward(*inputs)
    assert_close_scaled(new_h, expected[0], torch.float32)
    ones = torch.ones(16, 128)
    reference = lltm_gradients(inputs, ones, ones)
    assert_close_scaled(cell.weights.grad, reference["d_weights"], torch.float32)


@pytest.mark.cuda
def test_cuda_graph_capture_of_a_training_step():
    cell = lltm_cuda.LLTM(32, 128).cuda()
    static_x, h, c = (torch.randn(16, n, device="cuda") for n in (32, 128, 128))

    def step():
        new_h, _ = cell(static_x, (h, c))
        new_h.sum().backward()
        return new_h

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):  # warm-up outside the capture (allocator, cuBLAS workspace)
            step()
    torch.cuda.current_stream().wait_stream(side)
    cell.zero_grad(set_to_none=False)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_h = step()

    static_x.copy_(torch.randn_like(static_x))
    cell.zero_grad(set_to_none=False)
    graph.replay()
    torch.cuda.synchronize()
    inputs = _reference(cell, static_x, h, c)
    assert_close_scaled(static_h, lltm_forward(*inputs)[0], torch.float32)
    reference = lltm_gradients(inputs, torch.ones(16, 128), torch.zeros(16, 128))
    assert_close_scaled(cell.weights.grad, reference["d_weights"], torch.float32)
    assert_close_scaled(cell.bias.grad, reference["d_bias"], torch.float32)


@pytest.mark.cuda
def test_mixed_cpu_and_cuda_tensors_are_rejected():
    args = make_inputs(3, 4, 5, device="cuda")
    args[2] = args[2].cpu()
    with pytest.raises(
        RuntimeError,
        match="all tensors must be on the same device, got input on cuda:0 and bias on cpu",
    ):
        lltm_cuda.forward(*args)


@pytest.mark.cuda
def test_second_device_if_present():
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    inputs = make_inputs(4, 3, 5, device="cuda:1", dtype=torch.float64)
    outputs = lltm_cuda.forward(*inputs)
    assert all(t.device == torch.device("cuda:1") for t in outputs)
    expected = lltm_forward(*[t.cpu() for t in inputs])
    assert_close_scaled(outputs[0], expected[0], torch.float64)


@pytest.mark.cuda
@pytest.mark.slow  # 40 GB on the GPU: not under compute-sanitizer
def test_forward_past_2_to_the_31_elements():
    """gate_weights (batch, 3 * state) past 2^31 elements, where a 32-bit index into the
    fused pointwise pass first wraps: the first and last rows equal the float64 reference
    (each row of the LLTM depends on its own inputs and the shared weights only)."""
    batch, features, state = 180_000, 8, 4096  # 180,000 x 12,288 = 2.21e9 gate elements
    need_free_gpu_memory(48)
    g = torch.Generator(device="cuda").manual_seed(0)
    bound = state**-0.5
    weights = (torch.rand(3 * state, state + features, device="cuda", generator=g) * 2 - 1) * bound
    bias = (torch.rand(3 * state, device="cuda", generator=g) * 2 - 1) * bound
    x, h, c = (torch.randn(batch, n, device="cuda", generator=g) for n in (features, state, state))
    with torch.no_grad():
        outputs = lltm_cuda.forward(x, weights, bias, h, c)
    for rows in (slice(0, 2), slice(batch - 2, batch)):
        expected = lltm_forward(
            *(t.double().cpu() for t in (x[rows], weights, bias, h[rows], c[rows]))
        )
        for name, got, want in zip(FORWARD_OUTPUT_NAMES, outputs, expected, strict=True):
            # float32 GEMMs over 4,104 terms against float64: 1e-4 of the scale; a wrapped
            # index would be off by the values themselves.
            scale = max(1.0, want.abs().max().item())
            torch.testing.assert_close(
                got[rows].double().cpu(), want, atol=1e-4 * scale, rtol=1e-4,
                msg=lambda m, n=name: f"{n}: {m}",
            )  # fmt: skip


@pytest.mark.cuda
@pytest.mark.slow  # 24 GB on the GPU: not under compute-sanitizer
def test_backward_past_2_to_the_31_elements():
    """The backward op past 2^31 elements: gate_weights and d_gates (batch, 3 * state) hold
    2.21e9, so the fused backward pass's offsets into them (row * 3 * state + ...) pass 2^31,
    where a 32-bit offset first wraps. In float16 to keep it to 24 GB at the peak: 16
    tensors of batch x state halves (1.5 GB each: the forward's saved results, grad_h,
    grad_cell, d_gates, d_old_cell, d_X and d_old_h). Rows at the start, across 2^31 and at
    the end equal the float64 reference (each row's d_old_h, d_input and d_old_cell depend
    on its own inputs and the shared weights only)."""
    batch, features, state = 180_000, 8, 4096  # 180,000 x 12,288 = 2.21e9 gate elements
    need_free_gpu_memory(30)
    dtype = torch.float16
    g = torch.Generator(device="cuda").manual_seed(1)

    def randn(*shape):
        return torch.randn(*shape, device="cuda", dtype=dtype, generator=g)

    bound = state**-0.5
    weights = (torch.rand(3 * state, state + features, device="cuda", generator=g) * 2 - 1) * bound
    bias = (torch.rand(3 * state, device="cuda", generator=g) * 2 - 1) * bound
    weights, bias = weights.to(dtype), bias.to(dtype)
    x, h, c = randn(batch, features), randn(batch, state), randn(batch, state)
    across = 2**31 // (3 * state)  # the row whose gates hold element 2^31
    rows = torch.tensor([0, 1, across - 1, across, across + 1, batch - 2, batch - 1]).cuda()
    x_rows, h_rows, c_rows = (t[rows].cpu() for t in (x, h, c))
    with torch.no_grad():
        saved = lltm_cuda.forward(x, weights, bias, h, c)[1:]  # new_h is not needed
    del x, h, c
    grad_h, grad_cell = randn(batch, state), randn(batch, state)
    d_old_h, d_input, _, _, d_old_cell = lltm_cuda.backward(grad_h, grad_cell, *saved, weights)
    inputs = [x_rows, weights.cpu(), bias.cpu(), h_rows, c_rows]
    expected = lltm_gradients(inputs, grad_h[rows].cpu(), grad_cell[rows].cpu())
    for name, got in (("d_old_h", d_old_h), ("d_input", d_input), ("d_old_cell", d_old_cell)):
        assert_close_scaled(got[rows], expected[name], dtype, name)

"""lltm_cpu: the shared LLTM suite on the CPU, plus what only the CPU kernels have."""

from __future__ import annotations

import pytest
import torch
from lltm_common.reference import make_inputs
from lltm_common.suite import *  # noqa: F403  (the shared cases, run here against lltm_cpu)

import lltm_cpu


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_backward_same_bits_for_any_thread_count(dtype):
    """The batch is cut into fixed tasks whatever the thread count, and d_bias adds their
    partial sums in task order: one thread and two give bit-identical d_bias (and
    d_old_cell). The GEMM results are MKL's affair and may differ in the last bit."""
    shape = (64, 16, 1024)  # 64k elements: several tasks
    inputs = make_inputs(*shape, dtype=dtype)
    saved = lltm_cpu.forward(*inputs)[1:]
    grads = [torch.randn(64, 1024, dtype=dtype) for _ in range(2)]
    results = []
    previous = torch.get_num_threads()
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            *_, d_bias, d_old_cell = lltm_cpu.backward(*grads, *saved, inputs[1])
            results.append((d_bias, d_old_cell))
    finally:
        torch.set_num_threads(previous)
    for a, b in zip(*results, strict=True):
        assert torch.equal(a, b)


@pytest.mark.parametrize("op", ["forward", "backward", "_backward_pointwise"])
def test_every_op_has_its_kernels(op):
    for key in ("CPU", "Meta", "Autograd", "CUDA"):
        assert torch._C._dispatch_has_kernel_for_dispatch_key(f"lltm_cpu::{op}", key), key


@pytest.mark.cuda
def test_cuda_tensors_point_to_lltm_cuda():
    args = make_inputs(3, 4, 5, device="cuda")
    with pytest.raises(RuntimeError, match="lltm_cpu has CPU kernels only. Use lltm_cuda"):
        lltm_cpu.forward(*args)

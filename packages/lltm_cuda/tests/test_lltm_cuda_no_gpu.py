"""lltm_cuda without a GPU: what a CUDA build of torch on a machine without a GPU (CI) can
still check. CPU tensors are refused with a pointer to lltm_cpu, and the fake kernels
(meta device) give the shapes. (The battery's bad calls and fuzzer, in test_lltm_cuda.py,
also run here: the fake kernels and the CPU refusal check every argument first.)"""

from __future__ import annotations

import pytest
import torch
from lltm_common.battery import backward_args
from lltm_common.reference import make_inputs

import lltm_cuda

REFUSAL = "lltm_cuda runs on CUDA tensors only. Use lltm_cpu for CPU tensors"


def test_cpu_tensors_point_to_lltm_cpu():
    inputs = make_inputs(3, 4, 5)
    with pytest.raises(RuntimeError, match=f"lltm_cuda.forward: got tensors on cpu; {REFUSAL}"):
        lltm_cuda.forward(*inputs)
    with pytest.raises(RuntimeError, match=f"lltm_cuda.forward: got tensors on cpu; {REFUSAL}"):
        lltm_cuda.LLTM(4, 5)(inputs[0], (inputs[3], inputs[4]))
    args = backward_args("cpu")
    with pytest.raises(RuntimeError, match=f"lltm_cuda.backward: got tensors on cpu; {REFUSAL}"):
        lltm_cuda.backward(*args.values())


def test_cpu_tensors_that_need_grad_point_to_lltm_cpu():
    # Through the autograd kernel first, then the same refusal.
    inputs = [t.requires_grad_() for t in make_inputs(3, 4, 5)]
    with pytest.raises(RuntimeError, match=REFUSAL):
        lltm_cuda.forward(*inputs)


def test_fake_kernels_refuse_cpu_tensors_too():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode() as mode:
        inputs = [mode.from_tensor(t) for t in make_inputs(3, 4, 5)]
        with pytest.raises(RuntimeError, match=REFUSAL):
            torch.ops.lltm_cuda.forward(*inputs)


@pytest.mark.parametrize("op", ["forward", "backward", "_backward_pointwise"])
def test_every_op_has_its_kernels(op):
    """The CUDA kernels, registered even where no GPU can run them, next to the Meta and
    Autograd ones, and the refusal (CompositeExplicitAutograd) every other device reaches."""
    name = f"lltm_cuda::{op}"
    for key in ("CUDA", "Meta", "Autograd", "CompositeExplicitAutograd"):
        assert torch._C._dispatch_has_kernel_for_dispatch_key(name, key), key
    for key in ("CPU", "MPS"):
        assert torch._C._dispatch_has_computed_kernel_for_dispatch_key(name, key), key


def test_meta_shapes():
    inputs = make_inputs(6, 5, 4, device="meta")
    outputs = lltm_cuda.forward(*inputs)
    assert [tuple(t.shape) for t in outputs] == [(6, 4)] * 5 + [(6, 9), (6, 12)]
    grads = lltm_cuda.backward(*outputs[:2], *outputs[1:], inputs[1])
    assert [tuple(t.shape) for t in grads] == [(6, 4), (6, 5), (12, 9), (12,), (6, 4)]
    pointwise = torch.ops.lltm_cuda._backward_pointwise(*outputs[:2], outputs[1], outputs[6])
    assert [tuple(t.shape) for t in pointwise] == [(6, 12), (12,), (6, 4)]


def test_module_matches_lltm_cpu_api():
    lltm_cpu = pytest.importorskip("lltm_cpu", reason="lltm_cpu is not installed here")
    import inspect

    for name in ("forward", "backward"):
        assert inspect.signature(getattr(lltm_cuda, name)) == inspect.signature(
            getattr(lltm_cpu, name)
        )
    assert inspect.signature(lltm_cuda.LLTM) == inspect.signature(lltm_cpu.LLTM)
    for op in ("forward", "backward", "_backward_pointwise"):
        cuda_schema = str(getattr(torch.ops.lltm_cuda, op).default._schema)
        cpu_schema = str(getattr(torch.ops.lltm_cpu, op).default._schema)
        assert cuda_schema.replace("lltm_cuda::", "") == cpu_schema.replace("lltm_cpu::", "")

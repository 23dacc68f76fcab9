"""softclip(x, limit) = limit * tanh(x / limit), a C++ op on the LibTorch stable ABI.

The library registers the ops with the dispatcher (torch.ops.softclip.*); autograd is
registered here, from Python, because C++ autograd is not part of the stable API.
"""

from __future__ import annotations

from pathlib import Path

import torch

(_LIBRARY,) = Path(__file__).parent.glob("_C*.so")
torch.ops.load_library(str(_LIBRARY))

__all__ = ["softclip"]


def softclip(x: torch.Tensor, limit: float = 30.0) -> torch.Tensor:
    """limit * tanh(x / limit): x squashed smoothly into (-limit, limit), as logit soft
    capping does. x is a float32 or float64 CPU tensor (or a meta/fake one)."""
    return torch.ops.softclip.softclip(x, float(limit))


def _setup_context(ctx, inputs, output) -> None:
    x, limit = inputs
    ctx.save_for_backward(x)
    ctx.limit = limit


def _backward(ctx, grad: torch.Tensor):
    (x,) = ctx.saved_tensors
    return torch.ops.softclip.softclip_backward(grad.contiguous(), x, ctx.limit), None


def _no_double_backward(ctx, grad: torch.Tensor):
    raise RuntimeError("softclip: double backward is not supported")


torch.library.register_autograd("softclip::softclip", _backward, setup_context=_setup_context)
torch.library.register_autograd(
    "softclip::softclip_backward",
    _no_double_backward,
    setup_context=lambda ctx, inputs, output: None,
)

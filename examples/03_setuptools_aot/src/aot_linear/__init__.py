"""y = x @ weight.T + bias with its forward and backward in C++ (the module aot_linear._C)."""

from __future__ import annotations

import torch  # first: it loads libtorch, which the compiled module links against

from . import _C

__all__ = ["Linear", "LinearFunction", "linear"]


class LinearFunction(torch.autograd.Function):
    """Autograd glue: forward and backward each call one C++ function."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x, weight)
        return _C.linear_forward(x, weight, bias)

    @staticmethod
    def backward(ctx, grad_y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        x, weight = ctx.saved_tensors
        grad_x, grad_weight, grad_bias = _C.linear_backward(grad_y, x, weight)
        return grad_x, grad_weight, grad_bias


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """``x @ weight.T + bias``; x is (batch, in), weight (out, in), bias (out,)."""
    return LinearFunction.apply(x, weight, bias)


class Linear(torch.nn.Module):
    """``torch.nn.Linear`` with the C++ forward and backward above."""

    def __init__(self, in_features: int, out_features: int) -> None:
        super().__init__()
        reference = torch.nn.Linear(in_features, out_features)
        self.weight = torch.nn.Parameter(reference.weight.detach().clone())
        self.bias = torch.nn.Parameter(reference.bias.detach().clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear(x, self.weight, self.bias)

"""Import the CMake-built module and use it under autograd, checked against PyTorch."""

from __future__ import annotations

import torch

# isort: split
import cmake_softclip  # after torch, which loads the libtorch it links against

print(f"cmake_softclip loaded from {cmake_softclip.__file__}")


class SoftClip(torch.autograd.Function):
    """y = limit * tanh(x / limit), forward and backward in C++."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, limit: float) -> torch.Tensor:
        ctx.save_for_backward(x)
        ctx.limit = limit
        return cmake_softclip.softclip_forward(x, limit)

    @staticmethod
    def backward(ctx, grad_y: torch.Tensor) -> tuple[torch.Tensor, None]:
        (x,) = ctx.saved_tensors
        return cmake_softclip.softclip_backward(grad_y, x, ctx.limit), None


def softclip(x: torch.Tensor, limit: float = 1.0) -> torch.Tensor:
    return SoftClip.apply(x, limit)


def reference(x: torch.Tensor, limit: float) -> torch.Tensor:
    return limit * torch.tanh(x / limit)


for dtype in (torch.float32, torch.float64):
    x = torch.randn(64, 33, dtype=dtype).mul(3).requires_grad_()
    y = softclip(x.t(), 2.0)  # non-contiguous input
    torch.testing.assert_close(y, reference(x.t(), 2.0))
    (grad,) = torch.autograd.grad(y.sin().sum(), x)
    (expected,) = torch.autograd.grad(reference(x.t(), 2.0).sin().sum(), x)
    torch.testing.assert_close(grad, expected)
print("forward and gradient match limit * tanh(x / limit) in float32 and float64")

x = torch.randn(5, 7, dtype=torch.float64, requires_grad=True)
assert torch.autograd.gradcheck(lambda t: softclip(t, 1.5), (x,))
print("gradcheck (float64) passed")

for bad, fragment in (
    (lambda: softclip(torch.ones(3), -1.0), "limit must be positive, got -1"),
    (lambda: softclip(torch.ones(3, dtype=torch.int64)), "must be float32 or float64, got Long"),
):
    try:
        bad()
    except RuntimeError as error:
        message = str(error).splitlines()[0]
        assert fragment in message, message
        print(f"bad input raises RuntimeError: {message}")
    else:
        raise AssertionError(f"no error for bad input ({fragment})")

"""A torch.library custom op: schema and CPU kernel in C++, fake kernel and autograd in Python.

    python swish.py

swish.cpp defines ex_swish::swish and ex_swish::swish_backward with TORCH_LIBRARY and their
CPU kernels with TORCH_LIBRARY_IMPL. load(..., is_python_module=False) compiles it into a
plain shared library and loads it, which registers the ops: no pybind11, no module init,
nothing to import. This file adds what torch.compile needs (a fake kernel per op, for
shapes without data) and the autograd formula, checks both with opcheck, and compiles a
function that uses the op with torch.compile(fullgraph=True).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import torch
from torch.utils.cpp_extension import load

HERE = Path(__file__).resolve().parent


def build() -> None:
    start = time.perf_counter()
    library = load(
        name="ex_swish",
        sources=[str(HERE / "swish.cpp")],
        # -fopenmp: at::parallel_for runs on one thread without it (see 02_jit_inline).
        extra_cflags=["-O3", "-fopenmp"],
        is_python_module=False,
    )
    print(f"built and loaded {library} in {time.perf_counter() - start:.1f} s")


build()
# Looked up after the library registered the ops.
_swish = torch.ops.ex_swish.swish.default
_swish_backward = torch.ops.ex_swish.swish_backward.default


def swish(x: torch.Tensor, beta: float = 1.0) -> torch.Tensor:
    """``x * sigmoid(beta * x)``, differentiable, usable under torch.compile."""
    return _swish(x, beta)


def _check(x: torch.Tensor, name: str, op: str) -> None:
    # The same checks, in the same words, as the C++ kernel: under torch.compile only the
    # fake kernel sees the inputs while the graph is traced.
    torch._check(
        x.dtype in (torch.float32, torch.float64),
        lambda: f"{op}: {name} must be float32 or float64, got {x.dtype}",
    )


@torch.library.register_fake("ex_swish::swish")
def _(x: torch.Tensor, beta: float = 1.0) -> torch.Tensor:
    _check(x, "x", "ex_swish.swish")
    return torch.empty_like(x, memory_format=torch.contiguous_format)


@torch.library.register_fake("ex_swish::swish_backward")
def _(grad: torch.Tensor, x: torch.Tensor, beta: float) -> torch.Tensor:
    _check(x, "x", "ex_swish.swish_backward")
    torch._check(
        grad.shape == x.shape and grad.dtype == x.dtype,
        lambda: "ex_swish.swish_backward: grad must have the shape and dtype of x",
    )
    return torch.empty_like(x, memory_format=torch.contiguous_format)


def _setup_context(ctx, inputs, output) -> None:
    x, beta = inputs
    ctx.save_for_backward(x)
    ctx.beta = beta


def _backward(ctx, grad: torch.Tensor):
    (x,) = ctx.saved_tensors
    return _swish_backward(grad, x, ctx.beta), None


torch.library.register_autograd("ex_swish::swish", _backward, setup_context=_setup_context)


# The backward op gets a formula too, in plain torch ops, so that double backward (a
# gradient penalty, a Hessian-vector product) is right instead of silently wrong. With
# s = sigmoid(beta * x) and h(x) = s + beta * x * s * (1 - s), swish_backward is
# grad * h(x), and h'(x) = beta * s * (1 - s) * (2 + beta * x * (1 - 2 * s)).
def _setup_context_backward(ctx, inputs, output) -> None:
    grad, x, beta = inputs
    ctx.save_for_backward(grad, x)
    ctx.beta = beta


def _backward_backward(ctx, grad_grad_x: torch.Tensor):
    grad, x = ctx.saved_tensors
    beta = ctx.beta
    s = torch.sigmoid(beta * x)
    h = s + beta * x * s * (1 - s)
    h_prime = beta * s * (1 - s) * (2 + beta * x * (1 - 2 * s))
    return grad_grad_x * h, grad_grad_x * grad * h_prime, None


torch.library.register_autograd(
    "ex_swish::swish_backward", _backward_backward, setup_context=_setup_context_backward
)


def reference(x: torch.Tensor, beta: float = 1.0) -> torch.Tensor:
    return x * torch.sigmoid(beta * x)


def main() -> None:
    print(f"torch.ops.ex_swish: {torch.ops.ex_swish.swish.default._schema}")
    x = torch.randn(1000, 33, dtype=torch.float64, requires_grad=True)
    torch.testing.assert_close(swish(x, 1.5), reference(x, 1.5))
    (grad,) = torch.autograd.grad(swish(x.t(), 1.5).sum(), x)
    (expected,) = torch.autograd.grad(reference(x.t(), 1.5).sum(), x)
    torch.testing.assert_close(grad, expected)
    small = x[:4, :5].detach().requires_grad_()
    assert torch.autograd.gradcheck(swish, (small, 0.7))
    assert torch.autograd.gradgradcheck(swish, (small, 0.7))
    print("values and gradients match x * sigmoid(beta * x); gradcheck and gradgradcheck passed")

    # opcheck: schema, autograd registration, fake kernel vs real kernel, AOT dispatch.
    samples = [
        (torch.randn(3, 4), 1.0),
        (torch.randn(5, dtype=torch.float64, requires_grad=True), 0.5),
        (torch.randn(4, 6).t(), 2.0),  # non-contiguous
    ]
    for x_sample, beta in samples:
        torch.library.opcheck(_swish, (x_sample, beta))
        grad = torch.randn_like(x_sample).requires_grad_(x_sample.requires_grad)
        torch.library.opcheck(_swish_backward, (grad, x_sample, beta))
    print(f"opcheck passed on {len(samples)} samples for both ops")

    def model(x: torch.Tensor) -> torch.Tensor:
        return swish(x * 2.0 + 1.0, beta=1.5).mean(dim=-1)

    compiled = torch.compile(model, fullgraph=True)  # fullgraph: a graph break is an error
    x = torch.randn(64, 128, requires_grad=True)
    start = time.perf_counter()
    out = compiled(x)
    out.sum().backward()
    print(
        f"torch.compile(fullgraph=True): compiled forward and backward in {time.perf_counter() - start:.1f} s"
    )
    x_eager = x.detach().clone().requires_grad_()
    expected = model(x_eager)
    expected.sum().backward()
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(x.grad, x_eager.grad)
    print("compiled forward and backward match eager")

    try:
        swish(torch.ones(3, dtype=torch.int32))
    except RuntimeError as error:
        message = str(error).splitlines()[0]
        assert "must be float32 or float64, got Int" in message, message
        print(f"bad input raises RuntimeError: {message}")
    else:
        raise AssertionError("swish accepted an int32 tensor")
    print(f"(TORCH_EXTENSIONS_DIR={os.environ.get('TORCH_EXTENSIONS_DIR', 'default')})")


if __name__ == "__main__":
    main()

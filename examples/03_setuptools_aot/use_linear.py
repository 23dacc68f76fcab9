"""Use the installed aot_linear package: values, gradients and gradcheck against PyTorch."""

from __future__ import annotations

import aot_linear  # imports torch itself before its compiled module
import torch
import torch.nn.functional as F

print(f"aot_linear._C loaded from {aot_linear._C.__file__}")

x = torch.randn(8, 5, dtype=torch.float64, requires_grad=True)
weight = torch.randn(3, 5, dtype=torch.float64, requires_grad=True)
bias = torch.randn(3, dtype=torch.float64, requires_grad=True)

y = aot_linear.linear(x, weight, bias)
torch.testing.assert_close(y, F.linear(x, weight, bias))
grads = torch.autograd.grad(y.square().sum(), (x, weight, bias))
expected = torch.autograd.grad(F.linear(x, weight, bias).square().sum(), (x, weight, bias))
for got, want in zip(grads, expected, strict=True):
    torch.testing.assert_close(got, want)
print("forward and all three gradients match torch.nn.functional.linear")

assert torch.autograd.gradcheck(aot_linear.linear, (x, weight, bias))
print("gradcheck (float64) passed")

layer = aot_linear.Linear(5, 3)
layer(torch.randn(4, 5)).sum().backward()
assert layer.weight.grad is not None and layer.bias.grad is not None
print("aot_linear.Linear trains like torch.nn.Linear")

try:
    aot_linear.linear(torch.randn(8, 4), torch.randn(3, 5), torch.randn(3))
except RuntimeError as error:
    message = str(error).splitlines()[0]
    assert "x has 4 features but weight expects 5" in message, message
    print(f"bad input raises RuntimeError: {message}")
else:
    raise AssertionError("linear accepted x with the wrong number of features")

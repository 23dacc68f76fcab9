"""The LLTM cell in plain PyTorch, written from the math, and the inputs the tests feed it.

X = cat([old_h, input], 1)
gate_weights = X @ weights.T + bias          chunked in 3 along dim 1
input_gate = sigmoid(.), output_gate = sigmoid(.), candidate_cell = elu(., alpha=1)
new_cell = old_cell + candidate_cell * input_gate
new_h = tanh(new_cell) * output_gate
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

# The names of forward's inputs, in the order of the op's schema.
INPUT_NAMES = ("input", "weights", "bias", "old_h", "old_cell")
FORWARD_OUTPUT_NAMES = (
    "new_h",
    "new_cell",
    "input_gate",
    "output_gate",
    "candidate_cell",
    "X",
    "gate_weights",
)
BACKWARD_OUTPUT_NAMES = ("d_old_h", "d_input", "d_weights", "d_bias", "d_old_cell")


def lltm_forward(
    input: Tensor, weights: Tensor, bias: Tensor, old_h: Tensor, old_cell: Tensor
) -> list[Tensor]:
    """The seven results of the tutorial's forward, differentiable by torch.autograd."""
    X = torch.cat([old_h, input], dim=1)
    gate_weights = X @ weights.T + bias
    z_input, z_output, z_candidate = gate_weights.chunk(3, dim=1)
    input_gate = torch.sigmoid(z_input)
    output_gate = torch.sigmoid(z_output)
    # elu(z) = z for z > 0, exp(z) - 1 otherwise; the clamp keeps the branch that is not
    # taken finite, so that its zero gradient stays zero (not 0 * inf).
    candidate_cell = torch.where(
        z_candidate > 0, z_candidate, torch.expm1(z_candidate.clamp(max=0))
    )
    new_cell = old_cell + candidate_cell * input_gate
    new_h = torch.tanh(new_cell) * output_gate
    return [new_h, new_cell, input_gate, output_gate, candidate_cell, X, gate_weights]


def lltm_gradients(inputs: list[Tensor], grad_h: Tensor, grad_cell: Tensor) -> dict[str, Tensor]:
    """d_old_h, d_input, d_weights, d_bias, d_old_cell by autograd through lltm_forward, in
    float64."""
    leaves = [t.detach().double().requires_grad_() for t in inputs]
    new_h, new_cell, *_ = lltm_forward(*leaves)
    torch.autograd.backward([new_h, new_cell], [grad_h.double(), grad_cell.double()])
    d_input, d_weights, d_bias, d_old_h, d_old_cell = (t.grad for t in leaves)
    return {
        "d_old_h": d_old_h,
        "d_input": d_input,
        "d_weights": d_weights,
        "d_bias": d_bias,
        "d_old_cell": d_old_cell,
    }


def lltm_backward_pointwise(
    grad_h: Tensor, grad_cell: Tensor, new_cell: Tensor, gate_weights: Tensor
) -> list[Tensor]:
    """d_gates, d_bias and d_old_cell (the internal op _backward_pointwise) from the
    incoming gradients, new_cell and the gates, in float64, from the chain rule: the
    activations recomputed from the gates, tanh(new_cell) from new_cell."""
    grad_h, grad_cell, new_cell, gates = (
        t.double() for t in (grad_h, grad_cell, new_cell, gate_weights)
    )
    z_input, z_output, z_candidate = gates.chunk(3, dim=1)
    i, o, c = torch.sigmoid(z_input), torch.sigmoid(z_output), torch.nn.functional.elu(z_candidate)
    t = torch.tanh(new_cell)
    d_cell = grad_h * o * (1 - t * t) + grad_cell
    d_elu = torch.where(z_candidate > 0, 1.0, torch.exp(z_candidate.clamp(max=0)))
    d_gates = torch.cat([d_cell * c * i * (1 - i), grad_h * t * o * (1 - o), d_cell * i * d_elu], 1)
    return [d_gates, d_gates.sum(0), d_cell]


def lltm_backward(
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
    """The tutorial's backward, in float64: [d_old_h, d_input, d_weights, d_bias,
    d_old_cell]. Like the ops, it recomputes the activations from gate_weights (the ones
    it is given are forward's, rounded to their dtype). On forward's results it equals
    lltm_gradients."""
    del input_gate, output_gate, candidate_cell
    d_gates, d_bias, d_old_cell = lltm_backward_pointwise(grad_h, grad_cell, new_cell, gate_weights)
    d_X = d_gates @ weights.double()
    state = grad_h.shape[1]
    return [d_X[:, :state], d_X[:, state:], d_gates.T @ X.double(), d_bias, d_old_cell]


def make_inputs(
    batch: int,
    input_features: int,
    state_size: int,
    *,
    dtype: torch.dtype = torch.float32,
    device: str | torch.device = "cpu",
    gate_scale: float = 1.0,
    generator: torch.Generator | None = None,
) -> list[Tensor]:
    """input, weights, bias, old_h, old_cell as the LLTM module would see them: weights and
    bias uniform in ±1/sqrt(state_size) (times gate_scale, to push the gates into
    saturation), the rest standard normal. Drawn in float64 on the CPU, then converted, so
    every dtype and device gets the same numbers."""

    def randn(*shape: int) -> Tensor:
        return torch.randn(*shape, dtype=torch.float64, generator=generator)

    def uniform(*shape: int) -> Tensor:
        bound = gate_scale / math.sqrt(max(state_size, 1))
        return (torch.rand(*shape, dtype=torch.float64, generator=generator) * 2 - 1) * bound

    tensors = [
        randn(batch, input_features),
        uniform(3 * state_size, input_features + state_size),
        uniform(3 * state_size),
        randn(batch, state_size),
        randn(batch, state_size),
    ]
    return [t.to(device=device, dtype=dtype) for t in tensors]


# Absolute and relative tolerance per dtype for results of magnitude about 1; compare with
# assert_close_scaled, which scales atol by the reference's largest magnitude. float32 and
# float64 differ from the float64 reference by the GEMM's summation order; bfloat16 and
# float16 by the rounding of every stored tensor (gate_weights and the activations
# included).
TOLERANCES = {
    torch.float64: 1e-10,
    torch.float32: 2e-5,
    torch.float16: 1e-2,
    torch.bfloat16: 6e-2,
}


def assert_close_scaled(
    actual: Tensor, expected: Tensor, dtype: torch.dtype, name: str = ""
) -> None:
    tol = TOLERANCES[dtype]
    expected = expected.double().cpu()
    scale = max(1.0, expected.abs().max().item()) if expected.numel() else 1.0
    torch.testing.assert_close(
        actual.double().cpu(),
        expected,
        atol=tol * scale,
        rtol=tol,
        equal_nan=True,
        msg=lambda m: f"{name}: {m}",
    )

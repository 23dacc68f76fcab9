"""Typed wrappers of the LLTM ops, for lltm_cpu and lltm_cuda alike (``torch.ops.<package>``).

The ops' checks, Meta kernels (what torch.compile and the meta device run) and autograd
are registered in C++ (lltm_common/csrc): ``forward`` is
differentiable through ``new_h`` and ``new_cell`` in all five inputs, ``backward`` once.
``_backward_pointwise`` is internal: the fused, GEMM-free half of ``backward`` that the
autograd of ``forward`` calls before the GEMMs it needs.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["backward", "forward"]

# Installed as <package>._lltm.ops: the package's name is its op namespace.
_ops = getattr(torch.ops, __name__.split(".")[0])
_forward = _ops.forward.default
_backward = _ops.backward.default


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
    saved = (new_cell, input_gate, output_gate, candidate_cell)
    return list(_backward(grad_h, grad_cell, *saved, X, gate_weights, weights))

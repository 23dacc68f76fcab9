"""The LLTM cell as an ``nn.Module``."""

from __future__ import annotations

import math

import torch
from torch import nn

# Installed as <package>._lltm.module: the package's name is its op namespace.
_forward = getattr(torch.ops, __name__.split(".")[0]).forward.default


class LLTM(nn.Module):
    """The LLTM cell of the PyTorch C++ extension tutorial.

    ``forward(input, (old_h, old_cell))`` takes ``input`` ``(batch, input_features)`` and a
    state of two ``(batch, state_size)`` tensors and returns ``(new_h, new_cell)``.
    Parameters: ``weights`` ``(3 * state_size, input_features + state_size)`` and ``bias``
    ``(3 * state_size,)``, initialised uniformly in ``±1/sqrt(state_size)``.
    """

    def __init__(
        self,
        input_features: int,
        state_size: int,
        *,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        if input_features < 0:
            raise ValueError(f"LLTM: input_features must be >= 0, got {input_features}")
        if state_size < 1:
            raise ValueError(f"LLTM: state_size must be >= 1, got {state_size}")
        self.input_features = input_features
        self.state_size = state_size
        factory = {"device": device, "dtype": dtype}
        self.weights = nn.Parameter(
            torch.empty(3 * state_size, input_features + state_size, **factory)
        )
        self.bias = nn.Parameter(torch.empty(3 * state_size, **factory))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.state_size)
        with torch.no_grad():
            for parameter in self.parameters():
                parameter.uniform_(-bound, bound)

    def forward(
        self, input: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        old_h, old_cell = state
        outputs = _forward(input, self.weights, self.bias, old_h, old_cell)
        return outputs[0], outputs[1]

    def extra_repr(self) -> str:
        return f"input_features={self.input_features}, state_size={self.state_size}"

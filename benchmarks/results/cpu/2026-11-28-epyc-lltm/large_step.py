"""What faults.py and profile_step.py both time: lltm_cpu's and eager's training step at the
large shape (batch 64, input 256, state 1024), as the bench builds them."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "lltm_common" / "bench"))
import lltm_bench

import lltm_cpu


def models_and_step() -> tuple[nn.Module, nn.Module, Callable[[nn.Module], None]]:
    """(lltm_cpu's cell, eager's with the same weights, step): step(model) runs one forward
    and torch.autograd.grad for the parameters, old_h and old_cell."""
    batch, features, state = lltm_bench.LARGE
    torch.manual_seed(0)
    ours = lltm_cpu.LLTM(features, state)
    eager = lltm_bench.EagerLLTM(features, state)
    eager.load_state_dict(ours.state_dict())
    x = torch.randn(batch, features)
    h = torch.randn(batch, state, requires_grad=True)
    c = torch.randn(batch, state, requires_grad=True)
    grads = [torch.randn(batch, state), torch.randn(batch, state)]

    def step(model: nn.Module) -> None:
        new_h, new_cell = model(x, (h, c))
        torch.autograd.grad([new_h, new_cell], [*model.parameters(), h, c], grads)

    return ours, eager, step

"""lltm_cpu against the eager Python LLTM and torch.compile of it, on the CPU.

Forward and forward+backward of one step inside a sequence, as in training with
backpropagation through time: the parameters, old_h and old_cell need gradients, the input
(data) does not. At the tutorial's shape (batch 16, input 32, state 128) and a large one
(64, 256, 1024). The GEMMs that step needs are timed alone as well, the "GEMM floor":
X @ W.T + bias for forward, plus d_gates.T @ X (d_weights) and d_gates @ W[:, :state]
(d_old_h) for forward+backward. No LLTM can beat them; the distance to them is what the
rest (pointwise work, allocation, dispatch, autograd) costs.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

import lltm_cpu
from benchmarks.harness import Context, Goal

PACKAGE = "lltm_cpu"
TUTORIAL = (16, 32, 128)
LARGE = (64, 256, 1024)


def case_name(shape: tuple[int, int, int]) -> str:
    batch, features, state = shape
    return f"B={batch} in={features} state={state}"


GOALS = [
    Goal(
        op="lltm forward+backward",
        ours="lltm_cpu",
        peer=peer,
        min_speedup=3.0,
        device="cpu",
        case=case_name(TUTORIAL),
        note="issue 3: >= 3x faster than eager and than torch.compile at the tutorial shape",
    )
    for peer in ("eager", "torch.compile")
] + [
    Goal(
        op=op,
        ours="lltm_cpu",
        peer="GEMM floor",
        min_speedup=1 / 1.1,
        device="cpu",
        case=case_name(LARGE),
        note="issue 3: within 10% of the GEMMs alone at the large shape",
    )
    for op in ("lltm forward", "lltm forward+backward")
]


class EagerLLTM(nn.Module):
    """The tutorial's pure-Python LLTM: torch ops, autograd by torch."""

    def __init__(self, input_features: int, state_size: int) -> None:
        super().__init__()
        self.weights = nn.Parameter(torch.empty(3 * state_size, input_features + state_size))
        self.bias = nn.Parameter(torch.empty(3 * state_size))
        bound = 1.0 / math.sqrt(state_size)
        for p in self.parameters():
            nn.init.uniform_(p, -bound, bound)

    def forward(self, input, state):
        old_h, old_cell = state
        X = torch.cat([old_h, input], dim=1)
        gate_weights = F.linear(X, self.weights, self.bias)
        gates = gate_weights.chunk(3, dim=1)
        input_gate = torch.sigmoid(gates[0])
        output_gate = torch.sigmoid(gates[1])
        candidate_cell = F.elu(gates[2])
        new_cell = old_cell + candidate_cell * input_gate
        new_h = torch.tanh(new_cell) * output_gate
        return new_h, new_cell


def run(ctx: Context) -> None:
    for shape in (TUTORIAL, LARGE):
        batch, features, state = shape
        torch.manual_seed(0)
        ours = lltm_cpu.LLTM(features, state)
        eager = EagerLLTM(features, state)
        eager.load_state_dict(ours.state_dict())
        compiled = torch.compile(eager, fullgraph=True, dynamic=False)
        x = torch.randn(batch, features)
        h = torch.randn(batch, state, requires_grad=True)
        c = torch.randn(batch, state, requires_grad=True)
        grad_h = torch.randn(batch, state)
        grad_c = torch.randn(batch, state)
        models = {"lltm_cpu": ours, "eager": eager, "torch.compile": compiled}

        def forward(model):
            return lambda: model(x, (h, c))

        def forward_backward(model):
            # torch.autograd.grad returns the gradients instead of adding them to .grad: a
            # training loop that zeroes with set_to_none=True never pays for that addition
            # (at the large shape, 3.9 million floats for the weights alone).
            wanted = [*model.parameters(), h, c]

            def step():
                new_h, new_cell = model(x, (h, c))
                torch.autograd.grad([new_h, new_cell], wanted, [grad_h, grad_c])

            return step

        forward_impls = {name: forward(m) for name, m in models.items()}
        step_impls = {name: forward_backward(m) for name, m in models.items()}
        # The GEMM floor, at both shapes (the goal is set at the large one).
        weights = ours.weights.detach()
        bias = ours.bias.detach()
        X = torch.cat([h.detach(), x], dim=1)
        d_gates = torch.randn(batch, 3 * state)
        forward_impls["GEMM floor"] = lambda: torch.addmm(bias, X, weights.t())

        def gemms():
            torch.addmm(bias, X, weights.t())
            torch.mm(d_gates.t(), X)
            torch.mm(d_gates, weights[:, :state])

        step_impls["GEMM floor"] = gemms
        for op, impls in (("lltm forward", forward_impls), ("lltm forward+backward", step_impls)):
            ctx.compare(
                op=op,
                case=case_name(shape),
                size=batch * state,
                device="cpu",
                dtype=torch.float32,
                impls=impls,
                ours="lltm_cpu",
            )

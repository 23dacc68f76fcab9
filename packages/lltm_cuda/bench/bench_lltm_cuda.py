"""lltm_cuda against the eager Python LLTM and torch.compile of it, on a GPU.

The same cases as bench_lltm_cpu: one step inside a sequence as in training with
backpropagation through time (the parameters, old_h and old_cell need gradients, the input
does not), forward and forward+backward, at the tutorial's shape (16, 32, 128) and a large
one (64, 256, 1024), and the GEMMs that step needs timed alone ("GEMM floor":
X @ W.T + bias; d_gates.T @ X and d_gates @ W[:, :state]). Without a GPU it records a note
and times nothing.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

import lltm_cuda
from benchmarks.harness import Context, Goal

PACKAGE = "lltm_cuda"
TUTORIAL = (16, 32, 128)
LARGE = (64, 256, 1024)


def case_name(shape: tuple[int, int, int]) -> str:
    batch, features, state = shape
    return f"B={batch} in={features} state={state}"


GOALS = [
    Goal(
        op="lltm forward+backward",
        ours="lltm_cuda",
        peer="eager",
        min_speedup=2.0,
        device="cuda",
        case=case_name(TUTORIAL),
        note="issue 4: >= 2x faster than eager at the tutorial shape",
    ),
    Goal(
        op="lltm forward+backward",
        ours="lltm_cuda",
        peer="torch.compile",
        min_speedup=1.0,
        device="cuda",
        case=case_name(TUTORIAL),
        note="issue 4: faster than torch.compile at the tutorial shape",
    ),
] + [
    Goal(
        op=op,
        ours="lltm_cuda",
        peer="GEMM floor",
        min_speedup=1 / 1.1,
        device="cuda",
        case=case_name(LARGE),
        note="issue 4: within 10% of the GEMMs alone at the large shape",
    )
    for op in ("lltm forward", "lltm forward+backward")
]


class EagerLLTM(nn.Module):
    """The tutorial's pure-Python LLTM (the same as bench_lltm_cpu's)."""

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
    if "cuda" not in ctx.devices:
        ctx.note("no CUDA GPU visible, nothing timed")
        return
    device = "cuda"
    for shape in (TUTORIAL, LARGE):
        batch, features, state = shape
        torch.manual_seed(0)
        ours = lltm_cuda.LLTM(features, state, device=device)
        eager = EagerLLTM(features, state).to(device)
        eager.load_state_dict(ours.state_dict())
        compiled = torch.compile(eager, fullgraph=True, dynamic=False)
        x = torch.randn(batch, features, device=device)
        h = torch.randn(batch, state, device=device, requires_grad=True)
        c = torch.randn(batch, state, device=device, requires_grad=True)
        grad_h = torch.randn(batch, state, device=device)
        grad_c = torch.randn(batch, state, device=device)
        models = {"lltm_cuda": ours, "eager": eager, "torch.compile": compiled}

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
        d_gates = torch.randn(batch, 3 * state, device=device)
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
                device=device,
                dtype=torch.float32,
                impls=impls,
                ours="lltm_cuda",
            )

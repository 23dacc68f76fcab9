"""The LLTM benchmark that lltm_cpu and lltm_cuda share (each package's bench/ runs it on its
device): one step inside a sequence, as in training with backpropagation through time (the
parameters, old_h and old_cell need gradients, the input does not), forward and
forward+backward, against the tutorial's eager Python LLTM and torch.compile of it, at the
tutorial's shape (batch 16, input 32, state 128) and a large one (64, 256, 1024). The GEMMs
that step needs are timed alone as well, the "GEMM floor": X @ W.T + bias for forward, plus
d_gates.T @ X (d_weights) and d_gates @ W[:, :state] (d_old_h) for forward+backward. No
LLTM can beat them; the distance to them is what the rest (pointwise work, allocation,
dispatch, autograd) costs. "GEMM floor + autograd.grad" adds the cost of torch.autograd.grad
through a trivial graph: no step through autograd gets below that.

"lltm ops forward+backward" is the same step without autograd: the package's forward and
backward ops called directly (as the tutorial's own autograd.Function, or a hand-written
backpropagation through time, calls them), against the GEMM floor: what our kernels, their
allocations and dispatch cost beyond the GEMMs.

The GEMM floor reads inputs that were written long before, so with several threads they sit
in every core's cache. In a step, each product reads what the pass before it has just
written on the calling thread: X (the concatenation of old_h and input) and d_gates (the
backward's pointwise pass). FRESH_FLOOR, "GEMM floor (fresh inputs)", times the same three
products, each preceded by the cheapest op that writes its input (the concatenation for X,
one multiply for d_gates: less work than any backward's pointwise pass), those two ops
included. A step built like ours (concatenation, GEMM, pointwise passes, GEMMs) does at
least this, so it cannot beat this floor at any thread count. (On CUDA the same row times
the products after their producers' kernels; the cache argument is the CPU's.)
"""

from __future__ import annotations

import importlib
import math
from types import ModuleType

import torch
import torch.nn.functional as F
from torch import nn

from benchmarks.harness import Context, Goal

FRESH_FLOOR = "GEMM floor (fresh inputs)"
TUTORIAL = (16, 32, 128)
LARGE = (64, 256, 1024)


# What `size` counts in the LLTM measurements: the plots' x axis.
SIZE_LABEL = "batch x state_size, state elements"


def case_name(shape: tuple[int, int, int]) -> str:
    batch, features, state = shape
    return f"B={batch} in={features} state={state}"


def goals(ours: str, device: str, issue: str, peers: dict[str, float]) -> list[Goal]:
    """The issue's goals: min speedups over peers at the tutorial shape, and forward and
    forward+backward within 10% of the GEMMs alone at the large shape."""
    at_tutorial = [
        Goal(
            op="lltm forward+backward",
            ours=ours,
            peer=peer,
            min_speedup=speedup,
            device=device,
            case=case_name(TUTORIAL),
            note=f"{issue}: "
            + (f">= {speedup:g}x faster than {peer}" if speedup > 1 else f"faster than {peer}")
            + " at the tutorial shape",
        )
        for peer, speedup in peers.items()
    ]
    return at_tutorial + [
        Goal(
            op=op,
            ours=ours,
            peer="GEMM floor",
            min_speedup=1 / 1.1,
            device=device,
            case=case_name(LARGE),
            note=f"{issue}: within 10% of the GEMMs alone at the large shape",
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


OPS = ("lltm forward", "lltm forward+backward", "lltm ops forward+backward")


def run(ctx: Context, package: ModuleType | str, device: str) -> None:
    """Time the package's LLTM, eager, torch.compile and the GEMM floor at both shapes; the
    direct step also against the GEMM floor on fresh inputs (FRESH_FLOOR). package: the
    module, or its name, imported only when a row is timed (a plan lists the rows of a
    package not built here)."""
    name = package if isinstance(package, str) else package.__name__
    if device not in ctx.devices:  # e.g. lltm_cpu under run.py --device cuda
        return
    for shape in (TUTORIAL, LARGE):
        batch, features, state = shape
        ops = [op for op in OPS if ctx.wants(op, case_name(shape), device)]
        if not ops:
            continue
        if isinstance(package, str):
            package = importlib.import_module(package)
        torch.manual_seed(0)
        ours = package.LLTM(features, state, device=device)
        eager = EagerLLTM(features, state).to(device)
        eager.load_state_dict(ours.state_dict())
        compiled = torch.compile(eager, fullgraph=True, dynamic=False)
        x = torch.randn(batch, features, device=device)
        h = torch.randn(batch, state, device=device, requires_grad=True)
        c = torch.randn(batch, state, device=device, requires_grad=True)
        grad_h = torch.randn(batch, state, device=device)
        grad_c = torch.randn(batch, state, device=device)
        models = {name: ours, "eager": eager, "torch.compile": compiled}

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
        # The GEMMs plus what torch.autograd.grad itself costs: a graph of two elementwise
        # ops, gradients for old_h and old_cell only (the real step also returns the
        # parameters'). A lower bound for any LLTM step that goes through autograd, as
        # ours, eager and torch.compile do: at the tutorial shape the engine's own cost is
        # of the order of the GEMMs.
        h_leaf = h.detach().requires_grad_()
        c_leaf = c.detach().requires_grad_()

        def gemms_and_autograd():
            gemms()
            torch.autograd.grad([h_leaf * 2.0, c_leaf * 2.0], [h_leaf, c_leaf], [grad_h, grad_c])

        step_impls["GEMM floor + autograd.grad"] = gemms_and_autograd

        # The step through the ops themselves, no autograd: forward, then backward from its
        # saved tensors (its d_old_h GEMM takes every column of the weights, the floor's only
        # the state's: a little more work than the floor's).
        h_data = h.detach()
        c_data = c.detach()

        def ops_step():
            saved = package.forward(x, weights, bias, h_data, c_data)[1:]
            package.backward(grad_h, grad_c, *saved, weights)

        def gemms_on_fresh_inputs():
            fresh_X = torch.cat([h_data, x], dim=1)
            torch.addmm(bias, fresh_X, weights.t())
            fresh_d_gates = d_gates * 1.0
            torch.mm(fresh_d_gates.t(), fresh_X)
            torch.mm(fresh_d_gates, weights[:, :state])

        ops_impls = {name: ops_step, "GEMM floor": gemms, FRESH_FLOOR: gemms_on_fresh_inputs}
        for op, impls in zip(OPS, (forward_impls, step_impls, ops_impls), strict=True):
            if op not in ops:
                continue
            ctx.compare(
                op=op,
                case=case_name(shape),
                size=batch * state,
                device=device,
                dtype=torch.float32,
                impls=impls,
                ours=name,
            )

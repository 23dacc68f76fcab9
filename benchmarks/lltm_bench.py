"""The LLTM benchmark of lltm_cpu and lltm_cuda (packages/lltm_cpu/README.md, Benchmark): a
training step at the tutorial's shape and a large one against eager, torch.compile (on CUDA
also mode="reduce-overhead") and floors. FRESH_FLOOR: the GEMMs each after the cheapest op
that writes its input (the concatenation of old_h and input, a fresh gate gradient), as a
step's are, for the ops called directly ("lltm ops"); FRESH_FLOOR_GRAD adds autograd.grad:
the floor a step through autograd must pay (issue 63).
"""

from __future__ import annotations

import importlib
import math

import torch
import torch.nn.functional as F
from torch import nn

from benchmarks.harness import Context

FRESH_FLOOR = "GEMM floor (fresh inputs)"
FRESH_FLOOR_GRAD = "GEMM floor (fresh inputs) + autograd.grad"
TUTORIAL = (16, 32, 128)
LARGE = (64, 256, 1024)
BUSY = (1024, 256, 1024)  # CUDA only: GEMMs that keep a GPU busy (issue 58), not launches
OPS = ("lltm forward", "lltm forward+backward", "lltm ops forward+backward")
REDUCE_OVERHEAD = "torch.compile reduce-overhead"
AUTOGRAD_ALONE = "autograd.grad of two muls"


def case_name(shape: tuple[int, int, int]) -> str:
    return "B={} in={} state={}".format(*shape)


class EagerLLTM(nn.Module):
    """The tutorial's pure-Python LLTM: torch ops, autograd by torch."""

    def __init__(self, input_features: int, state_size: int) -> None:
        super().__init__()
        self.weights = nn.Parameter(torch.empty(3 * state_size, input_features + state_size))
        self.bias = nn.Parameter(torch.empty(3 * state_size))
        for p in self.parameters():
            nn.init.uniform_(p, -1.0 / math.sqrt(state_size), 1.0 / math.sqrt(state_size))

    def forward(self, input, state):
        old_h, old_cell = state
        gates = F.linear(torch.cat([old_h, input], dim=1), self.weights, self.bias).chunk(3, dim=1)
        new_cell = old_cell + F.elu(gates[2]) * torch.sigmoid(gates[0])
        return torch.tanh(new_cell) * torch.sigmoid(gates[1]), new_cell


def run(ctx: Context, package: str, device: str) -> None:
    """Every selected row of both shapes; the package is imported when a row is timed (a
    plan lists the rows of a package not built here)."""
    for shape in (TUTORIAL, LARGE, *([BUSY] if device == "cuda" else [])):
        ops = [op for op in OPS if ctx.wants(op, case_name(shape), device)]
        if ops:
            _time_shape(ctx, importlib.import_module(package), device, shape, ops)


def _time_shape(ctx: Context, package, device: str, shape: tuple, ops: list[str]) -> None:
    batch, features, state = shape
    torch.manual_seed(0)
    ours = package.LLTM(features, state, device=device)
    eager = EagerLLTM(features, state).to(device)
    eager.load_state_dict(ours.state_dict())
    models = {package.__name__: ours, "eager": eager,
              "torch.compile": torch.compile(eager, fullgraph=True, dynamic=False)}  # fmt: skip
    x = torch.randn(batch, features, device=device)
    h, c = (torch.randn(batch, state, device=device, requires_grad=True) for _ in range(2))
    grad_h, grad_c = torch.randn(2, batch, state, device=device)

    def step(model, graphs: bool = False):
        # autograd.grad returns the gradients instead of adding them to .grad: a loop that
        # zeroes with set_to_none=True never pays for that addition.
        def call():
            if graphs:  # CUDA graphs may reuse the last step's outputs: they are dead
                torch.compiler.cudagraph_mark_step_begin()
            new_h, new_cell = model(x, (h, c))
            torch.autograd.grad([new_h, new_cell], [*model.parameters(), h, c], [grad_h, grad_c])

        return call

    weights, bias = ours.weights.detach(), ours.bias.detach()
    h_data, c_data = h.detach(), c.detach()
    X = torch.cat([h_data, x], dim=1)
    d_gates = torch.randn(batch, 3 * state, device=device)

    def gemms():
        torch.addmm(bias, X, weights.t())
        torch.mm(d_gates.t(), X)
        torch.mm(d_gates, weights[:, :state])

    h_leaf, c_leaf = h_data.clone().requires_grad_(), c_data.clone().requires_grad_()

    def autograd_alone():  # the gradients of old_h and old_cell through two muls
        torch.autograd.grad([h_leaf * 2.0, c_leaf * 2.0], [h_leaf, c_leaf], [grad_h, grad_c])

    def gemms_and_autograd():
        gemms()
        autograd_alone()

    def ops_step():  # its d_old_h GEMM takes every column of the weights: more than the floor's
        saved = package.forward(x, weights, bias, h_data, c_data)[1:]
        package.backward(grad_h, grad_c, *saved, weights)

    def fresh_gemms():
        fresh_X = torch.cat([h_data, x], dim=1)
        torch.addmm(bias, fresh_X, weights.t())
        fresh_d_gates = d_gates * 1.0
        torch.mm(fresh_d_gates.t(), fresh_X)
        torch.mm(fresh_d_gates, weights[:, :state])

    def fresh_gemms_and_autograd():
        fresh_gemms()
        autograd_alone()

    steps = {name: step(model) for name, model in models.items()}
    if device == "cuda":
        graphed = torch.compile(eager, mode="reduce-overhead", dynamic=False)
        steps[REDUCE_OVERHEAD] = step(graphed, graphs=True)
    impls = {
        "lltm forward": {**{n: lambda m=m: m(x, (h, c)) for n, m in models.items()},
                         "GEMM floor": lambda: torch.addmm(bias, X, weights.t())},
        "lltm forward+backward": {**steps, "GEMM floor": gemms,
                                  "GEMM floor + autograd.grad": gemms_and_autograd,
                                  # autograd's own cost on this device (issue 58: on CUDA its
                                  # hand-off to the device, apart from ours)
                                  AUTOGRAD_ALONE: autograd_alone,
                                  FRESH_FLOOR_GRAD: fresh_gemms_and_autograd},
        "lltm ops forward+backward": {package.__name__: ops_step, "GEMM floor": gemms,
                                      FRESH_FLOOR: fresh_gemms},
    }  # fmt: skip
    for op in ops:
        # On CUDA every row is launch-bound at these shapes (H200, 2026-11-27): all but the
        # reduce-overhead compile, a CUDA graph already, are also timed as graph replays.
        graph = [name for name in impls[op] if name != REDUCE_OVERHEAD]
        ctx.compare(op=op, case=case_name(shape), size=batch * state, device=device,
                    dtype=torch.float32, impls=impls[op], ours=package.__name__, graph=graph)  # fmt: skip

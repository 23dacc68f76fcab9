"""Where the LLTM tutorial step's time goes against "GEMM floor (fresh inputs) + autograd.grad"
(issue 63, goal 2): each part of lltm_cpu's step timed alone, one thread, and the cost of a
custom autograd Function's five extra outputs (the tutorial API's activations) measured on a
Function that does no work (built with load_inline).

    OMP_NUM_THREADS=1 .nox/tests-torch-2-13-0/bin/python benchmarks/results/cpu/2026-11-29-epyc-lltm-parts/parts.py
"""

import os

import torch
import torch.utils.benchmark as tb
from torch.utils.cpp_extension import load_inline

import lltm_cpu

torch.set_num_threads(1)
B, F, S = 16, 32, 128  # the tutorial shape of benchmarks/lltm_bench.py
torch.manual_seed(0)
model = lltm_cpu.LLTM(F, S)
x = torch.randn(B, F)
h, c = (torch.randn(B, S, requires_grad=True) for _ in range(2))
grad_h, grad_c = torch.randn(2, B, S)
W, b = model.weights.detach(), model.bias.detach()
h0, c0 = h.detach(), c.detach()
ops = torch.ops.lltm_cpu
new_cell, _, _, _, X, gates = ops.forward(x, W, b, h0, c0)[1:]
d_gates = torch.randn(B, 3 * S)
params = [*model.parameters(), h, c]
h_leaf, c_leaf = h0.clone().requires_grad_(), c0.clone().requires_grad_()
kept = model(x, (h, c))  # a graph whose backward is timed alone (retain_graph)


def step():  # the bench's "lltm forward+backward" of lltm_cpu
    new_h, cell = model(x, (h, c))
    torch.autograd.grad([new_h, cell], params, [grad_h, grad_c])


def fresh_floor():  # the bench's FRESH_FLOOR
    fresh_X = torch.cat([h0, x], dim=1)
    torch.addmm(b, fresh_X, W.t())
    fresh_d = d_gates * 1.0
    torch.mm(fresh_d.t(), fresh_X)
    torch.mm(fresh_d, W[:, :S])


def autograd_alone():  # the bench's "autograd.grad of two muls"
    torch.autograd.grad([h_leaf * 2.0, c_leaf * 2.0], [h_leaf, c_leaf], [grad_h, grad_c])


def floor_and_grad():  # the bench's FRESH_FLOOR_GRAD
    fresh_floor()
    autograd_alone()


def forward_recorded():
    model(x, (h, c))


def forward_op():  # no autograd: the op's kernel
    ops.forward(x, W, b, h0, c0)


def cat_addmm():
    torch.addmm(b, torch.cat([h0, x], dim=1), W.t())


def backward_engine():  # our node's backward through autograd.grad
    torch.autograd.grad(
        list(kept[:2]) if isinstance(kept, tuple) else kept,
        params,
        [grad_h, grad_c],
        retain_graph=True,
    )


def backward_parts():  # what that backward runs: the pointwise op and two GEMMs
    d, _, _ = ops._backward_pointwise(grad_h, grad_c, new_cell, gates)
    torch.mm(d, W.narrow(1, 0, S))
    torch.mm(d.t(), X)


def backward_pointwise():
    ops._backward_pointwise(grad_h, grad_c, new_cell, gates)


SOURCE = r"""
#include <torch/extension.h>
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;
// A Function with N outputs and no work: N - 2 are non-differentiable, as LltmFunction's.
template <int N>
struct Outputs : torch::autograd::Function<Outputs<N>> {
  static variable_list forward(AutogradContext* ctx, const at::Tensor& a, const at::Tensor& b) {
    variable_list out;
    for (int i = 0; i < N; ++i) out.push_back(at::empty_like(a));
    ctx->save_for_backward({out[0], b});
    if (N > 2) ctx->mark_non_differentiable(variable_list(out.begin() + 2, out.end()));
    ctx->set_materialize_grads(false);
    return out;
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    ctx->get_saved_variables();
    return {g[0], g[0]};
  }
};
variable_list two(at::Tensor a, at::Tensor b) { return Outputs<2>::apply(a, b); }
variable_list seven(at::Tensor a, at::Tensor b) { return Outputs<7>::apply(a, b); }
"""
empty = load_inline(
    "lltm_parts_outputs", cpp_sources=SOURCE, functions=["two", "seven"], extra_cflags=["-O2"]
)  # load_inline adds no -O: unoptimized, apply costs 2.7x


def outputs(n):
    function = empty.two if n == 2 else empty.seven

    def call():
        out = function(h_leaf, c_leaf)
        torch.autograd.grad([out[0], out[1]], [h_leaf, c_leaf], [grad_h, grad_c])

    call.__name__ = f"empty Function, {n} outputs, + autograd.grad"
    return call


ROWS = [
    step,
    floor_and_grad,
    fresh_floor,
    autograd_alone,
    forward_recorded,
    forward_op,
    cat_addmm,
    backward_engine,
    backward_parts,
    backward_pointwise,
    outputs(2),
    outputs(7),
]
print(
    f"torch {torch.__version__}, one thread, load {os.getloadavg()[0]:.2f}; "
    "median us of blocked_autorange(0.5 s), three rounds, rows interleaved"
)
rounds = {f.__name__: [] for f in ROWS}
for _ in range(3):
    for f in ROWS:
        timer = tb.Timer("f()", globals={"f": f})
        rounds[f.__name__].append(timer.blocked_autorange(min_run_time=0.5).median * 1e6)
for name, us in rounds.items():
    print(f"| {name} | " + " | ".join(f"{u:.1f}" for u in us) + f" | {sorted(us)[1]:.1f} |")

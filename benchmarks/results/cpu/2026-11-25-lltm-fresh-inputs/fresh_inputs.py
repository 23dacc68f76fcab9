"""Why the direct LLTM step gains nothing from a second thread where its GEMMs alone do.

    python benchmarks/results/cpu/2026-11-25-lltm-fresh-inputs/fresh_inputs.py

At the tutorial shape (B16, in 32, state 128) the "GEMM floor" of the bench runs its three
products on inputs that nothing wrote since the previous call. In a step, every product
reads what the pass before it just wrote on the calling thread's core (X from the
concatenation, d_gates from the backward pointwise pass). This script times, at one and at
two threads, the backward's two products on d_gates alone, the pointwise pass alone, and
the two in sequence on the pass's fresh output; then the same with an ATen multiply as the
producer. "penalty" is what the sequence costs beyond its parts. Wall time, medians of
torch.utils.benchmark; run it on an idle machine. Not collected by the harness.
"""

from __future__ import annotations

import torch
import torch.utils.benchmark as tbench

import lltm_cpu

BATCH, FEATURES, STATE = 16, 32, 128


def median_us(fn, threads: int) -> float:
    timer = tbench.Timer("fn()", globals={"fn": fn}, num_threads=threads)
    return timer.blocked_autorange(min_run_time=0.5).median * 1e6


def main() -> None:
    torch.manual_seed(0)
    cell = lltm_cpu.LLTM(FEATURES, STATE)
    weights = cell.weights.detach()
    bias = cell.bias.detach()
    x = torch.randn(BATCH, FEATURES)
    h = torch.randn(BATCH, STATE)
    c = torch.randn(BATCH, STATE)
    grad_h = torch.randn(BATCH, STATE)
    grad_c = torch.randn(BATCH, STATE)
    _, new_cell, *_, X, gates = lltm_cpu.forward(x, weights, bias, h, c)
    pointwise = torch.ops.lltm_cpu._backward_pointwise
    d_gates_old = torch.randn(BATCH, 3 * STATE)

    def products(d_gates):
        torch.mm(d_gates.t(), X)
        torch.mm(d_gates, weights)

    def pass_alone():
        pointwise(grad_h, grad_c, new_cell, gates)

    def pass_then_products():
        products(pointwise(grad_h, grad_c, new_cell, gates)[0])

    def mul_alone():
        d_gates_old * 1.0

    def mul_then_products():
        products(d_gates_old * 1.0)

    cases = {
        "lltm pointwise pass": (pass_alone, pass_then_products),
        "ATen mul": (mul_alone, mul_then_products),
    }
    print(f"torch {torch.__version__}; backward products d_gates.T @ X and d_gates @ W")
    print(
        f"{'threads':>7}  {'producer':<20} {'products':>9} {'producer':>9} {'in seq.':>9} {'penalty':>9}"
    )
    for threads in (1, 2):
        alone = median_us(lambda: products(d_gates_old), threads)
        for name, (producer, sequence) in cases.items():
            made = median_us(producer, threads)
            both = median_us(sequence, threads)
            print(
                f"{threads:>7}  {name:<20} {alone:>6.1f} us {made:>6.1f} us {both:>6.1f} us"
                f" {both - alone - made:>6.1f} us"
            )


if __name__ == "__main__":
    main()

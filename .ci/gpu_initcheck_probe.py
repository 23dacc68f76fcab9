"""What compute-sanitizer's initcheck flags in torch's own kernels, with no kernel of ours: the
grounds of gpu_sanitize.py's INITCHECK_BLIND, whose PROBES holds what each part found where it
was measured (docs/gpu-check.md). ``cublas``: addmm at lltm_cuda's shapes, its result read by
a torch kernel (flagged: initcheck does not see cuBLAS's float16 and bfloat16 writes);
``reduce``: the sums lltm_cuda's grid-stride test makes on the GPU, at its three sizes
(flagged: torch's multi-block reductions read staging slots no block wrote, Reduce.cuh).

    PYTORCH_NO_CUDA_MEMORY_CACHING=1 compute-sanitizer --tool initcheck \\
        python3 .ci/gpu_initcheck_probe.py cublas
"""

from __future__ import annotations

import itertools
import sys

import torch


def cublas() -> None:
    for dtype, batch, features, state in itertools.product(
        (torch.bfloat16, torch.float16, torch.float32), (1, 4, 17, 33), (0, 7, 20), (1, 16, 65)
    ):
        bias = torch.randn(3 * state, device="cuda", dtype=dtype)
        x = torch.randn(batch, features + state, device="cuda", dtype=dtype)
        weights = torch.randn(3 * state, features + state, device="cuda", dtype=dtype)
        gates = torch.addmm(bias, x, weights.t())
        total = gates.float().sum().item()
        print(f"{dtype} batch={batch} features={features} state={state}: {total:.3f}", flush=True)


def reduce() -> None:
    # test_grid_stride_covers_large_and_odd_sizes: (batch, state); new_h.sum() + new_cell.sum()
    # before backward, then d_bias = d_gates.sum(0) in _backward_pointwise.
    for batch, state in ((4096, 600), (2, 3001), (70_000, 1)):
        new_h, new_cell = (torch.randn(batch, state, device="cuda") for _ in range(2))
        d_bias = torch.randn(batch, 3 * state, device="cuda").sum(0)
        total = (new_h.sum() + new_cell.sum()).item()
        print(f"float32 ({batch}, {state}): {total:.3f} {d_bias.cpu().sum().item():.3f}")


if __name__ == "__main__":
    # cublas_no_lt: cublas, run with gpu_sanitize.NO_LT in its environment.
    parts = {"cublas": cublas, "cublas_no_lt": cublas, "reduce": reduce}
    parts[sys.argv[1] if len(sys.argv) > 1 else "cublas"]()

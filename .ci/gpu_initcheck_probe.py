"""What compute-sanitizer's initcheck flags in torch's own kernels, with no kernel of ours: the
grounds of gpu_check.py's INITCHECK_BLIND (docs/gpu-check.md). ``cublas``: addmm at lltm_cuda's
shapes, its result read by a torch kernel (flagged: initcheck does not see cuBLAS's writes);
``reduce``: column sums spanning several blocks (flagged: torch's staging slots, Reduce.cuh).

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
    for rows, columns in ((4096, 3 * 600), (70_000, 3), (2, 3 * 3001)):
        d_gates = torch.randn(rows, columns, device="cuda")
        by_column, whole = d_gates.sum(0), d_gates.sum()
        print(f"float32 ({rows}, {columns}): {by_column.sum().item():.3f} {whole.item():.3f}")


if __name__ == "__main__":
    {"cublas": cublas, "reduce": reduce}[sys.argv[1] if len(sys.argv) > 1 else "cublas"]()

"""Does compute-sanitizer's initcheck see what cuBLAS writes? (GPU check, issue 33.)

On an H100, initcheck reported every read of ``gate_weights`` (``at::addmm``'s output) by
lltm_cuda's bfloat16 forward kernel as uninitialized, in the CUDA property tests, while
4x10 @ 10x12 products of three dtypes read back by torch's own kernel reported nothing.
This runs the property tests' LLTM shapes through the same product (bias, cat([old_h,
input]), weights.t()) and reads each result with a torch kernel: if initcheck flags that
torch kernel too, the finding is about cuBLAS's writes, not our kernel.

    PYTORCH_NO_CUDA_MEMORY_CACHING=1 compute-sanitizer --tool initcheck \\
        python3 .ci/gpu_initcheck_cublas.py
"""

from __future__ import annotations

import itertools

import torch


def main() -> None:
    for dtype, batch, features, state in itertools.product(
        (torch.bfloat16, torch.float16, torch.float32), (1, 4, 17, 33), (0, 7, 20), (1, 16, 65)
    ):
        bias = torch.randn(3 * state, device="cuda", dtype=dtype)
        x = torch.randn(batch, features + state, device="cuda", dtype=dtype)
        weights = torch.randn(3 * state, features + state, device="cuda", dtype=dtype)
        gates = torch.addmm(bias, x, weights.t())
        total = gates.float().sum().item()
        print(f"{dtype} batch={batch} features={features} state={state}: {total:.3f}", flush=True)


if __name__ == "__main__":
    main()

"""Per-call cost of warp_perspective on a 1 x 1 x 8 x 8 image: dispatch, checks, the matrix
inversion and autograd, when the sampling is tiny. `nox -s abi_overhead` runs it under the
stable-ABI build and the last full-ABI one: OMP_NUM_THREADS=1 python THIS_FILE
"""

from __future__ import annotations

import json

import torch
import torch.utils.benchmark as benchmark

import warp_perspective


def median_us(stmt: str, **names) -> float:
    timer = benchmark.Timer(
        stmt, globals={"warp_perspective": warp_perspective, "torch": torch, **names}
    )
    return min(timer.blocked_autorange(min_run_time=1.0).median for _ in range(3)) * 1e6


def main() -> None:
    torch.set_num_threads(1)
    image = torch.rand(1, 1, 8, 8)
    grad_image = image.clone().requires_grad_(True)
    m = torch.tensor([[1.0, 0.1, 0.5], [0.0, 1.0, -0.5], [0.0, 0.0, 1.0]])
    op = torch.ops.warp_perspective.warp_perspective
    big = torch.rand(1, 3, 256, 256, requires_grad=True)
    grid = torch.rand(1, 8, 8, 2) * 2 - 1
    cases = {
        "torch.ops op, no input requires grad": ("op(x, m)", image),
        "the same under inference_mode": ("with torch.inference_mode(): op(x, m)", image),
        "warp_perspective.warp_perspective (the wrapper)": ("warp_perspective.warp_perspective(x, m)", image),
        "forward + backward, image requires grad": ("op(x, m).sum().backward()", grad_image),
        "1 x 3 x 256 x 256, forward + backward": ("op(x, m).sum().backward()", big),
        "peer: torch.nn.functional.grid_sample, no grad": ("torch.nn.functional.grid_sample(x, g, align_corners=False)", image),
    }  # fmt: skip
    results = {name: median_us(stmt, op=op, x=x, m=m, g=grid) for name, (stmt, x) in cases.items()}
    info = warp_perspective.BUILD_INFO
    print(json.dumps({"abi": info.get("abi", "full"), "torch": torch.__version__, "us": results}))


if __name__ == "__main__":
    main()

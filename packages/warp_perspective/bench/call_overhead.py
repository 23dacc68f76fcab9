"""Per-call cost of warp_perspective on a 1 x 1 x 8 x 8 image: what dispatch, the checks,
the matrix inversion and autograd cost when the sampling itself is tiny. Run it in two
environments, one with the stable-ABI build and one with a full-ABI build of the same op
(e.g. a checkout from before the port), and compare:

    OMP_NUM_THREADS=1 python packages/warp_perspective/bench/call_overhead.py
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
    results = {
        "torch.ops op, no input requires grad": median_us("op(x, m)", op=op, x=image, m=m),
        "the same under inference_mode": median_us(
            "with torch.inference_mode(): op(x, m)", op=op, x=image, m=m
        ),
        "warp_perspective.warp_perspective (the wrapper)": median_us(
            "warp_perspective.warp_perspective(x, m)", x=image, m=m
        ),
        "forward + backward, image requires grad": median_us(
            "op(x, m).sum().backward()", op=op, x=grad_image, m=m
        ),
        "1 x 3 x 256 x 256, forward + backward": median_us(
            "op(x, m).sum().backward()",
            op=op,
            x=torch.rand(1, 3, 256, 256, requires_grad=True),
            m=m,
        ),
        "peer: torch.nn.functional.grid_sample, no grad": median_us(
            "torch.nn.functional.grid_sample(x, g, align_corners=False)",
            x=image,
            g=torch.rand(1, 8, 8, 2) * 2 - 1,
        ),
    }
    info = warp_perspective.BUILD_INFO
    print(json.dumps({"abi": info.get("abi", "full"), "torch": torch.__version__, "us": results}))


if __name__ == "__main__":
    main()

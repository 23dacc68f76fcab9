"""Agreement with cv2.warpPerspective, per backend, dtype and mode.

    python benchmarks/results/cpu/2026-11-21-warp-accuracy/accuracy.py [--trials 30]

Random near-identity homographies (as in the tests), 61x83 images warped into 57x90, each
plane through cv2.warpPerspective (opencv-python-headless). Prints, over all trials, the
largest max |ours - cv2| / R and mean |ours - cv2| / R (R: the value range, 1 or 255) and
the largest fraction of pixels that differ at all, for the public op (the build's backend)
and the built-in kernel.
"""

from __future__ import annotations

import argparse
import itertools

import cv2
import torch

import warp_perspective


def homography(g: torch.Generator) -> torch.Tensor:
    m = torch.eye(3, dtype=torch.float64)
    m[:2, :2] += 0.05 * torch.randn(2, 2, generator=g, dtype=torch.float64)
    m[:2, 2] = 5 * torch.randn(2, generator=g, dtype=torch.float64)
    m[2, :2] = 1e-4 * torch.randn(2, generator=g, dtype=torch.float64)
    return m


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=30)
    args = parser.parse_args()
    ops = {
        f"public ({warp_perspective.backend()})": torch.ops.warp_perspective.warp_perspective,
        "builtin": torch.ops.warp_perspective._warp_perspective_builtin,
    }
    g = torch.Generator().manual_seed(1)
    worst: dict[tuple, list[float]] = {}
    (h, w), dsize = (61, 83), (57, 90)
    for _ in range(args.trials):
        m = homography(g)
        for dtype in (torch.float32, torch.float64, torch.uint8):
            if dtype == torch.uint8:
                image, r = torch.randint(0, 256, (h, w), generator=g, dtype=dtype), 255.0
            else:
                image, r = torch.rand(h, w, generator=g, dtype=torch.float64).to(dtype), 1.0
            for interpolation, padding in itertools.product(
                ("bilinear", "nearest"), ("zeros", "border")
            ):
                expected = cv2.warpPerspective(
                    image.numpy(),
                    m.numpy(),
                    (dsize[1], dsize[0]),
                    flags=cv2.INTER_LINEAR if interpolation == "bilinear" else cv2.INTER_NEAREST,
                    borderMode=cv2.BORDER_CONSTANT if padding == "zeros" else cv2.BORDER_REPLICATE,
                )
                expected = torch.from_numpy(expected).double()
                wm = m.to(torch.float64 if dtype == torch.uint8 else dtype)
                for name, op in ops.items():
                    diff = (op(image, wm, dsize, interpolation, padding).double() - expected).abs()
                    stats = [
                        diff.max().item() / r,
                        diff.mean().item() / r,
                        (diff > 0).double().mean().item(),
                    ]
                    key = (name, str(dtype).replace("torch.", ""), interpolation, padding)
                    worst[key] = [
                        max(a, b) for a, b in zip(worst.get(key, stats), stats, strict=True)
                    ]
    print(
        f"cv2 {cv2.__version__}, {args.trials} trials: max/R, mean/R, fraction of pixels differing"
    )
    for key, (mx, mean, frac) in sorted(worst.items()):
        print(f"  {' '.join(key):48} {mx:10.3g} {mean:10.3g} {frac:10.3g}")


if __name__ == "__main__":
    main()

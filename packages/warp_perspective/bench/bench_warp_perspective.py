"""warp_perspective against kornia's warp_perspective and a Python loop of cv2.warpPerspective.

Batch 8, 3 channels, float32, bilinear with zeros padding, one homography per image,
256x256 and 1080p (1080x1920) in and out. CPU: the public op (whichever backend the build
has), the built-in kernel (the internal op, same build), kornia, and cv2 called once per
image on an (H, W, 3) array prepared beforehand (its native layout, conversion not timed:
the peer's best case). On a GPU also CUDA against kornia on CUDA.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import torch

import warp_perspective
from benchmarks.harness import Context, Goal

PACKAGE = "warp_perspective"
OP = "warp_perspective bilinear"
OURS = "warp_perspective"
BUILTIN = "warp_perspective (built-in kernel)"
GOALS = [
    Goal(op=OP, ours=OURS, peer="kornia", min_speedup=15, device="cpu"),
    Goal(op=OP, ours=OURS, peer="cv2 loop", min_speedup=1.5, device="cpu"),
    Goal(op=OP, ours=BUILTIN, peer="kornia", min_speedup=15, device="cpu",
         note="the built-in CPU kernel of the same build (internal op)"),
    Goal(op=OP, ours=BUILTIN, peer="cv2 loop", min_speedup=1.5, device="cpu",
         note="the built-in CPU kernel of the same build (internal op)"),
    Goal(op=OP, ours=OURS, peer="kornia", min_speedup=5, device="cuda"),
]  # fmt: skip
BATCH = 8
CHANNELS = 3
SIZES = {"256x256": (256, 256), "1080p": (1080, 1920)}


def _homographies(batch: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    m = torch.eye(3, dtype=torch.float64).repeat(batch, 1, 1)
    m[:, :2, :2] += 0.05 * torch.randn(batch, 2, 2, generator=g, dtype=torch.float64)
    m[:, :2, 2] = 8 * torch.randn(batch, 2, generator=g, dtype=torch.float64)
    m[:, 2, :2] = 1e-5 * torch.randn(batch, 2, generator=g, dtype=torch.float64)
    return m


def run(ctx: Context) -> None:
    have_kornia = importlib.util.find_spec("kornia") is not None
    have_cv2 = importlib.util.find_spec("cv2") is not None
    if have_kornia:
        from kornia.geometry.transform import warp_perspective as kornia_warp
    else:
        ctx.note("kornia is not installed: pip install kornia (the bench extra)")
    if have_cv2:
        import cv2
    else:
        ctx.note("cv2 is not installed: pip install opencv-python-headless (the bench extra)")
    ctx.note(
        f"warp_perspective CPU backend: {warp_perspective.backend()} "
        f"(OpenCV {warp_perspective.build_config()['opencv'] or 'absent'}), "
        f"cv2 {cv2.__version__ if have_cv2 else 'absent'} with {cv2.getNumThreads() if have_cv2 else 0} "
        f"threads, torch {torch.get_num_threads()} threads"
    )
    mats64 = _homographies(BATCH)
    sizes = {"256x256": SIZES["256x256"]} if ctx.quick else SIZES
    for device in ctx.devices:
        for case, (h, w) in sizes.items():
            g = torch.Generator().manual_seed(1)
            image = torch.rand(BATCH, CHANNELS, h, w, generator=g).to(device)
            mats = mats64.to(device, torch.float32)
            impls = {OURS: lambda: warp_perspective.warp_perspective(image, mats)}
            ours = [OURS]
            if device == "cpu":
                impls[BUILTIN] = lambda: torch.ops.warp_perspective._warp_perspective_builtin(
                    image, mats
                )
                ours.append(BUILTIN)
            if have_kornia:
                impls["kornia"] = lambda: kornia_warp(
                    image, mats, (h, w), mode="bilinear", padding_mode="zeros", align_corners=True
                )
            if have_cv2 and device == "cpu":
                hwc = [np.ascontiguousarray(im.permute(1, 2, 0).numpy()) for im in image]
                np_mats = [m.numpy() for m in mats64]

                def cv2_loop(hwc=hwc, np_mats=np_mats, h=h, w=w):
                    return [
                        cv2.warpPerspective(im, m, (w, h), flags=cv2.INTER_LINEAR)
                        for im, m in zip(hwc, np_mats, strict=True)
                    ]

                impls["cv2 loop"] = cv2_loop
            pixels = BATCH * CHANNELS * h * w
            ctx.compare(
                op=OP,
                case=f"B={BATCH} C={CHANNELS} {case}",
                size=pixels,
                device=device,
                dtype=torch.float32,
                impls=impls,
                ours=ours,
                extra=lambda s, n=pixels: {"Msamples/s": n / s / 1e6},
            )

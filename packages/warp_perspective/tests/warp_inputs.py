"""The images and homographies warp_perspective's suite feeds its ops. Plain torch, no
shared_build: the CPU-level scripts of test_warp_perspective.py import this in a fresh
process."""

from __future__ import annotations

import torch

FAMILIES = [
    "shift",
    "near_identity",
    "rotate_3",
    "rotate_30",
    "zoom_out",
    "zoom_in",
    "mirror",
    "perspective",
]


def random_homography(generator: torch.Generator, scale: float = 1.0) -> torch.Tensor:
    """Near identity: 5% linear distortion, a few pixels of shift, mild perspective."""
    m = torch.eye(3, dtype=torch.float64)
    m[:2, :2] += 0.05 * scale * torch.randn(2, 2, generator=generator, dtype=torch.float64)
    m[:2, 2] = 4 * scale * torch.randn(2, generator=generator, dtype=torch.float64)
    m[2, :2] = 1e-3 * scale * torch.randn(2, generator=generator, dtype=torch.float64)
    return m


def random_image(shape, dtype, generator, device="cpu") -> torch.Tensor:
    """Values in [0, 1) (uint8: 0..255) from generator, on device."""
    if dtype == torch.uint8:
        return torch.randint(0, 256, shape, generator=generator, dtype=torch.uint8).to(device)
    return torch.rand(shape, generator=generator, dtype=torch.float64).to(device, dtype)


def warp_dtype(dtype: torch.dtype) -> torch.dtype:
    """The matrix dtype for an image of dtype: its own, float64 for uint8."""
    return torch.float64 if dtype == torch.uint8 else dtype


def homography_family(kind: str, h: int, w: int) -> torch.Tensor:
    """Homographies that steer the CPU kernels' groups of pixels onto their different paths:
    loads from a window (near identity, integer shift), gathers (steep rotation, strong
    zoom out, a mirror, strong perspective with w = 0 inside the output), or both. None
    puts source coordinates on exact halves, where nearest sampling would depend on the
    last bit of the inverse matrix."""
    m = torch.eye(3, dtype=torch.float64)
    c = torch.tensor([[1.0, 0, (w - 1) / 2], [0, 1, (h - 1) / 2], [0, 0, 1]], dtype=torch.float64)
    if kind == "shift":
        m[0, 2], m[1, 2] = 5, -3
    elif kind == "near_identity":
        m = torch.tensor([[1.03, 0.04, 2.3], [-0.05, 0.98, -1.7], [2e-4, -1e-4, 1]])
    elif kind in ("rotate_3", "rotate_30"):
        a = torch.deg2rad(torch.tensor(3.0 if kind == "rotate_3" else 30.0, dtype=torch.float64))
        r = torch.tensor([[a.cos(), -a.sin(), 0], [a.sin(), a.cos(), 0], [0, 0, 1]])
        m = c @ r @ torch.linalg.inv(c)
    elif kind == "zoom_out":  # 16 pixels read ~40 columns: too wide for one window
        m = (
            c
            @ torch.diag(torch.tensor([0.37, 0.41, 1.0], dtype=torch.float64))
            @ torch.linalg.inv(c)
        )
    elif kind == "zoom_in":
        m = (
            c
            @ torch.diag(torch.tensor([2.3, 2.45, 1.0], dtype=torch.float64))
            @ torch.linalg.inv(c)
        )
    elif kind == "mirror":  # source columns decrease along a row
        m = torch.tensor([[-1.0, 0.02, w - 1.3], [0.01, 1, 0.3], [0, 0, 1]])
    elif kind == "perspective":  # w = 0 on a line through the output
        m = torch.tensor([[1.0, 0.1, 0], [0.05, 1, 0], [-2.0 / w, 0.0, 1.0]])
    else:
        raise ValueError(kind)
    return m.double()

"""The typed wrapper of ``torch.ops.warp_perspective.warp_perspective``.

The fake kernels that ``torch.compile`` and ``torch.export`` run instead of the real ones
are C++ Meta kernels (csrc/warp_perspective.cpp): the real kernels' checks over symbolic
sizes, then empty tensors of the right shape. Autograd is registered in C++
(csrc/autograd.cpp).
"""

from __future__ import annotations

from typing import List, Optional  # noqa: UP035  (TorchScript reads these annotations)

import torch

__all__ = ["backend", "build_config", "warp_perspective"]


def warp_perspective(
    image: torch.Tensor,
    warp: torch.Tensor,
    dsize: Optional[List[int]] = None,  # noqa: UP006, UP045
    interpolation: str = "bilinear",
    padding_mode: str = "zeros",
) -> torch.Tensor:
    """Warp ``image`` by the homography ``warp``, as ``cv2.warpPerspective`` does.

    image: (H, W), (C, H, W) or (B, C, H, W); float32, float64 or uint8.
    warp: (3, 3), shared by the batch, or (B, 3, 3): the matrix that maps source pixel
    coordinates to destination ones (pixel centres at integers), same dtype as a floating
    image (float32 or float64 for uint8). Must be invertible.
    dsize: (out_h, out_w), default the image's (H, W). Note the order: cv2 takes (w, h).
    interpolation: "bilinear" or "nearest". padding_mode: "zeros" (cv2.BORDER_CONSTANT
    with 0) or "border" (cv2.BORDER_REPLICATE).
    Returns the image's layout with the new spatial size. Differentiable with respect to
    ``image``; scriptable with TorchScript (pass dsize as a list there).
    """
    return torch.ops.warp_perspective.warp_perspective(
        image, warp, dsize, interpolation, padding_mode
    )


def build_config() -> dict[str, str]:
    """What the loaded op library was built with (cpu_backend, opencv, cuda, cxx11_abi) and
    the CPU loops it runs on this machine (cpu_geometry: "avx512", "avx2" or "portable")."""
    return dict(torch.ops.warp_perspective._build_config())


def backend() -> str:
    """The CPU backend the library was built with: "opencv" or "builtin".

    float64 images, and sources wider or taller than 32000 pixels, always take the built-in
    kernel; CUDA tensors take the CUDA kernel.
    """
    return build_config()["cpu_backend"]

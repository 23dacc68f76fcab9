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
    backend: Optional[str] = None,  # noqa: UP045
) -> torch.Tensor:
    """Warp ``image`` by the homography ``warp``, as ``cv2.warpPerspective`` does.

    image: (H, W), (C, H, W) or (B, C, H, W); float32, float64 or uint8.
    warp: (3, 3), shared by the batch, or (B, 3, 3): the matrix that maps source pixel
    coordinates to destination ones (pixel centres at integers), same dtype as a floating
    image (float32 or float64 for uint8). Must be invertible.
    dsize: (out_h, out_w), default the image's (H, W). Note the order: cv2 takes (w, h).
    interpolation: "bilinear" or "nearest". padding_mode: "zeros" (cv2.BORDER_CONSTANT
    with 0) or "border" (cv2.BORDER_REPLICATE).
    backend: the CPU kernel; None (default) takes the build's default (``build_config()
    ["cpu_default"]``: the built-in kernel unless built with WARP_PERSPECTIVE_OPENCV=1),
    "builtin" the built-in kernel, "opencv" cv::warpPerspective (raises in a build without
    OpenCV; float64 and sources over 32000 px still take the built-in kernel). CPU only:
    CUDA tensors take None.
    Returns the image's layout with the new spatial size. Differentiable with respect to
    ``image``; scriptable with TorchScript (pass dsize as a list there).
    """
    if backend is None:
        return torch.ops.warp_perspective.warp_perspective(
            image, warp, dsize, interpolation, padding_mode
        )
    if backend == "builtin":
        return torch.ops.warp_perspective._warp_perspective_builtin(
            image, warp, dsize, interpolation, padding_mode
        )
    if backend == "opencv":
        return torch.ops.warp_perspective._warp_perspective_opencv(
            image, warp, dsize, interpolation, padding_mode
        )
    raise ValueError(
        f'warp_perspective: backend must be None, "builtin" or "opencv", got "{backend}"'
    )


def build_config() -> dict[str, str]:
    """What the loaded op library was built with (cpu_backend, cpu_default, opencv, cuda,
    cxx11_abi) and the CPU loops it runs on this machine (cpu_geometry: "avx512", "avx2"
    or "portable")."""
    return dict(torch.ops.warp_perspective._build_config())


def backend() -> str:
    """The CPU backends the library was built with: "opencv" (OpenCV and the built-in
    kernel) or "builtin" (the built-in kernel only).

    The public op uses ``build_config()["cpu_default"]`` ("builtin" unless the build set
    WARP_PERSPECTIVE_OPENCV=1); ``warp_perspective(..., backend="opencv")`` picks OpenCV
    per call. float64 images, and sources wider or taller than 32000 pixels, always take
    the built-in kernel; CUDA tensors take the CUDA kernel.
    """
    return build_config()["cpu_backend"]

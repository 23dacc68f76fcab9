"""The typed wrapper of ``torch.ops.warp_perspective.warp_perspective`` and its fake kernels.

The fake (meta) kernels are what ``torch.compile`` and ``torch.export`` run instead of the
real ones: they repeat the C++ checks (same sentences, see csrc/warp_perspective.cpp) and
return empty tensors of the right shape. Autograd is registered in C++ (csrc/autograd.cpp).
"""

from __future__ import annotations

from typing import List, Optional  # noqa: UP035  (TorchScript reads these annotations)

import torch

__all__ = ["backend", "build_config", "warp_perspective"]

_MODES = {"interpolation": ("bilinear", "nearest"), "padding_mode": ("zeros", "border")}
# c10's names for dtypes, so that the fake kernels' messages read like the C++ ones.
_CPP_DTYPE = {
    torch.float32: "Float",
    torch.float64: "Double",
    torch.float16: "Half",
    torch.bfloat16: "BFloat16",
    torch.uint8: "Byte",
    torch.int8: "Char",
    torch.int16: "Short",
    torch.int32: "Int",
    torch.int64: "Long",
    torch.bool: "Bool",
    torch.complex64: "ComplexFloat",
    torch.complex128: "ComplexDouble",
}


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


def _dtype_name(dtype: torch.dtype) -> str:
    return _CPP_DTYPE.get(dtype, str(dtype))


def _check_mode(name: str, value: str) -> None:
    first, second = _MODES[name]
    torch._check(
        value in _MODES[name],
        lambda: f'warp_perspective: {name} must be "{first}" or "{second}", got "{value}"',
    )


def _check_image(x: torch.Tensor, name: str) -> None:
    torch._check(
        x.layout == torch.strided,
        lambda: f"warp_perspective: {name} must be a dense (strided) tensor, got {x.layout}",
    )
    torch._check(
        2 <= x.dim() <= 4,
        lambda: (
            f"warp_perspective: {name} must be (H, W), (C, H, W) or (B, C, H, W), got a "
            f"{x.dim()}-D tensor of shape {list(x.shape)}"
        ),
    )


def _check_warp(x: torch.Tensor, name: str, warp: torch.Tensor) -> None:
    torch._check(
        warp.layout == torch.strided,
        lambda: f"warp_perspective: warp must be a dense (strided) tensor, got {warp.layout}",
    )
    torch._check(
        warp.dim() in (2, 3) and warp.shape[-1] == 3 and warp.shape[-2] == 3,
        lambda: (
            "warp_perspective: warp must be a 3x3 matrix or a batch of them (B, 3, 3), "
            f"got shape {list(warp.shape)}"
        ),
    )
    torch._check(
        x.device == warp.device,
        lambda: (
            f"warp_perspective: {name} and warp must be on the same device, got {name} on "
            f"{x.device} and warp on {warp.device}"
        ),
    )
    if x.dtype == torch.uint8:
        torch._check(
            warp.dtype in (torch.float32, torch.float64),
            lambda: (
                "warp_perspective: warp must be float32 or float64 for a uint8 image, got "
                f"{_dtype_name(warp.dtype)}"
            ),
        )
    else:
        torch._check(
            warp.dtype == x.dtype,
            lambda: (
                f"warp_perspective: {name} and warp must have the same dtype, got {name} "
                f"{_dtype_name(x.dtype)} and warp {_dtype_name(warp.dtype)} (convert one, "
                f"e.g. warp.to({name}.dtype))"
            ),
        )
    batch = x.shape[0] if x.dim() == 4 else 1
    if warp.dim() == 3:
        torch._check(
            warp.shape[0] == batch,
            lambda: (
                f"warp_perspective: batch sizes differ: warp holds {warp.shape[0]} matrices "
                f"(shape {list(warp.shape)}) but {name} has batch size {batch} (shape "
                f"{list(x.shape)}); pass one matrix per image, or a single (3, 3) matrix "
                "for all of them"
            ),
        )


@torch.library.register_fake("warp_perspective::warp_perspective")
def _warp_perspective_fake(
    image: torch.Tensor,
    warp: torch.Tensor,
    dsize: list[int] | None = None,
    interpolation: str = "bilinear",
    padding_mode: str = "zeros",
) -> torch.Tensor:
    # The checks of check_forward in csrc/warp_perspective.cpp, in the same order and
    # words. The one check that needs values (an invertible warp) cannot run here.
    _check_image(image, "image")
    torch._check(
        image.dtype in (torch.float32, torch.float64, torch.uint8),
        lambda: (
            "warp_perspective: image dtype must be float32, float64 or uint8, got "
            f"{_dtype_name(image.dtype)}"
        ),
    )
    torch._check(
        image.shape[-1] > 0 and image.shape[-2] > 0,
        lambda: (
            f"warp_perspective: image must have at least one pixel, got shape {list(image.shape)}"
        ),
    )
    _check_warp(image, "image", warp)
    _check_mode("interpolation", interpolation)
    _check_mode("padding_mode", padding_mode)
    if dsize is None:
        out_h, out_w = image.shape[-2], image.shape[-1]
    else:
        torch._check(
            len(dsize) == 2 and dsize[0] > 0 and dsize[1] > 0,
            lambda: (
                "warp_perspective: dsize must be (out_h, out_w) with both positive, got "
                f"{list(dsize)}"
            ),
        )
        out_h, out_w = dsize
        planes = image.numel() // (image.shape[-2] * image.shape[-1])
        torch._check(
            out_h * out_w * planes * image.element_size() < 2**62,
            lambda: (
                f"warp_perspective: dsize {list(dsize)} makes an output of {planes} planes of "
                f"{out_h} x {out_w} pixels, more bytes than a tensor can hold"
            ),
        )
    return image.new_empty((*image.shape[:-2], out_h, out_w))


# The per-backend CPU ops (the wrapper's backend argument) have the public op's checks and
# shapes.
torch.library.register_fake("warp_perspective::_warp_perspective_builtin")(_warp_perspective_fake)
torch.library.register_fake("warp_perspective::_warp_perspective_opencv")(_warp_perspective_fake)


@torch.library.register_fake("warp_perspective::warp_perspective_backward")
def _warp_perspective_backward_fake(
    grad_output: torch.Tensor,
    warp: torch.Tensor,
    image_size: list[int],
    interpolation: str,
    padding_mode: str,
) -> torch.Tensor:
    # check_backward in csrc/warp_perspective.cpp.
    _check_image(grad_output, "grad_output")
    torch._check(
        grad_output.dtype in (torch.float32, torch.float64),
        lambda: (
            "warp_perspective_backward: grad_output dtype must be float32 or float64, got "
            f"{_dtype_name(grad_output.dtype)}"
        ),
    )
    dim = grad_output.dim()
    torch._check(
        len(image_size) == dim
        and all(image_size[i] == grad_output.shape[i] for i in range(dim - 2))
        and image_size[-2] > 0
        and image_size[-1] > 0,
        lambda: (
            f"warp_perspective_backward: image_size {list(image_size)} does not fit "
            f"grad_output of shape {list(grad_output.shape)} (same rank and leading dims, "
            "positive H and W)"
        ),
    )
    image_bytes = grad_output.element_size()
    for size in image_size:
        image_bytes *= size
    torch._check(
        image_bytes < 2**62,
        lambda: (
            f"warp_perspective_backward: image_size {list(image_size)} is more bytes than a "
            "tensor can hold"
        ),
    )
    _check_warp(grad_output, "grad_output", warp)
    _check_mode("interpolation", interpolation)
    _check_mode("padding_mode", padding_mode)
    return grad_output.new_empty(image_size)

"""The typed wrapper of ``torch.ops.warp_perspective.warp_perspective``, and the parts of
the op the stable ABI leaves to Python: the fake kernels and autograd.

The op library (csrc/) is built on LibTorch's stable ABI, which has neither C++ autograd
nor symbolic sizes. So:

- The real kernels (C++) check their arguments on concrete sizes, whoever calls them:
  Python, a TorchScript model, a C++ program (csrc/checks.h).
- The fake kernels here, which ``torch.compile``, ``torch.export`` and the meta device run
  instead of the real ones, check the same things over symbolic sizes and say the same
  words; tests/test_warp_perspective.py sends every bad input through both and compares the
  messages, so the two copies cannot drift apart.
- Autograd is registered here (shared_build's stable_op helper). A process that only
  loads the library (``torch.ops.load_library``, a C++ program) runs the op but does not
  differentiate it; ``import warp_perspective`` adds the gradients.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import List, Optional  # noqa: UP035  (TorchScript reads these annotations)

import torch

from ._build_info import c10_name
from ._library import cuda_library_path
from ._stable_op import below_autograd, register

__all__ = ["backend", "build_config", "warp_perspective"]

_NS = "warp_perspective"
_FORWARD_OPS = ("warp_perspective", "_warp_perspective_builtin", "_warp_perspective_opencv")


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
    image (float32 or float64 for uint8). Must be invertible: on the CPU a singular or
    non-finite matrix raises; on CUDA its image comes out as zeros (checking there would
    synchronise with the GPU on every call).
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
    """What the loaded op library was built with (cpu_backend, cpu_default, opencv,
    cxx11_abi), whether its CUDA kernels are loaded (cuda: "yes" or "no"; cuda_off: why
    not under a CUDA torch, else ""), and the CPU loops it runs on this machine
    (cpu_level: "avx512", "avx2" or "portable")."""
    from . import _library

    config = parse_build_config(torch.ops.warp_perspective._build_config())
    off = _library.cuda_kernels_off
    config["cuda"] = "yes" if cuda_library_path() is not None and not off else "no"
    config["cuda_off"] = off or ""
    return config


def parse_build_config(text: str) -> dict[str, str]:
    """The dict of ``torch.ops.warp_perspective._build_config()``'s "key=value" lines (the
    stable ABI returns no Dict)."""
    return dict(line.split("=", 1) for line in text.splitlines() if line)


def backend() -> str:
    """The CPU backends the library was built with: "opencv" (OpenCV and the built-in
    kernel) or "builtin" (the built-in kernel only).

    The public op uses ``build_config()["cpu_default"]`` ("builtin" unless the build set
    WARP_PERSPECTIVE_OPENCV=1); ``warp_perspective(..., backend="opencv")`` picks OpenCV
    per call. float64 images, and sources wider or taller than 32000 pixels, always take
    the built-in kernel; CUDA tensors take the CUDA kernel.
    """
    return build_config()["cpu_backend"]


# ---- the checks of the fake kernels -------------------------------------------------------
# csrc/checks.h's, over symbolic sizes, in its words.

_dtype = c10_name


def _sizes(sizes: Sequence[object]) -> str:
    return "[" + ", ".join(str(s) for s in sizes) + "]"


def _fail(*parts: object) -> None:
    raise RuntimeError("".join(str(p) for p in parts))


def _fits_in_a_tensor(sizes: Sequence[object], element_size: int) -> bool:
    """Whether the sizes times element_size bytes stay below 2^62 (a deferred runtime
    assert when a size is symbolic)."""
    total: object = element_size
    for size in sizes:
        total = total * size  # type: ignore[operator]
    if isinstance(total, int):
        return total < 2**62
    torch._check(total < 2**62)  # type: ignore[operator]
    return True


def _check_image(x: torch.Tensor, name: str) -> None:
    if x.layout != torch.strided:
        _fail(f"warp_perspective: {name} must be a dense (strided) tensor, got ",
              c10_name(x.layout, "unknown"))  # fmt: skip
    if not 2 <= x.dim() <= 4:
        _fail(f"warp_perspective: {name} must be (H, W), (C, H, W) or (B, C, H, W), got a ",
              x.dim(), "-D tensor of shape ", _sizes(x.shape))  # fmt: skip


def _check_warp(x: torch.Tensor, x_name: str, warp: torch.Tensor) -> None:
    if warp.layout != torch.strided:
        _fail("warp_perspective: warp must be a dense (strided) tensor, got ",
              c10_name(warp.layout, "unknown"))  # fmt: skip
    if warp.dim() not in (2, 3) or warp.shape[-1] != 3 or warp.shape[-2] != 3:
        _fail("warp_perspective: warp must be a 3x3 matrix or a batch of them (B, 3, 3), "
              "got shape ", _sizes(warp.shape))  # fmt: skip
    if x.device != warp.device:
        _fail(f"warp_perspective: {x_name} and warp must be on the same device, got {x_name} "
              f"on {x.device} and warp on {warp.device}")  # fmt: skip
    if x.dtype == torch.uint8:
        if warp.dtype not in (torch.float32, torch.float64):
            _fail("warp_perspective: warp must be float32 or float64 for a uint8 image, got ",
                  _dtype(warp.dtype))  # fmt: skip
    elif warp.dtype != x.dtype:
        _fail(f"warp_perspective: {x_name} and warp must have the same dtype, got {x_name} ",
              _dtype(x.dtype), " and warp ", _dtype(warp.dtype),
              f" (convert one, e.g. warp.to({x_name}.dtype))")  # fmt: skip
    batch = x.shape[0] if x.dim() == 4 else 1
    if warp.dim() == 3 and warp.shape[0] != batch:
        _fail("warp_perspective: batch sizes differ: warp holds ", warp.shape[0],
              " matrices (shape ", _sizes(warp.shape), f") but {x_name} has batch size ",
              batch, " (shape ", _sizes(x.shape), "); pass one matrix per image, or a "
              "single (3, 3) matrix for all of them")  # fmt: skip


def _check_modes(interpolation: str, padding_mode: str) -> None:
    if interpolation not in ("bilinear", "nearest"):
        _fail('warp_perspective: interpolation must be "bilinear" or "nearest", got "',
              interpolation, '"')  # fmt: skip
    if padding_mode not in ("zeros", "border"):
        _fail('warp_perspective: padding_mode must be "zeros" or "border", got "',
              padding_mode, '"')  # fmt: skip


def check_forward(
    image: torch.Tensor,
    warp: torch.Tensor,
    dsize: Sequence[object] | None,
    interpolation: str,
    padding_mode: str,
) -> None:
    """csrc/checks.h's check_forward over symbolic sizes."""
    _check_image(image, "image")
    if image.dtype not in (torch.float32, torch.float64, torch.uint8):
        _fail("warp_perspective: image dtype must be float32, float64 or uint8, got ",
              _dtype(image.dtype))  # fmt: skip
    if image.shape[-1] <= 0 or image.shape[-2] <= 0:
        _fail("warp_perspective: image must have at least one pixel, got shape ",
              _sizes(image.shape))  # fmt: skip
    _check_warp(image, "image", warp)
    _check_modes(interpolation, padding_mode)
    if dsize is not None:
        d = list(dsize)
        if len(d) != 2 or d[0] <= 0 or d[1] <= 0:  # type: ignore[operator]
            _fail("warp_perspective: dsize must be (out_h, out_w) with both positive, got ",
                  _sizes(d))  # fmt: skip
        planes = image.numel() // (image.shape[-1] * image.shape[-2])
        if not _fits_in_a_tensor([d[0], d[1], planes], image.element_size()):
            _fail("warp_perspective: dsize ", _sizes(d), " makes an output of ", planes,
                  " planes of ", d[0], " x ", d[1], " pixels, more bytes than a tensor can "
                  "hold")  # fmt: skip


def check_backward(
    grad_output: torch.Tensor,
    warp: torch.Tensor,
    image_size: Sequence[object],
    interpolation: str,
    padding_mode: str,
) -> None:
    """csrc/checks.h's check_backward over symbolic sizes."""
    _check_image(grad_output, "grad_output")
    if grad_output.dtype not in (torch.float32, torch.float64):
        _fail("warp_perspective_backward: grad_output dtype must be float32 or float64, got ",
              _dtype(grad_output.dtype))  # fmt: skip
    dim = grad_output.dim()
    size = list(image_size)
    fits = len(size) == dim and all(size[i] == grad_output.shape[i] for i in range(dim - 2))
    if not (fits and size[dim - 2] > 0 and size[dim - 1] > 0):  # type: ignore[operator]
        _fail("warp_perspective_backward: image_size ", _sizes(size), " does not fit "
              "grad_output of shape ", _sizes(grad_output.shape), " (same rank and leading "
              "dims, positive H and W)")  # fmt: skip
    if not _fits_in_a_tensor(size, grad_output.element_size()):
        _fail("warp_perspective_backward: image_size ", _sizes(size),
              " is more bytes than a tensor can hold")  # fmt: skip
    _check_warp(grad_output, "grad_output", warp)
    _check_modes(interpolation, padding_mode)


# ---- fake kernels ------------------------------------------------------------------------
# The one check that needs values (an invertible warp) cannot run here.


def _forward_fake(image, warp, dsize=None, interpolation="bilinear", padding_mode="zeros"):
    check_forward(image, warp, dsize, interpolation, padding_mode)
    sizes = list(image.shape)
    if dsize is not None:
        sizes[-2:] = list(dsize)
    return image.new_empty(sizes)


def _backward_fake(grad_output, warp, image_size, interpolation, padding_mode):
    check_backward(grad_output, warp, image_size, interpolation, padding_mode)
    return grad_output.new_empty(list(image_size))


# ---- autograd ----------------------------------------------------------------------------
# The forward is a linear map of the image (fixed weights per output pixel), so the
# gradient with respect to the image is its adjoint, warp_perspective_backward; that in
# turn is linear in grad_output with the forward as its adjoint, which gives double
# backward. Every CPU backend samples the same positions (OpenCV rounds them to 1/32
# pixel), so all share one gradient: the adjoint of exact sampling.

_NO_WARP_GRAD = (
    "warp_perspective: the gradient with respect to warp is not supported; pass "
    "warp.detach() (or a warp that does not require grad)"
)


def _alert_not_deterministic(grad: torch.Tensor) -> None:
    """torch.use_deterministic_algorithms' alert for the CUDA backward (atomic adds), which
    the full ABI raises in C++ and the stable ABI cannot reach."""
    if not (grad.is_cuda and torch.are_deterministic_algorithms_enabled()):
        return
    message = (
        "warp_perspective_backward_cuda does not have a deterministic implementation, but "
        "you set 'torch.use_deterministic_algorithms(True)'. You can turn off determinism "
        "just for this operation, or you can use the 'warn_only=True' option"
    )
    if torch.is_deterministic_algorithms_warn_only_enabled():
        warnings.warn(message, stacklevel=3)
    else:
        raise RuntimeError(message)


class _WarpFunction(torch.autograd.Function):
    """The graph node of either op. The two are each other's adjoint (both linear in their
    first argument): the backward of a forward op is warp_perspective_backward, and the
    backward of that (double backward) is warp_perspective."""

    @staticmethod
    def forward(ctx, keyset, op, is_forward, x, warp, size, interpolation, padding_mode):
        ctx.save_for_backward(warp)
        ctx.is_forward = is_forward
        # The adjoint's size argument: warp_perspective_backward takes the image's whole
        # shape, warp_perspective the plane of its output (dsize).
        ctx.adjoint_size = list(x.shape) if is_forward else list(x.shape[-2:])
        ctx.modes = (interpolation, padding_mode)
        return below_autograd(op, keyset, x, warp, size, interpolation, padding_mode)

    @staticmethod
    def backward(ctx, grad):
        if ctx.needs_input_grad[4]:
            raise RuntimeError(_NO_WARP_GRAD)
        grad_x = None
        if ctx.needs_input_grad[3]:
            (warp,) = ctx.saved_tensors
            if ctx.is_forward:
                _alert_not_deterministic(grad)
                adjoint = torch.ops.warp_perspective.warp_perspective_backward
            else:
                adjoint = torch.ops.warp_perspective.warp_perspective
            grad_x = adjoint(grad, warp, ctx.adjoint_size, *ctx.modes)
        return None, None, None, grad_x, None, None, None, None


def _recording(op, is_forward: bool):
    """The autograd callable of `op`: one graph node for either op."""

    def record(keyset, x, warp, size, interpolation, padding_mode):
        return _WarpFunction.apply(
            keyset, op, is_forward, x, warp, size, interpolation, padding_mode
        )

    return record


# No Python check in eager calls: the C++ kernels check every call (their callers include
# TorchScript and C++ programs), in the words of the fake kernels' checks above.
for _name in _FORWARD_OPS:
    register(
        f"{_NS}::{_name}",
        fake=_forward_fake,
        autograd=_recording(getattr(torch.ops.warp_perspective, _name).default, True),
    )
register(
    f"{_NS}::warp_perspective_backward",
    fake=_backward_fake,
    autograd=_recording(torch.ops.warp_perspective.warp_perspective_backward.default, False),
)

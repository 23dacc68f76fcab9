"""warp_perspective's ops as the test battery sees them (shared_build.battery): samples,
the reference (warp_reference.py), tolerances, bad calls, the fuzzer's extra breakages and
the property strategy. test_warp_perspective.py runs battery(OPS) and keeps what only this
package has (OpenCV, the CPU levels, the C++ and Python checks' one sentence, CUDA grids,
streams and 2^31 elements).

The ops: warp_perspective (the public op), _warp_perspective_builtin and, in a build with
OpenCV, _warp_perspective_opencv (the CPU kernels warp_perspective(..., backend=...) picks),
and warp_perspective_backward (the adjoint, also the public op's gradient).
_build_config takes no tensor: test_backend_reports_the_build checks it.
"""

from __future__ import annotations

import itertools
from dataclasses import replace
from typing import Any

import torch
from warp_inputs import FAMILIES, homography_family, random_homography, random_image, warp_dtype
from warp_reference import reference_and_ties

import warp_perspective
from shared_build.battery import Bad, OpTest, Sample
from shared_build.battery.checks import of_grad_inputs

MODES = list(itertools.product(["bilinear", "nearest"], ["zeros", "border"]))
DTYPES = ("float32", "float64", "uint8")
VIEWS = ("channels_last", "transposed", "sliced", "expanded")
HAVE_OPENCV = warp_perspective.backend() == "opencv"
OPENCV_DEFAULT = warp_perspective.build_config()["cpu_default"] == "opencv"
# The valid call the fuzzer breaks (each op's first float32 sample), as tests/test_robustness.py
# had it: dsize given, so any image size is valid.
FUZZ_WARP = [[1.0, 0.1, 2.0], [0.0, 0.9, -1.0], [1e-3, 0.0, 1.0]]
# A warp for the larger samples (threads, memory), as tests/test_robustness.py had it.
THREADS_WARP = [[0.95, 0.1, 3.0], [-0.05, 1.02, -2.0], [2e-4, 1e-4, 1.0]]


# ---- what the battery calls ---------------------------------------------------------------
# The battery differentiates every floating tensor argument; warp_perspective refuses a
# gradient for warp (test_gradient_with_respect_to_warp_is_refused). So fn and the
# reference hold warp constant, and the reference's results come back on the samples'
# device (the battery's backward check seeds the reference's gradients there).


def _constant(warp: Any) -> Any:
    return warp.detach() if isinstance(warp, torch.Tensor) else warp


def forward_fn(kind: str):
    """What users call for kind: warp_perspective(..., backend=None/"builtin"/"opencv")."""
    backend = None if kind == "public" else kind

    def fn(image, warp, dsize=None, interpolation="bilinear", padding_mode="zeros"):
        return warp_perspective.warp_perspective(
            image, _constant(warp), dsize, interpolation, padding_mode, backend=backend
        )

    return fn


def backward_fn(grad_output, warp, image_size, interpolation, padding_mode):
    return torch.ops.warp_perspective.warp_perspective_backward(
        grad_output, _constant(warp), image_size, interpolation, padding_mode
    )


def reference(image, warp, dsize=None, interpolation="bilinear", padding_mode="zeros"):
    """warp_reference.py's result, on the image's device."""
    result, _ = reference_and_ties(image, _constant(warp), dsize, interpolation, padding_mode)
    return result.to(image.device)


def backward_reference(grad_output, warp, image_size, interpolation, padding_mode):
    """The adjoint of the reference: its vector-Jacobian product with grad_output, in
    float64 (differentiable in grad_output: its gradient is the forward)."""
    image = torch.zeros(list(image_size), dtype=torch.float64, requires_grad=True)
    grad = grad_output.double().cpu()
    dsize = tuple(grad_output.shape[-2:])
    out, _ = reference_and_ties(image, _constant(warp), dsize, interpolation, padding_mode)
    if out.grad_fn is None:  # an empty batch: nothing to scatter
        return torch.zeros(list(image_size), dtype=grad_output.dtype, device=grad_output.device)
    (result,) = torch.autograd.grad(out, image, grad, create_graph=grad.requires_grad)
    return result.to(grad_output.device, grad_output.dtype)


def rounds(kind: str) -> bool:
    """Whether kind's CPU kernel is OpenCV's, which rounds bilinear source coordinates to
    1/32 pixel for float32 and uint8 images (float64 takes the built-in kernel)."""
    return kind == "opencv" or (kind == "public" and OPENCV_DEFAULT)


def tolerance(kind: str):
    def tol(dtype: torch.dtype) -> dict[str, float]:
        # float32: weights in float32, four products summed: a few ulp of the range.
        # uint8: the float32 sum can land on the other side of .5 from the float64 one.
        # OpenCV's 1/32-pixel coordinates: up to R/32 (see test_warp_perspective.py).
        if rounds(kind) and dtype != torch.float64:
            return {"atol": 1 / 32 + 1e-6 if dtype == torch.float32 else 255 / 32 + 1, "rtol": 0}
        return {
            torch.float64: {"atol": 1e-10, "rtol": 0},
            torch.float32: {"atol": 2e-6, "rtol": 0},
            torch.uint8: {"atol": 1, "rtol": 0},
        }[dtype]

    return tol


def gradient_tolerance(dtype: torch.dtype) -> dict[str, float]:
    """Of a gradient (the backward op's result): each pixel sums the weighted gradients of
    every output pixel that read it, and float32 rounds each addition; border padding
    gathers a whole margin onto the edge pixels (sums of 30 to 50 with cancellation)."""
    return {
        torch.float64: {"atol": 1e-10, "rtol": 1e-10},
        torch.float32: {"atol": 1e-4, "rtol": 1e-5},
    }[dtype]


# ---- samples -------------------------------------------------------------------------------


class _Maker:
    """Tensors for one (device, dtype): images that require grad where floating (float64
    ones serve gradcheck), matrices in the dtype a warp of such an image takes."""

    def __init__(self, device: str, dtype: torch.dtype, seed: int) -> None:
        self.device, self.dtype = device, dtype
        self.g = torch.Generator().manual_seed(seed)
        self.grad = dtype.is_floating_point

    def image(self, shape, view: str = "contiguous") -> torch.Tensor:
        if view == "sliced":  # an offset and strides over a larger image
            b, c, h, w = shape
            t = random_image((b, c + 2, h + 9, w + 14), self.dtype, self.g, self.device)
            t = t[:, 1 : c + 1, 3 : h + 3, 5 : w + 5]
        else:
            t = random_image(shape, self.dtype, self.g, self.device)
            if view == "channels_last":
                t = t.to(memory_format=torch.channels_last)
            elif view == "transposed":
                t = t.transpose(-1, -2).contiguous().transpose(-1, -2)
            elif view == "expanded":  # one image for the batch: stride 0
                return t[:1].expand(shape)  # overlapping memory: gradcheck cannot take it
        return t.requires_grad_(self.grad)

    def warp(self, values, dtype: torch.dtype | None = None) -> torch.Tensor:
        m = values if isinstance(values, torch.Tensor) else torch.tensor(values)
        return m.to(self.device, dtype or warp_dtype(self.dtype))

    def homographies(self, n: int | None, scale: float = 1.0) -> torch.Tensor:
        """One random homography (n None) or a batch of n."""
        if n is None:
            return self.warp(random_homography(self.g, scale))
        return self.warp(torch.stack([random_homography(self.g, scale) for _ in range(n)]))


def forward_samples(kind: str):
    """The forward samples of kind: what the package's tests called by hand before the
    battery (modes, dsize given or not, ranks, per-image and shared matrices, views, empty
    batches, non-finite pixels, w = 0 inside the output, the homography families on images
    wide enough for the AVX-512 windows)."""

    def samples(device: str, dtype: torch.dtype) -> list[Sample]:
        make, cases = _Maker(device, dtype, seed=15), []

        def add(name: str, *args: Any, special: bool = False) -> None:
            cases.append(Sample(args, name=name, special=special))

        # The fuzzer's valid call (the first float32 sample).
        add("one warp, dsize [7, 13]", make.image((2, 3, 9, 11)), make.warp(FUZZ_WARP), [7, 13])
        # Every mode on small images, a warp per image: the float64 ones are gradcheck's.
        for modes in MODES:
            args = (make.image((2, 2, 7, 9)), make.homographies(2, scale=0.5), [6, 10])
            add(f"small, {', '.join(modes)}", *args, *modes)
        # Larger distortions: many pixels sample outside the image; dsize given and not.
        for dsize, modes in itertools.product(([19, 40], None), MODES):
            args = (make.image((2, 2, 23, 31)), make.homographies(2, scale=3.0), dsize)
            add(f"strong warps, dsize {dsize}, {', '.join(modes)}", *args, *modes)
        # Ranks: (C, H, W) and (H, W) with a (3, 3) warp, (C, H, W) with a (1, 3, 3) one.
        m = make.homographies(None)
        add("(C, H, W)", make.image((3, 20, 24)), m, [18, 30])
        add("(H, W)", make.image((20, 24)), m, [18, 30])
        add("(C, H, W), (1, 3, 3) warp", make.image((3, 20, 24)), m[None], [18, 30])
        # One matrix per image, one shared (3, 3), one expanded to (B, 3, 3) (stride 0).
        images, mats = make.image((4, 2, 16, 16)), make.homographies(4)
        add("a warp per image", images, mats)
        add("one warp shared", images, mats[1])
        add("one warp expanded", images, mats[1].expand(4, 3, 3))
        # Every mode on each layout.
        for view, modes in itertools.product(VIEWS, MODES):
            add(
                f"{view}, {', '.join(modes)}", make.image((2, 3, 21, 26), view), m, (19, 28), *modes
            )
        # Empty batch and channels; a one-pixel image.
        eye = make.warp(torch.eye(3))
        add("empty batch", make.image((0, 3, 5, 5)), eye, [4, 6])
        add("no channels", make.image((2, 0, 5, 5)), eye, [4, 6])
        add("one pixel", make.image((1, 1, 1, 1)), eye, [3, 3], "bilinear", "border")
        # A 1e-4 zoom: a tiny determinant but independent rows, not singular.
        zoom = torch.diag(torch.tensor([1e-4, 1e-4, 1.0], dtype=torch.float64))
        add("1e-4 zoom, not singular", make.image((8, 8)), make.warp(zoom))
        if dtype == torch.uint8:  # a float32 warp serves a uint8 image too
            warp32 = make.warp(FUZZ_WARP, torch.float32)
            add("uint8 image, float32 warp", make.image((2, 3, 9, 11)), warp32)
        if dtype.is_floating_point:
            # inf and NaN pixels must not leak into pixels whose taps all lie outside, even
            # where a kernel reads a stand-in element.
            image = torch.ones(1, 1, 16, 16, dtype=dtype, device=device)
            image[..., 0, 0], image[..., 0, 1] = float("inf"), float("nan")
            shift = make.warp([[1.0, 0, 20.5], [0, 1, 20.5], [0, 0, 1]])
            for mode in ("bilinear", "nearest"):
                name = f"inf and NaN pixels, every tap outside, {mode}"
                add(name, image, shift, None, mode, "zeros", special=True)
        if dtype == torch.float64:
            # M^-1 = [[1,0,0],[0,1,0],[1,0,-5]]: w = x - 5 is 0 on column 5, which OpenCV
            # maps to source (0, 0) instead of infinity. float64: the exact zero needs it.
            inv = torch.tensor([[1.0, 0, 0], [0, 1, 0], [1, 0, -5]], dtype=torch.float64)
            for modes in MODES:
                args = (make.image((9, 11)), make.warp(torch.linalg.inv(inv)), None)
                add(f"w = 0 on column 5, {', '.join(modes)}", *args, *modes)
        # The homography families on images wide enough (32 columns and more) for the
        # AVX-512 kernel to load windows of rows rather than gather, output widths that
        # are not a multiple of 16, an image exactly one window wide, one two rows tall.
        # Every size for the built-in kernel; the first for the others.
        sizes = (((37, 70), [41, 77]), ((20, 32), [19, 33]), ((2, 40), [3, 45]))
        for ((h, w), dsize), family, modes in itertools.product(
            sizes if kind == "builtin" else sizes[:1], FAMILIES, MODES
        ):
            args = (make.image((2, 3, h, w)), make.warp(homography_family(family, h, w)), dsize)
            add(f"{family}, {h}x{w} -> {dsize}, {', '.join(modes)}", *args, *modes)
        # The largest sample (the threads check's): the public op in one pair of modes,
        # the built-in kernel in the other, as tests/test_robustness.py had them.
        modes = ("bilinear", "zeros") if kind == "public" else ("nearest", "border")
        args = (make.image((2, 3, 64, 96)), make.warp(THREADS_WARP), [70, 90])
        add(f"64x96 -> 70x90, {', '.join(modes)}", *args, *modes)
        return cases

    return samples


def backward_samples(device: str, dtype: torch.dtype) -> list[Sample]:
    """grad_output in every mode, rank and view, a warp per image or shared, empty."""
    make, cases = _Maker(device, dtype, seed=16), []

    def add(name: str, *args: Any) -> None:
        cases.append(Sample(args, name=name))

    # The fuzzer's valid call (the first float32 sample): any grad_output size is valid.
    add("one warp", make.image((2, 3, 7, 13)), make.warp(FUZZ_WARP), [2, 3, 9, 11], *MODES[0])
    for modes in MODES:
        # Tiny ones for gradcheck (the gradient of the backward is the forward).
        args = (make.image((1, 2, 4, 5)), make.homographies(None, scale=0.5), [1, 2, 5, 4])
        add(f"tiny, {', '.join(modes)}", *args, *modes)
        args = (make.image((2, 3, 7, 8)), make.homographies(None), [2, 3, 9, 6])
        add(f"small, {', '.join(modes)}", *args, *modes)
        args = (make.image((3, 2, 33, 21)), make.homographies(3, scale=2.0), [3, 2, 30, 25])
        add(f"strong warps per image, {', '.join(modes)}", *args, *modes)
    m = make.homographies(None)
    add("(C, H, W)", make.image((3, 7, 13)), m, [3, 9, 11], "bilinear", "border")
    add("(H, W)", make.image((7, 13)), m, [9, 11], "nearest", "zeros")
    args = (make.image((4, 2, 16, 16)), m.expand(4, 3, 3), [4, 2, 15, 17])
    add("one warp expanded", *args, "bilinear", "zeros")
    for view in VIEWS:
        args = (make.image((2, 3, 19, 28), view), m, [2, 3, 21, 26])
        add(f"{view} grad_output", *args, "bilinear", "border")
    add("empty batch", make.image((0, 3, 4, 6)), m, [0, 3, 5, 5], "bilinear", "zeros")
    args = (make.image((2, 3, 64, 96)), make.warp(THREADS_WARP), [2, 3, 70, 90])
    add("64x96 from 70x90", *args, "bilinear", "zeros")
    return cases


# ---- bad calls -----------------------------------------------------------------------------

# (image, warp, kwargs, message) on a device d; the singular and non-finite warps need
# values, which only the real kernels have (on CUDA they give zeros instead: see
# test_singular_or_non_finite_warp_gives_zeros_on_cuda_without_a_sync).
BAD_INPUTS = {
    "1-D": (lambda d: (torch.rand(5, device=d), torch.eye(3, device=d)), {}, r"\(H, W\), \(C, H, W\) or \(B, C, H, W\), got a 1-D tensor of shape \[5\]"),
    "5-D": (lambda d: (torch.rand(1, 1, 1, 4, 4, device=d), torch.eye(3, device=d)), {}, "got a 5-D tensor"),
    "warp-2x2": (lambda d: (torch.rand(4, 4, device=d), torch.eye(2, device=d)), {}, r"warp must be a 3x3 matrix or a batch of them \(B, 3, 3\), got shape \[2, 2\]"),
    "warp-4-D": (lambda d: (torch.rand(4, 4, device=d), torch.rand(1, 1, 3, 3, device=d)), {}, r"got shape \[1, 1, 3, 3\]"),
    "batch-3-vs-2": (lambda d: (torch.rand(2, 1, 4, 4, device=d), torch.eye(3, device=d).repeat(3, 1, 1)), {}, r"batch sizes differ: warp holds 3 matrices .* image has batch size 2"),
    "batch-unbatched-image": (lambda d: (torch.rand(1, 4, 4, device=d), torch.eye(3, device=d).repeat(2, 1, 1)), {}, "batch sizes differ: warp holds 2 matrices .* batch size 1"),
    "dsize-0": (lambda d: (torch.rand(4, 4, device=d), torch.eye(3, device=d)), {"dsize": [0, 5]}, r"dsize must be \(out_h, out_w\) with both positive, got \[0, 5\]"),
    "dsize-negative": (lambda d: (torch.rand(4, 4, device=d), torch.eye(3, device=d)), {"dsize": [4, -1]}, r"got \[4, -1\]"),
    "dsize-length": (lambda d: (torch.rand(4, 4, device=d), torch.eye(3, device=d)), {"dsize": [4]}, r"got \[4\]"),
    # Not square: a plane count taken from the wrong sides (numel / (w * w) is 0 here) lets the
    # check pass and the allocator fail with no word of dsize.
    "dsize-huge": (lambda d: (torch.rand(3, 2, 8, device=d), torch.eye(3, device=d)), {"dsize": [2**31, 2**31]}, "makes an output of 3 planes of 2147483648 x 2147483648 pixels, more bytes than a tensor can hold"),
    "interpolation": (lambda d: (torch.rand(4, 4, device=d), torch.eye(3, device=d)), {"interpolation": "cubic"}, 'interpolation must be "bilinear" or "nearest", got "cubic"'),
    "padding": (lambda d: (torch.rand(4, 4, device=d), torch.eye(3, device=d)), {"padding_mode": "reflect"}, 'padding_mode must be "zeros" or "border", got "reflect"'),
    "dtype-mixed": (lambda d: (torch.rand(4, 4, device=d), torch.eye(3, device=d, dtype=torch.float64)), {}, "image and warp must have the same dtype, got image Float and warp Double"),
    "warp-half": (lambda d: (torch.randint(0, 9, (4, 4), device=d, dtype=torch.uint8), torch.eye(3, device=d, dtype=torch.float16)), {}, "warp must be float32 or float64 for a uint8 image, got Half"),
    "image-int64": (lambda d: (torch.ones(4, 4, device=d, dtype=torch.int64), torch.eye(3, device=d)), {}, "image dtype must be float32, float64 or uint8, got Long"),
    "image-half": (lambda d: (torch.ones(4, 4, device=d, dtype=torch.float16), torch.eye(3, device=d, dtype=torch.float16)), {}, "got Half"),
    "no-pixels": (lambda d: (torch.rand(3, 0, 4, device=d), torch.eye(3, device=d)), {}, r"at least one pixel, got shape \[3, 0, 4\]"),
}  # fmt: skip
BAD_MATRICES = {
    "dependent-rows": ([[1.0, 2, 3], [2, 4, 6], [0, 0, 1]], r"warp matrix 0 is singular .*\[\[1, 2, 3\], \[2, 4, 6\], \[0, 0, 1\]\]"),
    "zero-row": ([[0.0, 0, 0], [0, 1, 0], [0, 0, 1]], "warp matrix 0 is singular"),
    "nan": ([[1.0, 0, float("nan")], [0, 1, 0], [0, 0, 1]], "warp matrix 0 has a non-finite entry"),
    "inf": ([[1.0, 0, 0], [0, float("inf"), 0], [0, 0, 1]], "warp matrix 0 has a non-finite entry"),
}  # fmt: skip
# (grad_output shape, image_size, dtype, message) of warp_perspective_backward.
BAD_BACKWARD = {
    "lead": ((2, 5, 5), [3, 5, 5], torch.float32, r"image_size \[3, 5, 5\] does not fit grad_output"),
    "rank": ((2, 5, 5), [5, 5], torch.float32, r"image_size \[5, 5\] does not fit grad_output"),
    "dtype": ((5, 5), [5, 5], torch.uint8, "grad_output dtype must be float32 or float64"),
    "huge": ((5, 5), [2**40, 2**40], torch.float32, "more bytes than a tensor can hold"),
}  # fmt: skip


_OTHER = {"cpu": "meta", "meta": "cpu", "cuda": "cpu"}  # a device to mix with


def bad_forward(device: str) -> list[Bad]:
    """The forward's bad calls on device ("meta": the fake kernel, which must say what the
    C++ checks say), mixed devices, and on the CPU the singular and non-finite warps (the
    matrix's index named, alone and in a batch)."""
    calls = []
    for name, (make, kwargs, message) in BAD_INPUTS.items():
        calls.append(Bad(make(device), message, kwargs, name=f"{name} on {device}"))
    image, warp = torch.rand(4, 4, device=device), torch.eye(3, device=_OTHER[device])
    calls.append(
        Bad(
            (image, warp),
            f"image and warp must be on the same device, got image on "
            f"{image.device} and warp on {warp.device}",
            name=f"image on {device}, warp not",
        )
    )
    if device == "cpu":  # CUDA writes zeros for such a warp instead (no synchronisation)
        for name, (matrix, message) in BAD_MATRICES.items():
            m = torch.tensor(matrix, device=device)
            image = torch.rand(2, 1, 4, 4, device=device)
            calls.append(Bad((image, m), message, name=name))
            batch = torch.stack([torch.eye(3, device=device), m])
            calls.append(
                Bad(
                    (image, batch),
                    message.replace("matrix 0", "matrix 1"),
                    name=f"{name}, second of a batch",
                )
            )
    return calls


def bad_backward(device: str) -> list[Bad]:
    calls = []
    for name, (shape, image_size, dtype, message) in BAD_BACKWARD.items():
        grad = torch.ones(shape, dtype=dtype, device=device)
        args = (grad, torch.eye(3, device=device), image_size, "bilinear", "zeros")
        calls.append(Bad(args, message, name=f"{name} on {device}"))
    return calls


# ---- the fuzzer ------------------------------------------------------------------------------

FORWARD_FUZZ = (
    ("warp", "torch.eye(4)"),
    ("warp", "torch.eye(3)[:2]"),
    ("warp", "torch.eye(3).expand(3, 3, 3)"),  # batch of 3 for 2 images
    ("warp", "torch.full((3, 3), float('nan'))"),
    ("warp", "torch.tensor([[1.0, 0, float('inf')], [0, 1, 0], [0, 0, 1]])"),
    ("warp", "torch.zeros(3, 3)"),  # not invertible
    ("image", "image.to(torch.int32)"),
    ("image", "image[..., :0, :]"),  # no rows to sample from
    ("image", "image.unsqueeze(0).unsqueeze(0)"),
    ("dsize", "[-1, 5]"),
    ("dsize", "[5, -3]"),
    ("dsize", "[2**40, 2**40]"),
    ("dsize", "[5]"),
    ("dsize", "[5, 5, 5]"),
    ("interpolation", "'bicubic'"),
    ("padding_mode", "'reflect'"),
)
# The ops have no sparse kernel: the dispatcher refuses a sparse tensor before any check of
# ours runs, naming the op and the layout but not the argument.
SPARSE_GAP = {
    r":sparse_coo$": r"Could not run '\w+::\w+' with arguments from the 'Sparse\w*' backend"
}
BACKWARD_FUZZ = (
    ("image_size", "[2, 3, -1, 11]"),
    ("image_size", "[9, 11]"),
    ("image_size", "[2, 3, 2**40, 2**40]"),
    ("warp", "torch.eye(4)"),
    ("warp", "torch.full((3, 3), float('nan'))"),
    ("interpolation", "'area'"),
)


# ---- properties ------------------------------------------------------------------------------


def homographies(h: int, w: int):
    """Invertible by construction: about the image centre, a rotation, scales in [0.3, 3]
    (negative: a mirror), a shear, a shift, and a mild perspective that keeps w > 0.8 over
    the output; one in five a plain shift (the kernels' window loads)."""
    from hypothesis import strategies as st

    @st.composite
    def draw(draw) -> torch.Tensor:
        angle = draw(st.floats(-3.2, 3.2))
        sx, sy = (
            draw(st.floats(0.3, 3.0)) * draw(st.sampled_from([1, 1, 1, -1])) for _ in range(2)
        )
        shear = draw(st.floats(-0.3, 0.3))
        tx, ty = draw(st.floats(-10, 10)), draw(st.floats(-10, 10))
        px, py = draw(st.floats(-2e-3, 2e-3)), draw(st.floats(-2e-3, 2e-3))
        a = torch.tensor(angle, dtype=torch.float64)
        rot = torch.tensor([[a.cos(), -a.sin(), 0], [a.sin(), a.cos(), 0], [0, 0, 1]])
        lin = torch.tensor([[sx, shear, 0], [0, sy, 0], [0, 0, 1]], dtype=torch.float64)
        c = torch.tensor(
            [[1.0, 0, (w - 1) / 2], [0, 1, (h - 1) / 2], [0, 0, 1]], dtype=torch.float64
        )
        shift = torch.tensor([[1.0, 0, tx], [0, 1, ty], [0, 0, 1]], dtype=torch.float64)
        persp = torch.tensor([[1.0, 0, 0], [0, 1, 0], [px, py, 1]], dtype=torch.float64)
        if draw(st.integers(0, 4)) == 0:
            return shift
        return persp @ shift @ c @ rot @ lin @ torch.linalg.inv(c)

    return draw()


def properties(device: str):
    """Images of rank 2 to 4, sides 1 to 40 (now and then 31, 33, 65, 70), any layout, a
    warp per image or shared, dsize drawn or none, every dtype and mode."""
    from hypothesis import strategies as st

    from shared_build import battery

    @st.composite
    def draw(draw) -> Sample:
        rank = draw(st.sampled_from([2, 3, 4]))
        h = draw(st.one_of(st.integers(1, 24), st.sampled_from([1, 2, 31, 33])))
        w = draw(st.one_of(st.integers(1, 40), st.sampled_from([1, 15, 16, 17, 32, 33, 65, 70])))
        lead = tuple(draw(st.integers(1, 3)) for _ in range(rank - 2))
        dtype = draw(st.sampled_from([torch.float32, torch.float64, torch.uint8]))
        image = draw(battery.tensors((*lead, h, w), dtype, device))
        per_image = rank == 4 and draw(st.booleans())
        mats = [draw(homographies(h, w)) for _ in range(lead[0] if per_image else 1)]
        matrix = (torch.stack(mats) if per_image else mats[0]).to(device, warp_dtype(dtype))
        dsize = draw(st.one_of(st.none(), st.tuples(st.integers(1, 30), st.integers(1, 70))))
        interpolation = draw(st.sampled_from(["bilinear", "nearest"]))
        padding_mode = draw(st.sampled_from(["zeros", "border"]))
        name = (
            f"image {list(image.shape)} {dtype} strides {image.stride()}, warp "
            f"{matrix.tolist()}, dsize {dsize}, {interpolation}, {padding_mode}"
        )
        return Sample((image, matrix, dsize, interpolation, padding_mode), name=name)

    return draw()


def property_check(kind: str):
    """A drawn call against the reference: nearest sampling equal but at ties (where the
    last bit of the inverse decides), bilinear within a few roundings (OpenCV's kernel:
    within its 1/32-pixel coordinates); a contiguous result, the same for a view as for
    its contiguous copy; for the built-in kernel in float64 the gradient too."""
    fn = forward_fn(kind)

    def check(sample: Sample, got: torch.Tensor, expected: torch.Tensor) -> None:
        image, matrix, dsize, interpolation, padding_mode = sample.args
        dtype = image.dtype
        assert got.shape == expected.shape and got.dtype == dtype and got.device == image.device
        assert got.is_contiguous(), f"a result of strides {got.stride()}"
        diff = (got.cpu().double() - expected.cpu().double()).abs()
        if interpolation == "nearest":
            # Every backend rounds the same double coordinate half to even.
            _, ties = reference_and_ties(image, matrix, dsize, interpolation, padding_mode)
            diff = diff.masked_fill(ties, 0)
            assert not diff.numel() or diff.max().item() == 0, f"{(diff != 0).sum()} pixels"
        else:
            r = max(1.0, image.double().abs().max().item()) if image.numel() else 1.0
            if rounds(kind) and image.is_cpu and dtype != torch.float64:
                scale = max(1.0, matrix.double().abs().max().item())
                bound = (255.0 if dtype == torch.uint8 else r) / 32 * (1 + scale / 8) + 1
            else:
                bound = {torch.float64: 1e-9 * r, torch.float32: 2e-5 * r, torch.uint8: 1.0}[dtype]
            assert not diff.numel() or diff.max().item() <= bound, (diff.max().item(), bound)
        if not image.is_contiguous():
            contiguous = fn(image.contiguous(), matrix, dsize, interpolation, padding_mode)
            assert torch.equal(got, contiguous), "a view gives another result than its copy"
        if kind == "builtin" and dtype == torch.float64 and image.numel() <= 2000:
            # The adjoint: the gradient against autograd through the reference.
            leaf = image.detach().requires_grad_()
            grad = torch.randn(got.shape, generator=torch.Generator().manual_seed(0), dtype=dtype)
            fn(leaf, matrix, dsize, interpolation, padding_mode).backward(grad.to(image.device))
            ref_leaf = image.detach().clone().requires_grad_()
            reference(ref_leaf, matrix, dsize, interpolation, padding_mode).backward(grad)
            torch.testing.assert_close(leaf.grad, ref_leaf.grad, rtol=1e-9, atol=1e-9)

    return check


# ---- the ops -------------------------------------------------------------------------------

# Checks the battery cannot run here yet, run by test_warp_perspective.py::test_gradients
# with what they lack (LOCAL_CHECKS below): gradcheck on every float64 sample, without the
# CUDA backward's nondeterminism allowed for; the forward's gradients within the forward's
# tolerance (a value's), where a gradient sums many.
LOCAL = "run by test_warp_perspective.py::test_gradients"
# gradcheck runs in float64, where every CPU backend runs the built-in kernel, under the one
# autograd node of ops.py: the public op's gradcheck is theirs.
SAME_GRADCHECK = "float64 takes the built-in kernel whatever the backend: the public op's"


def forward_op(kind: str) -> OpTest:
    name = {"public": "warp_perspective"}.get(kind, f"_warp_perspective_{kind}")
    return OpTest(
        name=f"warp_perspective.{name}",
        fn=forward_fn(kind),
        op=getattr(torch.ops.warp_perspective, name).default,
        samples=forward_samples(kind),
        reference=reference,
        dtypes=DTYPES,
        # The per-backend ops are CPU kernels; CUDA tensors take the public op.
        devices=("cpu", "cuda") if kind == "public" else ("cpu",),
        tolerance=tolerance(kind),
        gradgrad=True,
        bad=lambda: bad_forward("cpu") + bad_forward("meta"),
        fuzz_extra=FORWARD_FUZZ,
        fuzz_valid=frozenset({("image", "size+1")}),  # dsize is given: any image size is valid
        fuzz_gaps=SPARSE_GAP,
        properties=properties,
        check=property_check(kind),
        skip={"gradcheck": LOCAL if kind == "public" else SAME_GRADCHECK, "backward": LOCAL},
    )


OPS = [
    forward_op("public"),
    forward_op("builtin"),
    *([forward_op("opencv")] if HAVE_OPENCV else []),
    OpTest(
        name="warp_perspective.warp_perspective_backward",
        fn=backward_fn,
        op=torch.ops.warp_perspective.warp_perspective_backward.default,
        samples=backward_samples,
        reference=backward_reference,
        dtypes=("float32", "float64"),
        tolerance=gradient_tolerance,
        gradgrad=True,
        bad=lambda: bad_backward("cpu") + bad_backward("meta"),
        fuzz_extra=BACKWARD_FUZZ,
        fuzz_valid=frozenset({("grad_output", "size+1")}),  # the forward's dsize is free
        fuzz_gaps=SPARSE_GAP,
        skip={"gradcheck": LOCAL},
        nondeterministic=("cuda",),  # the image's gradient is scattered with atomic adds
    ),
]


# ---- what the battery lacks (to fold into shared_build.battery) ------------------------------


def check_gradcheck(op: OpTest, device: str, dtype: torch.dtype, most: int = 256) -> None:
    """gradcheck (and gradgradcheck where declared) on op's float64 samples on device whose
    inputs that require grad hold at most ``most`` elements in all (gradcheck's cost grows
    with their square) and no overlapping memory (which gradcheck cannot perturb). On CUDA
    with nondet_tol: the backward adds with atomics, so the last bits of a gradient vary
    between calls, which gradcheck would take for a non-reentrant backward."""
    nondet_tol = 1e-12 if device == "cuda" else 0.0
    checked = 0
    for sample in op.samples(device, dtype):
        inputs = [a for a in sample.args if isinstance(a, torch.Tensor) and a.requires_grad]
        if sample.special or not inputs or sum(a.numel() for a in inputs) > most:
            continue
        if any(0 in a.stride() and a.numel() > 1 for a in inputs):
            continue

        fn = of_grad_inputs(op, sample)
        assert torch.autograd.gradcheck(fn, inputs, nondet_tol=nondet_tol), sample.name
        if op.gradgrad:
            assert torch.autograd.gradgradcheck(fn, inputs, nondet_tol=nondet_tol), sample.name
        checked += 1
    assert checked, f"{op.name} has no float64 sample on {device} small enough for gradcheck"


def check_backward(op: OpTest, device: str, dtype: torch.dtype) -> None:
    """The battery's backward check with the tolerance of a gradient (gradient_tolerance),
    in the floating dtypes only (a uint8 image has no gradient)."""
    from shared_build.battery import checks

    checks.check_backward(replace(op, tolerance=gradient_tolerance), device, dtype)


LOCAL_CHECKS = {"gradcheck": check_gradcheck, "backward": check_backward}


def local_cases(ops: list[OpTest]) -> list[Any]:
    """(op, check, device, dtype) of the LOCAL checks, with ids and marks as the battery's."""
    import pytest

    cases = []
    for op in ops:
        for check in (c for c in LOCAL_CHECKS if op.skip.get(c) == LOCAL):
            dtypes = ["float64"] if check == "gradcheck" else ["float32", "float64"]
            for device, dtype in itertools.product(op.devices, dtypes):
                marks = [pytest.mark.cuda] if device == "cuda" else []
                ident = f"{op.name}-{check}-{device}-{dtype}"
                cases.append(pytest.param(op, check, device, dtype, id=ident, marks=marks))
    return cases


# The package's ops the battery does not run, with why (tests/test_battery_declarations.py).
NOT_DECLARED = {
    "warp_perspective::_build_config": "takes no tensor: test_backend_reports_the_build",
    **(
        {}
        if HAVE_OPENCV
        else {"warp_perspective::_warp_perspective_opencv": "this build has no OpenCV backend"}
    ),
}

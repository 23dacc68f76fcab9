"""warp_perspective: the test battery (shared_build.battery, declared in
warp_perspective_battery.py: every op against the plain-PyTorch reference of
warp_reference.py, gradients, opcheck, compile, export, bad input, fuzzing, properties,
threads, memory, CUDA against the CPU), and what only this package has:
cv2.warpPerspective (opencv-python-headless) as the oracle of the convention, the CPU
levels agreeing, the backends picked per call, the C++ and Python checks saying the same
sentence, the libraries' symbols, the CUDA kernels' grids, streams, ties and 2^31 elements.

Tolerances against cv2, and where they come from
------------------------------------------------
OpenCV up to 4.10, and every OpenCV for float64 images, samples bilinearly at source
coordinates rounded to 1/32 pixel (INTER_BITS = 5): each coordinate moves by at most 1/64
pixel, and the slope of a bilinear interpolant along an axis is at most the largest
difference between neighbouring pixels, at most the image's value range R. So

    |ours - cv2| <= (1/64 + 1/64) * R = R / 32          (plus one count for uint8)

when either side rounds. Since 4.11 (opencv/opencv#26271) cv2 samples float32 and uint8
images at unrounded float32 coordinates, which moves a coordinate by ~1e-5 pixel on these
test images: |ours - cv2| <= 1e-4 R for float32 and one count for uint8. Our built-in and
CUDA kernels never round coordinates (double precision, like the reference); the OpenCV
backend rounds as its OpenCV does (Debian's 4.6 does). Nearest sampling computes the
coordinate in double and rounds half to even everywhere, so it must agree exactly.
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from packaging.version import Version
from torch.testing import assert_close
from warp_inputs import random_homography, random_image, warp_dtype
from warp_perspective_battery import (
    BAD_BACKWARD,
    BAD_INPUTS,
    BAD_MATRICES,
    HAVE_OPENCV,
    LOCAL_CHECKS,
    MODES,
    OPENCV_DEFAULT,
    OPS,
    bad_backward,
    bad_forward,
    local_cases,
)
from warp_reference import reference, reference_and_ties

import warp_perspective
from shared_build.battery import battery
from warp_perspective import warp_perspective as warp

try:
    import cv2
except ImportError:  # the comparisons with cv2 skip, the rest runs
    cv2 = None

needs_cv2 = pytest.mark.skipif(cv2 is None, reason="needs cv2 (opencv-python-headless)")
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)]
MODE_IDS = [f"{i}-{p}" for i, p in MODES]
DTYPES = [torch.float32, torch.float64, torch.uint8]
CV2_ROUNDS_FLOAT32 = cv2 is not None and Version(cv2.__version__.split("-")[0]) < Version("4.11")
KERNELS = {
    "public": torch.ops.warp_perspective.warp_perspective.default,
    "builtin": torch.ops.warp_perspective._warp_perspective_builtin.default,
    "opencv": torch.ops.warp_perspective._warp_perspective_opencv.default,
}
# The public op and the two CPU backends picked per call (opencv only in a build with it).
KINDS = ["public", "builtin", "opencv"]


def skip_unless_runs(kind: str, device: str) -> None:
    """Skip the per-backend CPU ops where they do not apply: CUDA, or a build without OpenCV."""
    if kind != "public" and device == "cuda":
        pytest.skip(f"the {kind} kernel is a CPU kernel")
    if kind == "opencv" and not HAVE_OPENCV:
        pytest.skip("this build has no OpenCV backend (WARP_PERSPECTIVE_OPENCV=0 or not found)")


test_battery = battery(OPS)


@pytest.mark.parametrize(("op", "check", "device", "dtype"), local_cases(OPS))
def test_gradients(op, check, device, dtype):
    """The battery's gradcheck and backward checks with what the battery cannot take yet
    (warp_perspective_battery.LOCAL_CHECKS): small samples and the CUDA backward's atomics
    for gradcheck, a gradient's tolerance for the forward's gradients."""
    LOCAL_CHECKS[check](op, device, getattr(torch, dtype))


# ---- against cv2 ----------------------------------------------------------------------------


def value_range(dtype: torch.dtype) -> float:
    return 255.0 if dtype == torch.uint8 else 1.0


def cv2_warp(plane: torch.Tensor, matrix: torch.Tensor, dsize, interpolation, padding_mode):
    flags = cv2.INTER_LINEAR if interpolation == "bilinear" else cv2.INTER_NEAREST
    border = cv2.BORDER_CONSTANT if padding_mode == "zeros" else cv2.BORDER_REPLICATE
    out = cv2.warpPerspective(
        plane.cpu().numpy(),
        matrix.double().cpu().numpy(),
        (dsize[1], dsize[0]),
        flags=flags,
        borderMode=border,
        borderValue=0,
    )
    return torch.from_numpy(out)


def oracle(image, matrices, dsize, interpolation, padding_mode) -> torch.Tensor:
    """cv2.warpPerspective on every (image, channel) plane of a (B, C, H, W) batch."""
    return torch.stack(
        [
            torch.stack(
                [cv2_warp(plane, matrices[b], dsize, interpolation, padding_mode) for plane in img]
            )
            for b, img in enumerate(image)
        ]
    )


def check_against_oracle(ours, expected, dtype, interpolation, rounds: bool) -> None:
    r = value_range(dtype)
    diff = (ours.double().cpu() - expected.double()).abs()
    if interpolation == "nearest":
        assert diff.max().item() == 0, "nearest sampling must pick the pixels cv2 picks"
        return
    if rounds:
        bound = r / 32 + (1 if dtype == torch.uint8 else 1e-6)
        assert diff.max().item() <= bound, (diff.max().item(), bound)
        # The rounding error averages a quarter of its bound or less on noise images.
        assert diff.mean().item() <= r / 128
    else:
        bound = 1.0 if dtype == torch.uint8 else 1e-4 * r
        assert diff.max().item() <= bound, (diff.max().item(), bound)


def rounds_coordinates(kind: str, device: str, dtype: torch.dtype) -> bool:
    """Whether ours or cv2 rounds source coordinates to 1/32 pixel in this comparison."""
    cv2_rounds = dtype == torch.float64 or CV2_ROUNDS_FLOAT32
    ours_rounds = (
        (kind == "opencv" or (kind == "public" and OPENCV_DEFAULT))
        and device == "cpu"
        and dtype != torch.float64
    )
    return cv2_rounds or ours_rounds


@needs_cv2
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(("interpolation", "padding_mode"), MODES, ids=MODE_IDS)
def test_matches_cv2(device, kind, dtype, interpolation, padding_mode):
    skip_unless_runs(kind, device)
    g = torch.Generator().manual_seed(1234)
    for trial in range(6):
        b, c = 2, 3
        h, w = 37 + 7 * trial, 53 - 3 * trial
        dsize = (h + trial - 3, w + 5)
        image = random_image((b, c, h, w), dtype, g, device)
        matrices = torch.stack([random_homography(g) for _ in range(b)])
        ours = KERNELS[kind](
            image, matrices.to(device, warp_dtype(dtype)), dsize, interpolation, padding_mode
        )
        assert ours.shape == (b, c, *dsize) and ours.dtype == dtype
        expected = oracle(image.cpu(), matrices, dsize, interpolation, padding_mode)
        check_against_oracle(
            ours, expected, dtype, interpolation, rounds_coordinates(kind, device, dtype)
        )


@needs_cv2
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("padding_mode", ["zeros", "border"])
def test_nearest_rounds_half_to_even_like_cv2(device, padding_mode):
    # A half-pixel shift puts every source coordinate exactly on .5.
    image = torch.arange(48, dtype=torch.float32).reshape(6, 8)
    shift = torch.tensor([[1.0, 0, 0.5], [0, 1, -0.5], [0, 0, 1]])
    ours = warp(image.to(device), shift.to(device), None, "nearest", padding_mode)
    expected = cv2_warp(image, shift, (6, 8), "nearest", padding_mode)
    assert torch.equal(ours.cpu(), expected)
    assert torch.equal(ours.cpu(), reference(image, shift, None, "nearest", padding_mode))


# ---- the CPU levels ---------------------------------------------------------------------------

# Every CPU level of the built-in kernel, each in its own process: the level is read once.
_LEVELS = {
    "default": {},
    "no_avx512": {"WARP_PERSPECTIVE_NO_AVX512": "1"},
    "portable": {"WARP_PERSPECTIVE_NO_AVX2": "1"},
}

_LEVEL_SCRIPT = """
import itertools, sys, torch, warp_perspective
sys.path.insert(0, sys.argv[2])
from warp_inputs import FAMILIES, homography_family
outs = {}
for dtype, interpolation, padding_mode in itertools.product(
    (torch.float32, torch.float64, torch.uint8), ("bilinear", "nearest"), ("zeros", "border")
):
    g = torch.Generator().manual_seed(5)
    if dtype == torch.uint8:
        image = torch.randint(0, 256, (2, 3, 45, 67), generator=g, dtype=dtype)
    else:
        image = torch.rand(2, 3, 45, 67, generator=g, dtype=torch.float64).to(dtype)
    m = torch.eye(3, dtype=torch.float64).repeat(2, 1, 1)
    m[:, :2, :2] += 0.1 * torch.randn(2, 2, 2, generator=g, dtype=torch.float64)
    m[:, :2, 2] = 6 * torch.randn(2, 2, generator=g, dtype=torch.float64)
    m[:, 2, :2] = 2e-3 * torch.randn(2, 2, generator=g, dtype=torch.float64)
    m = torch.cat([m, torch.stack([homography_family(f, 45, 67) for f in FAMILIES])])
    image = torch.cat([image, image[:1].expand(len(FAMILIES), -1, -1, -1)])
    m = m.to(torch.float64 if dtype == torch.uint8 else dtype)
    outs[(str(dtype), interpolation, padding_mode)] = (
        torch.ops.warp_perspective._warp_perspective_builtin(
            image, m, (41, 77), interpolation, padding_mode
        )
    )
    if dtype != torch.uint8:
        grad = torch.randn(len(m), 3, 41, 77, generator=g, dtype=torch.float64).to(dtype)
        outs[("backward", str(dtype), interpolation, padding_mode)] = (
            torch.ops.warp_perspective.warp_perspective_backward(
                grad, m, list(image.shape), interpolation, padding_mode
            )
        )
outs["cpu_level"] = warp_perspective.build_config()["cpu_level"]
torch.save(outs, sys.argv[1])
"""


def _assert_nearest_close(got, expected, msg):
    """Nearest sampling copies pixels, so levels agree exactly but where a source
    coordinate lies within rounding of a half (exact half-pixel shifts, scales by 2):
    with and without fused multiply-adds it may round either way there. At most 1% of
    the pixels may differ."""
    same = (got == expected) | (got.isnan() & expected.isnan())
    differ = (~same).sum().item()
    assert differ <= 0.01 * got.numel(), f"{msg}: {differ} of {got.numel()} elements differ"


def test_cpu_levels_agree(tmp_path):
    """The built-in kernel has AVX-512 row loops, AVX2 ones and portable ones (for CPUs
    without AVX2); WARP_PERSPECTIVE_NO_AVX512=1 and WARP_PERSPECTIVE_NO_AVX2=1 force the
    lower ones, each in a subprocess. float32 and uint8 forwards must give the same
    results up to the rounding of the float32 weights (the portable level does not fuse
    multiply-adds on a target without FMA), nearest sampling but at ties
    (_assert_nearest_close). The table kernels (the float64 forward, the float32 and
    float64 backward) fuse nothing at any level and must agree bit for bit."""
    results = {}
    for name, env in _LEVELS.items():
        path = tmp_path / f"{name}.pt"
        subprocess.run(
            [sys.executable, "-c", _LEVEL_SCRIPT, str(path), os.path.dirname(__file__)],
            check=True,
            env={**os.environ, **env},
        )
        results[name] = torch.load(path)
    levels = {name: out.pop("cpu_level") for name, out in results.items()}
    assert levels["portable"] == "portable"
    assert levels["no_avx512"] in ("avx2", "portable")
    assert levels["default"] in ("avx512", "avx2", "portable")
    if levels["default"] == "portable":
        pytest.skip("this CPU has no AVX2: the portable loops are the only ones")
    assert len(levels) == len(set(levels.values())) or levels["default"] == "avx2"
    reference_level = results.pop("portable")
    assert len(reference_level) == 20
    for name, out in results.items():
        for key, expected in reference_level.items():
            if key[0] == "backward" or key[0] == "torch.float64":
                assert torch.equal(out[key], expected), f"{name} {key}: not bit for bit"
                continue
            if key[1] == "nearest":
                _assert_nearest_close(out[key], expected, f"{name} {key}")
                continue
            tol = {"atol": 1, "rtol": 0} if key[0] == "torch.uint8" else {"atol": 1e-5, "rtol": 0}
            assert_close(
                out[key], expected, **tol, msg=lambda m, key=key, name=name: f"{name} {key}: {m}"
            )


_ROWS_SCRIPT = """
import itertools, math, sys, torch, warp_perspective
outs = {}
g = torch.Generator().manual_seed(11)
for (h, w), dsize in (((37, 61), (35, 53)), ((50, 99), (47, 101)), ((9, 17), (13, 19))):
    c = torch.tensor([[1.0, 0, (w - 1) / 2], [0, 1, (h - 1) / 2], [0, 0, 1]], dtype=torch.float64)
    r = math.radians(30)
    rot = c @ torch.tensor(
        [[math.cos(r), -math.sin(r), 0], [math.sin(r), math.cos(r), 0], [0, 0, 1]],
        dtype=torch.float64,
    ) @ torch.linalg.inv(c)
    warps = torch.stack([
        torch.tensor([[1.01, 0.02, 0.7], [-0.015, 0.99, -0.4], [1e-4, -2e-4, 1]]).double(),
        rot,
        torch.tensor([[1.0, 0, w / 3], [0, 1, -h / 4], [0, 0, 1]]).double(),  # half outside
        torch.tensor([[0.3, 0.01, 2], [0.02, 0.35, 1], [0, 0, 1]]).double(),  # zoom out
        torch.tensor([[1.0, 0.1, 0], [0.05, 1, 0], [-2.0 / w, 0.0, 1.0]]).double(),  # w = 0
    ])
    for dtype, interpolation, padding_mode in itertools.product(
        (torch.float32, torch.uint8), ("bilinear", "nearest"), ("zeros", "border")
    ):
        if dtype == torch.uint8:
            image = torch.randint(0, 256, (len(warps), 2, h, w), generator=g, dtype=dtype)
        else:
            image = torch.randn(len(warps), 2, h, w, generator=g) * 100
            image[0, 0, 3, 5] = float("nan")
            image[1, 1, h // 2, w // 2] = float("inf")
        m = warps.float() if dtype == torch.float32 else warps
        outs[(h, w, str(dtype), interpolation, padding_mode)] = (
            torch.ops.warp_perspective._warp_perspective_builtin(
                image, m, dsize, interpolation, padding_mode
            )
        )
outs["cpu_level"] = warp_perspective.build_config()["cpu_level"]
torch.save(outs, sys.argv[1])
"""


def test_row_kernels_agree_across_levels(tmp_path):
    """float32 and uint8 take the row kernels of sampling_per_level.h at every CPU level:
    built for AVX-512 and AVX2 (fused multiply-adds, the same floor, rounding and uint8
    conversion) they must agree bit for bit; the portable build (no intrinsics;
    WARP_PERSPECTIVE_NO_AVX2=1), which fuses only where the target has FMA, agrees with
    them to rounding: float32 within 1e-5 of the value range, uint8 within one count,
    nearest sampling but at ties, NaN and inf pixels included. Near identity, a rotation, a warp half outside the
    image, zoom out and w = 0 inside the output, on widths that are not multiples of 8
    or 16."""
    results = {}
    for name, env in _LEVELS.items():
        path = tmp_path / f"{name}.pt"
        subprocess.run(
            [sys.executable, "-c", _ROWS_SCRIPT, str(path)], check=True, env={**os.environ, **env}
        )
        results[name] = torch.load(path)
    levels = {name: out.pop("cpu_level") for name, out in results.items()}
    assert levels["portable"] == "portable"
    if levels["default"] == "portable":
        pytest.skip("this CPU has no AVX2: the portable row kernels are the only ones")
    portable = results.pop("portable")
    for name, out in results.items():
        for key, expected in portable.items():
            got = out[key]
            msg = f"{levels[name]} against portable, {key}"
            if key[3] == "nearest":
                _assert_nearest_close(got, expected, msg)
            elif got.dtype == torch.uint8:
                assert_close(got, expected, atol=1, rtol=0, msg=msg)
            else:
                finite = expected[expected.isfinite()]
                atol = 1e-5 * (finite.max() - finite.min()).item()
                assert_close(got, expected, atol=atol, rtol=0, equal_nan=True, msg=msg)
    if "avx512" in levels.values() and "avx2" in levels.values():
        avx512, avx2 = results["default"], results["no_avx512"]
        for key, expected in avx2.items():
            got = avx512[key]
            if got.dtype == torch.float32:
                got, expected = got.view(torch.int32), expected.view(torch.int32)
            assert torch.equal(got, expected), f"avx512 against avx2, {key}: " + (
                f"{(got != expected).sum().item()} elements differ"
            )


def test_runs_the_cpu_level_asked_for():
    """nox -s sanitize reruns the property tests with WARP_PERSPECTIVE_NO_AVX512 /
    _NO_AVX2: make sure the kernels it then checks are the lower ones."""
    level = warp_perspective.build_config()["cpu_level"]
    if os.environ.get("WARP_PERSPECTIVE_NO_AVX2") == "1":
        assert level == "portable"
    elif os.environ.get("WARP_PERSPECTIVE_NO_AVX512") == "1":
        assert level in ("avx2", "portable")


# ---- exact copies, thread counts, backends --------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(("interpolation", "padding_mode"), MODES, ids=MODE_IDS)
def test_identity_and_integer_shift_are_exact(device, dtype, interpolation, padding_mode):
    g = torch.Generator().manual_seed(9)
    image = random_image((2, 13, 17), dtype, g, device)
    eye = torch.eye(3, dtype=warp_dtype(dtype), device=device)
    assert torch.equal(warp(image, eye, None, interpolation, padding_mode), image)
    shift = eye.clone()
    shift[0, 2], shift[1, 2] = 3, -2  # source (x, y) lands on (x + 3, y - 2)
    out = warp(image, shift, None, interpolation, padding_mode)
    assert torch.equal(out[:, :-2, 3:], image[:, 2:, :-3])
    if padding_mode == "zeros":
        assert (out[:, :, :3] == 0).all() and (out[:, -2:, :] == 0).all()
    else:
        assert torch.equal(out[:, :-2, :3], image[:, 2:, :1].expand(-1, -1, 3))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("rows", [1, 2, 5])
def test_images_with_shared_rows_read_each_row(kind, rows):
    """An expanded image (row stride 0) is a row step of 0, which cv::Mat reads as "rows
    packed": the OpenCV backend must copy such a layout (it once read past the row)."""
    skip_unless_runs(kind, "cpu")
    image = torch.arange(1.0, 4.0).view(1, 1, 1, 3).expand(2, 2, rows, 3)
    eye = torch.eye(3)
    for interpolation, padding_mode in MODES:
        got = KERNELS[kind](image, eye, None, interpolation, padding_mode)
        assert torch.equal(got, image.contiguous()), (interpolation, padding_mode)


@pytest.mark.parametrize("kind", KINDS)
def test_result_does_not_depend_on_thread_count(kind):
    skip_unless_runs(kind, "cpu")
    g = torch.Generator().manual_seed(11)
    image = random_image((1, 2, 300, 80), torch.float32, g)
    m = random_homography(g).float()
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = KERNELS[kind](image, m, None, "bilinear", "zeros")
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(one, KERNELS[kind](image, m, None, "bilinear", "zeros"))


def test_backend_reports_the_build():
    assert warp_perspective.backend() in ("opencv", "builtin")
    assert warp_perspective.backend() == warp_perspective.BUILD_INFO["backend"]
    config = warp_perspective.build_config()
    assert config["cxx11_abi"] == str(int(torch._C._GLIBCXX_USE_CXX11_ABI))
    assert (config["opencv"] != "") == (warp_perspective.backend() == "opencv")
    assert os.path.isfile(warp_perspective.library_path())
    assert config["cpu_default"] == warp_perspective.BUILD_INFO["cpu_default"]
    assert config["cpu_default"] in ("builtin", "opencv")
    # OpenCV is the default only when the build asked for it (WARP_PERSPECTIVE_OPENCV=1).
    assert HAVE_OPENCV or config["cpu_default"] == "builtin"


@pytest.mark.parametrize("dtype", [torch.float32, torch.uint8], ids=str)
def test_default_backend_is_the_builtin_kernel(dtype):
    """Whatever OpenCV the build found, the public op runs the faster built-in kernel unless
    the build was made with WARP_PERSPECTIVE_OPENCV=1."""
    if OPENCV_DEFAULT:
        pytest.skip("built with WARP_PERSPECTIVE_OPENCV=1: OpenCV is this build's default")
    g = torch.Generator().manual_seed(21)
    image = random_image((2, 3, 29, 41), dtype, g)
    m = torch.stack([random_homography(g) for _ in range(2)]).float()
    for interpolation, padding_mode in MODES:
        args = (image, m, (31, 37), interpolation, padding_mode)
        assert torch.equal(warp(*args), KERNELS["builtin"](*args))
        assert torch.equal(warp(*args, backend=None), KERNELS["public"](*args))


@pytest.mark.parametrize("backend", ["builtin", "opencv"])
def test_backend_per_call(backend):
    """warp_perspective(..., backend=...) picks a CPU kernel per call, gradient included."""
    skip_unless_runs(backend, "cpu")
    g = torch.Generator().manual_seed(22)
    image = random_image((2, 3, 19, 23), torch.float32, g).requires_grad_()
    m = torch.stack([random_homography(g) for _ in range(2)]).float()
    for interpolation, padding_mode in MODES:
        out = warp(image, m, [17, 25], interpolation, padding_mode, backend=backend)
        expected = KERNELS[backend](image.detach(), m, [17, 25], interpolation, padding_mode)
        assert torch.equal(out.detach(), expected)
        # Every backend shares the gradient: the adjoint of exact sampling.
        (grad,) = torch.autograd.grad(out, image, torch.ones_like(out))
        expected_grad = torch.ops.warp_perspective.warp_perspective_backward(
            torch.ones_like(out), m, list(image.shape), interpolation, padding_mode
        )
        assert torch.equal(grad, expected_grad)


@pytest.mark.parametrize(
    ("image_shape", "dtype", "dsize"),
    [
        ((2, 3, 20, 30), torch.float64, (19, 33)),
        ((1, 1, 2, 32000), torch.float32, (2, 40)),  # a source 32000 wide
        ((1, 1, 2, 40), torch.float32, (2, 32000)),  # a destination 32000 wide
    ],
    ids=["float64", "source-32000", "destination-32000"],
)
def test_opencv_backend_hands_what_it_cannot_take_to_the_builtin_kernel(image_shape, dtype, dsize):
    """The README: "float64 images, and sources over 32000 px, take the built-in kernel
    under every backend" (OpenCV's remap tables hold int16 coordinates: kOpenCVMaxSide in
    csrc/cpu/warp_perspective_kernel.cpp, for either side of source and destination).
    backend="opencv" gives the built-in kernel's bits there; one pixel short of 32000 (or
    in float32), an OpenCV that rounds coordinates to 1/32 pixel (before 4.11) gives
    other values for this sub-pixel shift, which shows which kernel ran."""
    skip_unless_runs("opencv", "cpu")
    g = torch.Generator().manual_seed(3)
    m = torch.tensor([[1.0, 0.0, 0.31], [0.0, 1.0, 0.01], [0.0, 0.0, 1.0]])
    rounds = Version(warp_perspective.build_config()["opencv"]) < Version("4.11")
    short = {torch.float64: torch.float32}.get(dtype, dtype)
    for shape, size, kind, handed_over in (
        (image_shape, dsize, dtype, True),
        ([s - (s == 32000) for s in image_shape], [s - (s == 32000) for s in dsize], short, False),
    ):
        image = torch.rand(shape, generator=g, dtype=torch.float64).to(kind)
        for interpolation, padding_mode in MODES:
            args = (image, m.to(kind), list(size), interpolation, padding_mode)
            same = torch.equal(warp(*args, backend="opencv"), warp(*args, backend="builtin"))
            what = (list(shape), list(size), kind, interpolation, padding_mode)
            if handed_over:
                assert same, what
            elif rounds and interpolation == "bilinear":  # OpenCV ran, and rounded
                assert not same, what


@pytest.mark.cuda
def test_cuda_tensors_take_the_cuda_kernel_whatever_the_backend_says_is_cpu_only():
    """The docstring: backend is "CPU only: CUDA tensors take None". The per-backend ops
    have CPU kernels only: a CUDA tensor there is refused by the dispatcher."""
    image, eye = torch.rand(2, 8, 8, device="cuda"), torch.eye(3, device="cuda")
    assert torch.equal(warp(image, eye, backend=None), image)
    for backend in ("builtin", "opencv"):
        with pytest.raises((RuntimeError, NotImplementedError), match="CUDA"):
            warp(image, eye, backend=backend)


def test_backend_per_call_errors():
    image, m = torch.rand(3, 8, 8), torch.eye(3)
    with pytest.raises(ValueError, match='backend must be None, "builtin" or "opencv", got "cv2"'):
        warp(image, m, backend="cv2")
    if not HAVE_OPENCV:
        with pytest.raises(RuntimeError, match="this build has no OpenCV"):
            warp(image, m, backend="opencv")


def test_built_on_the_stable_abi():
    # 2.13 (the release wheel's target), or the torch of this run where it is older, as
    # nox's STABLE_TARGET (TORCH_VERSIONS=2.11.0 nox -s tests), or the target a build was
    # given on purpose (.ci/gpu_check.sh under the GPU machine's torch 2.11).
    running = ".".join(torch.__version__.split(".")[:2])
    oldest = min("2.13", running, key=Version)
    assert warp_perspective.BUILD_INFO["abi"] == "stable"
    assert warp_perspective.BUILD_INFO["torch_target"] == (
        os.environ.get("SHARED_BUILD_STABLE_TARGET") or oldest
    )


def test_libraries_import_no_unstable_symbols():
    """Both libraries call libtorch only through the C shim: no c10::, at::, torch:: symbol,
    whose layout changes between torch releases (gc_cpp's tests show the audit can fail)."""
    from shared_build.runtime import unstable_symbols

    package = Path(warp_perspective.__file__).parent
    libraries = sorted(str(p) for p in package.iterdir() if p.suffix == ".so")
    assert warp_perspective.library_path() in libraries
    cuda = warp_perspective.BUILD_INFO.get("cuda_library")
    if cuda:
        assert any(Path(lib).name == f"{cuda}.so" for lib in libraries)
    for library in libraries:
        assert unstable_symbols(library) == [], library


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc (Linux)")
@pytest.mark.skipif(
    bool(warp_perspective.BUILD_INFO.get("sanitize")),
    reason="AddressSanitizer's quarantine holds freed memory: RSS cannot tell a leak",
)
def test_string_arguments_do_not_leak():
    """torch 2.13's stable headers leaked a copy of every str argument (48 bytes a call,
    `return *new std::string`); the kernels read theirs through shared_build's StrArg.
    100,000 calls would leak 4.6 MiB that way."""
    import gc

    def rss() -> int:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    grad, m = torch.rand(1, 1, 3, 3), torch.eye(3)
    bw = torch.ops.warp_perspective.warp_perspective_backward
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with torch.inference_mode():
            for _ in range(5000):
                bw(grad, m, [1, 1, 3, 3], "bilinear", "zeros")
            gc.collect()
            before = rss()
            for _ in range(100_000):
                bw(grad, m, [1, 1, 3, 3], "bilinear", "zeros")
            gc.collect()
            grown = rss() - before
    finally:
        torch.set_num_threads(threads)
    assert grown < 2 << 20, f"RSS grew by {grown / 2**20:.1f} MiB over 100,000 calls"


def test_the_cpu_library_has_no_cuda_kernel():
    """The CUDA kernels live in _C_cuda.so, loaded only under a CUDA torch: _C.so needs no
    CUDA runtime, so the same wheel imports under a CPU-only torch."""
    # Its own DT_NEEDED entries (ldd would also list a CUDA torch's own dependencies).
    readelf = subprocess.run(
        ["readelf", "-d", warp_perspective.library_path()], capture_output=True, text=True
    )
    if readelf.returncode != 0:
        pytest.skip(f"readelf unavailable: {readelf.stderr.strip()}")
    needed = [line for line in readelf.stdout.splitlines() if "(NEEDED)" in line]
    assert needed and not [n for n in needed if "cuda" in n or "cudart" in n], needed
    loaded = warp_perspective.build_config()["cuda"] == "yes"
    assert loaded == (warp_perspective.cuda_library_path() is not None)
    assert loaded == torch._C._dispatch_has_kernel_for_dispatch_key(
        "warp_perspective::warp_perspective", "CUDA"
    )


def test_library_does_not_need_libpython():
    """The library is loaded by a C++ program: it must not reference the Python C API."""
    nm = subprocess.run(
        ["nm", "-D", "--undefined-only", warp_perspective.library_path()],
        capture_output=True,
        text=True,
    )
    if nm.returncode != 0:
        pytest.skip(f"nm unavailable: {nm.stderr.strip()}")
    python_symbols = [line for line in nm.stdout.splitlines() if " Py" in line or "_Py" in line]
    assert python_symbols == []
    ldd = subprocess.run(["ldd", warp_perspective.library_path()], capture_output=True, text=True)
    assert "libtorch_python" not in ldd.stdout
    # A C++ program that links the library finds torch's libraries through its RUNPATH.
    readelf = subprocess.run(
        ["readelf", "-d", warp_perspective.library_path()], capture_output=True, text=True
    )
    if readelf.returncode == 0:
        assert "$ORIGIN/../torch/lib" in readelf.stdout


# ---- autograd -----------------------------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
def test_gradient_with_respect_to_warp_is_refused(device):
    image = torch.rand(1, 1, 5, 5, device=device, requires_grad=True)
    m = torch.eye(3, device=device, requires_grad=True)
    out = warp(image, m)
    with pytest.raises(RuntimeError, match="gradient with respect to warp is not supported"):
        out.sum().backward()
    # A detached warp is fine, and only the image gets a gradient.
    warp(image, m.detach()).sum().backward()
    assert image.grad is not None and m.grad is None


def test_uint8_has_no_gradient_and_no_graph():
    image = torch.randint(0, 255, (3, 8, 8), dtype=torch.uint8)
    out = warp(image, torch.eye(3))
    assert out.dtype == torch.uint8 and not out.requires_grad


# ---- opcheck, compile, export ---------------------------------------------------------------


@pytest.mark.slow
def test_torch_export_and_run():
    class Module(torch.nn.Module):
        def forward(self, x, m):
            return warp(x, m, [20, 24], "nearest", "zeros") + 1

    g = torch.Generator().manual_seed(18)
    x, m = torch.rand(2, 3, 16, 16), random_homography(g).float()
    batch = torch.export.Dim("batch", min=1, max=64)
    exported = torch.export.export(Module(), (x, m), dynamic_shapes=({0: batch}, None))
    assert "warp_perspective.warp_perspective" in str(exported.graph)
    x5 = torch.rand(5, 3, 16, 16)
    assert_close(exported.module()(x5, m), Module()(x5, m))


# ---- bad input: RuntimeError naming the problem, from C++ and from the fake kernel --------
# The bad calls themselves are the battery's (warp_perspective_battery.bad_forward and
# bad_backward), on the CPU and the meta device.


@pytest.mark.cuda
def test_bad_inputs_on_cuda():
    """The battery's bad calls with CUDA tensors (the CUDA kernels run csrc/checks.h too),
    a CPU warp with a CUDA image among them. Singular warps give zeros there instead."""
    for call in bad_forward("cuda"):
        with pytest.raises(call.error, match=call.match):
            warp(*call.args, **call.kwargs)
    for call in bad_backward("cuda"):
        with pytest.raises(call.error, match=call.match):
            torch.ops.warp_perspective.warp_perspective_backward(*call.args)


@pytest.mark.parametrize(("make", "kwargs", "message"), BAD_INPUTS.values(), ids=BAD_INPUTS.keys())
def test_fake_kernel_says_what_the_kernel_says(make, kwargs, message):
    """The C++ checks (every real kernel, any caller) and ops.py's (the fake kernels, over
    symbolic sizes) are two copies, as the stable ABI has no symbolic sizes in C++: every
    bad input must get the same sentence, word for word, from both."""
    said = []
    for device in ("cpu", "meta"):
        image, m = make(device)
        with pytest.raises(RuntimeError, match=message) as error:
            warp(image, m, **kwargs)
        said.append(str(error.value))
    assert said[0] == said[1]


@pytest.mark.parametrize(
    ("shape", "image_size", "dtype", "message"), BAD_BACKWARD.values(), ids=BAD_BACKWARD.keys()
)
def test_backward_fake_kernel_says_what_the_kernel_says(shape, image_size, dtype, message):
    said = []
    for device in ("cpu", "meta"):
        grad = torch.ones(shape, dtype=dtype, device=device)
        with pytest.raises(RuntimeError, match=message) as error:
            torch.ops.warp_perspective.warp_perspective_backward(
                grad, torch.eye(3, device=device), image_size, "bilinear", "zeros"
            )
        said.append(str(error.value))
    assert said[0] == said[1]


def test_bad_inputs_under_fake_tensor_mode():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode(), pytest.raises(RuntimeError, match="batch sizes differ"):
        warp(torch.rand(2, 1, 4, 4), torch.rand(3, 3, 3))


def test_none_and_huge_sizes_name_the_argument():
    """What the fuzzer found (tests/test_robustness.py before the battery)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    image, m = torch.rand(1, 2, 5, 6), torch.eye(3)
    ops = torch.ops.warp_perspective
    # None reached autograd's bookkeeping first: "tensor does not have a device".
    with pytest.raises(RuntimeError, match="warp_perspective: image is undefined"):
        ops.warp_perspective(None, m, None, "bilinear", "zeros")
    with pytest.raises(RuntimeError, match="warp_perspective: warp is undefined"):
        ops.warp_perspective_backward(image, None, [1, 2, 5, 6], "bilinear", "zeros")
    # Sizes whose bytes overflow int64 failed in the allocator, naming no argument.
    with pytest.raises(RuntimeError, match=r"dsize \[1099511627776, 1099511627776\] makes an"):
        ops.warp_perspective(image, m, [2**40, 2**40], "bilinear", "zeros")
    with pytest.raises(RuntimeError, match=r"image_size \[1, 2, 1099511627776, 1099511627776\]"):
        ops.warp_perspective_backward(image, m, [1, 2, 2**40, 2**40], "bilinear", "zeros")
    with FakeTensorMode() as mode, pytest.raises(RuntimeError, match="dsize .* makes an output"):
        ops.warp_perspective(mode.from_tensor(image), mode.from_tensor(m), [2**40, 2**40])


BAD_MATRIX = pytest.mark.parametrize(
    ("matrix", "message"), BAD_MATRICES.values(), ids=BAD_MATRICES.keys()
)


@pytest.mark.cuda
@BAD_MATRIX
@pytest.mark.parametrize("padding_mode", ["zeros", "border"])
def test_singular_or_non_finite_warp_gives_zeros_on_cuda_without_a_sync(
    matrix, message, padding_mode
):
    # Raising would need the matrices on the host: a synchronisation per call. The CUDA
    # kernels invert on the device and write zeros for that image (and its gradient) only.
    x = torch.rand(2, 3, 4, 4, device="cuda", requires_grad=True)
    batch = torch.stack([torch.eye(3), torch.tensor(matrix)]).cuda()
    torch.cuda.set_sync_debug_mode("error")
    try:
        out = warp(x, batch, padding_mode=padding_mode)
        out.backward(torch.ones_like(out))
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert torch.equal(out[0], x[0].detach())
    assert (out[1] == 0).all()
    assert torch.equal(x.grad[0], torch.ones_like(x[0]))
    assert (x.grad[1] == 0).all()


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(("interpolation", "padding_mode"), MODES, ids=MODE_IDS)
def test_cuda_bad_matrix_writes_zeros_in_every_loop(dtype, interpolation, padding_mode):
    """Every forward loop (dtype x mode) writes a bad matrix's image as zeros, from no taps
    (its inverse is never written), over memory the caching allocator most likely hands
    back full of 0xff bytes (NaN, 255); the batch's other images equal the CPU kernel's."""
    g = torch.Generator().manual_seed(44)
    image = random_image((3, 2, 20, 24), dtype, g, "cuda")
    bad = torch.tensor([[1.0, 2, 3], [2, 4, 6], [0, 0, 1]], dtype=torch.float64)
    mats = torch.stack([random_homography(g), bad, random_homography(g)])
    mats = mats.to("cuda", warp_dtype(dtype))
    dsize = [18, 26]
    # A block of the output's size, filled and freed: the output is the next allocation.
    nbytes = 3 * 2 * 18 * 26 * image.element_size()
    stale = torch.full((nbytes,), 255, dtype=torch.uint8, device="cuda")
    del stale
    out = warp(image, mats, dsize, interpolation, padding_mode).cpu()
    assert (out[1] == 0).all()
    good = [0, 2]
    cpu = torch.ops.warp_perspective._warp_perspective_builtin(
        image[good].cpu(), mats[good].cpu(), dsize, interpolation, padding_mode
    )
    tol = {"atol": 1, "rtol": 0} if dtype == torch.uint8 else {"atol": 2e-6, "rtol": 0}
    assert_close(out[good], cpu, **tol)


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.uint8])
@pytest.mark.parametrize("batched", [False, True])
def test_cuda_forward_and_backward_never_synchronise(dtype, batched):
    # A training step must not wait on the GPU: torch raises on any synchronising call
    # (a copy to the host, .item()) under sync debug mode "error".
    g = torch.Generator().manual_seed(31)
    x = random_image((2, 3, 16, 16), dtype, g, "cuda")
    m = random_homography(g).to(warp_dtype(dtype)).cuda()
    m = m.expand(2, 3, 3).contiguous() if batched else m
    floating = dtype.is_floating_point
    x.requires_grad_(floating)
    torch.cuda.set_sync_debug_mode("error")
    try:
        out = warp(x, m, dsize=(12, 20))
        if floating:
            out.backward(torch.ones_like(out))
    finally:
        torch.cuda.set_sync_debug_mode("default")
    tol = {"atol": 1, "rtol": 0} if dtype == torch.uint8 else {"atol": 2e-6, "rtol": 0}
    assert_close(out.detach().cpu(), warp(x.detach().cpu(), m.cpu(), dsize=(12, 20)), **tol)


# ---- CUDA ------------------------------------------------------------------------------------


def tie_matrices() -> torch.Tensor:
    """Homographies that put whole destination rows exactly on half pixels when every
    product and sum is rounded on its own, as the CPU build (-ffp-contract=off) and the CUDA
    build (--fmad=false) compute; with a product fused into the next add (an FMA, nvcc's
    default) those coordinates land an ulp or a few off the tie and round the other way (a
    half or all of each such row, by an emulation of nvcc 13.0's sm_90 code)."""
    mats = []
    for slope, row in [(13.37, 6), (21.1, 7), (11.3, 5), (0.7, 5), (29.7, 6), (17.9, 9)]:
        # A shear: its inverse maps (x, y) to (x - slope * y - shift, y), and on row `row`
        # the rounded product minus the shift is exactly 0.5; fused, the product's rounding
        # error (up to 7e-15) stays.
        shift = -slope * row - 0.5
        assert -slope * row - shift == 0.5
        mats.append([[1.0, slope, shift], [0, 1, 0], [0, 0, 1]])
    for row in (17, 25, 29, 31):
        # A projective term: the inverse's w = -(126 / row) * y + 128 is exactly 2 on row
        # `row` (the product rounded to -126), so every pixel there samples (x / 2, row / 2).
        assert -(126 / row) * row + 128 == 2.0
        mats.append([[1.0, 0, 0], [0, 1, 0], [0, 126 / row / 128, 1 / 128]])
    mats.append([[2.0, 0, 0], [0, 2, 0], [0, 0, 1]])  # a zoom: exact products, ties everywhere
    return torch.tensor(mats, dtype=torch.float64)


@pytest.mark.cuda
@pytest.mark.parametrize("padding_mode", ["zeros", "border"])
def test_cuda_nearest_picks_the_cpu_pixel_at_exact_ties(padding_mode):
    """Nearest sampling at exact ties is bit-identical on CUDA and on the CPU kernel
    (float64: its coordinate tables round every operation, as CUDA does), forward and
    backward (integer gradients: their sums are exact in any order)."""
    mats = tie_matrices()
    b, size = len(mats), [32, 32]
    _, ties = reference_and_ties(torch.zeros(b, 1, *size), mats, size, "nearest", padding_mode)
    assert (ties.flatten(1).sum(1) >= 32).all(), "each matrix puts a whole row on ties"
    image = torch.arange(1, b * 32 * 32 + 1, dtype=torch.float64).reshape(b, 1, *size)
    builtin = torch.ops.warp_perspective._warp_perspective_builtin
    cpu = builtin(image, mats, size, "nearest", padding_mode)
    cuda = warp(image.cuda(), mats.cuda(), size, "nearest", padding_mode).cpu()
    differ = (cuda != cpu).flatten(1).sum(1)
    assert torch.equal(cuda, cpu), f"pixels that differ, per matrix: {differ.tolist()}"
    grad = torch.randint(-8, 9, image.shape, generator=torch.Generator().manual_seed(7))
    grad = grad.double()
    backward = torch.ops.warp_perspective.warp_perspective_backward
    args = (list(image.shape), "nearest", padding_mode)
    cpu_grad = backward(grad, mats, *args)
    assert torch.equal(backward(grad.cuda(), mats.cuda(), *args).cpu(), cpu_grad)


# (a, b, c, d): rows (a, b, 0) and (c, d, 0) whose |det| / (|row0| |row1|) is 1e-12, the
# singular threshold, at d: with every product rounded (the CPU) d - 1 ulp is singular and
# d + 1 ulp is not, and d is decided one way there and the other with nvcc's fused
# multiply-adds (by an emulation of nvcc 13.0's sm_90 code).
THRESHOLD_ROWS = [
    (1.935, 0.533, 1.042, 0.287021188631612),
    (2.679, 1.024, 1.039, 0.39713923105755516),
    (2.904, 1.848, 2.195, 1.3968181818212657),
    (1.289, 1.703, 2.262, 2.9885073700605163),
]


@pytest.mark.cuda
def test_cuda_decides_singular_as_the_cpu_at_the_threshold():
    """A matrix right at the singular threshold is singular on CUDA (zeros) exactly when the
    CPU kernel raises, and otherwise gives the CPU's result (nearest: bit for bit)."""
    mats = [
        [[a, b, 0.0], [c, dd, 0.0], [0.0, 0.0, 1.0]]
        for a, b, c, d in THRESHOLD_ROWS
        for dd in (math.nextafter(d, -math.inf), d, math.nextafter(d, math.inf))
    ]
    mats = torch.tensor(mats, dtype=torch.float64)
    # Positive pixels and border padding: an invertible matrix never gives a zero.
    image = torch.arange(1, 17, dtype=torch.float64).reshape(1, 1, 4, 4).repeat(len(mats), 1, 1, 1)
    cuda = warp(image.cuda(), mats.cuda(), None, "nearest", "border").cpu()
    builtin = torch.ops.warp_perspective._warp_perspective_builtin
    decisions = []
    for i in range(len(mats)):
        try:
            cpu = builtin(image[i], mats[i], None, "nearest", "border")
        except RuntimeError as error:
            assert "is singular" in str(error)
            decisions.append("singular")
            assert (cuda[i] == 0).all(), f"matrix {i}: singular on the CPU, not on CUDA"
        else:
            decisions.append("invertible")
            assert torch.equal(cuda[i], cpu), f"matrix {i}: invertible on the CPU, not on CUDA"
    # Each triple straddles the threshold on the CPU: d - 1 ulp singular, d + 1 ulp not.
    assert decisions[0::3] == ["singular"] * len(THRESHOLD_ROWS), decisions
    assert decisions[2::3] == ["invertible"] * len(THRESHOLD_ROWS), decisions


@pytest.mark.cuda
def test_cuda_batch_larger_than_grid_z():
    image = torch.rand(70_000, 1, 2, 3, device="cuda")
    shift = torch.tensor([[1.0, 0, 1], [0, 1, 0], [0, 0, 1]], device="cuda")
    out = warp(image, shift.expand(70_000, 3, 3))
    assert torch.equal(out[:, :, :, 1:], image[:, :, :, :-1])
    assert (out[:, :, :, 0] == 0).all()


@pytest.mark.cuda
def test_cuda_takes_more_rows_than_the_grid():
    """600,000 destination rows: more than the grid's 65,535 x 8 (the kernels stride over
    the rest), forward and backward, equal to the CPU kernel's (a shift: exact)."""
    g = torch.Generator().manual_seed(21)
    image = random_image((1, 2, 600_000, 4), torch.float32, g)
    down = torch.tensor([[1.0, 0, 0], [0, 1, 1], [0, 0, 1]])  # dst(x, y) = src(x, y - 1)
    cpu = warp(image, down, [600_000, 4])
    cuda_image = image.cuda().requires_grad_()
    cuda = warp(cuda_image, down.cuda(), [600_000, 4])
    assert torch.equal(cuda.cpu(), cpu)
    assert torch.equal(cpu[:, :, 1:], image[:, :, :-1])
    cuda.sum().backward()
    expected = torch.ones_like(image)
    expected[:, :, -1] = 0  # the last source row lands outside the output
    assert torch.equal(cuda_image.grad.cpu(), expected)


@pytest.mark.slow  # 2 GB of address space (two pages touched): not under ASan
def test_cpu_plane_spans_either_side_of_the_int32_offsets_limit():
    """The CPU kernel's int32 offsets (check_plane_extent): a strided plane spanning 2^31 - 1
    elements runs in place, one spanning 2^31 is copied to a contiguous plane first; both
    give the pixels of the same image made contiguous."""
    storage = torch.empty(2**31, dtype=torch.uint8)
    storage[:2], storage[-2:] = torch.tensor([10, 5], dtype=torch.uint8), 20
    identity = torch.eye(3)
    for width in (1, 2):  # spans (2^31 - 2) + (width - 1) * 1 + 1 elements
        view = storage.as_strided((2, width), (2**31 - 2, 1))
        assert torch.equal(warp(view, identity), view.contiguous()), width


@pytest.mark.cuda
@pytest.mark.slow  # 17 GB on the GPU: not under compute-sanitizer
def test_cuda_past_2_to_the_31_elements():
    """A (1, 1, 46341, 46341) image: 2,147,488,281 elements, past 2^31 where a 32-bit
    offset first wraps. A shift down by one row: the last rows must be the image's."""
    side = 46_341
    from shared_build.testing import need_free_gpu_memory  # (see the stream test)

    need_free_gpu_memory(21)  # 17 GB and a margin
    image = torch.rand(1, 1, side, side, device="cuda")
    down = torch.tensor([[1.0, 0, 0], [0, 1, 1], [0, 0, 1]], device="cuda")
    out = warp(image, down)
    assert torch.equal(out[0, 0, -3:].cpu(), image[0, 0, -4:-1].cpu())
    assert torch.equal(out[0, 0, 1:4].cpu(), image[0, 0, 0:3].cpu())
    assert (out[0, 0, 0] == 0).all()


@pytest.mark.cuda
@pytest.mark.slow  # 17 GB on the GPU: not under compute-sanitizer
def test_cuda_backward_past_2_to_the_31_elements():
    """The atomic backward into a (1, 1, 65600, 32768) grad_image: 2,149,580,800 elements,
    its last 64 rows past 2^31, where a 32-bit offset first wraps. Needs 17 GB: grad_output
    and grad_image, float32, 8.6 GB each. A shift by one pixel up and left, whose adjoint
    moves each gradient back: grad_image[y, x] = grad_output[y - 1, x - 1] exactly (bilinear
    taps of weight 1 and 0), zero on the first row and column. Rows at the start, across
    2^31 and at the end."""
    h, w = 65_600, 32_768
    from shared_build.testing import need_free_gpu_memory  # (see the stream test)

    need_free_gpu_memory(21)  # 17 GB and a margin
    grad = torch.rand(1, 1, h, w, device="cuda", generator=torch.Generator("cuda").manual_seed(0))
    up_left = torch.tensor([[1.0, 0, -1], [0, 1, -1], [0, 0, 1]], device="cuda")
    backward = torch.ops.warp_perspective.warp_perspective_backward
    grad_image = backward(grad, up_left, [1, 1, h, w], "bilinear", "zeros")
    for rows in (slice(0, 3), slice(2**31 // w - 2, 2**31 // w + 2), slice(h - 3, h)):
        got = grad_image[0, 0, rows].cpu()
        expected = torch.zeros_like(got)
        first = 1 if rows.start == 0 else 0  # row 0 gets nothing
        expected[first:, 1:] = grad[0, 0, rows.start + first - 1 : rows.stop - 1, :-1].cpu()
        assert torch.equal(got, expected), f"rows {rows}"


@pytest.mark.cuda
def test_cuda_backward_alerts_nondeterminism():
    image = torch.rand(1, 1, 8, 8, device="cuda", requires_grad=True)
    out = warp(image, torch.eye(3, device="cuda"))
    torch.use_deterministic_algorithms(True)
    try:
        with pytest.raises(RuntimeError, match="warp_perspective_backward_cuda"):
            out.sum().backward()
    finally:
        torch.use_deterministic_algorithms(False)


@pytest.mark.cuda
def test_cuda_stream_and_graph_capture():
    g = torch.Generator().manual_seed(20)
    x = random_image((2, 3, 32, 32), torch.float32, g, "cuda")
    m = random_homography(g).float().cuda()
    new_x = random_image((2, 3, 32, 32), torch.float32, g, "cuda").requires_grad_()
    grad_out, new_grad_out = torch.zeros_like(x), random_image(x.shape, torch.float32, g, "cuda")
    x.requires_grad_()

    def write_inputs():
        x.detach().copy_(new_x.detach())
        grad_out.copy_(new_grad_out)

    def step():
        out = warp(x, m)
        out.backward(grad_out)
        return out

    def warm_up():  # the same launches, its gradient dropped
        step()
        x.grad = None

    # Forward reads x, backward grad_out, only after the side stream wrote them. (Imported
    # here: subprocesses import this module without the conftest.py that finds shared_build.)
    from shared_build.testing import on_a_busy_side_stream

    out = on_a_busy_side_stream(write_inputs, step, warm_up)
    expected = warp(new_x, m)
    expected.backward(new_grad_out)
    assert torch.equal(out, expected)
    assert_close(x.grad, new_x.grad)  # atomic adds: not bit-exact
    x = x.detach()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = warp(x, m)
    x2 = random_image((2, 3, 32, 32), torch.float32, g, "cuda")
    x.copy_(x2)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(captured, warp(x2, m))
    # On CUDA a singular matrix gives zeros, not an error, under capture as in eager.
    singular = torch.zeros(3, 3, device="cuda")
    graph2 = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph2):
        zeros = warp(x, singular)
    graph2.replay()
    torch.cuda.synchronize()
    assert (zeros == 0).all()


@pytest.mark.cuda
def test_cuda_second_device_if_present():
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    x = torch.rand(1, 2, 8, 8, device="cuda:1")
    assert torch.equal(warp(x, torch.eye(3, device="cuda:1")), x)


# ---- the CUDA library under another CUDA torch ---------------------------------------------

CUDA_OFF_CHECK = """
import torch, warp_perspective
assert warp_perspective.__file__.startswith(sys.argv[1]), warp_perspective.__file__
x = torch.rand(1, 2, 8, 8)
assert torch.equal(warp_perspective.warp_perspective(x, torch.eye(3)), x)  # the CPU kernel
config = warp_perspective.build_config()
assert config["cuda"] == "no", config
op = torch.ops.warp_perspective.warp_perspective.default
try:  # the op's CUDA kernel, called as a CUDA tensor would call it (no GPU needed)
    op.redispatch(torch._C.DispatchKeySet("CUDA"), x, torch.eye(3), None, "bilinear", "zeros")
except RuntimeError as error:
    assert str(error) == config["cuda_off"], (str(error), config["cuda_off"])
    print(error)
else:
    raise AssertionError("the CUDA kernel ran")
""".replace("import torch", "import sys, torch", 1)


@pytest.mark.skipif(
    not warp_perspective.BUILD_INFO.get("cuda_library") or torch.version.cuda is None,
    reason="needs a build with CUDA kernels under a CUDA build of torch",
)
@pytest.mark.parametrize("case", ["another-cuda-major", "library-does-not-load"])
def test_cuda_kernels_off_keep_cpu_working_and_say_why(tmp_path, case):
    # One stable wheel meets torch builds of several CUDA majors (cu126 and cu130 torch
    # 2.14.1): simulated on a copy of the installed package.
    copy = tmp_path / "warp_perspective"
    shutil.copytree(Path(warp_perspective.__file__).parent, copy)
    built = warp_perspective.BUILD_INFO["cuda"]
    if case == "another-cuda-major":
        info = copy / "_build_info.py"
        other = "12.8" if not built.startswith("12.") else "13.0"
        info.write_text(info.read_text().replace(f"'cuda': '{built}'", f"'cuda': '{other}'"))
        expected = f"they are built for CUDA {other} and this torch"
    else:
        (library,) = copy.glob(warp_perspective.BUILD_INFO["cuda_library"] + ".*")
        library.write_bytes(b"not a shared library")
        expected = f"{library.name} did not load"
    done = subprocess.run(
        [sys.executable, "-c", CUDA_OFF_CHECK, str(copy)],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(tmp_path)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    sentence = done.stdout.strip()
    assert sentence.startswith("warp_perspective's CUDA kernels are off: "), sentence
    assert (expected in sentence and "; install" in sentence) or "; reinstall" in sentence, sentence

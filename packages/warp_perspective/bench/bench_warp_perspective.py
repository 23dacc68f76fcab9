"""warp_perspective against kornia's warp_perspective and a Python loop of cv2.warpPerspective.

Batch 8, 3 channels, float32, bilinear with zeros padding, one homography per image,
256x256 and 1080p (1080x1920) in and out. CPU: the public op with its default backend (the
built-in kernel unless the build set WARP_PERSPECTIVE_OPENCV=1: the goal rows), each CPU
backend picked per call (backend="builtin", and backend="opencv" when the build has
OpenCV), kornia, and two loops calling cv2.warpPerspective once per image:

- "cv2 loop": on (H, W, 3) arrays and float64 matrices prepared beforehand (cv2's native
  layout, conversion not timed): cv2's best case;
- "cv2 loop (from NCHW tensors)": what a torch user with a (B, C, H, W) float tensor
  writes: per image permute to HWC, numpy(), cv2.warpPerspective, back to a CHW tensor,
  then stack.

And the memory floor of a call, "copy into a fresh output (floor)": the input copied into a
new tensor advised for huge pages from 8 MB as the op's outputs are (but not pre-faulted in
parallel, which the op does with several threads). It reads and writes what a warp must and
computes nothing: a warp that reads all of its input and writes a new output with ordinary
stores does not beat it.

On a GPU also CUDA against a plain-PyTorch warp, "grid_sample" (grid_sample_warp below: the
destination pixels mapped through the inverse homography, then
torch.nn.functional.grid_sample; the same pixels as ours, tests/test_benchmarks.py checks
it), and kornia on CUDA where installed.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import sys

import numpy as np
import torch
import torch.nn.functional as F

import warp_perspective
from benchmarks.harness import Context, Goal

PACKAGE = "warp_perspective"
# What `size` counts in this package's measurements: the plots' x axis.
SIZE_LABEL = "B x C x H x W, output elements"
OP = "warp_perspective bilinear"
OURS = "warp_perspective"
BUILTIN = "warp_perspective (built-in kernel)"
OPENCV = "warp_perspective (OpenCV backend)"
CV2_LOOP = "cv2 loop"
CV2_FROM_NCHW = "cv2 loop (from NCHW tensors)"
GRID_SAMPLE = "grid_sample"
COPY_FLOOR = "copy into a fresh output (floor)"
_DEFAULT_NOTE = "the default CPU backend, whichever library is installed"
# One thread each: the per-core ratio against cv2, which measured stable across VMs where
# the default-thread one swung 2x (two vCPUs may be one core's two hyperthreads).
ONE_THREAD = ", one thread"
OP_ONE_THREAD = OP + ONE_THREAD
GOALS = [
    Goal(op=OP_ONE_THREAD, ours=OURS, peer=CV2_LOOP, min_speedup=2.0, device="cpu",
         note="issue 32: one thread each (torch.set_num_threads(1), cv2.setNumThreads(1))"),
    Goal(op=OP, ours=OURS, peer=GRID_SAMPLE, min_speedup=2.0, device="cuda",
         note="issue 44: >= 2x a plain-PyTorch grid_sample warp"),
    Goal(op=OP, ours=OURS, peer="kornia", min_speedup=5, device="cuda"),
]  # fmt: skip
# The one-thread cases: (op, interpolation, dtype); the bilinear float32 one has the goal,
# the others their own rows.
ONE_THREAD_CASES = (
    (OP_ONE_THREAD, "bilinear", torch.float32),
    ("warp_perspective nearest" + ONE_THREAD, "nearest", torch.float32),
    ("warp_perspective bilinear uint8" + ONE_THREAD, "bilinear", torch.uint8),
)
BATCH = 8
CHANNELS = 3
SIZES = {"256x256": (256, 256), "1080p": (1080, 1920)}


def _case(size: str) -> str:
    return f"B={BATCH} C={CHANNELS} {size}"


# The rows of benchmarks/run.py --headline, on CUDA (issue 44, goal 6).
HEADLINE = [(OP, _case(size)) for size in SIZES]


def grid_sample_warp(image: torch.Tensor, mats: torch.Tensor, dsize: tuple[int, int]):
    """warp_perspective(image, mats, dsize) (bilinear, zeros) in plain PyTorch, as a user
    without this package writes it: each destination pixel (x, y) mapped through the inverse
    homography to the source, then grid_sample. Pixel centres at integers (cv2's convention
    and ours), so the source coordinates are normalised with align_corners=True.

    image: (B, C, H, W) float; mats: (B, 3, 3), source to destination."""
    h, w = image.shape[-2:]
    out_h, out_w = dsize
    dtype, device = image.dtype, image.device
    # inv_ex: no check of the result, so no wait for the GPU (as ours, which also returns
    # zeros for a singular matrix instead of raising).
    inv = torch.linalg.inv_ex(mats.to(dtype))[0]
    ys, xs = torch.meshgrid(
        torch.arange(out_h, dtype=dtype, device=device),
        torch.arange(out_w, dtype=dtype, device=device),
        indexing="ij",
    )
    points = torch.stack([xs, ys, torch.ones_like(xs)], dim=-1).reshape(1, -1, 3)
    source = points @ inv.transpose(1, 2)  # (B, out_h * out_w, 3)
    xy = source[..., :2] / source[..., 2:]
    scale = torch.tensor([2 / max(w - 1, 1), 2 / max(h - 1, 1)], dtype=dtype, device=device)
    grid = (xy * scale - 1).reshape(-1, out_h, out_w, 2)
    return F.grid_sample(image, grid, mode="bilinear", padding_mode="zeros", align_corners=True)


def _homographies(batch: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    m = torch.eye(3, dtype=torch.float64).repeat(batch, 1, 1)
    m[:, :2, :2] += 0.05 * torch.randn(batch, 2, 2, generator=g, dtype=torch.float64)
    m[:, :2, 2] = 8 * torch.randn(batch, 2, generator=g, dtype=torch.float64)
    m[:, 2, :2] = 1e-5 * torch.randn(batch, 2, generator=g, dtype=torch.float64)
    return m


def cv2_loops(
    image: torch.Tensor, mats64: torch.Tensor, mats: torch.Tensor, interpolation: str = "bilinear"
):
    """The two cv2.warpPerspective loops over a CPU (B, C, H, W) batch: (cv2's best case,
    a torch user's loop). Shared with benchmarks/results/cpu/2026-11-21-warp-cpu-time/cpu_time.py."""
    import cv2

    flags = cv2.INTER_NEAREST if interpolation == "nearest" else cv2.INTER_LINEAR
    h, w = image.shape[-2:]
    hwc = [np.ascontiguousarray(im.permute(1, 2, 0).numpy()) for im in image]
    np_mats = [m.numpy() for m in mats64]

    def cv2_loop():
        return [
            cv2.warpPerspective(im, m, (w, h), flags=flags)
            for im, m in zip(hwc, np_mats, strict=True)
        ]

    def cv2_from_nchw():
        return torch.stack(
            [
                torch.from_numpy(
                    cv2.warpPerspective(
                        np.ascontiguousarray(im.permute(1, 2, 0).numpy()),
                        m.numpy(),
                        (w, h),
                        flags=flags,
                    )
                ).permute(2, 0, 1)
                for im, m in zip(image, mats, strict=True)
            ]
        )

    return cv2_loop, cv2_from_nchw


# The process's libc, for madvise in fresh_copy: loaded once, not inside the timed call.
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform == "linux" else None


def fresh_copy(image: torch.Tensor) -> torch.Tensor:
    """image copied into a new tensor advised for huge pages as the op's outputs are
    (cpu/warp_perspective_kernel.cpp, empty_output, which also pre-faults them in parallel with several
    threads): the bytes a warp must read and write, nothing else."""
    out = torch.empty_like(image)
    huge = 2 << 20
    if out.nbytes >= 4 * huge and _LIBC is not None:
        start = out.data_ptr()
        first = (start + huge - 1) & ~(huge - 1)
        last = (start + out.nbytes) & ~(huge - 1)
        if last > first:
            _LIBC.madvise(ctypes.c_void_p(first), ctypes.c_size_t(last - first), 14)  # HUGEPAGE
    return out.copy_(image)


@contextlib.contextmanager
def one_thread(have_cv2: bool):
    """torch and cv2 (where installed) on one thread each, restored afterwards."""
    cv2 = importlib.import_module("cv2") if have_cv2 else None
    threads = torch.get_num_threads(), cv2.getNumThreads() if cv2 else None
    torch.set_num_threads(1)
    if cv2:
        cv2.setNumThreads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads[0])
        if cv2:
            cv2.setNumThreads(threads[1])


def run_one_thread(ctx: Context, sizes: dict, mats64: torch.Tensor, have_cv2: bool) -> None:
    """Ours against the cv2 loop with one thread each: bilinear and nearest float32, and
    bilinear uint8."""
    mats = mats64.to(torch.float32)
    for size, (h, w) in sizes.items():
        ops = [case for case in ONE_THREAD_CASES if ctx.wants(case[0], _case(size), "cpu")]
        if not ops:
            continue
        g = torch.Generator().manual_seed(1)
        image = torch.rand(BATCH, CHANNELS, h, w, generator=g)
        for op, interpolation, dtype in ops:
            x = image if dtype == torch.float32 else (image * 255).to(dtype)
            impls = {
                OURS: lambda x=x, i=interpolation: warp_perspective.warp_perspective(
                    x, mats, interpolation=i
                )
            }
            if have_cv2:
                impls[CV2_LOOP] = cv2_loops(x, mats64, mats, interpolation)[0]
            pixels = BATCH * CHANNELS * h * w
            with one_thread(have_cv2):
                ctx.compare(
                    op=op,
                    case=_case(size),
                    size=pixels,
                    device="cpu",
                    dtype=dtype,
                    impls=impls,
                    ours=OURS,
                    extra=lambda s, n=pixels: {"Msamples/s": n / s / 1e6},
                )


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
    config = warp_perspective.build_config()
    have_opencv_backend = warp_perspective.backend() == "opencv"
    ctx.note(
        f"warp_perspective default CPU backend: {config['cpu_default']} "
        f"(OpenCV {config['opencv'] or 'absent'}), "
        f"cv2 {cv2.__version__ if have_cv2 else 'absent'} with {cv2.getNumThreads() if have_cv2 else 0} "
        f"threads, torch {torch.get_num_threads()} threads"
    )
    mats64 = _homographies(BATCH)
    sizes = {"256x256": SIZES["256x256"]} if ctx.quick else SIZES
    for device in ctx.devices:
        for size, (h, w) in sizes.items():
            if not ctx.wants(OP, _case(size), device):
                continue
            g = torch.Generator().manual_seed(1)
            image = torch.rand(BATCH, CHANNELS, h, w, generator=g).to(device)
            mats = mats64.to(device, torch.float32)
            impls = {OURS: lambda: warp_perspective.warp_perspective(image, mats)}
            ours = [OURS]
            if device == "cpu":
                impls[BUILTIN] = lambda: warp_perspective.warp_perspective(
                    image, mats, backend="builtin"
                )
                ours.append(BUILTIN)
                if have_opencv_backend:
                    impls[OPENCV] = lambda: warp_perspective.warp_perspective(
                        image, mats, backend="opencv"
                    )
                    ours.append(OPENCV)
            if device == "cuda":
                impls[GRID_SAMPLE] = lambda: grid_sample_warp(image, mats, (h, w))
            if have_kornia:
                impls["kornia"] = lambda: kornia_warp(
                    image, mats, (h, w), mode="bilinear", padding_mode="zeros", align_corners=True
                )
            if have_cv2 and device == "cpu":
                impls[CV2_LOOP], impls[CV2_FROM_NCHW] = cv2_loops(image, mats64, mats)
            if device == "cpu":
                impls[COPY_FLOOR] = lambda: fresh_copy(image)
            pixels = BATCH * CHANNELS * h * w
            ctx.compare(
                op=OP,
                case=_case(size),
                size=pixels,
                device=device,
                dtype=torch.float32,
                impls=impls,
                ours=ours,
                extra=lambda s, n=pixels: {"Msamples/s": n / s / 1e6},
            )
    if "cpu" in ctx.devices:
        run_one_thread(ctx, sizes, mats64, have_cv2)

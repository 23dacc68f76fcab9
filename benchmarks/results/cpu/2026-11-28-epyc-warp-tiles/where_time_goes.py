"""Where warp_perspective's one-thread time goes at 256x256, 1080p and 4K, beside the cv2 loop.

Batch 8, 3 channels, float32, bilinear, zeros padding; torch and cv2 on one thread each.
Per size, every implementation is called in turn (A B C ..., A B C ...) for --rounds rounds,
--calls calls each; the table gives each one's median over all calls, its spread (min, max
of the round medians) and ns per output sample. The rows:

- ours (bench): the public op on the bench's homographies (bench_warp_perspective.py);
- ours identity / rotated 10 deg / strong perspective: the same op on other warps, to
  expose the traversal's cost (identity: every group takes the window path; 10 deg: every
  group gathers, source rows crossed every 6 pixels; perspective: gathers, zoom varies);
- cv2 loop: cv2.warpPerspective per image on prepared (H, W, 3) arrays, the bench's peer;
- copy, fresh output: image copied into a new tensor advised for huge pages (the bench's
  floor: what any op returning a new tensor pays: read input, fault and zero the output
  pages, write it);
- copy, reused output: the same copy into one preallocated tensor (no page faults);
- fresh output, zeroed: a new advised tensor written with zeros (the first-touch cost);
- ours (bench) and rotated 10 deg with WARP_PERSPECTIVE_MEASURE_VARIANT=<v>, for each
  --variant: a measurement-only switch of a work-in-progress build (absent from committed
  code): "tiles:<rows>:<cols>" traversed the output in tiles of that size (also timed on
  the rotated warp), "populate" mapped the output's huge pages before the kernel ran (as
  with several threads), "nohuge" advised it against huge pages.

Run from this folder, under the bench's malloc settings (benchmarks/run.py's ALLOCATOR), with
the bench's module importable (the batch, the sizes and the homographies are its own):

PYTHONPATH=../../../..:../../../../packages/warp_perspective/bench \
GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=4294967296 \
    python where_time_goes.py [--sizes 256x256 1080p 4K] [--rounds 5] [--calls 3]
    [--variant tiles:32:512 ...]   # only with measurement_variants.patch applied and built
"""

from __future__ import annotations

import argparse
import ctypes
import math
import os
import statistics
import time

import cv2
import numpy as np
import torch
from bench_warp_perspective import BATCH as B
from bench_warp_perspective import CHANNELS as C
from bench_warp_perspective import SIZES
from bench_warp_perspective import _homographies as bench_homographies

import warp_perspective

_LIBC = ctypes.CDLL(None)


def rotation(h: int, w: int, degrees: float) -> torch.Tensor:
    a = math.radians(degrees)
    cx, cy = (w - 1) / 2, (h - 1) / 2
    r = torch.tensor([[math.cos(a), -math.sin(a), 0], [math.sin(a), math.cos(a), 0], [0, 0, 1]],
                     dtype=torch.float64)  # fmt: skip
    t = torch.tensor([[1, 0, cx], [0, 1, cy], [0, 0, 1]], dtype=torch.float64)
    ti = torch.tensor([[1, 0, -cx], [0, 1, -cy], [0, 0, 1]], dtype=torch.float64)
    return (t @ r @ ti).repeat(B, 1, 1)


def perspective(h: int, w: int) -> torch.Tensor:
    """The image's corners to a trapezoid: the top edge shrunk to half its width."""
    src = np.float32([[0, 0], [w - 1, 0], [w - 1, h - 1], [0, h - 1]])
    dst = np.float32([[w / 4, 0], [3 * w / 4, 0], [w - 1, h - 1], [0, h - 1]])
    m = cv2.getPerspectiveTransform(src, dst)
    return torch.from_numpy(m).to(torch.float64).repeat(B, 1, 1)


def advised_empty(like: torch.Tensor) -> torch.Tensor:
    out, huge = torch.empty_like(like), 2 << 20
    first = (out.data_ptr() + huge - 1) & ~(huge - 1)
    last = (out.data_ptr() + out.nbytes) & ~(huge - 1)
    if out.nbytes >= 4 * huge and last > first:
        _LIBC.madvise(ctypes.c_void_p(first), ctypes.c_size_t(last - first), 14)  # HUGEPAGE
    return out


def impls_for(h: int, w: int, variants: list[str]):
    image = torch.rand(B, C, h, w, generator=torch.Generator().manual_seed(1))
    mats64 = bench_homographies(B)
    reused = torch.empty_like(image)
    hwc = [np.ascontiguousarray(im.permute(1, 2, 0).numpy()) for im in image]
    np_mats = [m.numpy() for m in mats64]

    def ours(m):
        m = m.to(torch.float32)
        return lambda: warp_perspective.warp_perspective(image, m)

    def cv2_loop():
        return [cv2.warpPerspective(im, m, (w, h), flags=cv2.INTER_LINEAR)
                for im, m in zip(hwc, np_mats, strict=True)]  # fmt: skip

    def variant(v, mats):
        m = mats.to(torch.float32)

        def call():
            os.environ["WARP_PERSPECTIVE_MEASURE_VARIANT"] = v
            try:
                return warp_perspective.warp_perspective(image, m)
            finally:
                del os.environ["WARP_PERSPECTIVE_MEASURE_VARIANT"]

        return call

    impls = {
        "ours (bench)": ours(mats64),
        "cv2 loop": cv2_loop,
        "ours identity": ours(torch.eye(3, dtype=torch.float64).repeat(B, 1, 1)),
        "ours rotated 10 deg": ours(rotation(h, w, 10.0)),
        "ours strong perspective": ours(perspective(h, w)),
        "copy, fresh output": lambda: advised_empty(image).copy_(image),
        "copy, reused output": lambda: reused.copy_(image),
        "fresh output, zeroed": lambda: advised_empty(image).zero_(),
    }
    for v in variants:
        impls[f"ours (bench) variant {v}"] = variant(v, mats64)
        if v.startswith("tiles"):
            impls[f"ours rotated 10 deg variant {v}"] = variant(v, rotation(h, w, 10.0))
    return image, impls


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", nargs="+", default=list(SIZES))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=3)
    ap.add_argument("--variant", action="append", default=[])
    ap.add_argument("--only", nargs="*", default=None, help="row names to time (prefixes)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    cv2.setNumThreads(1)
    print(f"torch {torch.__version__}, cv2 {cv2.__version__}, warp_perspective "
          f"{warp_perspective.build_config()['cpu_level']}, one thread each")  # fmt: skip
    for size in args.sizes:
        h, w = SIZES[size]
        image, impls = impls_for(h, w, args.variant)
        if args.only is not None:
            impls = {k: v for k, v in impls.items()
                     if k in ("ours (bench)", "cv2 loop") or any(k.startswith(o) for o in args.only)}  # fmt: skip
        for fn in impls.values():  # warm-up: pages, caches, lazy init
            fn()
        samples = {k: [] for k in impls}
        rounds = {k: [] for k in impls}
        load0 = os.getloadavg()[0]
        for _ in range(args.rounds):
            for name, fn in impls.items():
                t = []
                for _ in range(args.calls):
                    t0 = time.perf_counter()
                    fn()
                    t.append(time.perf_counter() - t0)
                samples[name] += t
                rounds[name].append(statistics.median(t))
        load1 = os.getloadavg()[0]
        n = image.numel()
        print(f"\n## B={B} C={C} {size}: {n / 1e6:.1f} M samples, input {image.nbytes / 1e6:.0f} MB"
              f"; load average (1 min) {load0:.2f} before, {load1:.2f} after; "
              f"{args.rounds} rounds x {args.calls} calls\n")  # fmt: skip
        print("| row | median ms | round medians min..max | ns/sample | cv2 loop / row |")
        print("| --- | --- | --- | --- | --- |")
        cv = statistics.median(samples["cv2 loop"])
        for name in impls:
            med = statistics.median(samples[name])
            lo, hi = min(rounds[name]), max(rounds[name])
            print(f"| {name} | {med * 1e3:.2f} | {lo * 1e3:.2f}..{hi * 1e3:.2f} | "
                  f"{med / n * 1e9:.3f} | {cv / med:.2f}x |")  # fmt: skip
        del image, impls


if __name__ == "__main__":
    main()

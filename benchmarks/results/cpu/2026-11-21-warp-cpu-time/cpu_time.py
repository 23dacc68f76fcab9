"""Process CPU time per call, one thread, for the cases of bench_warp_perspective.py.

    python benchmarks/results/cpu/2026-11-21-warp-cpu-time/cpu_time.py [--repeat 7]

Wall-clock timings on a machine shared with other work move with its load; the CPU time
a single-threaded call consumes does much less, so this compares the kernels' cost per
core: warp_perspective (the public op, whichever backend the build has), its built-in
kernel, kornia and both cv2 loops (on prepared HWC arrays, and from NCHW tensors), each
with torch and cv2 limited to one thread. The median of --repeat calls is printed, in ms,
and each peer's time over ours; then, as the memory-traffic floor of a call, a copy of
the input into a fresh output allocated as the op allocates its own (transparent huge
pages from 8 MB), and a copy into an existing tensor (bandwidth alone).
"""

from __future__ import annotations

import argparse
import resource
import sys
from pathlib import Path

import torch

# The benchmark module (beside this file) and the harness it imports (repository root).
ROOT = Path(__file__).resolve().parents[4]
sys.path[:0] = [str(ROOT / "packages" / "warp_perspective" / "bench"), str(ROOT)]
import bench_warp_perspective as bench  # noqa: E402

import warp_perspective  # noqa: E402


def cpu_seconds(fn, repeat: int) -> float:
    fn()
    samples = []
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_SELF)
        fn()
        after = resource.getrusage(resource.RUSAGE_SELF)
        samples.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return sorted(samples)[len(samples) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    import cv2
    from kornia.geometry.transform import warp_perspective as kornia_warp

    torch.set_num_threads(1)
    cv2.setNumThreads(1)
    print(
        f"one thread; warp_perspective backend {warp_perspective.backend()}, "
        f"cv2 {cv2.__version__}, torch {torch.__version__}"
    )
    mats64 = bench._homographies(bench.BATCH)
    mats = mats64.float()
    peers = ("kornia", bench.CV2_LOOP, bench.CV2_FROM_NCHW)
    for case, (h, w) in bench.SIZES.items():
        image = torch.rand(bench.BATCH, bench.CHANNELS, h, w)
        cv2_loop, cv2_from_nchw = bench.cv2_loops(image, mats64, mats)
        impls = {
            bench.OURS: lambda: warp_perspective.warp_perspective(image, mats),
            bench.BUILTIN: lambda: torch.ops.warp_perspective._warp_perspective_builtin(
                image, mats
            ),
            "kornia": lambda: kornia_warp(image, mats, (h, w), align_corners=True),
            bench.CV2_LOOP: cv2_loop,
            bench.CV2_FROM_NCHW: cv2_from_nchw,
        }
        times = {name: cpu_seconds(fn, args.repeat) for name, fn in impls.items()}
        for name, seconds in times.items():
            ratios = ", ".join(
                f"{peer} / this {times[peer] / seconds:.2f}x"
                for peer in peers
                if peer != name and name in (bench.OURS, bench.BUILTIN)
            )
            print(f"  {case:8} {name:34} {seconds * 1e3:8.2f} ms  {ratios}")
        existing = torch.empty_like(image)
        floors = {
            "floor: copy into a fresh output": lambda: bench.fresh_copy(image),
            "floor: copy into an existing tensor": lambda: existing.copy_(image),
        }
        mb = 2 * image.nbytes / 1e6
        for name, fn in floors.items():
            seconds = cpu_seconds(fn, args.repeat)
            print(
                f"  {case:8} {name:34} {seconds * 1e3:8.2f} ms  ({mb:.0f} MB read + written, "
                f"{mb / 1e3 / seconds:.1f} GB/s); built-in kernel / this "
                f"{times[bench.BUILTIN] / seconds:.1f}x"
            )


if __name__ == "__main__":
    main()

"""The bench's own rows for issue 63's goal, exactly as ``nox -s bench`` times them
(bench_warp_perspective, harness.Context, torch.utils.benchmark, round-robin rounds), at
256x256, 1080p and 4K, with the load average before and after each row: the one-thread
bilinear float32 row (ours against the cv2 loop), or with --default-threads the default-
threads row (every CPU implementation, torch and cv2 at their default threads). Run from the
repository root under the bench's malloc settings:

PYTHONPATH=.:packages/warp_perspective/bench \\
GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=4294967296 \\
    python benchmarks/results/cpu/2026-11-28-epyc-warp-tiles/goal_rows.py [--rounds 5]
"""

import argparse
import importlib
import os

import cv2
import torch

from benchmarks.harness import Context

bench = importlib.import_module("bench_warp_perspective")

ap = argparse.ArgumentParser()
ap.add_argument("--rounds", type=int, default=5)
ap.add_argument("--sizes", nargs="+", default=list(bench.SIZES))
ap.add_argument("--default-threads", action="store_true")
args = ap.parse_args()
op = bench.OP if args.default_threads else bench.OP + bench.ONE_THREAD
print(f"torch {torch.get_num_threads()} threads, cv2 {cv2.getNumThreads()} threads by default")


def fmt(x) -> str:
    return (f"{x.seconds * 1e3:.2f} ms (rounds {min(x.rounds) * 1e3:.2f}.."
            f"{max(x.rounds) * 1e3:.2f}, IQR {x.iqr / x.seconds:.1%})")  # fmt: skip


for size in args.sizes:
    ctx = Context(rounds=args.rounds, devices=["cpu"], only={(op, bench._case(size), "cpu")})
    load0 = os.getloadavg()[0]
    if args.default_threads:
        bench.run(ctx)
    else:
        bench._one_thread_rows(
            ctx, {size: bench.SIZES[size]}, bench._homographies(bench.BATCH), cv2
        )
    load1 = os.getloadavg()[0]
    m = {x.impl: x for x in ctx.measurements}
    ours, peer = m[bench.OURS], m[bench.CV2_LOOP]
    print(
        f"{size}: load {load0:.2f} -> {load1:.2f}; ours/cv2 loop speedup "
        f"{peer.seconds / ours.seconds:.2f}x",
        flush=True,
    )
    for name, x in m.items():
        print(f"  {name}: {fmt(x)}", flush=True)

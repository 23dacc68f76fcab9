"""Does a fresh output cost more when the previous call's memory was freed a while ago?

This VM's balloon device reports free memory to the host (virtio_balloon's REPORTING
feature; page_reporting_order 9: 2 MB blocks, about 2 s after they are freed), so the host may
take those pages back and fault them in again, zeroed, when the guest touches them next.
Each row is one thread, called with a pause of GAP seconds before each call (0: back to back;
3: longer than the reporting delay), interleaved, with the guest's counters around the calls:
wall and system time (getrusage) and /proc/vmstat's page faults, THP faults and direct
compaction stalls. Rows: ours (the bench's 4K and 1080p goal call), a fresh output of the
same size advised for huge pages and written (the bench's "copy into a fresh output" floor,
without the read), and the cv2 loop. Run from the repository root:

PYTHONPATH=.:packages/warp_perspective/bench \\
GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=4294967296 \\
    python benchmarks/results/cpu/2026-11-29-epyc-fresh-pages/gaps.py [--calls 5]
"""

import argparse
import importlib
import os
import resource
import statistics
import time
from pathlib import Path

import cv2
import torch

import warp_perspective

bench = importlib.import_module("bench_warp_perspective")
ap = argparse.ArgumentParser()
ap.add_argument("--calls", type=int, default=5)
ap.add_argument("--sizes", nargs="+", default=["4K", "1080p"])
ap.add_argument("--gaps", nargs="+", type=float, default=[0.0, 3.0])
args = ap.parse_args()
torch.set_num_threads(1)
cv2.setNumThreads(1)
COUNTERS = ("pgfault", "thp_fault_alloc", "thp_fault_fallback", "compact_stall")


def vmstat() -> dict[str, int]:
    pairs = (line.split() for line in Path("/proc/vmstat").read_text().splitlines())
    return {k: int(v) for k, v in pairs if k in COUNTERS}


print(f"torch {torch.__version__}, cv2 {cv2.__version__}, one thread each; "
      f"MemFree {Path('/proc/meminfo').read_text().split('MemFree:')[1].split()[0]} kB; "
      f"load {os.getloadavg()[0]:.2f}", flush=True)  # fmt: skip
mats64 = bench._homographies(bench.BATCH)
mats = mats64.to(torch.float32)
for size in args.sizes:
    h, w = bench.SIZES[size]
    x = torch.rand(bench.BATCH, bench.CHANNELS, h, w, generator=torch.Generator().manual_seed(1))
    impls = {
        "ours": lambda: warp_perspective.warp_perspective(x, mats),
        "fresh output, zeroed": lambda: bench.fresh_output(x).zero_(),
        "cv2 loop": bench.cv2_loops(x, mats64, mats)[0],
    }
    for fn in impls.values():
        fn()  # warm: libraries loaded, the heap grown
    rows = {(name, gap): [] for name in impls for gap in args.gaps}
    for _ in range(args.calls):
        for gap in args.gaps:
            for name, fn in impls.items():
                time.sleep(gap)
                r0, v0, t0 = resource.getrusage(resource.RUSAGE_SELF), vmstat(), time.perf_counter()
                out = fn()
                t1, r1, v1 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF), vmstat()
                del out
                rows[name, gap].append((t1 - t0, r1.ru_stime - r0.ru_stime, r1.ru_utime - r0.ru_utime,
                                        {k: v1[k] - v0[k] for k in COUNTERS}))  # fmt: skip
    print(
        f"\n{size} (B={bench.BATCH} C={bench.CHANNELS} {h}x{w}), {args.calls} calls a row, "
        f"load {os.getloadavg()[0]:.2f}"
    )
    print(
        "| row | pause before each call | wall ms: median (min..max) | system ms | user ms | "
        "page faults | THP faults | compaction stalls |\n| --- | ---: | --- | --- | --- | --- | --- | --- |"
    )
    for (name, gap), calls in rows.items():
        wall = [c[0] * 1e3 for c in calls]
        sys_ms = statistics.median(c[1] * 1e3 for c in calls)
        user_ms = statistics.median(c[2] * 1e3 for c in calls)
        total = {k: sum(c[3][k] for c in calls) // len(calls) for k in COUNTERS}
        print(f"| {name} | {gap:g} s | {statistics.median(wall):.1f} ({min(wall):.1f}..{max(wall):.1f}) | "
              f"{sys_ms:.0f} | {user_ms:.0f} | {total['pgfault']} | {total['thp_fault_alloc']} | "
              f"{total['compact_stall']} |", flush=True)  # fmt: skip

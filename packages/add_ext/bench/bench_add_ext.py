"""add_ext.add against torch.add(y, x, alpha=alpha) and eager alpha * x + y.

CPU float32 at 1e3 to 1e7 elements; on a GPU also CUDA up to 1e8, with achieved GB/s and,
from 1e6, a device-to-device copy of the same bytes (the ceiling for an op that reads two
tensors and writes one).
"""

from __future__ import annotations

import torch

import add_ext
from benchmarks.harness import Context, Goal

PACKAGE = "add_ext"
# What `size` counts in this package's measurements: the plots' x axis.
SIZE_LABEL = "n, elements per input tensor"
ALPHA = 2.0
COPY = "device copy"
# Issue 32 on the CPU: never more than 5% behind torch.add at any size. Issue 44 on CUDA: at
# least 90% of a device-to-device copy's bandwidth. The copy row moves the same bytes as the
# add (reads 1.5n elements and writes 1.5n: 12n bytes in float32, as x + y -> out), so
# its time over ours is the fraction of the copy's bandwidth the add reaches.
GOALS = [
    Goal(
        op="add",
        ours="add_ext",
        peer="torch.add",
        min_speedup=0.95,
        device="cpu",
        note="issue 32: >= 0.95x torch.add from 1e3 to 1e7 elements",
    ),
    *(
        Goal(
            op="add",
            ours="add_ext",
            peer=COPY,
            min_speedup=0.9,
            device="cuda",
            case=case,
            note="issue 44: >= 90% of a device-to-device copy's bandwidth (the same bytes)",
        )
        for case in ("n=1e+07", "n=1e+08")
    ),
]
# The rows of benchmarks/run.py --headline, on CUDA (issue 44, goal 6).
HEADLINE = [("add", "n=1e+07"), ("add", "n=1e+08")]


def _sizes(ctx: Context, device: str) -> list[int]:
    if ctx.quick:
        return [1_000, 10_000, 100_000, 1_000_000]
    sizes = [1_000, 10_000, 100_000, 1_000_000, 10_000_000]
    # 1e8 on a GPU only: 1.2 GB moved per call, where 1e7 still fits in an H100's 50 MB L2
    # for a good part.
    return [*sizes, 100_000_000] if device == "cuda" else sizes


def run(ctx: Context) -> None:
    dtype = torch.float32
    for device in ctx.devices:
        for n in _sizes(ctx, device):
            case = f"n={n:.0e}"
            if not ctx.wants("add", case, device):
                continue
            x = torch.randn(n, device=device, dtype=dtype)
            y = torch.randn(n, device=device, dtype=dtype)
            bytes_moved = 3 * n * x.element_size()
            impls = {
                "add_ext": lambda: add_ext.add(x, y, ALPHA),
                "torch.add": lambda: torch.add(y, x, alpha=ALPHA),
                "eager alpha*x+y": lambda: ALPHA * x + y,
            }
            if device == "cuda" and n >= 1_000_000:
                # Timed round-robin with the others, as one of them: the same clocks and
                # memory state.
                src = torch.empty(n * 3 // 2, device=device, dtype=dtype)
                dst = torch.empty_like(src)
                impls[COPY] = lambda src=src, dst=dst: dst.copy_(src)
            ctx.compare(
                op="add",
                case=case,
                size=n,
                device=device,
                dtype=dtype,
                impls=impls,
                ours="add_ext",
                extra=lambda s, b=bytes_moved: {"GB/s": b / s / 1e9},
            )

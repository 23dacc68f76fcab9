"""Minor page faults and glibc's heap, step by step, of lltm_cpu's training step at the large
shape (batch 64, input 256, state 1024): alone, with eager's steps between its own (as the
bench's round-robin runs them), or eager's step alone for comparison.

    python faults.py alone|mixed|eager [threads]   # under GLIBC_TUNABLES=... to try a setting

Each line: a step of the model timed, its minor faults, and mallinfo2's heap size and free
bytes after it. Run from the repository root's environment with lltm_cpu installed.
"""

from __future__ import annotations

import ctypes
import resource
import sys

import torch
from large_step import models_and_step


class MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in [
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        ]
    ]


def main() -> None:
    mode = sys.argv[1]
    torch.set_num_threads(int(sys.argv[2]) if len(sys.argv) > 2 else torch.get_num_threads())
    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = MallInfo2
    ours, eager, step = models_and_step()

    timed, other = (eager, ours) if mode == "eager" else (ours, eager)
    faulting = 0
    for i in range(64):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        step(timed)
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
        info = libc.mallinfo2()
        if i >= 3:  # the first steps grow the heap in any case
            faulting += faults > 1000
            print(f"step {i:2d}: {faults:5d} faults; heap {info.arena / 2**20:6.1f} MiB, "
                  f"free {info.fordblks / 2**20:5.1f} MiB")  # fmt: skip
        if mode == "mixed" and i % 8 == 7:
            for _ in range(8):
                step(other)
    print(f"{torch.__version__}, {mode}: {faulting} of 61 steps took over 1,000 faults")


if __name__ == "__main__":
    main()

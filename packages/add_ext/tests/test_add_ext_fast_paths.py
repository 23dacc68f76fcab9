"""Every path of add_ext's CPU kernel (csrc/cpu/add_kernel.cpp) taken on purpose, with
results to the bit.

The kernel copies non-contiguous inputs once, cuts the elements into at::parallel_for
chunks (grain 32768: one task up to 32768 elements, one per thread above), and runs per
chunk a loop chosen by dtype and CPU: float16 through F16C (8 elements at a time, then a
scalar tail) where the CPU has AVX2, FMA and F16C, else (or under ADD_EXT_NO_F16C=1,
read once) a portable loop; the other dtypes through GCC clones for AVX-512, AVX2 and
baseline x86-64, chosen by the CPU. The calls run here and in a subprocess with the F16C
switch the other way, on two intra-op threads, so which paths ran is known: f16c_path()
models the kernel's own test of the CPU, chunks() at::parallel_for's split. Sizes 0 to
40 (every tail of an 8-wide loop and of a 16-float clone), both sides of the grain and
of two chunks' worth, and a view off 16-byte alignment; alphas whose product with a
float16 or bfloat16 x is exact in float32 but that float16 cannot hold (1 + 2^-12), so
that any path computing in float32 and rounding once gives the exactly rounded value
(add_ext_battery.reference), fused multiply-add or not.
"""

from __future__ import annotations

import functools
import itertools
import os
import subprocess
import sys
from pathlib import Path

import torch
from add_ext_battery import reference

GRAIN = 32768  # add_kernel.cpp's kGrainSize
SIZES = (*range(41), GRAIN - 1, GRAIN, GRAIN + 1, 2 * GRAIN, 2 * GRAIN + 9)
ALPHAS = (-2.5, 1 + 2**-12, 2**-10)
DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def f16c_path(no_f16c: str) -> bool:
    """Whether float16 takes the F16C loop: the kernel's test (ADD_EXT_NO_F16C unless "1",
    and the CPU's AVX2, FMA and F16C) over /proc/cpuinfo's flags."""
    try:
        flags = set(Path("/proc/cpuinfo").read_text().split("flags")[1].split("\n")[0].split())
    except (OSError, IndexError):
        flags = set()
    return no_f16c != "1" and {"avx2", "fma", "f16c"} <= flags


def chunks(n: int, threads: int = 2) -> list[int]:
    """The first element of each at::parallel_for task for n elements."""
    tasks = min(threads, max(1, -(-n // GRAIN))) if n > GRAIN else 1
    size = -(-n // tasks)
    return list(range(0, n, size)) if n else [0]


@functools.cache
def inputs(n: int, dtype: torch.dtype, misaligned: bool) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(n)
    x, y = (torch.randn(n + 1, generator=g, dtype=torch.float64).to(dtype) for _ in "xy")
    return (x[1:], y[1:]) if misaligned else (x[:n], y[:n])


def outputs() -> dict:
    """add_ext.add at every size, dtype, alignment and alpha, two threads, with this
    process's F16C switch."""
    import add_ext

    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        return {
            (str(dtype), n, misaligned, alpha): add_ext.add(*inputs(n, dtype, misaligned), alpha)
            for dtype, n, misaligned, alpha in itertools.product(
                DTYPES, SIZES, (False, True), ALPHAS
            )
        }
    finally:
        torch.set_num_threads(threads)


_SCRIPT = """
import sys, torch
sys.path.insert(0, sys.argv[2])
from test_add_ext_fast_paths import outputs
torch.save(outputs(), sys.argv[1])
"""


def test_every_cpu_path_gives_the_exactly_rounded_value(tmp_path):
    """This process's float16 loop here, the other one in a subprocess with the switch
    (ADD_EXT_NO_F16C) turned the other way."""
    here = os.environ.get("ADD_EXT_NO_F16C", "0")
    there = "0" if here == "1" else "1"
    path = tmp_path / "outs.pt"
    subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(path), os.path.dirname(__file__)],
        check=True,
        env={**os.environ, "ADD_EXT_NO_F16C": there},
    )
    assert {len(chunks(n)) for n in SIZES} == {1, 2}  # one task and two
    for switch, outs in ((here, outputs()), (there, torch.load(path))):
        loop = "F16C" if f16c_path(switch) else "portable"
        for (dtype, n, misaligned, alpha), got in outs.items():
            x, y = inputs(n, getattr(torch, dtype.removeprefix("torch.")), misaligned)
            want = reference(x, y, alpha)
            what = f"{dtype} n={n} misaligned={misaligned} alpha={alpha}, chunks at {chunks(n)}"
            if x.dtype in (torch.float16, torch.bfloat16):  # one rounding: to the bit
                differ = (got.view(torch.int16) != want.view(torch.int16)).sum().item()
                where = f"{loop} loop" if x.dtype == torch.float16 else "clone"
                assert differ == 0, f"{what} ({where}): {differ} of {n} not exactly rounded"
            else:  # a clone fuses the multiply-add or not: within the battery's tolerance
                torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6, msg=what)

"""lltm_cpu: the test battery of the LLTM ops on the CPU (lltm_common/tests: battery.py
declares them), the shared LLTM suite (suite.py: the Python API, the module, the C++
autograd), plus what only the CPU kernels have."""

from __future__ import annotations

import functools
import platform
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from lltm_common.reference import make_inputs
from lltm_common.suite import *  # noqa: F403  (the shared cases, run here against lltm_cpu)
from lltm_cpu_battery import OPS

import lltm_cpu
from shared_build.battery import battery

test_battery = battery(OPS)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_backward_same_bits_for_any_thread_count(dtype):
    """The batch is cut into fixed tasks whatever the thread count, and d_bias adds their
    partial sums in task order: one thread and two give bit-identical d_bias (and
    d_old_cell). The GEMM results are MKL's affair and may differ in the last bit."""
    shape = (64, 16, 1024)  # 64k elements: several tasks
    inputs = make_inputs(*shape, dtype=dtype)
    saved = lltm_cpu.forward(*inputs)[1:]
    grads = [torch.randn(64, 1024, dtype=dtype) for _ in range(2)]
    results = []
    previous = torch.get_num_threads()
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            *_, d_bias, d_old_cell = lltm_cpu.backward(*grads, *saved, inputs[1])
            results.append((d_bias, d_old_cell))
    finally:
        torch.set_num_threads(previous)
    for a, b in zip(*results, strict=True):
        assert torch.equal(a, b)


def _denormal_survives() -> bool:
    """Whether this thread keeps a float32 denormal (2**-130) instead of flushing it."""
    tiny = torch.tensor(2.0**-120, dtype=torch.float32)
    return bool((tiny * 2.0**-10) != 0)


@pytest.mark.parametrize("flush", [False, True], ids=["denormals", "flushed"])
def test_passes_leave_the_callers_denormal_setting(flush):
    """The pointwise passes flush denormals while they run (lltm_kernel.cpp: a denormal
    constant in GCC's vectorized code cost a microcode assist per vector) and give the
    thread its own setting back, whichever it was."""
    inputs = make_inputs(4, 8, 16)
    previous = _denormal_survives()
    torch.set_flush_denormal(flush)
    try:
        saved = lltm_cpu.forward(*inputs)[1:]
        lltm_cpu.backward(torch.ones(4, 16), torch.ones(4, 16), *saved, inputs[1])
        assert _denormal_survives() is not flush
    finally:
        torch.set_flush_denormal(not previous)


@pytest.mark.skipif(platform.machine() != "x86_64", reason="FTZ/DAZ are set on x86-64 only")
def test_backward_flushes_a_result_below_the_normal_range():
    """What the flush changes: arithmetic that would give a float32 denormal gives 0. With
    the gates and the cell at zero, d_old_cell = grad_h * sigmoid(0) = grad_h / 2, and half
    of 2e-38 is below float32's smallest normal number (1.18e-38)."""
    grad_h = torch.full((2, 8), 2e-38)
    zeros = torch.zeros(2, 8)
    _, _, d_old_cell = torch.ops.lltm_cpu._backward_pointwise(
        grad_h, zeros, zeros, torch.zeros(2, 24)
    )
    assert _denormal_survives()
    assert torch.equal(d_old_cell, zeros)


@pytest.mark.skipif(platform.machine() != "x86_64", reason="FTZ/DAZ are set on x86-64 only")
@pytest.mark.parametrize("dtype, tiny", [(torch.float32, 1e-40), (torch.float64, 1e-310)])
def test_forward_reads_a_denormal_input_as_zero(dtype, tiny):
    """DAZ, in float64 too: with the gates at zero, new_cell = old_cell + elu(0) *
    sigmoid(0) = old_cell, and a denormal old_cell is read as 0."""
    zeros = functools.partial(torch.zeros, dtype=dtype)
    old_cell = torch.full((2, 8), tiny, dtype=dtype)
    new_cell = lltm_cpu.forward(zeros(2, 8), zeros(24, 16), zeros(24), zeros(2, 8), old_cell)[1]
    assert torch.equal(new_cell, zeros(2, 8))
    assert torch.equal(old_cell + 0, old_cell)  # outside the pass, the denormal stays


@pytest.mark.parametrize("op", ["forward", "backward", "_backward_pointwise"])
def test_every_op_has_its_kernels(op):
    """The CPU kernels next to the Meta and Autograd ones, and the
    refusal (CompositeExplicitAutograd) that every other device type reaches."""
    name = f"lltm_cpu::{op}"
    for key in ("CPU", "Meta", "Autograd", "CompositeExplicitAutograd"):
        assert torch._C._dispatch_has_kernel_for_dispatch_key(name, key), key
    for key in ("CUDA", "MPS"):
        assert torch._C._dispatch_has_computed_kernel_for_dispatch_key(name, key), key


@pytest.mark.cuda
def test_cuda_tensors_point_to_lltm_cuda():
    args = make_inputs(3, 4, 5, device="cuda")
    with pytest.raises(RuntimeError, match="lltm_cpu has CPU kernels only. Use lltm_cuda"):
        lltm_cpu.forward(*args)


def _disassembly_of_clones(names: tuple[str, ...]) -> tuple[dict[str, str], bool]:
    """The disassembly of each target_clones copy of the named float32 pointwise passes in
    _C.so, keyed '<name> <clone>' (clone: default, arch_x86_64_v3, arch_x86_64_v4), and
    whether _C.so has any such clone at all."""
    library = Path(lltm_cpu._C.__file__)
    try:
        dump = subprocess.run(
            ["objdump", "-d", "-C", "--no-show-raw-insn", str(library)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError) as error:
        pytest.skip(f"objdump unavailable: {error}")
    bodies: dict[str, str] = {}
    header = re.compile(r"^[0-9a-f]+ <(.*)>:$")
    current = None
    any_clone = False
    for line in dump.splitlines():
        match = header.match(line)
        if match:
            current = None
            symbol = match.group(1)
            clone = re.search(r"\[clone \.(default|arch_x86_64_v[34])\]$", symbol)
            any_clone = any_clone or clone is not None
            for name in names:
                # forward_rows(lltm::ForwardData<float>, ...): the float32 pass.
                if clone and re.search(rf"::{name}\((\w+::)*\w+Data<float>", symbol):
                    current = f"{name} {clone.group(1)}"
                    bodies[current] = ""
        elif current is not None:
            bodies[current] += line + "\n"
    return bodies, any_clone


@pytest.mark.skipif(
    platform.machine() != "x86_64" or sys.platform != "linux",
    reason="the pointwise passes have per-CPU clones on x86-64 Linux (GCC target_clones) only",
)
@pytest.mark.skipif(lltm_cpu.BUILD_INFO["debug"], reason="a DEBUG=1 build is not optimized")
@pytest.mark.skipif(
    bool(lltm_cpu.BUILD_INFO["sanitize"]),
    reason="a sanitizer build checks every load and store, which keeps GCC from vectorizing",
)
def test_pointwise_passes_are_vectorized_in_every_clone():
    """The fused pointwise passes run packed SIMD at every CPU level, not one element at a
    time. GCC left the AVX2 and baseline clones scalar (its 'control flow in loop') until the
    build passed -fno-trapping-math (packages/lltm_cpu/setup.py): AVX2 machines ran the
    passes several times slower than they need, and no value test could see it."""
    names = ("forward_rows", "backward_rows")
    bodies, any_clone = _disassembly_of_clones(names)
    if not any_clone:
        pytest.skip("no target_clones copies in _C.so (not a GCC build)")
    packed = {
        "default": re.compile(r"\b(v?mulps|v?addps|vfmadd\w*ps)\b.*%xmm"),
        "arch_x86_64_v3": re.compile(r"\b(vmulps|vaddps|vfmadd\w*ps)\b.*%ymm"),
        "arch_x86_64_v4": re.compile(r"\b(vmulps|vaddps|vfmadd\w*ps)\b.*%[yz]mm"),
    }
    for name in names:
        for clone, pattern in packed.items():
            body = bodies.get(f"{name} {clone}")
            assert body is not None, f"no {clone} clone of {name} in _C.so"
            count = len(pattern.findall(body))
            assert count >= 16, f"{name} [{clone}]: {count} packed float instructions"

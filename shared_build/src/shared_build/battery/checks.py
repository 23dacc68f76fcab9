"""The battery's checks but the fuzzer: each takes an OpTest, a device and a dtype, and
fails with the sample it failed on."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from itertools import combinations
from typing import Any

import pytest

from . import OpTest, Sample


def _tolerance(op: OpTest, dtype: Any) -> dict[str, float]:
    import torch

    if op.tolerance is not None:
        return op.tolerance(dtype)
    eps = {torch.float64: 1e-10, torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 2e-2}
    return {"atol": eps.get(dtype, 0.0), "rtol": eps.get(dtype, 0.0)}


def _tensors(value: Any) -> list[Any]:
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _tensors(v)]
    return []


def _close(got: Any, want: Any, tolerance: dict[str, float], what: str) -> None:
    import torch

    got_t, want_t = _tensors(got), _tensors(want)
    assert len(got_t) == len(want_t), (
        f"{what}: {len(got_t)} results, the reference has {len(want_t)}"
    )
    for i, (g, w) in enumerate(zip(got_t, want_t, strict=True)):
        assert g.shape == w.shape, (
            f"{what}: result {i} has shape {list(g.shape)}, not {list(w.shape)}"
        )
        torch.testing.assert_close(
            g.to_dense().cpu().double(), w.to_dense().cpu().double(), equal_nan=True, **tolerance,
            msg=lambda m, i=i: f"{what}, result {i}: {m}",
        )  # fmt: skip


def _samples(op: OpTest, device: str, dtype: Any, special: bool = False) -> Sequence[Sample]:
    """op's samples on device in dtype; with special=False, those whose values equal
    themselves (no NaN)."""
    samples = [s for s in op.samples(device, dtype) if special or not s.special]
    assert samples, f"{op.name} has no sample on {device} in {dtype}"
    return samples


def _detach(value: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return value.detach()
    if isinstance(value, (tuple, list)):
        return type(value)(_detach(v) for v in value)
    return value


def check_reference(op: OpTest, device: str, dtype: Any) -> None:
    import torch

    half = op.exact is not None and dtype in (torch.float16, torch.bfloat16)
    for sample in _samples(op, device, dtype, special=True):
        got = op.fn(*sample.args, **sample.kwargs)
        what = f"{op.name}({sample.name})"
        _close(got, op.reference(*sample.args, **sample.kwargs), _tolerance(op, dtype), what)
        if half:
            _within_ulps(_tensors(got), _tensors(op.exact(*sample.args, **sample.kwargs)), op, what)


def _within_ulps(got: list, want: list, op: OpTest, what: str) -> None:
    """Each 16-bit float result within op.ulps units in the last place of want's: the
    distance of their bit patterns read as ordered integers (NaN matches NaN, -0 0)."""
    import torch

    assert len(got) == len(want) == len(op.ulps), f"{what}: {len(op.ulps)} ulps for {len(got)}"
    for i, (g, w, most) in enumerate(zip(got, want, op.ulps, strict=True)):
        if most is None:
            continue
        assert g.dtype == w.dtype and g.shape == w.shape, f"{what}, result {i}: {w.dtype} {w.shape}"
        g, w = g.detach().cpu().contiguous(), w.detach().cpu().contiguous()
        bits = [t.view(torch.int16).int() for t in (g, w)]
        ordered = [torch.where(b < 0, -32768 - b, b) for b in bits]
        apart = torch.where(g.isnan() & w.isnan(), 0, (ordered[0] - ordered[1]).abs())
        bad = (apart > most).nonzero()
        assert not len(bad), (
            f"{what}, result {i}: {len(bad)} of {g.numel()} elements over {most} ulp from the "
            f"exact result, e.g. at {bad[0].tolist()}: {g[tuple(bad[0])].item()!r}, not "
            f"{w[tuple(bad[0])].item()!r} ({apart.max().item()} ulp)"
        )


# opcheck's utilities: the schema and the fake kernel depend on the dtype (a fake kernel
# that gives float16 a float32 result fails in float16 only), the autograd registration
# and AOT dispatch (the costly part: an AOT trace with dynamic shapes) do not, and run in
# float32 and float64 (or the op's one dtype).
DTYPE_UTILS = ("test_schema", "test_faketensor")
ALL_UTILS = (*DTYPE_UTILS, "test_autograd_registration", "test_aot_dispatch_dynamic")


def check_opcheck(op: OpTest, device: str, dtype: Any) -> None:
    import torch

    names = [str(d).removeprefix("torch.") for d in op.dtypes]
    full = {"float32", "float64"} & set(names) or {names[-1]}
    utils = ALL_UTILS if str(dtype).removeprefix("torch.") in full else DTYPE_UTILS
    for sample in _one_of_each_structure(_samples(op, device, dtype)):
        torch.library.opcheck(op.op, sample.args, sample.kwargs, test_utils=utils)


def of_grad_inputs(op: OpTest, sample: Sample) -> Any:
    """op.fn as a function of the sample's tensors that require grad (in order), the
    sample's other arguments fixed: what gradcheck calls."""
    import torch

    def fn(*tensors):
        swap = iter(tensors)
        args = [
            next(swap) if isinstance(a, torch.Tensor) and a.requires_grad else a
            for a in sample.args
        ]
        return op.fn(*args, **sample.kwargs)

    return fn


def _subsets(positions: Sequence[int], most: int = 3) -> list[tuple[int, ...]]:
    """Which of the inputs at positions need a gradient, one case each: every non-empty
    subset of up to ``most`` inputs, else each alone and all together. An autograd kernel
    branches on the inputs that need grad (a GEMM skipped, a fast path): each branch runs."""
    if len(positions) <= most:
        return [c for r in range(1, len(positions) + 1) for c in combinations(positions, r)]
    return [(p,) for p in positions] + [tuple(positions)]


def check_gradcheck(op: OpTest, device: str, dtype: Any) -> None:
    import torch

    for sample in _samples(op, device, dtype):
        needing = [
            i for i, a in enumerate(sample.args) if isinstance(a, torch.Tensor) and a.requires_grad
        ]
        assert needing, f"{op.name}({sample.name}): a float64 sample needs inputs that require grad"
        for wanted in _subsets(needing):
            args = tuple(
                a.detach() if i in needing and i not in wanted else a
                for i, a in enumerate(sample.args)
            )
            fn = of_grad_inputs(op, replace(sample, args=args))
            inputs = [args[i] for i in wanted]
            what = f"{sample.name}, grad of arguments {list(wanted)}"
            # Atomic adds (a CUDA backward's) sum in any order: a rounding apart between calls.
            tol = 1e-12 if device == "cuda" else 0.0
            assert torch.autograd.gradcheck(
                fn, inputs, nondet_tol=tol, check_forward_ad=op.forward_ad
            ), what
            if op.gradgrad:
                assert torch.autograd.gradgradcheck(fn, inputs, nondet_tol=tol), what


def check_backward(op: OpTest, device: str, dtype: Any) -> None:
    """As shared_build.battery says; forward mode on the first sample only unless forward_ad."""
    for n, sample in enumerate(_samples(op, device, dtype)):
        for wanted in _subsets(_floating(sample.args)):
            _compare_gradients(op, sample, wanted, dtype)
            if op.forward_ad or n == 0:
                _compare_tangents(op, sample, wanted, dtype)


def _floating(args: Sequence[Any]) -> list[int]:
    """The positions of the floating dense tensors among args: those a gradient flows to."""
    import torch

    return [
        i for i, a in enumerate(args)
        if isinstance(a, torch.Tensor) and a.dtype.is_floating_point and a.layout == torch.strided
    ]  # fmt: skip


def _compare_gradients(op: OpTest, sample: Sample, wanted: Sequence[int], dtype: Any) -> None:
    import torch

    ours, theirs = list(_detach(sample.args)), list(_detach(sample.args))
    for i in wanted:  # the reference's leaves in float64
        ours[i], theirs[i] = ours[i].clone().requires_grad_(), theirs[i].double().requires_grad_()
    got = _tensors(op.fn(*ours, **sample.kwargs))
    want = _tensors(op.reference(*theirs, **sample.kwargs))
    what = f"{op.name}({sample.name}) with arguments {list(wanted)} needing grad"
    pairs = [(g, w) for g, w in zip(got, want, strict=True) if g.requires_grad and w.requires_grad]
    # An autograd kernel that skips the graph for this mix of inputs returns no gradient.
    assert pairs or not any(w.requires_grad for w in want), f"{what}: no result requires grad"
    if not pairs:
        return
    outs, refs = [g for g, _ in pairs], [w for _, w in pairs]
    seeds = [torch.randn(g.shape, dtype=torch.float64, device=g.device) for g in outs]

    def grad(results, leaves, seeds=seeds):
        cast = [s.to(r.device, r.dtype) for s, r in zip(seeds, results, strict=True)]
        return torch.autograd.grad(results, leaves, cast, allow_unused=True)

    grads = grad(outs, [ours[i] for i in wanted])
    expected = grad(refs, [theirs[i] for i in wanted])
    for i, g, w in zip(wanted, grads, expected, strict=True):
        if w is None:
            assert g is None or not g.any(), (
                f"{what}: a gradient for argument {i}, none in the reference"
            )
            continue
        assert g is not None, f"{what}: no gradient for argument {i}"
        _close(g, w.to(g.dtype), _tolerance(op, dtype), f"gradient of argument {i} of {what}")


def _compare_tangents(op: OpTest, sample: Sample, wanted: Sequence[int], dtype: Any) -> None:
    """Forward mode with tangents on the arguments at wanted: the reference's tangents
    (op.forward_ad), or an exception, where the reference has any."""
    import torch
    import torch.autograd.forward_ad as fwAD

    args = list(_detach(sample.args))
    seeds = {i: torch.randn(args[i].shape, dtype=torch.float64) for i in wanted}

    def tangents(fn, cast):
        with fwAD.dual_level():
            duals = [
                fwAD.make_dual(cast(a), seeds[i].to(a.device, cast(a).dtype)) if i in seeds else a
                for i, a in enumerate(args)
            ]
            return [fwAD.unpack_dual(t).tangent for t in _tensors(fn(*duals, **sample.kwargs))]

    expected = tangents(op.reference, lambda a: a.double())
    if all(t is None for t in expected):
        return  # nothing to carry (e.g. an argument the op holds constant)
    what = f"forward mode of {op.name}({sample.name}) with tangents on arguments {list(wanted)}"
    if not op.forward_ad:
        with pytest.raises((RuntimeError, NotImplementedError), match=r"jvp|forward.(mode|AD)"):
            tangents(op.fn, lambda a: a)
            pytest.fail(f"{what}: no exception (forward_ad=False), so tangents were dropped")
        return
    got = tangents(op.fn, lambda a: a)
    for i, (g, w) in enumerate(zip(got, expected, strict=True)):
        if w is not None:
            assert g is not None, f"{what}: no tangent for result {i}"
            _close(g, w.to(g.dtype), _tolerance(op, dtype), f"tangent of result {i} of {what}")


def check_compile(op: OpTest, device: str, dtype: Any) -> None:
    """As shared_build.battery says, over samples of one structure: one graph, dynamic sizes."""
    import torch

    torch._dynamo.reset()
    compiled = torch.compile(op.fn, fullgraph=True, dynamic=True)
    for sample in _same_structure(_samples(op, device, dtype)):
        args = list(_detach(sample.args))
        leaves = []
        for i in _floating(args) if op.differentiable else ():
            args[i] = args[i].clone().requires_grad_()
            leaves.append(args[i])
        eager = op.fn(*args, **sample.kwargs)
        got = compiled(*args, **sample.kwargs)
        what = f"compiled {op.name}({sample.name})"
        _close(got, eager, _tolerance(op, dtype), what)
        pairs = [
            (g, e) for g, e in zip(_tensors(got), _tensors(eager), strict=True) if g.requires_grad
        ]
        if not (pairs and leaves):
            continue
        seeds = [torch.randn_like(g, dtype=torch.float64).to(g.dtype) for g, _ in pairs]
        grads = torch.autograd.grad([g for g, _ in pairs], leaves, seeds, allow_unused=True)
        want = torch.autograd.grad([e for _, e in pairs], leaves, seeds, allow_unused=True)
        for i, (g, w) in enumerate(zip(grads, want, strict=True)):
            assert (g is None) == (w is None), f"gradient {i} of {what}: present on one side only"
            if g is not None:
                _close(g, w, _tolerance(op, dtype), f"gradient {i} of {what}")


def _structure(sample: Sample) -> tuple:
    """What a fake kernel or a compiled graph depends on: ranks, layouts, dtypes, strides
    up to size, whether tensors are empty."""
    import torch

    return tuple(
        (t.dim(), t.layout, t.dtype, t.numel() == 0, t.layout != torch.strided or t.is_contiguous())
        for t in _tensors(sample.args)
    )


def _one_of_each_structure(samples: Sequence[Sample]) -> list[Sample]:
    """The first sample of each structure: opcheck's fake-tensor and AOT checks see every
    rank, layout and stride pattern the samples have, once."""
    seen: dict[tuple, Sample] = {}
    for sample in samples:
        seen.setdefault(_structure(sample), sample)
    return list(seen.values())


def _same_structure(samples: Sequence[Sample], most: int = 3) -> list[Sample]:
    """Up to ``most`` samples whose tensors have the ranks and layouts of the first: one
    compiled graph, with dynamic sizes, serves them all (others would recompile)."""

    def structure(sample: Sample) -> tuple:
        return tuple((t.dim(), t.layout, t.dtype) for t in _tensors(sample.args))

    first = structure(samples[0])
    return [s for s in samples if structure(s) == first][:most]


def _module(op: OpTest, sample: Sample) -> tuple[Any, tuple]:
    """A module calling the op with a sample's non-tensor arguments fixed, and its tensors."""
    import torch

    positions = [i for i, a in enumerate(sample.args) if isinstance(a, torch.Tensor)]

    class Call(torch.nn.Module):
        def forward(self, *tensors):
            args = list(sample.args)
            for i, t in zip(positions, tensors, strict=True):
                args[i] = t
            return op.op(*args, **sample.kwargs)

    return Call(), tuple(_detach(sample.args[i]) for i in positions)


def check_export(op: OpTest, device: str, dtype: Any) -> None:
    import torch

    for sample in _samples(op, device, dtype):
        module, tensors = _module(op, sample)
        eager = module(*tensors)
        program = torch.export.export(module, tensors)
        what, tolerance = f"{op.name}({sample.name})", _tolerance(op, dtype)
        _close(program.module()(*tensors), eager, tolerance, f"exported {what}")
        if op.aoti:
            with tempfile.TemporaryDirectory() as folder:
                path = torch._inductor.aoti_compile_and_package(
                    program, package_path=os.path.join(folder, "op.pt2")
                )
                loaded = torch._inductor.aoti_load_package(path)
                _close(loaded(*tensors), eager, tolerance, f"AOTInductor {what}")
        return  # one sample: exporting is the same for all


_TORCHSCRIPT_CHILD = """
import sys, torch, {package}
module = torch.jit.load(sys.argv[1])
args = torch.load(sys.argv[2])
torch.save(module(*args), sys.argv[3])
"""


def check_torchscript(op: OpTest, device: str, dtype: Any) -> None:
    import torch

    sample = _samples(op, device, dtype)[0]
    module, tensors = _module(op, sample)
    eager = module(*tensors)
    scripted = torch.jit.trace(module, tensors, check_trace=False)
    with tempfile.TemporaryDirectory() as folder:
        paths = [os.path.join(folder, name) for name in ("op.pt", "args.pt", "out.pt")]
        scripted.save(paths[0])
        torch.save(tensors, paths[1])
        child = _TORCHSCRIPT_CHILD.format(package=op.package())
        done = subprocess.run([sys.executable, "-c", child, *paths], capture_output=True, text=True)
        assert done.returncode == 0, (
            f"the saved module failed in a fresh process:\n{done.stderr[-3000:]}"
        )
        what = f"TorchScript {op.name}({sample.name})"
        _close(torch.load(paths[2]), eager, _tolerance(op, dtype), what)


def check_cuda_vs_cpu(op: OpTest, device: str, dtype: Any) -> None:
    import torch

    def to_cuda(value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            moved = value.detach().to("cuda")
            return moved.requires_grad_(value.requires_grad) if value.is_leaf else moved
        if isinstance(value, (tuple, list)):
            return type(value)(to_cuda(v) for v in value)
        return value

    for sample in _samples(op, "cpu", dtype):
        cpu = op.fn(*sample.args, **sample.kwargs)
        cuda = op.fn(*to_cuda(sample.args), **to_cuda(sample.kwargs))
        what = f"{op.name}({sample.name}) on CUDA against the CPU"
        _close(cuda, cpu, _tolerance(op, dtype), what)


def check_bad(op: OpTest, device: str, dtype: Any) -> None:
    bad = op.bad()
    assert bad, f"{op.name} declares no bad call"
    for call in bad:
        with pytest.raises(call.error, match=call.match):
            op.fn(*call.args, **call.kwargs)


def check_threads(op: OpTest, device: str, dtype: Any) -> None:
    import torch

    sample = max(
        _samples(op, device, dtype), key=lambda s: sum(t.numel() for t in _tensors(s.args))
    )
    args = _detach(sample.args)
    expected = _tensors(op.op(*args, **sample.kwargs))
    start = threading.Barrier(8)

    def worker() -> list[Any]:
        start.wait()
        for _ in range(5):
            got = _tensors(op.op(*args, **sample.kwargs))
        return got

    with ThreadPoolExecutor(8) as pool:
        futures = [pool.submit(worker) for _ in range(8)]
    what = f"{op.name}({sample.name})"
    for i, future in enumerate(futures):
        assert future.exception() is None, f"thread {i}: {future.exception()!r}"
        got = future.result()
        if device in op.nondeterministic:
            _close(got, expected, _tolerance(op, dtype), f"{what}: thread {i}")
            continue
        for ours, want in zip(got, expected, strict=True):
            assert torch.equal(ours, want), f"{what}: thread {i} differs from the serial call"


def check_memory(op: OpTest, device: str, dtype: Any) -> None:
    """RSS after 20,000 more calls is within 4 MiB of RSS after 2,000: a kernel that leaks
    200 bytes a call fails. The smallest sample, one intra-op thread."""
    import torch

    if not os.path.exists("/proc/self/statm"):
        pytest.skip("needs /proc (Linux)")
    dtype_ = getattr(torch, op.memory_dtype if op.memory_dtype in op.dtypes else op.dtypes[-1])
    # The smallest sample that has data: the kernel runs, and 22,000 calls take seconds.
    sized = [s for s in _samples(op, "cpu", dtype_) if all(t.numel() for t in _tensors(s.args))]
    sample = min(sized, key=lambda s: sum(t.numel() for t in _tensors(s.args)))

    def rss() -> int:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        sizes = []
        for calls in (2000, 20000):
            for _ in range(calls):
                op.fn(*sample.args, **sample.kwargs)
            gc.collect()
            sizes.append(rss())
        grown = sizes[1] - sizes[0]
    finally:
        torch.set_num_threads(threads)
    assert grown < 4 << 20, (
        f"{op.name}({sample.name}): RSS grew by {grown / 2**20:.1f} MiB over 20,000 calls"
    )


def check_properties(op: OpTest, device: str, dtype: Any) -> None:
    if op.properties is None:
        pytest.skip(f"{op.name} declares no property strategy")
    hypothesis = pytest.importorskip("hypothesis")
    from hypothesis import assume, given, note, settings

    def close(sample: Sample, got: Any, want: Any) -> None:
        _close(got, want, _tolerance(op, _tensors(got)[0].dtype), f"{op.name}({sample.name})")

    check = op.check or close

    # Dtypes a run leaves out of the drawn samples (e.g. the GPU check's initcheck, which
    # cannot see cuBLAS's half-precision writes): "float16,bfloat16".
    left_out = set(filter(None, os.environ.get("SHARED_BUILD_BATTERY_SKIP_DTYPES", "").split(",")))

    @settings(max_examples=max(200, settings.default.max_examples), deadline=None, database=None,
              suppress_health_check=list(hypothesis.HealthCheck))  # fmt: skip
    @given(sample=op.properties(device))
    def run(sample: Sample) -> None:
        import torch

        tensors = _tensors([*sample.args, *sample.kwargs.values()])
        assume(not any(str(t.dtype).removeprefix("torch.") in left_out for t in tensors))
        note(sample.name)
        got = op.fn(*sample.args, **sample.kwargs)
        check(sample, got, op.reference(*sample.args, **sample.kwargs))
        boxed = op.op(*sample.args, **sample.kwargs)  # the same through torch.ops
        if device in op.nondeterministic:
            _close(boxed, got, _tolerance(op, _tensors(got)[0].dtype), "torch.ops' result")
        else:
            assert all(map(torch.equal, _tensors(boxed), _tensors(got))), (
                "torch.ops gives another result"
            )

    run()

"""Bad input, threads and memory: what users do that hand-picked tests do not.

- Malformed calls, generated per op from a valid call by breaking one argument at a time
  (rank, sizes, dtype, device, layout, None, NaN/inf, dsize, modes): each must raise a
  Python exception whose message names the broken argument. They run in a child process
  per package, so a crash fails the test with the call that crashed instead of killing
  pytest.
- 8 threads calling each op at once get the results of serial calls.
- The process does not grow across 20,000 calls of each op (slow).
"""

from __future__ import annotations

import gc
import importlib
import json
import os
import re
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

# The LLTM names live once, in lltm_common/tests (the lltm packages' suites use them too).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lltm_common" / "tests"))
from lltm_common.reference import FORWARD_OUTPUT_NAMES

SKIPPED = dict(
    item.split("=", 1)
    for item in os.environ.get("REPO_SKIPPED_PACKAGES", "").split(",")
    if "=" in item  # a reason may hold commas: only name=reason items start an entry
)


def package(name: str):
    if name in SKIPPED:
        pytest.skip(f"{name} not built here: {SKIPPED[name]}")
    return importlib.import_module(name)


@dataclass(frozen=True)
class Op:
    """A valid call (setup defines the arguments), the names of its tensor arguments and
    hand-written malformed values beyond the generic ones: (argument, expression)."""

    package: str
    setup: str
    fn: str  # the op, called with the arguments in the order of `order`
    order: tuple[str, ...]
    tensors: tuple[str, ...]
    others: dict[str, str] = field(default_factory=dict)  # non-tensor args: their values
    extra: tuple[tuple[str, str], ...] = ()
    valid: frozenset[tuple[str, str]] = frozenset()  # (argument, mutation) that are allowed


# Generic ways to break a tensor argument; {v} is the valid value.
TENSOR_MUTATIONS = {
    "rank+1": "{v}.unsqueeze(0)",
    "rank-1": "({v}.reshape(-1) if {v}.dim() != 1 else {v}.reshape(1, -1))",
    "size+1": "torch.cat([{v}, {v}.narrow(-1, 0, 1)], -1)",
    "int64": "{v}.long()",
    "bool": "{v}.bool()",
    "complex": "{v}.to(torch.complex64)",
    "other_float": "({v}.double() if {v}.dtype != torch.float64 else {v}.float())",
    "meta": "{v}.to('meta')",
    "none": "None",
    "sparse_coo": "{v}.to_sparse()",
}

G = "g = torch.Generator().manual_seed(0)\n"
# backward takes the two incoming gradients, what forward saved (its results after new_h)
# and the weights.
_LLTM_BACKWARD_ARGS = ("grad_h", "grad_cell", *FORWARD_OUTPUT_NAMES[1:], "weights")
OPS = {
    "add_ext.add": Op(
        "add_ext",
        G + "x = torch.randn(4, 33, generator=g); y = torch.randn(4, 33, generator=g)",
        "add_ext.add",
        ("x", "y", "alpha"),
        ("x", "y"),
        {"alpha": "0.5"},
        extra=(
            ("alpha", "'two'"),
            ("x", "torch.randn(4, 1)"),  # no broadcasting
            ("y", "torch.randn(33)"),
            ("x", "x.half()"),  # float16 x with float32 y
            ("y", "y.bfloat16()"),
        ),
    ),
    "gc_cpp.graph_conv": Op(
        "gc_cpp",
        G
        + "adj = (torch.rand(6, 6, generator=g) < 0.4).float()\n"
        + "x = torch.randn(6, 5, generator=g); weight = torch.randn(5, 3, generator=g)\n"
        + "bias = torch.randn(3, generator=g)",
        "gc_cpp.graph_conv",
        ("adj", "x", "weight", "bias"),
        ("adj", "x", "weight", "bias"),
        extra=(
            ("adj", "adj.to_sparse_csc()"),
            ("adj", "adj.to_sparse_bsr((2, 2))"),
            ("adj", "adj.to_sparse(1)"),  # COO with a dense dimension
            ("adj", "adj[:, :5]"),  # not square
            ("weight", "weight.to(torch.bfloat16)"),  # a bf16 weight with fp32 x
            ("x", "x.to_sparse_csr()"),
        ),
        # bias may be None, adj sparse COO.
        valid=frozenset({("bias", "none"), ("adj", "sparse_coo")}),
    ),
    "gc_cpp.weight_grad": Op(
        "gc_cpp",
        G
        + "adj = (torch.rand(6, 6, generator=g) < 0.4).float().to_sparse_csr()\n"
        + "x = torch.randn(6, 5, generator=g); grad = torch.randn(6, 3, generator=g)",
        "gc_cpp.weight_grad",
        ("adj", "x", "grad"),
        ("adj", "x", "grad"),
        extra=(("adj", "adj.to_dense()[:5]"), ("adj", "adj.to_sparse_csc()")),
        # CSR to COO is still a valid adj; F_in (x) and F_out (grad) are free sizes.
        valid=frozenset({("adj", "sparse_coo"), ("x", "size+1"), ("grad", "size+1")}),
    ),
    "gc_cpp._csr_transpose": Op(
        "gc_cpp",
        G
        + "m = (torch.rand(5, 7, generator=g) < 0.5).float().to_sparse_csr()\n"
        + "crow_indices = m.crow_indices().int(); col_indices = m.col_indices().int()\n"
        + "values = m.values()",
        "torch.ops.gc_cpp._csr_transpose",
        ("crow_indices", "col_indices", "values", "num_cols"),
        ("crow_indices", "col_indices", "values"),
        {"num_cols": "7"},
        extra=(
            ("num_cols", "-1"),
            ("num_cols", "3"),  # a column index past the end
            ("crow_indices", "crow_indices.flip(0)"),
            ("crow_indices", "crow_indices + 1"),
            ("crow_indices", "crow_indices[:0]"),
            ("col_indices", "col_indices - 100"),
            ("col_indices", "col_indices + 2**30"),
        ),
        # other_float on values: float64 values are valid.
        valid=frozenset({("values", "other_float")}),
    ),
    "lltm_cpu.forward": Op(
        "lltm_cpu",
        G
        + "input = torch.randn(3, 5, generator=g); weights = torch.randn(12, 9, generator=g)\n"
        + "bias = torch.randn(12, generator=g); old_h = torch.randn(3, 4, generator=g)\n"
        + "old_cell = torch.randn(3, 4, generator=g)",
        "torch.ops.lltm_cpu.forward",
        ("input", "weights", "bias", "old_h", "old_cell"),
        ("input", "weights", "bias", "old_h", "old_cell"),
        extra=(
            ("weights", "weights.bfloat16()"),  # a bf16 weight with an fp32 input
            ("weights", "weights[:11]"),
            ("bias", "bias[:11]"),
            ("old_h", "old_h[:2]"),
            ("old_cell", "old_cell[:, :3]"),
        ),
    ),
    "lltm_cpu.backward": Op(
        "lltm_cpu",
        G
        + "input = torch.randn(3, 5, generator=g); weights = torch.randn(12, 9, generator=g)\n"
        + "bias = torch.randn(12, generator=g); old_h = torch.randn(3, 4, generator=g)\n"
        + "old_cell = torch.randn(3, 4, generator=g)\n"
        + "new_h, new_cell, input_gate, output_gate, candidate_cell, X, gate_weights = "
        + "torch.ops.lltm_cpu.forward(input, weights, bias, old_h, old_cell)\n"
        + "grad_h = torch.randn(3, 4, generator=g); grad_cell = torch.randn(3, 4, generator=g)",
        "torch.ops.lltm_cpu.backward",
        _LLTM_BACKWARD_ARGS,
        _LLTM_BACKWARD_ARGS,
        extra=(
            ("X", "X[:, :3]"),
            ("weights", "weights[:, :8]"),
            ("gate_weights", "gate_weights[:, :11]"),
        ),
    ),
}
_WARP_SETUP = G + (
    "image = torch.rand(2, 3, 9, 11, generator=g)\n"
    "warp = torch.tensor([[1.0, 0.1, 2.0], [0.0, 0.9, -1.0], [1e-3, 0.0, 1.0]])"
)
_WARP_EXTRA = (
    ("warp", "torch.eye(4)"),
    ("warp", "torch.eye(3)[:2]"),
    ("warp", "torch.eye(3).expand(3, 3, 3)"),  # batch of 3 for 2 images
    ("warp", "torch.full((3, 3), float('nan'))"),
    ("warp", "torch.tensor([[1.0, 0, float('inf')], [0, 1, 0], [0, 0, 1]])"),
    ("warp", "torch.zeros(3, 3)"),  # not invertible
    ("image", "image.to(torch.int32)"),
    ("image", "image[..., :0, :]"),  # no rows to sample from
    ("image", "image.unsqueeze(0).unsqueeze(0)"),
    ("dsize", "[-1, 5]"),
    ("dsize", "[5, -3]"),
    ("dsize", "[2**40, 2**40]"),
    ("dsize", "[5]"),
    ("dsize", "[5, 5, 5]"),
    ("interpolation", "'bicubic'"),
    ("padding_mode", "'reflect'"),
)
for _name in ("warp_perspective", "_warp_perspective_builtin"):
    OPS[f"warp_perspective.{_name}"] = Op(
        "warp_perspective",
        _WARP_SETUP,
        f"torch.ops.warp_perspective.{_name}",
        ("image", "warp", "dsize", "interpolation", "padding_mode"),
        ("image", "warp"),
        {"dsize": "[7, 13]", "interpolation": "'bilinear'", "padding_mode": "'zeros'"},
        extra=_WARP_EXTRA,
        # dsize is given: any image size is valid.
        valid=frozenset({("image", "size+1")}),
    )
OPS["warp_perspective.warp_perspective_backward"] = Op(
    "warp_perspective",
    _WARP_SETUP + "\ngrad_output = torch.rand(2, 3, 7, 13, generator=g)",
    "torch.ops.warp_perspective.warp_perspective_backward",
    ("grad_output", "warp", "image_size", "interpolation", "padding_mode"),
    ("grad_output", "warp"),
    {"image_size": "[2, 3, 9, 11]", "interpolation": "'bilinear'", "padding_mode": "'zeros'"},
    extra=(
        ("image_size", "[2, 3, -1, 11]"),
        ("image_size", "[9, 11]"),
        ("image_size", "[2, 3, 2**40, 2**40]"),
        ("warp", "torch.eye(4)"),
        ("warp", "torch.full((3, 3), float('nan'))"),
        ("interpolation", "'area'"),
    ),
    valid=frozenset({("grad_output", "size+1")}),  # the forward's dsize is free
)


def malformed_calls(op: Op) -> list[tuple[str, str, list[str]]]:
    """(label, argument it breaks, argument expressions) for every generic and extra
    mutation."""
    values = {name: name for name in op.tensors} | op.others
    cases = []
    for arg in op.tensors:
        for label, template in TENSOR_MUTATIONS.items():
            if (arg, label) in op.valid:
                continue
            broken = {**values, arg: template.format(v=arg)}
            cases.append((f"{arg}:{label}", arg, [broken[name] for name in op.order]))
    for i, (arg, expression) in enumerate(op.extra):
        broken = {**values, arg: expression}
        cases.append((f"{arg}:extra{i}", arg, [broken[name] for name in op.order]))
    return cases


_CHILD = r"""
import json, sys, torch
import {package}
{setup}
for label, exprs in json.loads(sys.argv[1]):
    try:  # a value torch itself refuses to build is no test of the op
        args = [eval(e) for e in exprs]
    except Exception as error:
        print(json.dumps({{"label": label, "type": "unbuildable", "message": str(error)}}))
        continue
    print("CALL", label, file=sys.stderr, flush=True)
    try:
        result = {fn}(*args)
    except Exception as error:
        out = {{"label": label, "type": type(error).__name__, "message": str(error)}}
    else:
        out = {{"label": label, "type": None, "message": repr(result)[:200]}}
    print(json.dumps(out), flush=True)
"""


# Gaps the malformed calls show that are not fixed here, with why; anything else fails.
KNOWN_GAPS = {
    # An op with no sparse kernel: the dispatcher refuses the call before any check of ours
    # runs ("Could not run 'lltm_cpu::forward' with arguments from the 'SparseCPU'
    # backend"), naming the op and the layout but not the argument.
    "sparse": re.compile(r"Could not run '\w+::\w+' with arguments from the 'Sparse\w*' backend"),
}
# lltm_cpu's autograd kernel reads the device of a None tensor before its checks run; the
# lltm packages are being restructured on another branch, the fix belongs there.
KNOWN_NONE_GAPS = {"lltm_cpu"}


def known_gap(op: Op, label: str, result: dict) -> bool:
    if KNOWN_GAPS["sparse"].search(result["message"]) and label.endswith(":sparse_coo"):
        return True
    return (
        op.package in KNOWN_NONE_GAPS
        and label.endswith(":none")
        and "tensor does not have a device" in result["message"]
    )


def run_malformed(op: Op) -> list[str]:
    """Run every malformed call of op in one child process; return the problems found."""
    cases = malformed_calls(op)
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            _CHILD.format(package=op.package, setup=op.setup, fn=op.fn),
            json.dumps([(label, exprs) for label, _, exprs in cases]),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    results = {r["label"]: r for r in map(json.loads, proc.stdout.splitlines())}
    problems = []
    if proc.returncode != 0:
        started = [line[5:] for line in proc.stderr.splitlines() if line.startswith("CALL ")]
        last = started[-1] if started else "(before the first call)"
        problems.append(
            f"the child process died (status {proc.returncode}) in {last}: "
            f"{op.fn}({', '.join(dict((c[0], c[2]) for c in cases).get(last, []))})\n"
            f"{proc.stderr[-3000:]}"
        )
    for label, arg, exprs in cases:
        result = results.get(label)
        call = f"{op.fn}({', '.join(exprs)})"
        if result is None or result["type"] == "unbuildable" or known_gap(op, label, result):
            continue
        if result["type"] is None:
            problems.append(f"{label}: {call} returned {result['message']} instead of raising")
        elif not re.search(rf"(?<![\w.]){re.escape(arg)}(?!\w)", result["message"]):
            problems.append(
                f"{label}: {call} raised {result['type']} not naming {arg!r}: "
                f"{result['message'].splitlines()[0][:300]}"
            )
    return problems


@pytest.mark.parametrize("name", sorted(OPS))
def test_malformed_calls_raise_naming_the_argument(name):
    op = OPS[name]
    package(op.package)
    problems = run_malformed(op)
    assert not problems, f"{len(problems)} of {len(malformed_calls(op))} calls:\n" + "\n".join(
        problems
    )


# ---- threads ------------------------------------------------------------------------------


def valid_calls() -> dict[str, tuple[str, object]]:
    """A moderately sized valid call of every op whose package is here: name -> (package,
    zero-argument function)."""
    g = torch.Generator().manual_seed(3)
    calls = {}
    x, y = torch.randn(70001, generator=g), torch.randn(70001, generator=g)
    calls["add_ext.add"] = ("add_ext", lambda: torch.ops.add_ext.add(x, y, 0.3))
    xh, yh = x.half(), y.half()
    calls["add_ext.add-half"] = ("add_ext", lambda: torch.ops.add_ext.add(xh, yh, 0.3))
    adj = (torch.rand(300, 300, generator=g) < 0.05).float()
    feats, w = torch.randn(300, 40, generator=g), torch.randn(40, 20, generator=g)
    grad = torch.randn(300, 20, generator=g)
    for layout, a in (("dense", adj), ("coo", adj.to_sparse()), ("csr", adj.to_sparse_csr())):
        calls[f"gc_cpp.graph_conv-{layout}"] = (
            "gc_cpp",
            lambda a=a: torch.ops.gc_cpp.graph_conv(a, feats, w, None),
        )
        calls[f"gc_cpp.weight_grad-{layout}"] = (
            "gc_cpp",
            lambda a=a: torch.ops.gc_cpp.weight_grad(a, feats, grad),
        )
    lltm_in = [
        torch.randn(32, 24, generator=g),
        torch.randn(3 * 65, 24 + 65, generator=g) * 0.1,
        torch.randn(3 * 65, generator=g) * 0.1,
        torch.randn(32, 65, generator=g),
        torch.randn(32, 65, generator=g),
    ]
    calls["lltm_cpu.forward"] = ("lltm_cpu", lambda: torch.ops.lltm_cpu.forward(*lltm_in)[:2])

    def lltm_backward():
        leaves = [t.detach().requires_grad_() for t in lltm_in]
        new_h, new_cell = torch.ops.lltm_cpu.forward(*leaves)[:2]
        return torch.autograd.grad((new_h.sum() + new_cell.sum()), leaves)

    calls["lltm_cpu.forward-backward"] = ("lltm_cpu", lltm_backward)
    image = torch.rand(2, 3, 64, 96, generator=g)
    image_u8 = (image * 255).to(torch.uint8)
    m = torch.tensor([[0.95, 0.1, 3.0], [-0.05, 1.02, -2.0], [2e-4, 1e-4, 1.0]])
    for op in ("warp_perspective", "_warp_perspective_builtin"):
        for dtype, img, mat in (
            ("f32", image, m),
            ("u8", image_u8, m.double()),
            ("f64", image.double(), m.double()),
        ):
            for modes in (("bilinear", "zeros"), ("nearest", "border")):
                calls[f"warp_perspective.{op}-{dtype}-{'-'.join(modes)}"] = (
                    "warp_perspective",
                    lambda op=op, img=img, mat=mat, modes=modes: getattr(
                        torch.ops.warp_perspective, op
                    )(img, mat, [70, 90], *modes),
                )
    return calls


def _as_tensors(result) -> list[torch.Tensor]:
    return list(result) if isinstance(result, (tuple, list)) else [result]


@pytest.mark.parametrize("name", sorted(valid_calls()))
def test_eight_threads_get_the_serial_results(name):
    pkg, call = valid_calls()[name]
    package(pkg)
    expected = _as_tensors(call())
    results: list[list[torch.Tensor] | BaseException] = [None] * 8  # type: ignore[list-item]
    start = threading.Barrier(8)

    def worker(i: int) -> None:
        try:
            start.wait()
            for _ in range(5):
                results[i] = _as_tensors(call())
        except BaseException as error:  # reported below, with the thread's number
            results[i] = error

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, got in enumerate(results):
        assert not isinstance(got, BaseException), f"thread {i}: {got!r}"
        for ours, want in zip(got, expected, strict=True):
            assert torch.equal(ours, want), f"thread {i} differs from the serial call"


# ---- memory -------------------------------------------------------------------------------


def rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


# One call per kernel family (20,000 calls of every variant would take minutes).
MEMORY_CALLS = [
    "add_ext.add-half",
    "gc_cpp.graph_conv-csr",
    "gc_cpp.weight_grad-coo",
    "lltm_cpu.forward-backward",
    "warp_perspective._warp_perspective_builtin-f32-bilinear-zeros",
    "warp_perspective.warp_perspective-u8-nearest-border",
]


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc (Linux)")
@pytest.mark.parametrize("name", MEMORY_CALLS)
def test_memory_is_flat_across_20000_calls(name):
    """RSS after 20,000 more calls is within 4 MiB of RSS after a warm-up of 2,000: a
    kernel that leaks even 200 bytes a call fails. Inputs of the threads test, smaller."""
    pkg, _ = valid_calls()[name]
    package(pkg)
    call = small_calls()[name]
    # One intra-op thread: on a shared 2-core machine, waking the pool for these small
    # inputs cost 10x the calls themselves; leaks do not depend on the thread count.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for _ in range(2000):
            call()
        gc.collect()
        before = rss_bytes()
        for _ in range(20000):
            call()
        gc.collect()
        grown = rss_bytes() - before
    finally:
        torch.set_num_threads(threads)
    assert grown < 4 << 20, f"{name}: RSS grew by {grown / 2**20:.1f} MiB over 20,000 calls"


def small_calls() -> dict[str, object]:
    """The calls of valid_calls() on small inputs (20,000 of each take seconds)."""
    g = torch.Generator().manual_seed(4)
    calls = {}
    x, y = torch.randn(333, generator=g), torch.randn(333, generator=g)
    calls["add_ext.add"] = lambda: torch.ops.add_ext.add(x, y, 0.3)
    xh, yh = x.half(), y.half()
    calls["add_ext.add-half"] = lambda: torch.ops.add_ext.add(xh, yh, 0.3)
    adj = (torch.rand(20, 20, generator=g) < 0.2).float()
    feats, w = torch.randn(20, 6, generator=g), torch.randn(6, 3, generator=g)
    grad = torch.randn(20, 3, generator=g)
    for layout, a in (("dense", adj), ("coo", adj.to_sparse()), ("csr", adj.to_sparse_csr())):
        calls[f"gc_cpp.graph_conv-{layout}"] = lambda a=a: torch.ops.gc_cpp.graph_conv(
            a, feats, w, None
        )
        calls[f"gc_cpp.weight_grad-{layout}"] = lambda a=a: torch.ops.gc_cpp.weight_grad(
            a, feats, grad
        )
    lltm_in = [
        torch.randn(4, 5, generator=g),
        torch.randn(3 * 17, 5 + 17, generator=g) * 0.1,
        torch.randn(3 * 17, generator=g) * 0.1,
        torch.randn(4, 17, generator=g),
        torch.randn(4, 17, generator=g),
    ]
    calls["lltm_cpu.forward"] = lambda: torch.ops.lltm_cpu.forward(*lltm_in)

    def lltm_backward():
        leaves = [t.detach().requires_grad_() for t in lltm_in]
        new_h, new_cell = torch.ops.lltm_cpu.forward(*leaves)[:2]
        return torch.autograd.grad((new_h.sum() + new_cell.sum()), leaves)

    calls["lltm_cpu.forward-backward"] = lltm_backward
    image = torch.rand(1, 2, 9, 37, generator=g)
    m = torch.tensor([[0.95, 0.1, 3.0], [-0.05, 1.02, -2.0], [2e-4, 1e-4, 1.0]])
    for op in ("warp_perspective", "_warp_perspective_builtin"):
        for dtype, img, mat in (
            ("f32", image, m),
            ("u8", (image * 255).to(torch.uint8), m.double()),
            ("f64", image.double(), m.double()),
        ):
            for modes in (("bilinear", "zeros"), ("nearest", "border")):
                calls[f"warp_perspective.{op}-{dtype}-{'-'.join(modes)}"] = (
                    lambda op=op, img=img, mat=mat, modes=modes: getattr(
                        torch.ops.warp_perspective, op
                    )(img, mat, [11, 35], *modes)
                )
    return calls


# ---- regressions: what the malformed calls found -----------------------------------------


@pytest.mark.parametrize(
    ("call", "message"),
    [
        # None for a tensor: "tensor does not have a device", naming nothing.
        (
            lambda a, x, w, g: torch.ops.gc_cpp.graph_conv(None, x, w, None),
            "gc_cpp.graph_conv: adj must be a tensor, got None",
        ),
        (
            lambda a, x, w, g: torch.ops.gc_cpp.weight_grad(a, x, None),
            "gc_cpp.weight_grad: grad must be a tensor, got None",
        ),
    ],
)
def test_gc_cpp_none_for_a_tensor_names_it(call, message):
    package("gc_cpp")
    a, x, w, g = torch.eye(3), torch.ones(3, 2), torch.ones(2, 4), torch.ones(3, 4)
    with pytest.raises(RuntimeError, match=message):
        call(a, x, w, g)


def test_gc_cpp_csr_transpose_checks_its_values_and_devices():
    package("gc_cpp")
    crow, col = torch.tensor([0, 1, 2]), torch.tensor([1, 0])
    op = torch.ops.gc_cpp._csr_transpose
    # A meta tensor among CPU ones reached the fake kernel, which returned garbage.
    with pytest.raises(RuntimeError, match="must be on the same device, got cpu, cpu and meta"):
        op(crow, col, torch.ones(2, device="meta"), 2)
    # Sparse values were read as if dense.
    with pytest.raises(RuntimeError, match="values must be a dense .strided. tensor"):
        op(crow, col, torch.ones(2).to_sparse(), 2)
    # Integer values failed in the dtype dispatch, naming the kernel, not the argument.
    with pytest.raises(RuntimeError, match="values must be float16, bfloat16, float32 or float64"):
        op(crow, col, torch.ones(2, dtype=torch.int64), 2)
    with pytest.raises(RuntimeError, match="col_indices must be a dense"):
        op(crow, col.to_sparse(), torch.ones(2), 2)


def test_warp_perspective_none_and_huge_sizes_name_the_argument():
    package("warp_perspective")
    image, m = torch.rand(1, 2, 5, 6), torch.eye(3)
    ops = torch.ops.warp_perspective
    # None reached autograd's bookkeeping first: "tensor does not have a device".
    with pytest.raises(RuntimeError, match="warp_perspective: image is undefined"):
        ops.warp_perspective(None, m, None, "bilinear", "zeros")
    with pytest.raises(RuntimeError, match="warp_perspective: warp is undefined"):
        ops.warp_perspective_backward(image, None, [1, 2, 5, 6], "bilinear", "zeros")
    # Sizes whose bytes overflow int64 failed in the allocator, naming no argument.
    with pytest.raises(RuntimeError, match=r"dsize \[1099511627776, 1099511627776\] makes an"):
        ops.warp_perspective(image, m, [2**40, 2**40], "bilinear", "zeros")
    with pytest.raises(RuntimeError, match=r"image_size \[1, 2, 1099511627776, 1099511627776\]"):
        ops.warp_perspective_backward(image, m, [1, 2, 2**40, 2**40], "bilinear", "zeros")
    with FakeTensorMode() as mode, pytest.raises(RuntimeError, match="dsize .* makes an output"):
        ops.warp_perspective(mode.from_tensor(image), mode.from_tensor(m), [2**40, 2**40])

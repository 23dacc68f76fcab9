"""The LLTM ops as the test battery (shared_build.battery) sees them, declared once for
lltm_cpu and lltm_cuda: ``lltm_ops(package, device)`` returns the OpTests of the package's
three registered ops, ``<package>.forward``, ``.backward`` and ``._backward_pointwise``, on
its device. Each package's test file runs ``test_battery = battery(lltm_ops(...))``; what
only the LLTM has (its Python API and module, its C++ autograd, each device's own kernels)
stays in suite.py and the package test files.

Two declarations beyond one per op, both the battery's own checks on other inputs:
``<package>.forward`` runs gradcheck on small float64 samples of its own (the value checks
take float64 at every shape, where gradcheck would take minutes), and
``<package>.forward+autograd`` runs the threads and memory checks on forward and
torch.autograd.grad through it (the C++ autograd kernel, not only the op).
"""

from __future__ import annotations

import dataclasses
import types
import zlib
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor

from shared_build.battery import CHECKS, Bad, OpTest, Sample, as_view

from .reference import (
    BACKWARD_OUTPUT_NAMES,
    FORWARD_OUTPUT_NAMES,
    INPUT_NAMES,
    TOLERANCES,
    assert_close_scaled,
    lltm_backward,
    lltm_backward_pointwise,
    lltm_forward,
    make_inputs,
)

__all__ = ["BACKWARD_BAD", "FORWARD_BAD", "backward_args", "bad_forward_args", "lltm_ops"]

# (batch, input_features, state_size). The first is the fuzzer's valid call (its extra
# breakages below cut these sizes); then the tutorial's shape, batch 1, sizes that are no
# multiple of a vector or block width, no input features, an empty batch, a batch the CPU
# cuts into several tasks (16,384 elements each), and no state (the READMEs: "any batch
# and state size (zero included)").
SHAPES = [
    (3, 5, 4), (16, 32, 128), (1, 5, 3), (7, 13, 33), (3, 0, 4), (0, 3, 4), (40, 24, 700),
    (3, 4, 0),
]  # fmt: skip
# gradcheck's float64 samples: a Jacobian column per input element, so small ones.
GRADCHECK_SHAPES = [(3, 4, 5), (1, 3, 8), (2, 0, 3), (0, 3, 4)]
# Memory layouts of every argument (at VIEW_SHAPE), in float32 and float64: a storage
# offset (a data pointer off alignment), transposed, every other element after an offset,
# stride 0 (expanded). (In float16 and bfloat16 the property tests draw them: as samples,
# each would be one more opcheck per op for the same fake kernel.)
VIEWS = ("offset", "transposed", "sliced", "expanded")
VIEW_SHAPE = (5, 6, 7)
LAYOUT_DTYPES = (torch.float32, torch.float64)
# Gate pre-activations far in the flat tails of sigmoid, elu and tanh (LAYOUT_DTYPES),
# with results up to about 100. (Scaled by 1000, the results reach thousands, and each
# needs a tolerance scaled to its own magnitude: suite.py, test_saturated_gates.)
SATURATED = 30.0


def _view(t: Tensor, view: str) -> Tensor:
    """t's values (expanded: a broadcast part of them) in the memory layout ``view``."""
    if view == "offset":
        flat = torch.zeros(t.numel() + 1, dtype=t.dtype, device=t.device)
        flat[1:] = t.reshape(-1)
        return flat[1:].view(t.shape)
    return as_view(t, view)


def _generator(*key: Any) -> torch.Generator:
    """A generator seeded by key: a sample's values are the same in every run and dtype."""
    return torch.Generator().manual_seed(zlib.crc32(repr(key).encode()))


# ---- samples -----------------------------------------------------------------------------


def _forward_inputs(shape, dtype, device, gate_scale=1.0, grad=False, view="") -> list[Tensor]:
    inputs = make_inputs(
        *shape, dtype=dtype, device=device, gate_scale=gate_scale, generator=_generator(shape)
    )
    if view:
        inputs = [_view(t, view) for t in inputs]
    return [t.requires_grad_(grad) for t in inputs]


def _name(shape: Sequence[int], extra: str = "") -> str:
    b, i, s = shape
    return f"B{b}-I{i}-S{s}" + (f" {extra}" if extra else "")


def forward_samples(device: str, dtype: torch.dtype) -> list[Sample]:
    """forward's good calls. In float32 the first two need grad: the reference check takes
    the autograd kernel's path there (the others its direct one), and opcheck checks the
    autograd registration with inputs that need grad."""
    samples = [
        Sample(
            tuple(_forward_inputs(shape, dtype, device, grad=dtype == torch.float32 and n < 2)),
            name=_name(shape),
        )
        for n, shape in enumerate(SHAPES)
    ]
    if dtype in LAYOUT_DTYPES:
        samples += [
            Sample(tuple(_forward_inputs(VIEW_SHAPE, dtype, device, view=view)), name=view)
            for view in VIEWS
        ]
        inputs = _forward_inputs((6, 9, 10), dtype, device, SATURATED)
        samples.append(Sample(tuple(inputs), name=f"gates x{SATURATED}"))
    # NaN in old_h reaches every gate of its row through the GEMM, and no other row.
    inputs = _forward_inputs((3, 4, 5), dtype, device)
    inputs[3][1, 2] = float("nan")
    samples.append(Sample(tuple(inputs), name="NaN in old_h row 1", special=True))
    return samples


def gradcheck_samples(device: str, dtype: torch.dtype) -> list[Sample]:
    samples = [
        Sample(tuple(_forward_inputs(shape, dtype, device, grad=True)), name=_name(shape))
        for shape in GRADCHECK_SHAPES
    ]
    inputs = _forward_inputs((3, 4, 5), dtype, device, grad=True, view="transposed")
    return [*samples, Sample(tuple(inputs), name="transposed")]


def _backward_args(shape, dtype, device, gate_scale=1.0, view="") -> list[Tensor]:
    """backward's arguments from the float64 reference's forward (then rounded to dtype):
    what forward saves, and incoming gradients drawn standard normal."""
    g = _generator("backward", shape)
    inputs = make_inputs(*shape, dtype=torch.float64, gate_scale=gate_scale, generator=g)
    _, *saved = lltm_forward(*inputs)
    batch, _, state = shape
    grads = [torch.randn(batch, state, dtype=torch.float64, generator=g) for _ in range(2)]
    args = [t.to(device, dtype) for t in (*grads, *saved, inputs[1])]
    return [_view(t, view) for t in args] if view else args


def backward_samples(device: str, dtype: torch.dtype) -> list[Sample]:
    """backward's good calls: forward's shapes, and in float32 and float64 saturated gates,
    every argument in each memory layout, and the gradients that new_h.sum() hands down
    (stride 0 in both dims; new_cell's: zero)."""
    samples = [Sample(tuple(_backward_args(s, dtype, device)), name=_name(s)) for s in SHAPES]
    if dtype in LAYOUT_DTYPES:
        samples += [
            Sample(tuple(_backward_args(VIEW_SHAPE, dtype, device, view=view)), name=view)
            for view in VIEWS
        ]
        args = _backward_args((6, 9, 10), dtype, device, SATURATED)
        samples.append(Sample(tuple(args), name=f"gates x{SATURATED}"))
        args = _backward_args((4, 3, 6), dtype, device)
        args[0] = torch.ones(1, 1, dtype=dtype, device=device).expand(4, 6)
        args[1] = torch.zeros(1, 1, dtype=dtype, device=device).expand(4, 6)
        samples.append(Sample(tuple(args), name="gradient of new_h.sum()"))
    return samples


def exact_gemm_samples(device: str, dtype: torch.dtype) -> list[Sample]:
    """forward's calls whose GEMM rounds nothing in any dtype: each row of weights picks
    one column of X, times a power of two in [1/4, 8], and bias is zero. The gates are
    then the same values in float16 or bfloat16 as in float32, and so is everything the
    fused pass computes from them before it stores it (OpTest.exact)."""
    samples = []
    for shape in SHAPES:
        _, features, state = shape
        g = _generator("exact gemm", shape)
        inputs = make_inputs(*shape, dtype=torch.float64, generator=g)
        pick = torch.randint(0, features + state, (3 * state,), generator=g)
        scale = 2.0 ** torch.randint(-2, 4, (3 * state,), generator=g).double()
        weights = torch.zeros(3 * state, features + state, dtype=torch.float64)
        weights[torch.arange(3 * state), pick] = scale
        inputs[1], inputs[2] = weights, torch.zeros(3 * state, dtype=torch.float64)
        args = tuple(t.to(device, dtype) for t in inputs)
        samples.append(Sample(args, name=f"{_name(shape)}, one-hot weights"))
    return samples


def in_float32_rounded(fn: Callable) -> Callable:
    """fn on float32 copies of its arguments, each result rounded to the arguments' dtype
    by torch (to nearest, ties to even): what an op that computes in float32 and stores in
    its inputs' dtype must give, to the bit."""

    def exact(*args: Tensor) -> list[Tensor]:
        return [r.to(args[0].dtype) for r in fn(*(a.float() for a in args))]

    return exact


def pointwise_samples(device: str, dtype: torch.dtype) -> list[Sample]:
    """backward's, with the arguments _backward_pointwise takes: grad_h, grad_cell,
    new_cell and gate_weights."""
    return [
        dataclasses.replace(s, args=(*s.args[:3], s.args[7]))
        for s in backward_samples(device, dtype)
    ]


# ---- references and tolerances -----------------------------------------------------------


def forward_reference(*inputs: Tensor) -> list[Tensor]:
    return lltm_forward(*(t.double() for t in inputs))


def tolerance(dtype: torch.dtype) -> dict[str, float]:
    """reference.TOLERANCES, atol twice that: in float16 and bfloat16, d_weights sums 40
    rows of rounded gradients into results near 0 (1.6 times TOLERANCES at the worst of ten
    seeds for the incoming gradients)."""
    return {"atol": 2 * TOLERANCES[dtype], "rtol": TOLERANCES[dtype]}


# ---- property tests (hypothesis) ---------------------------------------------------------


def _drawn_case(draw: Any) -> tuple[tuple[int, int, int], torch.dtype, float, torch.Generator]:
    """A shape (0 to 9 rows or one past a vector width, 0 to 20 features, a state size up to
    20 or about a vector width), a dtype, a gate scale and a seeded generator."""
    from hypothesis import strategies as st

    batch = draw(st.one_of(st.integers(0, 9), st.sampled_from([17, 33])))
    features = draw(st.integers(0, 20))
    state = draw(st.one_of(st.integers(1, 20), st.sampled_from([8, 15, 16, 17, 33, 65])))
    dtype = draw(st.sampled_from([torch.float16, torch.bfloat16, torch.float32, torch.float64]))
    scale = draw(st.sampled_from([1.0, 8.0]))
    generator = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    return (batch, features, state), dtype, scale, generator


def _in_views(draw: Any, tensors: Sequence[Tensor]) -> tuple[list[Tensor], str]:
    from hypothesis import strategies as st

    views = [
        draw(st.sampled_from(["contiguous", "transposed", "sliced", "expanded"])) for _ in tensors
    ]
    return [as_view(t, v) for t, v in zip(tensors, views, strict=True)], "/".join(views)


def forward_properties(device: str) -> Any:
    from hypothesis import strategies as st

    @st.composite
    def draw(draw: Any) -> Sample:
        shape, dtype, scale, g = _drawn_case(draw)
        inputs = make_inputs(*shape, dtype=dtype, device=device, gate_scale=scale, generator=g)
        inputs, views = _in_views(draw, inputs)
        return Sample(tuple(inputs), name=f"{_name(shape)} {dtype} gates x{scale} {views}")

    return draw()


def backward_properties(device: str) -> Any:
    from hypothesis import strategies as st

    @st.composite
    def draw(draw: Any) -> Sample:
        shape, dtype, scale, g = _drawn_case(draw)
        inputs = make_inputs(*shape, dtype=torch.float64, gate_scale=scale, generator=g)
        _, *saved = lltm_forward(*inputs)
        grads = [torch.randn(shape[0], shape[2], dtype=torch.float64, generator=g) for _ in "hc"]
        args = [t.to(device, dtype) for t in (*grads, *saved, inputs[1])]
        args, views = _in_views(draw, args)
        return Sample(tuple(args), name=f"{_name(shape)} {dtype} gates x{scale} {views}")

    return draw()


def _check_forward(sample: Sample, got: Sequence[Tensor], want: Sequence[Tensor]) -> None:
    """Every result has the reference's shape and the inputs' dtype and device, and its
    values are the reference's within TOLERANCES[dtype] of its largest magnitude."""
    for name, ours, ref in zip(FORWARD_OUTPUT_NAMES, got, want, strict=True):
        assert ours.shape == ref.shape, (name, ours.shape, ref.shape)
        assert ours.dtype == sample.args[0].dtype and ours.device == sample.args[0].device, name
        assert_close_scaled(ours, ref, ours.dtype, name)


def _check_backward(sample: Sample, got: Sequence[Tensor], want: Sequence[Tensor]) -> None:
    """As _check_forward, the tolerance grown by the square root of the longest sum behind
    a gradient: over the batch (d_weights, d_bias) or over X's columns (d_X)."""
    first = sample.args[0]
    tol = TOLERANCES[first.dtype] * max(1, first.shape[0], sample.args[6].shape[1]) ** 0.5
    for name, ours, ref in zip(BACKWARD_OUTPUT_NAMES, got, want, strict=True):
        assert ours.shape == ref.shape, (name, ours.shape, ref.shape)
        assert ours.dtype == first.dtype and ours.device == first.device, name
        scale = max(1.0, ref.abs().max().item()) if ref.numel() else 1.0
        torch.testing.assert_close(
            ours.double().cpu(), ref.double().cpu(), atol=2 * tol * scale, rtol=tol,
            equal_nan=True, msg=lambda m, n=name: f"{n}: {m}",
        )  # fmt: skip


# ---- bad calls: a sentence naming the argument and the sizes -----------------------------

B, I, S = 16, 32, 128  # noqa: E741  (batch, input_features, state_size)


def bad_forward_args(mutate: Callable) -> Callable[[str], dict[str, Tensor]]:
    """A function of the device that returns forward's arguments, by name, at the tutorial
    shape with mutate(args, device) applied."""

    def build(device: str) -> dict[str, Tensor]:
        args = dict(zip(INPUT_NAMES, make_inputs(B, I, S, device=device), strict=True))
        mutate(args, device)
        return args

    return build


def _set(name: str, factory: Callable) -> Callable:
    return lambda args, device: args.__setitem__(name, factory(args, device))


FORWARD_BAD = {
    "input-1d": (
        _set("input", lambda a, d: torch.randn(I, device=d)),
        r"input must be 2-D \(batch, input_features\), got a 1-D tensor of shape \[32\]",
    ),
    "input-3d": (
        _set("input", lambda a, d: torch.randn(2, B, I, device=d)),
        r"input must be 2-D .*got a 3-D tensor of shape \[2, 16, 32\]",
    ),
    "weights-shape": (
        _set("weights", lambda a, d: torch.randn(3 * S, I + S - 10, device=d)),
        r"weights must have shape \[384, 160\] \(3 \* state_size, input_features \+ state_size; .*\), got \[384, 150\]",
    ),
    "weights-transposed": (
        _set("weights", lambda a, d: a["weights"].t()),
        r"weights must have shape \[384, 160\] .*got \[160, 384\]",
    ),
    "bias-length": (
        _set("bias", lambda a, d: torch.randn(3 * S - 1, device=d)),
        r"bias must have shape \[384\] \(3 \* state_size; state_size is old_h.size\(1\)\), got \[383\]",
    ),
    "bias-2d": (
        _set("bias", lambda a, d: a["bias"][None]),
        r"bias must be 1-D \(3 \* state_size,\), got a 2-D tensor of shape \[1, 384\]",
    ),
    "old_h-batch": (
        _set("old_h", lambda a, d: torch.randn(8, S, device=d)),
        r"old_h must have the batch size of input, 16, got old_h of shape \[8, 128\] and input of shape \[16, 32\]",
    ),
    "old_cell-state": (
        _set("old_cell", lambda a, d: torch.randn(B, S // 2, device=d)),
        r"old_cell must have shape \[16, 128\] \(the shape of old_h\), got \[16, 64\]",
    ),
    "old_cell-broadcast": (
        _set("old_cell", lambda a, d: torch.randn(1, S, device=d)),
        r"old_cell must have shape \[16, 128\] \(the shape of old_h\), got \[1, 128\]",
    ),
    "state-mismatch": (
        lambda a, d: (
            a.__setitem__("old_h", torch.randn(B, 64, device=d)),
            a.__setitem__("old_cell", torch.randn(B, 64, device=d)),
        ),
        r"weights must have shape \[192, 96\] .*got \[384, 160\]",
    ),
    "dtype-mismatch": (
        _set("weights", lambda a, d: a["weights"].double()),
        "all tensors must have the same dtype, got input Float and weights Double",
    ),
    "integer-dtype": (
        lambda a, d: a.update({k: v.long() for k, v in a.items()}),
        "dtype must be float32, float64, bfloat16 or float16, got Long",
    ),
    "complex-dtype": (
        lambda a, d: a.update({k: v.to(torch.complex64) for k, v in a.items()}),
        "dtype must be float32, float64, bfloat16 or float16, got ComplexFloat",
    ),
}


def backward_args(device: str, dtype: torch.dtype = torch.float32) -> dict[str, Tensor]:
    """backward's nine arguments, by name, with valid shapes at the tutorial shape."""
    inputs = make_inputs(B, I, S, device=device, dtype=dtype)
    g = torch.randn(B, S, device=device, dtype=dtype)
    z = torch.randn(B, 3 * S, device=device, dtype=dtype)
    x = torch.randn(B, S + I, device=device, dtype=dtype)
    names = ("grad_h", "grad_cell", "new_cell", "input_gate", "output_gate", "candidate_cell")
    return {**{n: g.clone() for n in names}, "X": x, "gate_weights": z, "weights": inputs[1]}


BACKWARD_BAD = {
    "grad_h-1d": (
        "grad_h",
        lambda a, d: torch.randn(S, device=d),
        r"grad_h must be 2-D \(batch, state_size\), got a 1-D tensor of shape \[128\]",
    ),
    "grad_cell-shape": (
        "grad_cell",
        lambda a, d: torch.randn(B, S + 1, device=d),
        r"grad_cell must have shape \[16, 128\] \(the shape of grad_h\), got \[16, 129\]",
    ),
    "candidate-batch": (
        "candidate_cell",
        lambda a, d: torch.randn(B - 1, S, device=d),
        r"candidate_cell must have shape \[16, 128\] \(the shape of grad_h\), got \[15, 128\]",
    ),
    "X-narrow": (
        "X",
        lambda a, d: torch.randn(B, S - 1, device=d),
        r"X must have shape \(batch, state_size \+ input_features\) with batch 16 and at least state_size = 128 columns .*got \[16, 127\]",
    ),
    "gate_weights-shape": (
        "gate_weights",
        lambda a, d: torch.randn(B, 2 * S, device=d),
        r"gate_weights must have shape \[16, 384\] .*got \[16, 256\]",
    ),
    "weights-shape": (
        "weights",
        lambda a, d: torch.randn(3 * S, S + I + 1, device=d),
        r"weights must have shape \[384, 160\] \(3 \* state_size, X.size\(1\); .*\), got \[384, 161\]",
    ),
    "dtype-mismatch": (
        "X",
        lambda a, d: a["X"].double(),
        "all tensors must have the same dtype, got grad_h Float and X Double",
    ),
}
# backward's arguments that _backward_pointwise does not take, and the cases of
# BACKWARD_BAD whose argument it takes too.
_POINTWISE_LEAVES_OUT = ("input_gate", "output_gate", "candidate_cell", "X", "weights")
_POINTWISE_BAD = ("grad_h-1d", "grad_cell-shape", "gate_weights-shape")


def _bad_devices() -> list[str]:
    """Where the argument checks run: the CPU (lltm_cpu's kernel; lltm_cuda's kernel for CPU
    tensors checks them before it points to lltm_cpu), the meta device (the fake kernels),
    and, where a GPU is visible, CUDA (lltm_cuda's kernel; lltm_cpu's refusal)."""
    return ["cpu", "meta"] + (["cuda"] if torch.cuda.is_available() else [])


def _bad(package: str) -> Callable[[], list[Bad]]:
    def bad() -> list[Bad]:
        calls = []
        for device in _bad_devices():
            for case, (mutate, message) in FORWARD_BAD.items():
                args = tuple(bad_forward_args(mutate)(device).values())
                calls.append(Bad(args, f"{package}.forward: {message}", name=f"{case} {device}"))
            if device != "meta":
                args = make_inputs(3, 4, 5, device=device)
                args[4] = args[4].to("meta")
                message = f"{package}.forward: .*same device, got input on {device}.* and old_cell on meta"
                calls.append(Bad(tuple(args), message, name=f"mixed devices {device}"))
        return calls

    return bad


def _bad_backward(package: str, pointwise: bool) -> Callable[[], list[Bad]]:
    op = "_backward_pointwise" if pointwise else "backward"

    def bad() -> list[Bad]:
        calls = []
        for device in _bad_devices():
            for case, (name, factory, message) in BACKWARD_BAD.items():
                if pointwise and case not in _POINTWISE_BAD:
                    continue
                args = backward_args(device)
                args[name] = factory(args, device)
                if pointwise:
                    for taken_by_backward_only in _POINTWISE_LEAVES_OUT:
                        del args[taken_by_backward_only]
                calls.append(
                    Bad(tuple(args.values()), f"{package}.{op}: {message}", name=f"{case} {device}")
                )
        return calls

    return bad


# ---- the declarations --------------------------------------------------------------------

# What the malformed calls show that is not fixed here, with why (the fuzzer's label regex ->
# the message regex accepted there); anything else fails. (The dispatcher's refusal of a
# sparse tensor is a gap of every op: the battery accepts it itself.)
FUZZ_GAPS: dict[str, str] = {}


def _only(declared: OpTest, checks: set[str], **changes: Any) -> OpTest:
    """``declared`` with the battery's other checks skipped and ``changes`` made: some of
    one op's checks declared apart, on other samples or another call."""
    skip = {c: "declared apart" for c in CHECKS if c not in checks}
    return dataclasses.replace(declared, skip=skip, **changes)


def _forward_and_grad(forward: Callable) -> Callable:
    """forward and the gradients of new_h.sum() + new_cell.sum() in all five inputs (the
    C++ autograd kernel: _backward_pointwise and the GEMMs)."""

    def call(*inputs: Tensor) -> tuple[Tensor, ...]:
        leaves = [t.detach().requires_grad_() for t in inputs]
        new_h, new_cell = forward(*leaves)[:2]
        return (new_h, new_cell, *torch.autograd.grad(new_h.sum() + new_cell.sum(), leaves))

    return call


def lltm_ops(package: types.ModuleType, device: str) -> list[OpTest]:
    """The OpTests of lltm_cpu (device "cpu") or lltm_cuda ("cuda")."""
    name = package.__name__
    ops = getattr(torch.ops, name)
    # One memory check for the three ops: forward and torch.autograd.grad through it run
    # forward's kernel, _backward_pointwise's pass and the GEMMs backward runs too.
    memory = {"memory": "forward+autograd's memory check calls it"}
    if device == "cuda":
        # lltm_cuda has no CPU kernels (its CPU ones check the arguments, then point to
        # lltm_cpu): the checks that compute on the CPU do not apply. The fuzzer and the bad
        # calls do: they only need the checks.
        memory = {"memory": "lltm_cuda refuses CPU tensors; the memory check counts host RSS"}
        memory["cuda_vs_cpu"] = (
            "lltm_cuda has no CPU kernels: test_cuda_agrees_with_lltm_cpu compares it with lltm_cpu"
        )
    common: dict[str, Any] = {"devices": (device,), "tolerance": tolerance, "fuzz_gaps": FUZZ_GAPS}
    forward = OpTest(
        name=f"{name}.forward",
        fn=package.forward,
        op=ops.forward.default,
        samples=forward_samples,
        reference=forward_reference,
        # A fresh process that loads a saved module finds the library's ops: one op shows
        # it for the three (each check starts a Python).
        torchscript=True,
        bad=_bad(name),
        fuzz_extra=(
            ("weights", "weights.bfloat16()"),  # a bf16 weight with an fp32 input
            ("weights", "weights[:11]"),
            ("bias", "bias[:11]"),
            ("old_h", "old_h[:2]"),
            ("old_cell", "old_cell[:, :3]"),
        ),
        properties=forward_properties,
        check=_check_forward,
        # Double backward raises (suite.py: test_double_backward_raises); gradcheck runs on
        # the samples of the declaration below.
        skip={"gradcheck": "on small samples, declared apart", **memory},
        **common,
    )
    # backward and _backward_pointwise return gradients; differentiating them raises
    # (differentiable once: suite.py, test_double_backward_raises).
    backward = OpTest(
        name=f"{name}.backward",
        fn=package.backward,
        op=ops.backward.default,
        samples=backward_samples,
        reference=lltm_backward,
        differentiable=False,
        bad=_bad_backward(name, pointwise=False),
        fuzz_extra=(
            ("X", "X[:, :3]"),
            ("weights", "weights[:, :8]"),
            ("gate_weights", "gate_weights[:, :11]"),
        ),
        properties=backward_properties,
        check=_check_backward,
        skip=memory,
        **common,
    )
    # Internal: the pass of backward (pointwise_impl, lltm.h) that forward's autograd calls
    # before its GEMMs; no user's module calls it (no TorchScript check).
    pointwise = OpTest(
        name=f"{name}._backward_pointwise",
        fn=ops._backward_pointwise.default,
        op=ops._backward_pointwise.default,
        samples=pointwise_samples,
        reference=lltm_backward_pointwise,
        differentiable=False,
        # The pass computes in float32 and rounds each store to nearest even, as torch
        # rounds the float32 pass's results: d_gates and d_old_cell to the bit. d_bias sums
        # the rows in float32 here and in float64 in the float32 pass: other values.
        exact=in_float32_rounded(ops._backward_pointwise.default),
        ulps=(0, None, 0),
        bad=_bad_backward(name, pointwise=True),
        fuzz_extra=(("gate_weights", "gate_weights[:, :11]"), ("grad_cell", "grad_cell[:2]")),
        skip={
            "properties": "backward's property test draws calls of the same pass",
            "compile": "forward's compile check differentiates through the compiled forward, whose backward calls it",
            **memory,
        },
        **common,
    )
    return [
        forward,
        _only(forward, {"gradcheck"}, samples=gradcheck_samples),
        # The fused forward pass's float16 and bfloat16 stores, to the bit: on calls whose
        # GEMM is exact, the op's results are its float32 results rounded by torch.
        _only(
            forward,
            {"reference"},
            name=f"{name}.forward-exact-gemm",
            samples=exact_gemm_samples,
            dtypes=("float16", "bfloat16"),
            exact=in_float32_rounded(ops.forward.default),
            ulps=(0,) * 7,
        ),
        backward,
        pointwise,
        _only(
            forward,
            {"threads", "memory"} if device == "cpu" else {"threads"},
            name=f"{name}.forward+autograd",
            fn=_forward_and_grad(package.forward),
            op=_forward_and_grad(ops.forward.default),
            dtypes=("float32",),
        ),
    ]

"""shared_build.battery: each check passes on a correct op and fails on an op broken the
way it is there to catch. The ops are Python custom ops (torch.library.custom_op), written
to a module the fuzzer's child process can import: no compiler needed."""

from __future__ import annotations

import dataclasses
import importlib
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")
# The battery, not torch: under one torch of a nox run.
pytestmark = pytest.mark.once

from shared_build import battery  # noqa: E402
from shared_build.battery import Bad, OpTest, Sample  # noqa: E402

# Toy ops, scale(x, factor) = x * factor and axpy(x, y, alpha) = alpha * x + y, with one
# defect switched on by name. Their Python side is shared_build.stable_op's, as a
# stable-ABI package's: an autograd.Function without jvp, so forward mode raises.
TOY = """
import ctypes
import torch
import torch.autograd.forward_ad as fwAD
from shared_build import stable_op

DEFECT = {defect!r}
lib = torch.library.Library("{name}", "DEF")
lib.define("scale(Tensor x, float factor) -> Tensor")
lib.define("axpy(Tensor x, Tensor y, float alpha) -> Tensor")


def scale_cpu(x, factor):
    if DEFECT == "crash" and x.dtype == torch.bool:
        ctypes.string_at(0)
    if DEFECT != "unchecked":
        torch._check(x.dim() == 1, lambda: f"{name}.scale: x must be 1-D, got {{x.dim()}}-D")
        torch._check(x.dtype.is_floating_point, lambda: f"{name}.scale: x must be floating, got {{x.dtype}}")
    out = x * factor
    if DEFECT == "wrong" and x.numel() > 3:
        out[0] += 1
    if DEFECT == "truncates" and out.dtype == torch.float16:  # to zero, not to nearest
        exact = x.float() * factor
        out = torch.where(out.float().abs() > exact.abs(), out.nextafter(torch.zeros_like(out)), out)
    return out


lib.impl("scale", scale_cpu, "CPU")
lib.impl("axpy", lambda x, y, alpha: x * alpha + y, "CPU")
op = torch.ops.{name}.scale.default
axpy_op = torch.ops.{name}.axpy.default


def fake(x, factor):
    return x.new_empty(x.shape[:-1] if DEFECT == "fake" else x.shape)


class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, keyset, x, factor):
        ctx.factor = factor
        return stable_op.below_autograd(op, keyset, x, factor)

    @staticmethod
    def backward(ctx, grad):
        return None, grad * (ctx.factor if DEFECT != "grad" else 1.0), None


class Axpy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, keyset, x, y, alpha):
        ctx.alpha = alpha
        return stable_op.below_autograd(axpy_op, keyset, x, y, alpha)

    @staticmethod
    def backward(ctx, grad):
        _, need_x, need_y, _ = ctx.needs_input_grad
        # partial: the branch where only y needs a gradient scales it as x's.
        grad_y = grad * ctx.alpha if DEFECT == "partial" and not need_x else grad
        return None, grad * ctx.alpha if need_x else None, grad_y if need_y else None, None


stable_op.register("{name}::scale", fake=fake, autograd=Scale.apply)
stable_op.register("{name}::axpy", fake=lambda x, y, alpha: x.new_empty(x.shape), autograd=Axpy.apply)


def scale(x, factor):
    if DEFECT == "drops":  # a fast path that looks at requires_grad only: the tangent is lost
        x = fwAD.unpack_dual(x).primal
    return op(x, factor)
"""


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """toy(defect) -> an OpTest of a freshly written toy op with that defect ("" for none)."""
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}:{':'.join(sys.path)}")

    def make(defect: str = "") -> OpTest:
        name = f"toy_{defect or 'good'}"
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(TOY.format(defect=defect, name=name)))
        module = importlib.import_module(name)

        def samples(device, dtype):
            grad = dtype == torch.float64
            return [
                Sample(
                    (torch.randn(n, dtype=dtype, device=device, requires_grad=grad), 2.5),
                    name=f"n={n}",
                )
                for n in (1, 5, 9)
            ]

        def properties(device):
            from hypothesis import strategies as st

            return st.builds(
                lambda x, f: Sample((x, f)),
                battery.tensors((7,), torch.float64, device),
                st.floats(-4, 4),
            )

        return OpTest(
            name=f"{name}.scale",
            fn=module.scale,
            op=getattr(torch.ops, name).scale.default,
            samples=samples,
            reference=lambda x, factor: (x.double() * factor).to(x.dtype),
            devices=("cpu",),
            bad=lambda: [Bad((torch.ones(2, 2), 1.0), "x must be 1-D, got 2-D")],
            # Any length, float64 and meta tensors are valid calls of scale.
            fuzz_valid=frozenset({("x", "size+1"), ("x", "other_float"), ("x", "meta")}),
            # x is scale's only tensor: without it the dispatcher finds no kernel to run.
            fuzz_gaps={r"^x:none$": "There were no tensor arguments to this function"},
            properties=properties,
        )

    return make


def run(op: OpTest, check: str, dtype=torch.float32, device="cpu") -> None:
    battery.run_check(op, check, device, dtype)


@pytest.mark.parametrize(
    ("check", "defect", "dtype"),
    [
        ("reference", "wrong", torch.float32),
        ("opcheck", "fake", torch.float32),
        ("opcheck", "fake", torch.float16),  # the fake kernel is checked in every dtype
        ("gradcheck", "grad", torch.float64),
        ("backward", "grad", torch.float32),
        ("backward", "drops", torch.float32),  # forward mode must raise, not drop the tangent
        ("bad", "unchecked", None),
        ("fuzz", "unchecked", None),
        ("fuzz", "crash", None),
        ("properties", "wrong", None),
    ],
)
def test_each_check_passes_a_good_op_and_fails_the_defect_it_is_for(toy, check, defect, dtype):
    run(toy(), check, dtype)
    with pytest.raises(BaseException) as failure:  # pytest.raises' own "did not raise" too
        run(toy(defect), check, dtype)
    assert not isinstance(failure.value, pytest.skip.Exception)
    if check == "fuzz" and defect == "crash":
        assert "the child died" in str(failure.value) and "x:bool" in str(failure.value)


@pytest.fixture
def axpy(toy):
    """axpy(defect) -> the OpTest of the toy axpy(x, y, alpha) with that defect."""

    def make(defect: str = "") -> OpTest:
        op = toy(defect)
        name = op.name.removesuffix(".scale")

        def samples(device, dtype):
            grad = dtype == torch.float64
            return [
                Sample((*(torch.randn(n, dtype=dtype, requires_grad=grad) for _ in "xy"), 3.0))
                for n in (1, 6)
            ]

        axpy_op = getattr(torch.ops, name).axpy.default
        return dataclasses.replace(
            op, name=f"{name}.axpy", fn=axpy_op, op=axpy_op, samples=samples,
            reference=lambda x, y, alpha: (alpha * x.double() + y.double()).to(x.dtype),
        )  # fmt: skip

    return make


@pytest.mark.parametrize(
    ("check", "dtype"), [("backward", torch.float32), ("gradcheck", torch.float64)]
)
def test_gradients_for_every_subset_of_the_inputs(axpy, check, dtype):
    """A backward that is wrong only where y needs a gradient and x does not (a branch
    the all-inputs case never takes) fails the backward and gradcheck checks."""
    run(axpy(), check, dtype)
    # gradcheck's GradcheckError is a RuntimeError.
    with pytest.raises((AssertionError, RuntimeError), match=r"arguments \[1\]|Jacobian mismatch"):
        run(axpy("partial"), check, dtype)


def test_forward_mode_gives_the_references_tangents_where_declared(toy):
    """forward_ad=True: the tangents must be the reference's (a wrong jvp fails); an op
    without it must raise (the drops defect fails the main test above)."""

    class WrongJvp(torch.autograd.Function):
        @staticmethod
        def forward(x, factor):
            return x * factor

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.factor = inputs[1]

        @staticmethod
        def backward(ctx, grad):
            return grad * ctx.factor, None

        @staticmethod
        def jvp(ctx, tangent, _):
            return tangent  # not times factor

    op = dataclasses.replace(toy(), forward_ad=True, fn=lambda x, f: x * f)
    run(op, "backward")
    run(op, "gradcheck", torch.float64)
    with pytest.raises(AssertionError, match="tangent of result 0"):
        run(dataclasses.replace(op, fn=WrongJvp.apply), "backward")


def test_half_precision_results_to_the_bit_where_declared(toy):
    """A float16 result that rounds toward zero is within the tolerance but not the exact
    result: the reference check fails it where exact and ulps say 0 ulp."""
    exact = {"exact": lambda x, f: (x.double() * f).to(x.dtype), "ulps": (0,)}
    run(dataclasses.replace(toy(), **exact), "reference", torch.float16)
    run(toy("truncates"), "reference", torch.float16)  # what the tolerance alone sees
    with pytest.raises(AssertionError, match=r"elements over 0 ulp from the exact result"):
        run(dataclasses.replace(toy("truncates"), **exact), "reference", torch.float16)


def test_threads_and_memory_pass_a_good_op(toy):
    run(toy(), "threads")
    run(toy(), "memory")


def test_threads_and_properties_compare_within_tolerance_only_where_the_op_is_nondeterministic(toy):
    """An op whose last bits vary between calls (atomic adds) fails the bitwise threads and
    properties checks, and passes them where it declares the device nondeterministic."""
    op = toy()

    def last_bits(x, f):  # a few units in the last place, different at every call
        return x * f * (1 + (1 + torch.rand_like(x)) * 4 * torch.finfo(x.dtype).eps)

    jitter = dataclasses.replace(op, op=last_bits)
    with pytest.raises(AssertionError, match="thread .* differs from the serial call"):
        run(jitter, "threads")
    run(dataclasses.replace(jitter, nondeterministic=("cpu",)), "threads")
    with pytest.raises(BaseException, match="torch.ops gives another result"):
        run(jitter, "properties")
    run(dataclasses.replace(jitter, nondeterministic=("cpu",)), "properties")
    wrong = dataclasses.replace(
        op, op=lambda x, f: x * f + torch.rand_like(x), nondeterministic=("cpu",)
    )
    with pytest.raises(AssertionError, match="thread"):
        run(wrong, "threads")


def test_properties_leave_out_the_dtypes_a_run_names(toy, monkeypatch):
    """SHARED_BUILD_BATTERY_SKIP_DTYPES (the GPU check's initcheck sets it) drops the drawn
    samples with a tensor of those dtypes, and only those."""
    from hypothesis import strategies as st

    op = toy()
    seen = []

    def recording(x, f):
        seen.append(x.dtype)
        return op.fn(x, f)

    def properties(device):
        dtype = st.sampled_from([torch.float16, torch.float64])
        x = dtype.flatmap(lambda d: battery.tensors((7,), d, device))
        return st.builds(lambda x, f: Sample((x, f)), x, st.floats(-4, 4))

    drawn = dataclasses.replace(op, fn=recording, properties=properties)
    run(drawn, "properties")
    assert set(seen) == {torch.float16, torch.float64}
    seen.clear()
    monkeypatch.setenv("SHARED_BUILD_BATTERY_SKIP_DTYPES", "float16,bfloat16")
    run(drawn, "properties")
    assert set(seen) == {torch.float64}


def test_the_cases_name_the_op_and_the_check(toy):
    op = toy()
    ids = [p.id for p in battery._cases(op)]
    assert "toy_good.scale-reference-cpu-float32" in ids
    assert "toy_good.scale-gradcheck-cpu-float64" in ids
    assert "toy_good.scale-fuzz-cpu" in ids and "toy_good.scale-properties-cpu" in ids
    assert not any("cuda" in i for i in ids)  # devices=("cpu",)
    assert not any("torchscript" in i for i in ids)  # not declared
    marks = {p.id: {m.name for m in p.marks} for p in battery._cases(op)}
    assert marks["toy_good.scale-compile-cpu-float32"] == {"slow"}
    assert marks["toy_good.scale-reference-cpu-float32"] == set()


def test_fuzz_names_each_argument_it_breaks(toy):
    from shared_build.battery.fuzz import fuzz_cases

    cases = fuzz_cases(toy(), Sample((torch.randn(3), 2.0)))
    assert ("x:rank+1", "x", "v.unsqueeze(0)") in cases
    assert {arg for _, arg, _ in cases} == {"x"}  # factor is no tensor

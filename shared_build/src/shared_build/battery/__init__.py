"""One test battery for any custom op: declare it once as an :class:`OpTest` (good calls
per device and dtype, a plain-PyTorch reference, the bad calls with the sentence each must
raise, what is out of scope); ``test_battery = battery(OPS)`` in a test file makes pytest
collect ``test_battery[<op>-<check>-<device>-<dtype>]`` for every check below that applies.
Each check runs every sample of its device and dtype; a failure names the sample.

- ``reference``: each sample's result equals the reference's (computed in float64, rounded
  to the sample's dtype), within ``tolerance``; in float16 and bfloat16 also ``exact``'s
  (what the op computes to the bit) within ``ulps`` units in the last place;
- ``opcheck``: ``torch.library.opcheck`` on each sample (schema, fake kernel; in float32
  and float64 also the autograd registration and AOT dispatch);
- ``backward``: in every dtype, for each subset of the floating inputs needing a gradient
  (every one up to three inputs, else each alone and all), the gradients equal those of
  autograd through the reference in float64, within tolerance; forward mode gives the
  reference's tangents (``forward_ad``) or raises;
- ``gradcheck``: ``torch.autograd.gradcheck`` in float64 (``gradgradcheck`` too where
  declared), for each subset of the inputs that require grad;
- ``compile``: ``torch.compile(fullgraph=True, dynamic=True)`` of the op and a gradient
  through it, over the samples, equal to eager;
- ``export``: ``torch.export`` of a module calling the op, run, equal to eager; with
  ``aoti=True`` also compiled by AOTInductor, packaged, loaded and run;
- ``torchscript``: a scripted module saved and loaded in a fresh process (``torchscript=True``);
- ``cuda_vs_cpu``: each CPU sample moved to the GPU gives the CPU's result (cuda-marked);
- ``bad``: each declared bad call raises its exception with its sentence;
- ``fuzz``: every tensor argument of a valid call broken one way at a time (rank, size,
  dtype, device, layout, None) plus the declared extra breakages, in a child process: each
  call must raise an exception whose message names the argument (breakages declared valid
  are left out, and declared gaps accepted with their reason); a crash fails with the call
  that crashed;
- ``properties``: hypothesis draws samples (``properties``) and checks them against the
  reference, at least 200 examples;
- ``threads``: eight threads calling the op get the serial results;
- ``memory`` (slow): RSS stays flat over 20,000 calls."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from .draw import as_view, sides, tensors

__all__ = [
    "CHECKS", "Bad", "OpTest", "Sample", "as_view", "battery", "run_check", "sides", "tensors",
]  # fmt: skip

FLOATING = ("float16", "bfloat16", "float32", "float64")
CHECKS = (
    "reference", "backward", "opcheck", "gradcheck", "compile", "export", "torchscript", "cuda_vs_cpu",
    "bad", "fuzz", "properties", "threads", "memory",
)  # fmt: skip
SLOW = {"compile", "export", "torchscript", "memory"}


@dataclass
class Sample:
    """One call: positional and keyword arguments, and a name for failure messages."""

    args: tuple
    kwargs: dict = field(default_factory=dict)
    name: str = ""
    # Values that do not equal themselves (NaN): checked against the reference only, not
    # by opcheck, compile, export or the threads, which compare for equality.
    special: bool = False


@dataclass
class Bad:
    """A call that must raise ``error`` with a message matching ``match`` (a regex)."""

    args: tuple
    match: str
    kwargs: dict = field(default_factory=dict)
    error: type[BaseException] = RuntimeError
    name: str = ""


@dataclass
class OpTest:
    """What the battery needs to know about one op.

    ``fn`` is what users call (the package's Python wrapper); ``op`` the registered overload
    (``torch.ops.<ns>.<name>.default``) that opcheck, export and the fuzzer call. ``samples``
    returns good calls on a device in a dtype (any number; float64 ones serve gradcheck).
    ``reference`` takes the same arguments and computes the result in plain PyTorch."""

    name: str
    fn: Callable[..., Any]
    op: Any
    samples: Callable[[str, Any], Sequence[Sample]]
    reference: Callable[..., Any]
    dtypes: Sequence[str] = FLOATING
    devices: Sequence[str] = ("cpu", "cuda")
    tolerance: Callable[[Any], dict[str, float]] | None = None
    differentiable: bool = True
    gradgrad: bool = False
    compile: bool = True
    export: bool = True
    aoti: bool = False
    torchscript: bool = False
    bad: Callable[[], Sequence[Bad]] = list
    # Extra ways to break a call for the fuzzer: (argument, Python expression over the
    # valid call's arguments, by name), and the (argument, breakage) pairs that are valid
    # calls, which the fuzzer leaves out.
    fuzz_extra: Sequence[tuple[str, str]] = ()
    fuzz_valid: frozenset[tuple[str, str]] = frozenset()
    # Known gaps: breakage label (regex) -> the message (regex) accepted there, e.g. the
    # dispatcher's refusal of a sparse tensor, which names the op but not the argument.
    fuzz_gaps: dict[str, str] = field(default_factory=dict)
    # A hypothesis strategy of Samples on a device (None: no property test), and the check
    # of one drawn sample; by default its result against the reference within tolerance.
    properties: Callable[[str], Any] | None = None
    check: Callable[[Sample, Any, Any], None] | None = None
    skip: dict[str, str] = field(default_factory=dict)  # check -> why it does not apply
    memory_dtype: str = "float32"  # the dtype whose smallest sample the memory check calls
    # Devices where the last bits vary from call to call (atomic adds in a CUDA backward's
    # scatter, cuSPARSE's products): the threads check, and the properties check's second
    # call through torch.ops, compare within tolerance there, not bitwise.
    nondeterministic: Sequence[str] = ()
    # Forward-mode AD: True where the op computes tangents; False where it must raise
    # (an autograd kernel without jvp), never return results without them.
    forward_ad: bool = False
    # In float16 and bfloat16: what the op computes to the bit (the torch op it mirrors, or
    # its own float32 results rounded by torch), and per result how many units in the last
    # place it may differ (0: bitwise; None: not compared), each with its reason.
    exact: Callable[..., Any] | None = None
    ulps: Sequence[int | None] = ()

    def package(self) -> str:
        return self.name.split(".", 1)[0]


# ---------------------------------------------------------------- generation
def battery(ops: Sequence[OpTest]) -> Callable[..., None]:
    """The parametrized test function: one case per op, check, device and dtype."""
    params = [p for op in ops for p in _cases(op)]

    @pytest.mark.parametrize(("op", "check", "device", "dtype"), params)
    def test_battery(op: OpTest, check: str, device: str, dtype: str) -> None:
        import torch

        run_check(op, check, device, getattr(torch, dtype) if dtype else None)

    return test_battery


def _applies(op: OpTest, check: str) -> bool:
    flags = {
        "gradcheck": op.differentiable, "backward": op.differentiable, "compile": op.compile, "export": op.export,
        "torchscript": op.torchscript, "properties": op.properties is not None,
        "bad": op.bad is not list, "cuda_vs_cpu": "cuda" in op.devices,
    }  # fmt: skip
    return check not in op.skip and flags.get(check, True)


def _cases(op: OpTest) -> list[Any]:
    unknown = set(op.skip) - set(CHECKS)
    assert not unknown, f"{op.name} skips checks the battery does not have: {sorted(unknown)}"
    devices = {"cuda_vs_cpu": ["cuda"], "fuzz": ["cpu"], "memory": ["cpu"], "bad": ["cpu"]}
    cases = []
    for check in (c for c in CHECKS if _applies(op, c)):
        for device in devices.get(check, op.devices):
            for dtype in _dtypes(op, check):
                marks = [pytest.mark.cuda] if device == "cuda" or check == "cuda_vs_cpu" else []
                marks += [pytest.mark.slow] if check in SLOW else []
                ident = "-".join(filter(None, (op.name, check, device, dtype)))
                cases.append(pytest.param(op, check, device, dtype, id=ident, marks=marks))
    return cases


def _dtypes(op: OpTest, check: str) -> list[str | None]:
    if check == "gradcheck":
        return ["float64"] if op.differentiable and "float64" in op.dtypes else []
    if check == "backward":  # no gradient of an integer tensor
        return [d for d in op.dtypes if d in FLOATING]
    if check in ("opcheck", "reference", "cuda_vs_cpu", "threads"):
        return list(op.dtypes)
    if check in ("compile", "export", "torchscript"):
        return [op.dtypes[-1] if "float32" not in op.dtypes else "float32"]
    return [None]


def run_check(op: OpTest, check: str, device: str, dtype: Any) -> None:
    """Run one check of op on a device in a dtype (None where the check takes none)."""
    from . import checks, fuzz

    (fuzz.check_fuzz if check == "fuzz" else getattr(checks, f"check_{check}"))(op, device, dtype)

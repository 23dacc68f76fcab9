"""The Python side of an op on LibTorch's stable ABI, which has neither C++ autograd nor
symbolic sizes (see the README). Copied into every stable-ABI package as ``_stable_op.py``:
the one place those packages use private torch API, tested under every torch of the matrix."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch.autograd import forward_ad as _forward_ad

__all__ = ["below_autograd", "no_autocast", "register"]

_BACKEND_SELECT = torch._C.DispatchKey.BackendSelect
# Below the Autograd kernel, which has run the check: past BackendSelect, whose kernel
# would run it again.
_BELOW_AUTOGRAD = torch._C._after_autograd_keyset.remove(_BACKEND_SELECT)
_BELOW_BACKEND_SELECT = torch._C._dispatch_keyset_full_after(_BACKEND_SELECT)
_AUTOCAST = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastCPU) | torch._C.DispatchKeySet(
    torch._C.DispatchKey.AutocastCUDA
)
_REQUIRED = object()
# One IMPL library per namespace, kept alive: its registrations go when it is collected.
_LIBRARIES: dict[str, torch.library.Library] = {}


def below_autograd(op: Any, keyset: Any, *args: Any) -> Any:
    """Call ``op`` (an OpOverload) with the kernels below its Autograd and BackendSelect
    kernels: the backend kernels of the op library (CPU, CUDA, Meta ...). ``keyset`` is
    the one the autograd callable of :func:`register` received."""
    return op.redispatch(keyset & _BELOW_AUTOGRAD, *args)


def no_autocast() -> Any:
    """A context in which the ATen ops called run without torch.autocast: for an op's
    backward in Python, which computes in the saved tensors' dtype as its forward did,
    even when backward is called inside an autocast region."""
    return torch._C._ExcludeDispatchKeyGuard(_AUTOCAST)


def register(
    qualname: str,
    *,
    fake: Callable[..., Any],
    autograd: Callable[..., Any] | None,
    check: Callable[..., None] | None = None,
    fake_keys: Sequence[str] = (),
) -> None:
    """Register the Python side of the op ``qualname`` ("namespace::name"): its ``fake``
    kernel (also for ``fake_keys``, e.g. "SparseMeta"); ``autograd(keyset, *args)`` for a
    call that records a graph (None: not differentiable, a backward raises), every other
    call going straight to the kernels below autograd; ``check(*args)``, run once per eager
    call before any C++ kernel (None where the C++ kernels check). Arguments arrive
    positionally, defaults filled in. The shared_build README has the details.
    """
    namespace, name = qualname.split("::")
    op = getattr(getattr(torch.ops, namespace), name).default
    positions = _tensor_positions(op)  # first: it refuses a schema it cannot serve
    lib = _LIBRARIES.get(namespace)
    if lib is None:
        lib = _LIBRARIES[namespace] = torch.library.Library(namespace, "IMPL")
    torch.library.register_fake(qualname, fake)
    for key in fake_keys:
        lib.impl(name, fake, key)
    complete = _completer(op)
    grad_path = autograd if autograd is not None else _not_differentiable(op, qualname)
    autograd_kernel = _autograd_kernel(op, positions, complete, check, grad_path)
    lib.impl(name, autograd_kernel, "Autograd", with_keyset=True)
    if check is not None:
        lib.impl(name, _checked_kernel(op, complete, check), "BackendSelect", with_keyset=True)
    for key in ("AutocastCPU", "AutocastCUDA"):
        lib.impl(name, _without_autocast(op), key)


def _without_autocast(op: Any) -> Callable[..., Any]:
    """The op's kernel under torch.autocast: the op with autocast off for the ATen ops its
    kernels call, so it computes in its inputs' dtype in eager as its fake kernel says (else
    bfloat16 out of float32 inputs under CPU autocast, in eager only)."""

    def kernel(*args, **kwargs):
        with no_autocast():
            return op(*args, **kwargs)

    return kernel


def _completer(op: Any) -> Callable[[tuple, dict], tuple]:
    """A function that turns the dispatcher's (args, kwargs) into every argument,
    positionally (the dispatcher leaves out trailing arguments equal to their defaults)."""
    arguments = op._schema.arguments
    names = [a.name for a in arguments]
    defaults = [a.default_value if a.has_default_value() else _REQUIRED for a in arguments]
    count = len(arguments)
    # tails[k]: the defaults of the arguments from position k on (None if one has none).
    tails = [
        None if any(d is _REQUIRED for d in defaults[k:]) else tuple(defaults[k:])
        for k in range(count + 1)
    ]

    def complete(args: tuple, kwargs: dict) -> tuple:
        given = len(args)
        if not kwargs:
            if given == count:
                return args
            tail = tails[given] if given < count else None
            if tail is not None:
                return (*args, *tail)
        rest = [kwargs.get(n, d) for n, d in zip(names[given:], defaults[given:], strict=True)]
        missing = [n for n, v in zip(names[given:], rest, strict=True) if v is _REQUIRED]
        if missing or given > count:
            raise TypeError(
                f"{op} takes {count} arguments ({', '.join(names)}), got {given} positional "
                f"and {sorted(kwargs)}"
            )
        return (*args, *rest)

    return complete


def _tensor_positions(op: Any) -> tuple[int, ...]:
    """The positions of the Tensor and Tensor? arguments: those that may require grad. A
    list of tensors (Tensor[]) is refused: the grad test below does not look into one."""
    for a in op._schema.arguments:
        element = a.type.getElementType() if isinstance(a.type, torch.ListType) else None
        if isinstance(element, (torch.TensorType, torch.OptionalType)):
            raise NotImplementedError(
                f"{op}: stable_op.register does not support the list-of-tensors argument "
                f"{a.name!r} ({a.type}); pass the tensors as separate arguments"
            )
    return tuple(
        i
        for i, a in enumerate(op._schema.arguments)
        if isinstance(a.type, torch.TensorType)
        or (
            isinstance(a.type, torch.OptionalType)
            and isinstance(a.type.getElementType(), torch.TensorType)
        )
    )


def _autograd_kernel(
    op: Any,
    positions: tuple[int, ...],
    complete: Callable,
    check: Callable | None,
    grad_path: Callable,
):
    # Every eager call with autograd on enters this Python kernel, so the common case,
    # nothing to record, is kept short: straight to the kernels below autograd.

    def kernel(keyset, *args, **kwargs):
        args = complete(args, kwargs)
        if check is not None:
            check(*args)
        if torch.is_grad_enabled():
            for i in positions:
                t = args[i]
                if t is not None and t.requires_grad:
                    return grad_path(keyset, *args)
        # A forward-mode tangent goes there too, where the autograd.Function raises that it
        # has no jvp: below autograd it would be dropped, or worse, half carried by the
        # ATen ops a composite kernel calls (a wrong tangent, torch.func.jvp's zeros).
        # Only a strided tensor can carry one (unpack_dual raises on a sparse one).
        level = _forward_ad._current_level
        if level >= 0 and any(
            t is not None
            and t.layout == torch.strided
            and _forward_ad.unpack_dual(t, level=level).tangent is not None
            for t in (args[i] for i in positions)
        ):
            return grad_path(keyset, *args)
        # The ATen ops a kernel calls pass their own autograd kernels, which record
        # nothing either, as no input requires grad (or grad mode is off).
        return op.redispatch(keyset & _BELOW_AUTOGRAD, *args)

    return kernel


def _checked_kernel(op: Any, complete: Callable, check: Callable):
    # BackendSelect is in every call's key set and comes after the Autograd kernels, which
    # skip it, and before every backend: it runs the check on exactly the calls that
    # passed no Autograd kernel.
    def kernel(keyset, *args, **kwargs):
        args = complete(args, kwargs)
        check(*args)
        return op.redispatch(keyset & _BELOW_BACKEND_SELECT, *args)

    return kernel


class _NotImplementedBackward(torch.autograd.Function):
    """Passes the outputs through; a backward through them raises."""

    @staticmethod
    def forward(ctx, name, outs, *inputs):
        ctx.name = name
        return tuple(o.view_as(o) for o in outs)

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError(f"derivative for {ctx.name} is not implemented")


def _not_differentiable(op: Any, qualname: str) -> Callable:
    def grad_path(keyset, *args):
        # Below autograd, so the ATen ops the kernel calls record no history either.
        with torch._C._AutoDispatchBelowAutograd():
            out = op.redispatch(keyset & _BELOW_AUTOGRAD, *args)
        outs = out if isinstance(out, tuple) else (out,)
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        wrapped = _NotImplementedBackward.apply(qualname, outs, *tensors)
        return wrapped if isinstance(out, tuple) else wrapped[0]

    return grad_path

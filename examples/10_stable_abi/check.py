"""Use the installed softclip wheel and check it: values, gradients, opcheck, torch.compile,
bad input, and that its library imports no C++ symbol of torch (the stable-ABI promise).

    python check.py /path/to/softclip-0.1.0-cp310-abi3-linux_x86_64.whl
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import softclip
import torch


def reference(x: torch.Tensor, limit: float) -> torch.Tensor:
    return limit * torch.tanh(x / limit)


def expect_error(pattern: str, fn, *args) -> None:
    try:
        fn(*args)
    except RuntimeError as error:
        assert re.search(pattern, str(error)), f"wrong message: {error}"
        return
    raise AssertionError(f"no error matching {pattern!r}")


def unstable_symbols(library: Path) -> list[str]:
    """Undefined C++ symbols of c10, at or torch: what would tie the library to one torch."""
    names = subprocess.run(
        ["nm", "-D", "--undefined-only", str(library)], capture_output=True, text=True, check=True
    ).stdout.split()
    mangled = "\n".join(n.split("@")[0] for n in names if n.startswith("_Z"))
    demangled = subprocess.run(
        ["c++filt"], input=mangled, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    return [d for d in demangled if re.search(r"(?<![\w:])(c10|at|torch)::", d)]


def main() -> None:
    wheel = Path(sys.argv[1]).name
    assert wheel.endswith("-cp310-abi3-linux_x86_64.whl"), f"not an abi3 wheel: {wheel}"
    print(f"wheel {wheel}, running under torch {torch.__version__}")

    library = softclip._LIBRARY
    leaks = unstable_symbols(library)
    assert not leaks, f"{library.name} imports C++ symbols of torch: {leaks[:5]}"
    print(f"{library.name}: no c10::/at::/torch:: symbol imported (nm -D | c++filt)")

    for dtype in (torch.float32, torch.float64):
        x = torch.randn(1000, 33, dtype=dtype) * 50
        for sample in (x, x.t(), x[:, 1:], torch.empty(0, 3, dtype=dtype)):
            torch.testing.assert_close(softclip.softclip(sample, 30.0), reference(sample, 30.0))
    print("values match limit * tanh(x / limit) (float32, float64, non-contiguous, empty)")

    x = torch.randn(6, 5, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: softclip.softclip(t, 2.0), (x,))
    print("gradcheck passed (float64); double backward raises")
    (g,) = torch.autograd.grad(softclip.softclip(x, 2.0).sum(), x, create_graph=True)
    expect_error("double backward is not supported", g.sum().backward)

    sample = torch.randn(4, 7)
    torch.library.opcheck(torch.ops.softclip.softclip.default, (sample, 3.0))
    torch.library.opcheck(
        torch.ops.softclip.softclip_backward.default, (torch.randn(4, 7), sample, 3.0)
    )
    print("opcheck passed (schema, fake tensors, autograd registration)")

    compiled = torch.compile(lambda t: softclip.softclip(t * 2, 5.0) + 1, fullgraph=True)
    torch.testing.assert_close(compiled(sample), reference(sample * 2, 5.0) + 1)
    print("torch.compile(fullgraph=True) matches eager")

    expect_error("x must be float32 or float64", softclip.softclip, torch.arange(3), 1.0)
    expect_error("limit must be a positive finite number", softclip.softclip, sample, 0.0)
    expect_error("limit must be a positive finite number", softclip.softclip, sample, float("nan"))
    expect_error(
        "grad must have the shape of x",
        torch.ops.softclip.softclip_backward,
        torch.randn(7, 4),
        sample,
        1.0,
    )
    print("bad input raises RuntimeError naming the argument")

    # The stable ABI's price: each call crosses the C shim (boxed arguments, a dispatcher
    # call by name for contiguous and empty_like). Printed, not asserted: it is a timing.
    small = torch.randn(16)
    for fn, name in ((softclip.softclip, "softclip"), (torch.tanh, "torch.tanh")):
        start = time.perf_counter()
        for _ in range(20000):
            fn(small)
        print(f"{name}: {(time.perf_counter() - start) / 20000 * 1e6:.1f} us per call (16 floats)")


if __name__ == "__main__":
    main()

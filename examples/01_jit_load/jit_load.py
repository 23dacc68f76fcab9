"""Build add.cpp just in time with torch.utils.cpp_extension.load() and use it with autograd.

    python jit_load.py                     # compiles on the first run, loads from the cache after
    python jit_load.py --expect-cache-hit  # fails if this load compiled anything

load() writes the sources' build files and the compiled module into a build folder,
TORCH_EXTENSIONS_DIR/<name> (default ~/.cache/torch_extensions/py<ver>_<cpu|cuXXX>/<name>),
and runs ninja there. A later load() in a new process runs ninja again, and ninja rebuilds
only what changed since, so an unchanged extension is imported straight from the cache.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import torch
from torch.utils.cpp_extension import load

HERE = Path(__file__).resolve().parent
NAME = "jit_add"
ext = None  # the compiled module; main() loads it


def build_outputs(build_dir: Path) -> dict[str, int]:
    """Every object file and library in the build folder, with its modification time."""
    if not build_dir.is_dir():
        return {}
    return {p.name: p.stat().st_mtime_ns for p in build_dir.iterdir() if p.suffix in (".o", ".so")}


class Add2xPlusY(torch.autograd.Function):
    """z = 2x + y, forward and backward in C++."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return ext.add_forward(x, y)

    @staticmethod
    def backward(ctx, grad_z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        grad_x, grad_y = ext.add_backward(grad_z.contiguous())
        return grad_x, grad_y


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--expect-cache-hit",
        action="store_true",
        help="fail if load() compiled or linked anything",
    )
    args = parser.parse_args()

    cache_root = os.environ.get("TORCH_EXTENSIONS_DIR")
    if cache_root is None:
        raise SystemExit("set TORCH_EXTENSIONS_DIR to the folder load() should build in")
    build_dir = Path(cache_root) / NAME
    before = build_outputs(build_dir)

    global ext
    start = time.perf_counter()
    ext = load(name=NAME, sources=[str(HERE / "add.cpp")], extra_cflags=["-O2"])
    seconds = time.perf_counter() - start
    after = build_outputs(build_dir)

    print(f"build folder: {build_dir}")
    print(f"  {', '.join(sorted(after))}")
    print(f"module: {ext.__file__}")
    rebuilt = sorted(name for name, mtime in after.items() if before.get(name) != mtime)
    if rebuilt:
        print(f"load(): {seconds:.2f} s, compiled or linked: {', '.join(rebuilt)}")
    else:
        print(f"load(): {seconds:.2f} s, cache hit: nothing compiled or linked")
    if args.expect_cache_hit and rebuilt:
        raise SystemExit(f"expected a cache hit, but load() rebuilt {rebuilt}")
    if not args.expect_cache_hit and before and not rebuilt:
        print("  (the build folder was already up to date from an earlier run)")

    x = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    y = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    z = Add2xPlusY.apply(x, y)
    torch.testing.assert_close(z, 2 * x + y)
    z.sum().backward()
    torch.testing.assert_close(x.grad, torch.full_like(x, 2.0))
    torch.testing.assert_close(y.grad, torch.ones_like(y))
    assert torch.autograd.gradcheck(Add2xPlusY.apply, (x, y))
    print("z = 2x + y matches PyTorch; gradcheck passed")

    try:
        ext.add_forward(torch.ones(2), torch.ones(3))
    except RuntimeError as error:
        message = str(error).splitlines()[0]
        assert "must have the same shape" in message, message
        print(f"bad input raises RuntimeError: {message}")
    else:
        raise AssertionError("add_forward accepted tensors of different shapes")


if __name__ == "__main__":
    main()

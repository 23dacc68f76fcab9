"""``python -m shared_build info PACKAGE``: what an installed package was built with.

Reads the package's ``_build_info.py`` by path, without importing the package, so that it
also answers for a package that refuses to import under the torch installed now."""

from __future__ import annotations

import glob
import importlib.metadata
import importlib.util
import os
import re
import shutil
import site
import subprocess
import sys
from typing import Any

from .errors import BuildError


def package_dir(name: str) -> str:
    spec = importlib.util.find_spec(name) if name.isidentifier() else None
    if spec is None or not spec.submodule_search_locations:
        raise BuildError(
            f"{name} is not installed in this environment ({sys.executable}); "
            f"pip install --no-build-isolation ./packages/{name}"
        )
    return next(iter(spec.submodule_search_locations))


def load_build_info(folder: str) -> dict[str, Any]:
    path = os.path.join(folder, "_build_info.py")
    if not os.path.isfile(path):
        raise BuildError(f"{folder} has no _build_info.py: it was not built by shared_build")
    spec = importlib.util.spec_from_file_location("_shared_build_info", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return dict(module.BUILD_INFO)


def cuda_architectures(libraries: list[str]) -> list[str] | None:
    """The sm_XX of the device code in the libraries (cuobjdump --list-elf; on PATH, else
    NVIDIA's pip nvidia-cuda-cuobjdump), or None when there is no cuobjdump to ask."""
    pattern = os.path.join("nvidia", "*", "bin", "cuobjdump")
    pip = [p for d in site.getsitepackages() for p in sorted(glob.glob(os.path.join(d, pattern)))]
    tool = shutil.which("cuobjdump") or (pip[0] if pip else None)
    if tool is None:
        return None
    command = [tool, "--list-elf", *libraries]
    out = subprocess.run(command, capture_output=True, text=True, check=False).stdout
    return sorted(set(re.findall(r"\bsm_\d+a?\b", out)), key=lambda s: int(re.sub(r"\D", "", s)))


def describe(name: str) -> list[tuple[str, str]]:
    name = re.sub(r"[-_.]+", "_", name).lower()  # pip's my-op, My_Op: the import name my_op
    folder = package_dir(name)
    info = load_build_info(folder)
    libraries = sorted(
        glob.glob(os.path.join(folder, "*.so")) + glob.glob(os.path.join(folder, "*.pyd"))
    )
    try:
        version = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        version = str(info.get("version", "?"))
    abi = info.get("abi", "full")
    abi3 = any(".abi3." in os.path.basename(p) for p in libraries)
    abi_text = f"{abi} LibTorch ABI" + (", CPython limited API (abi3)" if abi3 else "")
    cuda_text, arch_text = "none (CPU kernels only)", "-"
    if info.get("cuda"):
        archs = cuda_architectures(libraries) if libraries else None
        cuda_text = f"CUDA {info['cuda']} (nvcc {info.get('nvcc') or '?'})"
        asked = f"{info.get('arch_list')} (asked for; no cuobjdump to read the binary)"
        arch_text = ", ".join(archs) if archs else asked
    torch_cuda = f"CUDA {info['torch_cuda']}" if info.get("torch_cuda") else "CPU-only build"
    rows = [
        ("package", f"{name} {version}"),
        ("built against", f"torch {info.get('torch')} ({torch_cuda}), Python {info.get('python')}"),
        ("compiler", str(info.get("compiler"))),
        ("CUDA", cuda_text),
        ("CUDA architectures", arch_text),
        ("ABI", abi_text),
    ]
    if "backend" in info:
        rows.append(("backend", str(info["backend"])))
    rows += [
        ("loads under this torch", _loads_here(info)),
        ("debug", "yes" if info.get("debug") else "no"),
        ("libraries", ", ".join(libraries) or "none"),
        ("source", str(info.get("source_dir"))),
        ("git commit", _commit_text(info)),
    ]
    return rows


def _loads_here(info: dict[str, Any]) -> str:
    """Whether the package imports under the torch installed here, and if not why, in the
    sentence its import raises."""
    from .runtime import incompatibility

    try:
        import torch
    except ImportError:
        return "no: torch is not installed here"
    problem = incompatibility(info, torch.__version__, torch.version.cuda)
    return f"NO: {problem}" if problem else f"yes (torch {torch.__version__})"


def _commit_text(info: dict[str, object]) -> str:
    """The commit the build came from, and whether its tree had uncommitted changes."""
    if not (commit := info.get("git_commit")):
        return "not recorded (built outside a git checkout, e.g. from an sdist)"
    dirty = info.get("git_dirty")
    state = {True: "with uncommitted changes", False: "clean tree"}.get(dirty, "tree state unknown")
    return f"{commit} ({state})"


def main(name: str) -> int:
    for key, value in describe(name):
        print(f"{key:20} {value}")
    return 0

"""Step 5 of a build: the extensions setuptools compiles, from the package, the CudaBuild
and the Flags (``make_extensions``)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import BuildError

if TYPE_CHECKING:
    from .config import PackageConfig
    from .cuda import CudaBuild
    from .flags import Flags


def _is_cuda(source: Path) -> bool:
    """A .cu file, or anything under a cuda/ folder."""
    return source.suffix == ".cu" or "cuda" in source.parts[:-1]


def collect_sources(root: Path, with_cuda: bool) -> list[str]:
    """csrc/**/*.cpp (links followed: a folder shared by packages is a link in their csrc/),
    plus the CUDA sources when building CUDA; never two that would compile to one object."""
    csrc = root / "csrc"
    if not csrc.is_dir():
        raise BuildError(f"{root} has no csrc/ folder with the C++ sources")
    found = sorted(
        Path(folder, name).relative_to(root)
        for folder, _, names in os.walk(csrc, followlinks=True)
        for name in names
    )
    sources = [p for p in found if p.suffix in (".cpp", ".cu") and (with_cuda or not _is_cuda(p))]
    objects: dict[Path, Path] = {}
    for path in sources:
        if (other := objects.setdefault(path.with_suffix(""), path)) != path:
            raise BuildError(
                f"{other} and {path} would both compile to {path.stem}.o; rename one of them"
            )
    if not sources:
        raise BuildError(f"{csrc} has no .cpp or .cu sources")
    return [str(p) for p in sources]


def split_cuda_sources(sources: Sequence[str]) -> tuple[list[str], list[str]]:
    """(C++ sources, CUDA sources)."""
    cuda = [source for source in sources if _is_cuda(Path(source))]
    return [source for source in sources if source not in cuda], cuda


def make_extensions(
    package: PackageConfig, cuda: CudaBuild, flags: Flags
) -> tuple[list[Any], str | None]:
    """The extensions, <name>.<module> (a CUDAExtension when it compiles CUDA), and the
    name of the CUDA library (None without one): a stable-ABI build puts its CUDA sources
    into <module>_cuda, loaded only under a CUDA torch. WITH_CUDA is defined where CUDA is
    compiled; USE_CUDA too in that library (the C shim declares its CUDA API under it)."""
    from torch.utils import cpp_extension

    def compile_args() -> dict[str, list[str]]:
        # A copy per extension: cpp_extension adds to the lists it is given.
        return {key: list(args) for key, args in flags.compile_args.items()}

    sources = collect_sources(package.root, cuda.enabled)
    extensions = []
    cuda_library = None
    if package.abi == "stable" and cuda.enabled:
        sources, cuda_sources = split_cuda_sources(sources)
        cuda_library = f"{package.module}_cuda"
        extensions.append(
            cpp_extension.CUDAExtension(
                name=f"{package.name}.{cuda_library}",
                sources=cuda_sources,
                include_dirs=list(flags.include_dirs),
                define_macros=[*flags.define_macros, ("WITH_CUDA", None), ("USE_CUDA", None)],
                extra_compile_args=compile_args(),
                extra_link_args=list(flags.link_args),
                py_limited_api=True,
            )
        )
    main_cuda = cuda.enabled and cuda_library is None
    extension_cls = cpp_extension.CUDAExtension if main_cuda else cpp_extension.CppExtension
    main = extension_cls(
        name=f"{package.name}.{package.module}",
        sources=sources,
        include_dirs=list(flags.include_dirs),
        library_dirs=list(flags.library_dirs),
        libraries=list(flags.libraries),
        extra_link_args=list(flags.link_args),
        define_macros=[*flags.define_macros, *([("WITH_CUDA", None)] if main_cuda else [])],
        extra_compile_args=compile_args(),
        # Ops reach Python through the dispatcher, not pybind11: one abi3 wheel serves every
        # CPython >= 3.10 (limited_api = false: a package that binds with pybind11).
        py_limited_api=package.limited_api or not package.python_module,
    )
    return [main, *extensions], cuda_library

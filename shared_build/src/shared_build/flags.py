"""Step 4 of a build (``compile_flags``): what the compiler and the linker are given; each
piece a function of its inputs, unit-tested without compiling."""

from __future__ import annotations

import sys
import sysconfig
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.version import Version

if TYPE_CHECKING:
    from .config import BuildConfig
    from .cuda import CudaBuild
    from .torch_facts import TorchFacts

HERE = Path(__file__).resolve().parent
INCLUDE_DIR = HERE / "include"
# On Linux, ahead of the system's headers: see glibc_compat/sys/single_threaded.h.
GLIBC_COMPAT_DIR = HERE / "glibc_compat"


def compile_args(debug: bool, with_cuda: bool) -> dict[str, list[str]]:
    """Optimisation flags for the host compiler and for nvcc."""
    # Python's CFLAGS, first on every compile line, carry -g: -g0 (the later flag wins)
    # keeps debug info out of release libraries.
    args = {"cxx": ["-O0", "-g"] if debug else ["-O3", "-g0"]}
    if with_cuda:
        # -lineinfo keeps compute-sanitizer and Nsight able to point at source lines at no
        # cost to the generated code; -G (device debug) disables optimisation entirely.
        args["nvcc"] = ["-O0", "-g", "-G"] if debug else ["-O3", "-lineinfo"]
    return args


def warning_args(werror: bool, system_include_dirs: list[str]) -> list[str]:
    """-Wall -Wextra -Werror for the package's own sources, under WERROR=1; -isystem makes
    the headers of torch, Python and external libraries system headers, whose warnings GCC
    and Clang do not report (a folder given with both -I and -isystem is a system folder)."""
    system = [arg for folder in system_include_dirs for arg in ("-isystem", folder)]
    return ["-Wall", "-Wextra", "-Werror", *system] if werror else []


def sanitize_args(names: Sequence[str], debug: bool = False) -> tuple[list[str], list[str]]:
    """Compile and link flags for the sanitizers ``names`` (both empty for none): -O1
    after compile_args' -O3 (DEBUG's -O0 stays), as the sanitizers' docs recommend, since
    -O3 can optimise a bad access away; -g1 for file and line numbers in the reports."""
    if not names:
        return [], []
    flag = "-fsanitize=" + ",".join(names)
    return [*([] if debug else ["-O1"]), flag, "-fno-omit-frame-pointer", "-g1"], [flag]


def cxx_runtime_link_args(platform: str) -> list[str]:
    """The shared libstdc++ named on the link line (Linux), so the extension uses torch's
    C++ runtime even under a compiler that links it statically (a wrapper adding
    -static-libstdc++; a plain -lstdc++ does not help), where c10's ``operator<<`` on the
    extension's stream segfaults. With a normal compiler it changes nothing."""
    return ["-l:libstdc++.so.6"] if platform.startswith("linux") else []


def openmp_compile_args(torch_uses_openmp: bool, platform: str) -> list[str]:
    """-fopenmp for the host compiler when torch uses OpenMP: at::parallel_for's pragma is
    compiled in the extension, and runs serially without it (cpp_extension never adds it).
    The link does not get it: the GOMP symbols resolve to libtorch_cpu's runtime."""
    return ["-fopenmp"] if torch_uses_openmp and platform != "darwin" else []


def target_version_macro(release: str) -> str:
    """TORCH_TARGET_VERSION for a torch release ("2.13"), encoded as torch/headeronly/version.h
    encodes TORCH_ABI_VERSION: one byte each for major, minor, patch, from the top."""
    major, minor, patch = (*Version(release).release, 0, 0)[:3]
    return f"0x{(major << 56) | (minor << 48) | (patch << 40):016x}ULL"


@dataclass
class Flags:
    """Step 4's result: the compiler's arguments ({"cxx": [...], "nvcc": [...]}), include
    folders, macros, and what the link gets."""

    compile_args: dict[str, list[str]]
    include_dirs: list[str]
    link_args: list[str] = field(default_factory=list)
    define_macros: list[tuple[str, str | None]] = field(default_factory=list)
    library_dirs: list[str] = field(default_factory=list)
    libraries: list[str] = field(default_factory=list)


def compile_flags(config: BuildConfig, facts: TorchFacts, cuda: CudaBuild) -> Flags:
    """Step 4: the compile and link arguments, include folders and macros of a build."""
    from torch.utils import cpp_extension

    package, options, knobs = config.package, config.options, config.knobs
    sanitize_cxx, sanitize_link = sanitize_args(knobs.sanitize, knobs.debug)
    args = compile_args(knobs.debug, cuda.enabled)
    args["cxx"] += [*sanitize_cxx, *openmp_compile_args(facts.openmp, sys.platform)]
    for key, extra in options.extra_compile_args.items():
        args.setdefault(key, []).extend(extra)
    # Our headers: never -isystem, or WERROR would not see their warnings and an
    # incremental build (SHARED_BUILD_DIR) would not rebuild after they change (GCC's
    # -MMD leaves system headers out of the dependency files ninja reads).
    ours = [str(INCLUDE_DIR), str(package.root / "csrc")]
    include_dirs = [*ours, *options.include_dirs, *cuda.include_dirs]
    if sys.platform.startswith("linux"):
        # The wheel needs no glibc newer than 2.28 (manylinux_2_28): glibc_compat/ ahead of
        # the system's headers (its sys/single_threaded.h says why); NVTX_DISABLE, as CUDA
        # 13.2's headers compile NVTX3's loader, which calls dlopen at GLIBC_2.34, into every
        # .cu object (our kernels emit no NVTX ranges).
        for key in args:
            args[key] += ["-isystem", str(GLIBC_COMPAT_DIR), "-DNVTX_DISABLE"]
    torch_dirs = cpp_extension.include_paths("cuda" if cuda.enabled else "cpu")
    external = [d for d in include_dirs if d not in ours]  # CUDA's, OpenCV's ...
    args["cxx"] += warning_args(
        knobs.werror, [*torch_dirs, sysconfig.get_path("include"), *external]
    )
    macros = list(options.define_macros)
    if facts.stable_target is not None:
        macros.append(("TORCH_TARGET_VERSION", target_version_macro(facts.stable_target)))
    # The package's own link arguments first, the CUDA runtime's rpath last.
    link_args = [*options.extra_link_args, *sanitize_link, *cxx_runtime_link_args(sys.platform)]
    return Flags(
        compile_args=args,
        include_dirs=include_dirs,
        link_args=[*link_args, *cuda.rpath_args],
        define_macros=macros,
        library_dirs=list(options.library_dirs),
        libraries=list(options.libraries),
    )

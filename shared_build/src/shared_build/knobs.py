"""The environment variables that steer a build, parsed into decisions.

Every function here is pure: it takes the environment (and facts about the machine) as
arguments, so the unit tests can exercise each decision without compiling anything.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from .errors import BuildError

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}

# Peak resident memory of one compile job, measured with GNU time on the 2-core CI
# machine: g++ 12 -O3 on a file including torch/csrc/autograd/custom_function.h, 0.94 GiB;
# nvcc 13.0 on add_ext's kernel for five architectures, 1.1 GiB. Rounded up for headroom.
CXX_JOB_BYTES = 1 << 30
NVCC_JOB_BYTES = 2 << 30


def parse_flag(env: Mapping[str, str], name: str, default: bool = False) -> bool:
    """Read an on/off variable; anything other than the usual spellings is an error."""
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise BuildError(f"{name}={raw!r} is not understood; use {name}=1 or {name}=0")


def use_cuda_mode(env: Mapping[str, str]) -> str:
    """Return "auto", "on" or "off" from USE_CUDA (auto|0|1), with FORCE_CUDA=1 meaning on."""
    raw = env.get("USE_CUDA")
    if raw is not None and raw.strip() != "":
        value = raw.strip().lower()
        if value == "auto":
            mode = "auto"
        elif value in _TRUE:
            mode = "on"
        elif value in _FALSE:
            mode = "off"
        else:
            raise BuildError(
                f"USE_CUDA={raw!r} is not understood; use USE_CUDA=auto, USE_CUDA=1 or USE_CUDA=0"
            )
    else:
        mode = "auto"
    if parse_flag(env, "FORCE_CUDA"):
        if mode == "off":
            raise BuildError("FORCE_CUDA=1 and USE_CUDA=0 contradict each other; unset one")
        mode = "on"
    return mode


# The oldest torch whose stable-ABI headers compile our stable packages: 2.11 lacks op tags
# (2.12) and STABLE_TORCH_ERROR_CODE_CHECK (2.13); include/shared_build/stable_compat.h
# bridges both. 2.10 is not tried.
OLDEST_STABLE_TARGET = "2.11"


def stable_target(env: Mapping[str, str], default: str, torch_version: str) -> str:
    """The torch release a stable-ABI build targets (TORCH_TARGET_VERSION).

    ``default`` (STABLE_TARGET, what release wheels target) unless
    SHARED_BUILD_STABLE_TARGET names an older release, for a build under an older torch
    that cannot be replaced (a GPU machine's torch 2.11): that build loads on its target and
    every newer torch, and its ops carry no tags below 2.12.
    """
    from packaging.version import InvalidVersion, Version

    raw = env.get("SHARED_BUILD_STABLE_TARGET", "").strip()
    target = raw or default
    try:
        parsed = Version(target)
    except InvalidVersion:
        parsed = None
    if parsed is None or len(parsed.release) != 2 or str(parsed) != target:
        raise BuildError(
            f"SHARED_BUILD_STABLE_TARGET={raw!r} is not a torch release such as "
            f"{OLDEST_STABLE_TARGET}; leave it unset to target {default}"
        )
    if not Version(OLDEST_STABLE_TARGET) <= parsed <= Version(default):
        raise BuildError(
            f"SHARED_BUILD_STABLE_TARGET={raw} is outside what the stable-ABI packages build "
            f"for: {OLDEST_STABLE_TARGET} to {default}"
        )
    installed = Version(Version(torch_version).base_version)
    if installed < parsed:
        hint = (
            f"; to build for this older torch set SHARED_BUILD_STABLE_TARGET="
            f"{installed.major}.{installed.minor}"
            if Version(OLDEST_STABLE_TARGET) <= installed and not raw
            else ""
        )
        raise BuildError(
            f"a stable-ABI build for torch >= {target} needs torch {target} or newer to "
            f"build with, but the build environment has torch {torch_version}; install "
            f"torch>={target}{hint}"
        )
    return target


def is_debug(env: Mapping[str, str]) -> bool:
    """DEBUG=1 builds with -O0 -g (and -G for device code)."""
    return parse_flag(env, "DEBUG")


def compile_args(debug: bool, with_cuda: bool) -> dict[str, list[str]]:
    """Optimisation flags for the host compiler and for nvcc."""
    # Python's CFLAGS, which setuptools puts first on every compile line, carry -g: -g0 (the
    # later flag wins) keeps debug info out of release libraries (gc_cpp: 11.6 MB -> 0.3 MB).
    cxx = ["-O0", "-g"] if debug else ["-O3", "-g0"]
    args = {"cxx": cxx}
    if with_cuda:
        # -lineinfo keeps compute-sanitizer and Nsight able to point at source lines at no
        # cost to the generated code; -G (device debug) disables optimisation entirely.
        args["nvcc"] = ["-O0", "-g", "-G"] if debug else ["-O3", "-lineinfo"]
    return args


def is_werror(env: Mapping[str, str]) -> bool:
    """WERROR=1 turns every warning of our own sources into an error (CI sets it)."""
    return parse_flag(env, "WERROR")


def warning_args(werror: bool, system_include_dirs: list[str]) -> list[str]:
    """-Wall -Wextra -Werror for the package's own sources, under WERROR=1.

    The headers of torch, Python and external libraries are not ours to fix: -isystem makes
    them system headers, whose warnings GCC and Clang do not report (a folder given with
    both -I and -isystem is searched as a system folder).
    """
    if not werror:
        return []
    args = ["-Wall", "-Wextra", "-Werror"]
    for folder in system_include_dirs:
        args += ["-isystem", folder]
    return args


# The sanitizers a build may be instrumented with (GCC and Clang spell them alike).
# ThreadSanitizer is left out: torch's OpenMP runtime is not instrumented, so it reports
# races inside every at::parallel_for.
SANITIZERS = ("address", "undefined")


def sanitizers(env: Mapping[str, str]) -> tuple[str, ...]:
    """SANITIZE=address,undefined (or one of them): the sanitizers to compile in, sorted."""
    raw = env.get("SANITIZE", "")
    names = sorted({name.strip().lower() for name in raw.split(",") if name.strip()})
    unknown = [name for name in names if name not in SANITIZERS]
    if unknown:
        raise BuildError(
            f"SANITIZE={raw!r} names {', '.join(unknown)}; use a comma-separated subset of "
            f"{','.join(SANITIZERS)}, e.g. SANITIZE=address,undefined"
        )
    return tuple(names)


def sanitize_args(names: Sequence[str], debug: bool = False) -> tuple[list[str], list[str]]:
    """Compile and link flags for the sanitizers ``names`` (both empty for none).

    -O1 (after compile_args' -O3, so it wins; DEBUG's -O0 stays) is the level the
    sanitizers' own docs recommend: inlining and loop transforms at -O3 can optimise a bad
    access away, and instrumenting them costs compile time (lltm_cpu's heaviest file: 41 s
    at -O3, 25 s at -O1). -g1 gives the reports file and line numbers at little compile
    cost; the link flag makes the module depend on the sanitizer runtimes (a Python process
    must load libasan first: LD_PRELOAD, see the README).
    """
    if not names:
        return [], []
    flag = "-fsanitize=" + ",".join(names)
    return [*([] if debug else ["-O1"]), flag, "-fno-omit-frame-pointer", "-g1"], [flag]


def cxx_runtime_link_args(platform: str) -> list[str]:
    """The shared libstdc++ named on the link line (Linux): the extension then loads the
    process's one C++ runtime, the libstdc++.so.6 torch loaded.

    A compiler set up to link libstdc++ statically (a wrapper adding -static-libstdc++,
    as on the lent GPU machines, whose builds came out without libstdc++.so.6 even with
    a plain -lstdc++ added) gives the extension a second C++ runtime. Streams, locales and
    exceptions then cross between the two: c10's ``operator<<`` on an ostringstream the
    extension made segfaulted in every error message, and in warp_perspective's
    ``_build_config``. The file name (``-l:``) links the shared object itself ahead of the
    driver's implicit library, so nothing is taken from an archive; with a normal
    compiler it changes nothing (the driver's own -lstdc++ still follows, for what a
    linker script adds, as gcc-toolset's libstdc++_nonshared). ``loads_shared_libstdcxx``
    checks the result.
    """
    return ["-l:libstdc++.so.6"] if platform.startswith("linux") else []


def loads_shared_libstdcxx(library: str) -> bool | None:
    """Whether the ELF shared object ``library`` itself (not a library it loads) needs
    libstdc++.so.6. Every C++ extension of torch does, unless it was linked with a copy of
    its own; None where there is nothing to tell: no readelf, or no ELF file."""
    readelf = shutil.which("readelf")
    if readelf is None:
        return None
    try:
        dynamic = subprocess.run(
            [readelf, "-d", "-W", library], capture_output=True, text=True, check=True, timeout=60
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return any("(NEEDED)" in line and "[libstdc++.so" in line for line in dynamic.splitlines())


def openmp_compile_args(torch_uses_openmp: bool, platform: str) -> list[str]:
    """-fopenmp for the host compiler when torch's intra-op parallelism is OpenMP.

    at::parallel_for is a header template: its ``#pragma omp parallel`` is compiled in the
    extension's own translation unit, and without -fopenmp it silently runs serially
    (torch.utils.cpp_extension never adds the flag). Only the compile gets the flag: the
    GOMP symbols then resolve, at load time, to the OpenMP runtime libtorch_cpu already
    loaded, instead of linking a second runtime into the process.
    """
    if not torch_uses_openmp or platform == "darwin":
        return []
    return ["-fopenmp"]


def available_memory_bytes() -> int | None:
    """MemAvailable from /proc/meminfo, or None where it cannot be read."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def cpu_count() -> int:
    """Cores this process may run on (respects taskset and cgroup CPU sets)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def max_jobs(env: Mapping[str, str], cores: int, memory_bytes: int | None, with_cuda: bool) -> int:
    """Parallel compile jobs: MAX_JOBS if set, else as many as both cores and memory allow."""
    raw = env.get("MAX_JOBS")
    if raw is not None and raw.strip() != "":
        try:
            jobs = int(raw)
        except ValueError:
            jobs = 0
        if jobs < 1:
            raise BuildError(f"MAX_JOBS={raw!r} must be a whole number of at least 1")
        return jobs
    jobs = max(1, cores)
    if memory_bytes is not None:
        per_job = NVCC_JOB_BYTES if with_cuda else CXX_JOB_BYTES
        jobs = min(jobs, max(1, memory_bytes // per_job))
    return int(jobs)


@dataclass(frozen=True)
class Compiler:
    """The C++ compiler setuptools will call."""

    command: str
    path: str


def find_cxx(env: Mapping[str, str], which: Callable[[str], str | None] = shutil.which) -> Compiler:
    """Locate the C++ compiler (CXX, else c++), failing with what to install."""
    command = env.get("CXX", "").strip() or "c++"
    program = command.split()[0]
    path = which(program)
    if path is None:
        hint = (
            f"CXX={command!r} is not on PATH"
            if env.get("CXX", "").strip()
            else "no C++ compiler named 'c++' is on PATH"
        )
        raise BuildError(
            f"{hint}; install one (Debian/Ubuntu: apt-get install g++) or set CXX to its path"
        )
    return Compiler(command=command, path=path)


def compiler_launcher(
    env: Mapping[str, str], which: Callable[[str], str | None] = shutil.which
) -> str | None:
    """The compiler cache to put in front of the C++ and nvcc commands, or None.

    USE_CCACHE=auto (default) takes ccache, else sccache, when one is on PATH; 1 requires
    one; 0 turns caching off.
    """
    raw = env.get("USE_CCACHE", "").strip().lower() or "auto"
    if raw in _FALSE:
        return None
    if raw not in _TRUE and raw != "auto":
        raise BuildError(
            f"USE_CCACHE={env.get('USE_CCACHE')!r} is not understood; use USE_CCACHE=auto, 1 or 0"
        )
    for name in ("ccache", "sccache"):
        path = which(name)
        if path:
            return path
    if raw in _TRUE:
        raise BuildError(
            "USE_CCACHE=1 asks for a compiler cache but neither ccache nor sccache is on "
            "PATH; install one (apt-get install ccache) or unset USE_CCACHE"
        )
    return None

"""Step 1 of a build (with config.py): ``read_knobs`` parses the environment variables
that steer it, once, before torch is imported (those of one step only are read there)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from .errors import BuildError

_TRUE, _FALSE = {"1", "true", "yes", "on"}, {"0", "false", "no", "off"}
_CUDA_MODES = (
    {"": "auto", "auto": "auto"} | dict.fromkeys(_TRUE, "on") | dict.fromkeys(_FALSE, "off")
)

# Peak resident memory of one compile job, rounded up: g++ -O3 on a file including torch's
# autograd headers, nvcc on a kernel for five architectures.
CXX_JOB_BYTES = 1 << 30
NVCC_JOB_BYTES = 2 << 30


def parse_flag(env: Mapping[str, str], name: str) -> bool:
    """Read an on/off variable (unset: off); anything other than the usual spellings is an
    error."""
    value = env.get(name, "").strip().lower()
    if value in _TRUE | _FALSE or not value:
        return value in _TRUE
    raise BuildError(f"{name}={env[name]!r} is not understood; use {name}=1 or {name}=0")


def use_cuda_mode(env: Mapping[str, str]) -> str:
    """Return "auto", "on" or "off" from USE_CUDA (auto|0|1), with FORCE_CUDA=1 meaning on."""
    mode = _CUDA_MODES.get(env.get("USE_CUDA", "").strip().lower())
    if mode is None:
        raise BuildError(
            f"USE_CUDA={env['USE_CUDA']!r} is not understood; use USE_CUDA=auto, USE_CUDA=1 or "
            "USE_CUDA=0"
        )
    if parse_flag(env, "FORCE_CUDA"):
        if mode == "off":
            raise BuildError("FORCE_CUDA=1 and USE_CUDA=0 contradict each other; unset one")
        mode = "on"
    return mode


# ThreadSanitizer is left out: torch's OpenMP runtime is not instrumented, so it reports
# races inside every at::parallel_for.
SANITIZERS = ("address", "undefined")


def sanitizers(env: Mapping[str, str]) -> tuple[str, ...]:
    """SANITIZE=address,undefined (or one of them): the sanitizers to compile in, sorted."""
    raw = env.get("SANITIZE", "")
    names = sorted({name.strip().lower() for name in raw.split(",") if name.strip()})
    if unknown := [name for name in names if name not in SANITIZERS]:
        raise BuildError(
            f"SANITIZE={raw!r} names {', '.join(unknown)}; use a comma-separated subset of "
            f"{','.join(SANITIZERS)}, e.g. SANITIZE=address,undefined"
        )
    return tuple(names)


def loads_shared_libstdcxx(library: str) -> bool | None:
    """Whether the ELF shared object ``library`` itself needs libstdc++.so.6 (else it
    carries a copy of its own); None without readelf or for no ELF file."""
    if (readelf := shutil.which("readelf")) is None:
        return None
    try:
        dynamic = subprocess.run(
            [readelf, "-d", "-W", library], capture_output=True, text=True, check=True, timeout=60
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return any("(NEEDED)" in line and "[libstdc++.so" in line for line in dynamic.splitlines())


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
    raw = env.get("MAX_JOBS", "")
    if raw.strip():
        jobs = int(raw) if raw.strip().isdecimal() else 0
        if jobs < 1:
            raise BuildError(f"MAX_JOBS={raw!r} must be a whole number of at least 1")
        return jobs
    if memory_bytes is None:
        return max(1, cores)
    per_job = NVCC_JOB_BYTES if with_cuda else CXX_JOB_BYTES
    return max(1, min(cores, memory_bytes // per_job))


@dataclass(frozen=True)
class Compiler:
    """The C++ compiler setuptools will call."""

    command: str
    path: str


def find_cxx(env: Mapping[str, str], which: Callable[[str], str | None] = shutil.which) -> Compiler:
    """Locate the C++ compiler (CXX, else c++), failing with what to install."""
    command = env.get("CXX", "").strip() or "c++"
    path = which(command.split()[0])
    if path is None:
        hint = "no C++ compiler named 'c++' is on PATH"
        if env.get("CXX", "").strip():
            hint = f"CXX={command!r} is not on PATH"
        raise BuildError(
            f"{hint}; install one (Debian/Ubuntu: apt-get install g++) or set CXX to its path"
        )
    return Compiler(command=command, path=path)


def compiler_launcher(
    env: Mapping[str, str], which: Callable[[str], str | None] = shutil.which
) -> str | None:
    """The compiler cache to put in front of the C++ and nvcc commands, or None:
    USE_CCACHE=auto (default) takes ccache, else sccache, if on PATH; 1 requires one."""
    raw = env.get("USE_CCACHE", "").strip().lower() or "auto"
    if raw in _FALSE:
        return None
    if raw not in _TRUE and raw != "auto":
        raise BuildError(
            f"USE_CCACHE={env.get('USE_CCACHE')!r} is not understood; use USE_CCACHE=auto, 1 or 0"
        )
    path = which("ccache") or which("sccache")
    if path is None and raw in _TRUE:
        raise BuildError(
            "USE_CCACHE=1 asks for a compiler cache but neither ccache nor sccache is on "
            "PATH; install one (apt-get install ccache) or unset USE_CCACHE"
        )
    return path


@dataclass(frozen=True)
class Knobs:
    """Every knob of a build, read from the environment once (``read_knobs``)."""

    use_cuda: str = "auto"  # USE_CUDA and FORCE_CUDA: "auto", "on" or "off"
    debug: bool = False
    werror: bool = False
    sanitize: tuple[str, ...] = ()
    compiler: Compiler | None = None  # CXX, else c++
    launcher: str | None = None  # USE_CCACHE: ccache or sccache in front of the compilers
    # MAX_JOBS, else what cores and memory allow: for a C++ build, for one with nvcc.
    max_jobs: int = 1
    max_jobs_cuda: int = 1


def read_knobs(env: Mapping[str, str]) -> Knobs:
    """The knobs of env; a knob it does not understand is a BuildError naming it."""
    cores, memory_bytes = cpu_count(), available_memory_bytes()
    return Knobs(
        use_cuda=use_cuda_mode(env),
        debug=parse_flag(env, "DEBUG"),
        werror=parse_flag(env, "WERROR"),
        sanitize=sanitizers(env),
        compiler=find_cxx(env),
        launcher=compiler_launcher(env),
        max_jobs=max_jobs(env, cores, memory_bytes, with_cuda=False),
        max_jobs_cuda=max_jobs(env, cores, memory_bytes, with_cuda=True),
    )

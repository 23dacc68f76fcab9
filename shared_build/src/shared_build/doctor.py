"""``python -m shared_build doctor``: what this machine can build, one line per fact.

Each check asks the build step that decides it, or takes what it looks at as arguments so
the tests feed it broken setups; a blocker is the sentence the build would stop at."""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from . import config, knobs
from . import cuda as cuda_mod
from .build_info import compiler_version
from .errors import BuildError
from .flags import cxx_runtime_link_args
from .torch_facts import require_ninja

Runner = Callable[[Sequence[str], str | None], subprocess.CompletedProcess]


@dataclass(frozen=True)
class Finding:
    """One line of the report: "ok", "warn" (works, with a fix to consider) or "fail" (a
    blocker)."""

    status: str
    topic: str
    text: str

    def line(self) -> str:
        mark = {"ok": "ok  ", "warn": "WARN", "fail": "FAIL"}[self.status]
        return f"[{mark}] {self.topic}: {self.text}"


def _run(command: Sequence[str], stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        list(command), input=stdin, capture_output=True, text=True, timeout=120, check=False
    )


def check_python() -> Finding:
    version = tuple(sys.version_info[:3])
    text = ".".join(map(str, version))
    if version < (3, 10):
        return Finding("fail", "python", f"{text}; the packages need Python 3.10 or newer")
    return Finding("ok", "python", f"{text} ({sys.executable})")


# The setuptools the packages' [build-system] requires: their license = "BSD-3-Clause"
# (PEP 639) needs 77.
SETUPTOOLS_NEEDED = "77"


def check_setuptools(version: str | None) -> Finding:
    """The installed setuptools (None: none) as the build checks it (config.check_setuptools)."""
    requirement = f"setuptools>={SETUPTOOLS_NEEDED}"
    if version is None:
        return Finding("fail", "setuptools", f"not installed; pip install -U '{requirement}'")
    try:
        config.check_setuptools(requirement, version=version)
    except BuildError as error:
        text = f"{version}, older than the {SETUPTOOLS_NEEDED} the packages need: {error}"
        return Finding("fail", "setuptools", text)
    return Finding("ok", "setuptools", version)


def check_torch(torch: Any) -> Finding:
    if torch is None:
        text = (
            "not importable; install it first (pip install torch), then build with "
            "pip install --no-build-isolation so the build sees it"
        )
        return Finding("fail", "torch", text)
    build = f"CUDA {torch.version.cuda} build" if torch.version.cuda else "CPU-only build"
    text = f"{torch.__version__}, {build}, at {os.path.dirname(torch.__file__)}"
    return Finding("ok", "torch", text)


def cxx_standard(torch_version: str | None) -> str:
    """The C++ standard torch's headers need: C++20 from torch 2.13 on, C++17 before."""
    from packaging.version import Version

    return "c++17" if torch_version and Version(torch_version).release[:2] < (2, 13) else "c++20"


def check_cxx(env: Mapping[str, str], torch_version: str | None) -> Finding:
    try:
        compiler = knobs.find_cxx(env)
    except BuildError as error:
        return Finding("fail", "c++", str(error))
    standard = cxx_standard(torch_version)
    name = compiler_version(compiler.command)
    probe = "#include <version>\nint main() { return 0; }\n"
    command = [*compiler.command.split(), f"-std={standard}", "-x", "c++", "-fsyntax-only", "-"]
    result = _run(command, probe)
    if result.returncode != 0:
        reason = (result.stderr.strip().splitlines() or ["it failed"])[0]
        text = (
            f"{compiler.path} ({name}) does not accept -std={standard}, which torch "
            f"{torch_version}'s headers need ({reason}); install GCC 10 or newer or Clang 12 "
            "or newer (apt-get install g++) or set CXX to such a compiler"
        )
        return Finding("fail", "c++", text)
    return Finding("ok", "c++", f"{compiler.path} ({name}), accepts -std={standard}")


def check_cxx_runtime(env: Mapping[str, str]) -> Finding | None:
    """How the compiler links libstdc++ (Linux): shared, as torch's is, or a static copy,
    which shared_build's link line overrides and its build_ext refuses where it cannot.
    None where there is nothing to check (no Linux, no compiler, no readelf)."""
    if not sys.platform.startswith("linux") or shutil.which("readelf") is None:
        return None
    try:
        compiler = knobs.find_cxx(env)
    except BuildError:
        return None  # check_cxx has said so
    source = "#include <sstream>\nint f(long x) { std::ostringstream s; s << x; return 0; }\n"
    with tempfile.TemporaryDirectory() as folder:
        library = os.path.join(folder, "probe.so")

        def static_with(*link_args: str) -> bool | None:
            command = [*compiler.command.split(), "-shared", "-fPIC", "-x", "c++", "-"]
            if _run([*command, *link_args, "-o", library], source).returncode != 0:
                return None
            loads = knobs.loads_shared_libstdcxx(library)
            return None if loads is None else not loads

        default = static_with()
        if default is None:
            return None
        if not default:
            return Finding("ok", "c++ runtime", "links the shared libstdc++, as torch does")
        if static_with(*cxx_runtime_link_args(sys.platform)) is False:
            text = (
                f"{compiler.command} links libstdc++ statically by default; shared_build's "
                "builds name the shared one (-l:libstdc++.so.6), but a library built "
                "another way (CMake, torch.utils.cpp_extension.load) gets its own copy and "
                "can crash beside torch's: set CXX to a compiler that links the shared one"
            )
            return Finding("warn", "c++ runtime", text)
        text = (
            f"{compiler.command} links libstdc++ statically even when the shared one is "
            "named: every library would carry a second C++ runtime beside torch's and crash "
            "at its first error message; set CXX to a compiler that links the shared "
            "libstdc++ (e.g. /usr/bin/g++)"
        )
        return Finding("fail", "c++ runtime", text)


def cxx_candidates(env: Mapping[str, str]) -> list[str]:
    """The C++ compilers on env's PATH to try, in order: CXX (kept whole: "ccache g++"), c++,
    g++, then g++-real and the numbered g++-N, newest first (on the lent GPU machines c++
    and g++ were wrappers that link libstdc++ statically, around g++-real)."""
    path = env.get("PATH", os.defpath)
    numbered = set()
    for folder in path.split(os.pathsep):
        if os.path.isdir(folder):
            numbered.update(n for n in os.listdir(folder) if re.fullmatch(r"g\+\+-\d+", n))
    names = [env.get("CXX", "").strip(), "c++", "g++", "g++-real"]
    names += sorted(numbered, key=lambda n: -int(n.split("-")[1]))
    return list(dict.fromkeys(n for n in names if n and shutil.which(n.split()[0], path=path)))


def pick_cxx(env: Mapping[str, str]) -> tuple[str | None, list[tuple[str, Finding | None]]]:
    """The first of cxx_candidates that links the shared libstdc++ by default (None when
    none does), and what check_cxx_runtime found for each candidate tried."""
    tried = []
    for name in cxx_candidates(env):
        program, *rest = name.split()
        found = shutil.which(program, path=env.get("PATH", os.defpath)) or program
        command = " ".join([found, *rest])
        finding = check_cxx_runtime({**env, "CXX": command})
        tried.append((name, finding))
        if finding is not None and finding.status == "ok":
            return name, tried
    return None, tried


def check_ninja(env: Mapping[str, str]) -> Finding:
    try:
        return Finding("ok", "ninja", require_ninja(dict(env)))
    except BuildError as error:
        return Finding("fail", "ninja", str(error))


def check_nvcc(
    env: Mapping[str, str],
    torch_cuda: str | None,
    site_dirs: Sequence[str],
    cuda_home_dir: str,
    which: Callable[[str], str | None] = shutil.which,
) -> tuple[Finding, cuda_mod.CudaToolkit | None]:
    if torch_cuda is None:
        text = "not needed: torch is a CPU-only build, CUDA sources are skipped"
        return Finding("ok", "nvcc", text), None
    try:
        chosen = cuda_mod.select_toolkit(env, torch_cuda, site_dirs, cuda_home_dir, which=which)
    except BuildError as error:
        # A build with CUDA on (USE_CUDA auto or 1) stops at this very sentence.
        if knobs.use_cuda_mode(env) == "off":
            return Finding("ok", "nvcc", f"not used (USE_CUDA=0); CUDA would fail: {error}"), None
        text = f"{error}; every package with CUDA sources fails to build"
        return Finding("fail", "nvcc", text), None
    if chosen is None:
        text = (
            "none found, so CUDA kernels are skipped (CUDA-only packages fail); for torch's "
            f"CUDA {torch_cuda} run: {cuda_mod.pip_compiler_command(torch_cuda)}"
        )
        return Finding("warn", "nvcc", text), None
    found = chosen.toolkit
    text = (
        f"{found.nvcc}, CUDA {found.version} ({found.origin}, toolkit "
        f"{found.pip_dir or found.root}); fits torch's CUDA {torch_cuda} and its headers"
    )
    return Finding("ok", "nvcc", text), found


def check_arch_list(env: Mapping[str, str], toolkit: cuda_mod.CudaToolkit, torch: Any) -> Finding:
    """The arch list a build will use, decided as resolve_cuda decides it."""
    from .torch_facts import arch_flags, visible_capabilities

    torch_archs = cuda_mod.parse_nvcc_gpu_codes(arch_flags(torch))
    nvcc_archs = cuda_mod.toolkit_archs(toolkit.nvcc)
    try:
        archs, origin = cuda_mod.resolve_arch_list(
            env, visible_capabilities(torch), nvcc_archs, torch_archs
        )
    except BuildError as error:
        return Finding("fail", "TORCH_CUDA_ARCH_LIST", str(error))
    return Finding("ok", "TORCH_CUDA_ARCH_LIST", f"{archs} (from {origin})")


def check_max_jobs(
    env: Mapping[str, str], cores: int, memory: int | None, with_cuda: bool
) -> Finding:
    try:
        jobs = knobs.max_jobs(env, cores, memory, with_cuda)
    except BuildError as error:
        return Finding("fail", "MAX_JOBS", str(error))
    per_job = knobs.NVCC_JOB_BYTES if with_cuda else knobs.CXX_JOB_BYTES
    memory_text = f"{memory / 2**30:.1f} GiB available" if memory else "memory unknown"
    origin = "MAX_JOBS" if env.get("MAX_JOBS", "").strip() else "cores and memory"
    text = (
        f"{jobs} (from {origin}: {cores} cores, {memory_text}, about "
        f"{per_job / 2**30:.0f} GiB per {'nvcc' if with_cuda else 'C++'} job)"
    )
    if memory and jobs * per_job > memory:
        lower = max(1, memory // per_job)
        text += f"; {jobs} jobs may run out of memory: lower MAX_JOBS to {lower}"
        return Finding("warn", "MAX_JOBS", text)
    return Finding("ok", "MAX_JOBS", text)


def check_opencv(which: Callable[[str], str | None] = shutil.which, run: Runner = _run) -> Finding:
    if which("pkg-config") is None:
        text = (
            "pkg-config not found, so warp_perspective builds without OpenCV (its built-in "
            "kernel only); apt-get install pkg-config libopencv-dev to have both"
        )
        return Finding("warn", "opencv", text)
    result = run(["pkg-config", "--modversion", "opencv4"], None)
    if result.returncode != 0:
        text = (
            "opencv4 not found by pkg-config, so warp_perspective builds its built-in kernel "
            "only; apt-get install libopencv-dev to have the OpenCV backend too"
        )
        return Finding("warn", "opencv", text)
    return Finding("ok", "opencv", f"opencv4 {result.stdout.strip()} (pkg-config)")


def check_cache(env: Mapping[str, str]) -> Finding:
    try:
        launcher = knobs.compiler_launcher(env)
    except BuildError as error:
        return Finding("fail", "compiler cache", str(error))
    if launcher is not None:
        text = f"{launcher}, in front of c++ and nvcc (USE_CCACHE=0 turns it off)"
        return Finding("ok", "compiler cache", text)
    if env.get("USE_CCACHE", "").strip().lower() in ("0", "false", "no", "off"):
        return Finding("ok", "compiler cache", "off (USE_CCACHE=0)")
    text = (
        "neither ccache nor sccache is on PATH; apt-get install ccache makes rebuilds "
        "of unchanged sources near-instant (shared_build uses it by itself)"
    )
    return Finding("warn", "compiler cache", text)


def diagnose(env: Mapping[str, str] | None = None, torch: Any = "import") -> list[Finding]:
    """Every check, in the order a build meets them."""
    env = dict(os.environ if env is None else env)
    if torch == "import":
        try:
            import torch
        except ImportError:
            torch = None
    try:
        from setuptools import __version__ as setuptools_version
    except ImportError:
        setuptools_version = None
    findings = [check_python(), check_setuptools(setuptools_version), check_torch(torch)]
    findings.append(check_cxx(env, torch.__version__ if torch is not None else None))
    runtime = check_cxx_runtime(env)
    if runtime and runtime.status != "ok" and (better := pick_cxx(env)[0]):
        runtime = replace(runtime, text=f"{runtime.text}; here CXX={better} does")
    if runtime:
        findings.append(runtime)
    findings.append(check_ninja(env))
    toolkit = None
    if torch is not None:
        from .torch_facts import site_dirs

        with tempfile.TemporaryDirectory() as home:
            nvcc, toolkit = check_nvcc(env, torch.version.cuda, site_dirs(torch), home)
            findings.append(nvcc)
            if toolkit:
                findings.append(check_arch_list(env, toolkit, torch))
    jobs = check_max_jobs(
        env, knobs.cpu_count(), knobs.available_memory_bytes(), toolkit is not None
    )
    findings += [jobs, check_opencv(), check_cache(env)]
    return findings


def main(env: Mapping[str, str] | None = None) -> int:
    print(f"shared_build doctor on {platform.node()} ({platform.platform()})")
    findings = diagnose(env)
    for finding in findings:
        print(finding.line())
    if blockers := [f for f in findings if f.status == "fail"]:
        print(f"{len(blockers)} blocker(s): fix the FAIL lines above before building")
        return 1
    print("nothing blocks a build")
    return 0

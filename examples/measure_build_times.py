"""Measure the cold and warm build time of each extension style, for the table in README.md.

    python examples/measure_build_times.py [--repeats 2]

Cold: an empty build folder (the first build on a machine, or after a torch upgrade).
Warm: the same build again with nothing changed (the next run, or the next `pip install`).
Each figure is the best of --repeats runs, in seconds of wall time, with what a user waits
for: `pip wheel` includes pip and setup.py starting, CMake includes configuring. Everything
is built under a temporary folder; nothing is installed. The machine's load average is
printed before and after: other work on the machine makes every figure larger.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PYTHON = sys.executable


def _run(command: list[str], *, env: dict[str, str] | None = None, cwd: Path | None = None) -> str:
    proc = subprocess.run(
        command,
        env={**os.environ, **(env or {})},
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"failed: {' '.join(command)}\n{proc.stdout}\n{proc.stderr}")
    return proc.stdout


def _seconds(command: list[str], **kwargs) -> float:
    start = time.perf_counter()
    _run(command, **kwargs)
    return time.perf_counter() - start


def _timed_python(code: str, env: dict[str, str]) -> float:
    """Seconds of the statement `build()` inside a fresh Python that defines it in code."""
    program = (
        code + "\nimport time\n_t = time.perf_counter()\nbuild()\nprint(time.perf_counter() - _t)\n"
    )
    return float(_run([PYTHON, "-c", program], env=env).strip().splitlines()[-1])


def jit(code: str) -> Callable[[Path], tuple[float, float]]:
    """A JIT style: build() in one process, then again in a new process with the cache."""

    def measure(scratch: Path) -> tuple[float, float]:
        env = {"TORCH_EXTENSIONS_DIR": str(scratch / "ext")}
        return _timed_python(code, env), _timed_python(code, env)

    return measure


LOAD = jit(
    f"""
from torch.utils.cpp_extension import load
def build():
    load(name="jit_add", sources=[{str(HERE / "01_jit_load" / "add.cpp")!r}], extra_cflags=["-O2"])
"""
)

LOAD_INLINE = jit(
    f"""
import sys
sys.path.insert(0, {str(HERE / "02_jit_inline")!r})
from jit_inline import SOURCE
from torch.utils.cpp_extension import load_inline
def build():
    load_inline(name="inline_axpy", cpp_sources=SOURCE, functions=["axpy"],
                extra_cflags=["-O3", "-fopenmp"], no_implicit_headers=True)
"""
)

# The same one-line function, with load_inline's default header, <torch/extension.h>.
LOAD_INLINE_EXTENSION_H = jit(
    """
from torch.utils.cpp_extension import load_inline
def build():
    load_inline(name="inline_extension_h",
                cpp_sources="at::Tensor twice(const at::Tensor& x) { return x.mul(2); }",
                functions=["twice"], extra_cflags=["-O3"])
"""
)

LOAD_INLINE_LIGHT = jit(
    """
from torch.utils.cpp_extension import load_inline
def build():
    load_inline(name="inline_light",
                cpp_sources=["#include <ATen/core/Tensor.h>", "#include <torch/csrc/Exceptions.h>",
                             "at::Tensor twice(const at::Tensor& x) { return x.mul(2); }"],
                functions=["twice"], extra_cflags=["-O3"], no_implicit_headers=True)
"""
)

LIBRARY = jit(
    f"""
from torch.utils.cpp_extension import load
def build():
    load(name="ex_swish", sources=[{str(HERE / "06_torch_library_compile" / "swish.cpp")!r}],
         extra_cflags=["-O3", "-fopenmp"], is_python_module=False)
"""
)


def _pip_wheel(source: Path, out: Path) -> list[str]:
    return [
        PYTHON,
        "-m",
        "pip",
        "wheel",
        "-q",
        "--disable-pip-version-check",
        "--no-build-isolation",
        "--no-deps",
        "-w",
        str(out),
        str(source),
    ]


def setuptools_aot(scratch: Path) -> tuple[float, float]:
    source = scratch / "src"
    source.mkdir()
    folder = HERE / "03_setuptools_aot"
    for name in ("setup.py", "pyproject.toml"):
        shutil.copy(folder / name, source)
    for name in ("csrc", "src"):
        shutil.copytree(folder / name, source / name)
    command = _pip_wheel(source, scratch / "dist")
    return _seconds(command), _seconds(command)


def cmake(scratch: Path) -> tuple[float, float]:
    build = scratch / "build"
    configure = [
        "cmake",
        "-S",
        str(HERE / "04_cmake_pybind"),
        "-B",
        str(build),
        "-G",
        "Ninja",
        "-DCMAKE_BUILD_TYPE=Release",
        f"-DPython3_EXECUTABLE={PYTHON}",
    ]
    env = {"PATH": os.pathsep.join([os.path.dirname(PYTHON), os.environ.get("PATH", "")])}
    cold = _seconds(configure, env=env) + _seconds(["cmake", "--build", str(build)], env=env)
    warm = _seconds(["cmake", "--build", str(build)], env=env)
    return cold, warm


def cmake_torchscript_apps(scratch: Path) -> tuple[float, float]:
    """05's two C++ programs (TorchScript and AOTInductor), against the installed op library."""
    import torch

    library = _run([PYTHON, "-c", "import warp_perspective as w; print(w.library_path())"])
    build = scratch / "build"
    configure = [
        "cmake",
        "-S",
        str(HERE / "05_torchscript_cpp"),
        "-B",
        str(build),
        "-G",
        "Ninja",
        "-DCMAKE_BUILD_TYPE=Release",
        f"-DCMAKE_PREFIX_PATH={torch.utils.cmake_prefix_path}",
        f"-DWARP_PERSPECTIVE_LIBRARY={library.strip()}",
    ]
    cold = _seconds(configure) + _seconds(["cmake", "--build", str(build)])
    warm = _seconds(["cmake", "--build", str(build)])
    return cold, warm


ADD_EXT_SOURCES = len(list((ROOT / "packages" / "add_ext" / "csrc").rglob("*.cpp")))


def shared_build_package(scratch: Path) -> tuple[float, float]:
    command = _pip_wheel(ROOT / "packages" / "add_ext", scratch / "dist")
    env = {"SHARED_BUILD_DIR": str(scratch / "build")}
    return _seconds(command, env=env), _seconds(command, env=env)


STYLES: dict[str, Callable[[Path], tuple[float, float]]] = {
    "01 load() (one .cpp, pybind11)": LOAD,
    "02 load_inline (no_implicit_headers, -fopenmp)": LOAD_INLINE,
    "03 setuptools, pip wheel (one .cpp)": setuptools_aot,
    "04 CMake, configure + build (two .cpp)": cmake,
    "05 CMake, configure + build (two C++ programs, CPU torch)": cmake_torchscript_apps,
    "06 load(is_python_module=False), TORCH_LIBRARY": LIBRARY,
    # Counted, not written: the label said "three .cpp" long after add_ext had four.
    f"packages/add_ext: shared_build, pip wheel ({ADD_EXT_SOURCES} .cpp)": shared_build_package,
    "load_inline, one line, <torch/extension.h>": LOAD_INLINE_EXTENSION_H,
    "load_inline, one line, two light headers": LOAD_INLINE_LIGHT,
}


def machine() -> str:
    cpu = platform.processor() or "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import torch

    compiler = _run(["c++", "--version"]).splitlines()[0]
    return (
        f"{cpu}, {os.cpu_count()} cores; torch {torch.__version__}, Python "
        f"{platform.python_version()}, {compiler}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2, help="runs per figure; the best is kept")
    parser.add_argument("--only", help="measure only the styles whose label contains this")
    args = parser.parse_args()
    print(f"machine: {machine()}")
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    rows = []
    for label, measure in STYLES.items():
        if args.only and args.only not in label:
            continue
        cold, warm = float("inf"), float("inf")
        for _ in range(args.repeats):
            with tempfile.TemporaryDirectory(prefix="build-times-") as scratch:
                c, w = measure(Path(scratch))
            cold, warm = min(cold, c), min(warm, w)
        rows.append((label, cold, warm))
        print(f"  {label}: cold {cold:.1f} s, warm {warm:.2f} s", flush=True)
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    print()
    print("| style | cold build (s) | warm, nothing changed (s) |")
    print("| --- | ---: | ---: |")
    for label, cold, warm in rows:
        print(f"| {label} | {cold:.1f} | {warm:.2f} |")
    print(textwrap.dedent(f"\n(python {' '.join(sys.argv)}; best of {args.repeats})"))


if __name__ == "__main__":
    main()

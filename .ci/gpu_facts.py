"""What the GPU check's builds and tests will meet in this Python (run by its preflight in its
venv): prints {"facts": {...}, "missing": [...]}, each missing item naming what to install."""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig

MODULES = {
    "ninja": "the builds",
    "pytest": "the tests",
    "hypothesis": "the property tests",
    "cv2": "warp_perspective's tests compare with OpenCV",
    "numpy": "the tests",
    "xdist": "runs each suite on several cores",
}


def run(*command: str) -> str:
    try:
        return subprocess.run(command, capture_output=True, text=True, check=False).stdout
    except OSError:
        return ""


def main() -> dict:
    facts: dict = {"python": f"{sys.version.split()[0]} at {sys.executable}"}
    missing: list[str] = []

    def have(module: str, why: str):
        try:
            return importlib.import_module(module)
        except Exception as error:  # a module that fails at import is missing too
            missing.append(f"{module} ({why}; {type(error).__name__}: {error})")
            return None

    from packaging.version import Version

    torch = have("torch", "the packages build against it")
    if torch is not None:
        version = Version(Version(torch.__version__).base_version)
        facts["torch"] = f"{torch.__version__} (CUDA {torch.version.cuda})"
        if version < Version("2.11"):
            missing.append(f"torch >= 2.11 (found {torch.__version__})")
        elif version < Version("2.13"):  # the stable-ABI packages then target this torch
            facts["stable_target"] = f"{version.major}.{version.minor}"
        if torch.cuda.is_available():
            major, minor = torch.cuda.get_device_capability(0)
            facts["gpu"] = f"{torch.cuda.get_device_name(0)} sm_{major}{minor}"
            facts["arch"] = f"{major}.{minor}"
            facts["gpu_memory_gb"] = round(torch.cuda.mem_get_info(0)[1] / 1e9, 1)
        else:
            missing.append(f"a GPU that torch {torch.__version__} can use")
        if torch.version.cuda is not None:
            from torch.utils import cpp_extension

            nvcc = shutil.which("nvcc") or f"{cpp_extension.CUDA_HOME}/bin/nvcc"
            release = run(nvcc, "--version").partition("release ")[2].split(",")[0]
            facts["nvcc"] = f"{release or 'none'} at {nvcc}"
            if release.split(".")[0] != torch.version.cuda.split(".")[0]:
                missing.append(f"nvcc of CUDA {torch.version.cuda} (found {facts['nvcc']})")
    setuptools = have("setuptools", "builds the packages")
    if setuptools is not None:
        facts["setuptools"] = setuptools.__version__
        if Version(setuptools.__version__) < Version("77"):
            missing.append(f"setuptools >= 77 (our license fields; found {setuptools.__version__})")
        # What setuptools links a C++ extension with: its own copy of distutils, set up from
        # sysconfig and CXX / LDSHARED / LDCXXSHARED.
        from distutils.ccompiler import new_compiler
        from distutils.sysconfig import customize_compiler

        compiler = new_compiler()
        customize_compiler(compiler)
        link = getattr(compiler, "linker_so_cxx", None) or compiler.linker_so
        facts["setuptools links C++ with"] = " ".join(link)
    for name in ("CXX", "LDSHARED", "LDCXXSHARED"):
        facts[f"sysconfig {name}"] = sysconfig.get_config_var(name)
    for module, why in MODULES.items():
        have(module, why)
    sanitizer = shutil.which("compute-sanitizer") or "/usr/local/cuda/bin/compute-sanitizer"
    if os.access(sanitizer, os.X_OK):
        facts["sanitizer"] = sanitizer
        options = run(sanitizer, "--help")
        facts["bulk_copy"] = "--check-bulk-copy" in options
        facts["print_limit"] = "--print-limit" in options
    else:
        missing.append("compute-sanitizer (on PATH or in /usr/local/cuda/bin)")
    gdb = shutil.which("cuda-gdb") or "/usr/local/cuda/bin/cuda-gdb"
    facts["cuda_gdb"] = gdb if os.access(gdb, os.X_OK) else None
    return {"facts": facts, "missing": missing}


if __name__ == "__main__":
    print(json.dumps(main()))

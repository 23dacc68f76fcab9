"""``setup_kwargs``: everything a package's ``setup()`` needs, from one call.

A package's setup.py is a few lines: ``setup(**setup_kwargs(here))``, with shared_build
installed (a build requirement: pip install --no-build-isolation builds with the one
installed, torch's too). A build goes through six steps, each a module that takes
the results of the ones before it and returns its own:

1. config.py (with knobs.py): the package's pyproject.toml, setup.py's overrides, the
   environment's knobs, the setuptools installed -> BuildConfig
2. torch_facts.py: torch and ninja -> TorchFacts
3. cuda.py: whether to compile CUDA, the toolkit, the architectures -> CudaBuild
4. flags.py: the compiler's and the linker's arguments -> Flags
5. extensions.py: the sources and the extensions
6. setup_args.py: setup()'s arguments, with the commands (commands.py) and the record of
   the build (build_info.py)

Every failure is a BuildError whose message says what to do next; setup.py prints it
without a traceback.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .config import check_setuptools, configure, is_metadata_only, read_config
from .cuda import resolve_cuda
from .errors import BuildError
from .extensions import make_extensions
from .flags import compile_flags
from .setup_args import metadata_arguments, setup_arguments
from .torch_facts import site_dirs as _site_dirs
from .torch_facts import torch_facts

# Imported from here elsewhere: is_metadata_only (packages/warp_perspective/build_opencv.py),
# read_config (tests/test_packages.py), _site_dirs (examples/cuda_cmake_args.py).
__all__ = [
    "_site_dirs",
    "is_metadata_only",
    "pkg_config",
    "read_config",
    "setup_kwargs",
]


def _setup_kwargs(
    root: Path,
    env: dict[str, str],
    argv: Sequence[str],
    overrides: Mapping[str, Any],
    orig_argv: Sequence[str] = (),
) -> dict[str, Any]:
    root = root.resolve()
    if root.is_file():
        root = root.parent
    package = read_config(root)
    metadata_only = is_metadata_only(argv)
    # Before setup() reads pyproject.toml: an older setuptools fails there in its own words.
    check_setuptools(package.setuptools_requirement, building=not metadata_only)
    if metadata_only:
        return metadata_arguments(package, env, orig_argv)
    config = configure(package, env, overrides)
    facts = torch_facts(config)
    cuda = resolve_cuda(config, facts)
    flags = compile_flags(config, facts, cuda)
    extensions = make_extensions(package, cuda, flags)
    return setup_arguments(config, facts, cuda, extensions)


def setup_kwargs(package_root: str | os.PathLike[str], **overrides: Any) -> dict[str, Any]:
    """Everything ``setuptools.setup()`` needs to build the package at package_root.

    overrides may add to the extension: libraries, library_dirs, include_dirs,
    extra_link_args, define_macros, extra_compile_args ({"cxx": [...], "nvcc": [...]}), and
    build_info (a dict recorded in _build_info.py, e.g. which backend was compiled in).
    """
    try:
        return _setup_kwargs(
            Path(package_root), os.environ, sys.argv, overrides, getattr(sys, "orig_argv", ())
        )
    except BuildError as error:
        raise SystemExit(f"error: {error}") from None


def pkg_config(name: str, env: Mapping[str, str] | None = None) -> dict[str, list[str]] | None:
    """include_dirs, library_dirs and libraries of a pkg-config package, or None if absent."""
    program = shutil.which("pkg-config")
    if program is None:
        return None
    run_env = dict(os.environ if env is None else env)
    result = {}
    for key, flag, prefix in (
        ("include_dirs", "--cflags-only-I", "-I"),
        ("library_dirs", "--libs-only-L", "-L"),
        ("libraries", "--libs-only-l", "-l"),
    ):
        proc = subprocess.run(
            [program, flag, name], capture_output=True, text=True, env=run_env, check=False
        )
        if proc.returncode != 0:
            return None
        result[key] = [
            item[len(prefix) :] for item in proc.stdout.split() if item.startswith(prefix)
        ]
    return result

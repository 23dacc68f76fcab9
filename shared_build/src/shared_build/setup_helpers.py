"""``setup_kwargs``: everything a package's ``setup()`` needs, from one call that runs the
build steps (config -> torch_facts -> cuda -> flags -> extensions -> setup_args)."""

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
from .torch_facts import site_dirs as _site_dirs  # noqa: F401 (examples/cuda_cmake_args.py)
from .torch_facts import torch_facts


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
    """Everything ``setuptools.setup()`` needs to build the package at package_root;
    overrides add to [tool.shared_build]'s keys, and build_info to _build_info.py."""
    try:
        return _setup_kwargs(
            Path(package_root), os.environ, sys.argv, overrides, getattr(sys, "orig_argv", ())
        )
    except BuildError as error:
        raise SystemExit(f"error: {error}") from None


def pkg_config(name: str, env: Mapping[str, str] | None = None) -> dict[str, list[str]] | None:
    """include_dirs, library_dirs and libraries of a pkg-config package, or None if absent."""
    if (program := shutil.which("pkg-config")) is None:
        return None
    run_env = dict(os.environ if env is None else env)
    result = {}
    for key, option in (
        ("include_dirs", "--cflags-only-I"),
        ("library_dirs", "--libs-only-L"),
        ("libraries", "--libs-only-l"),
    ):
        proc = subprocess.run([program, option, name], capture_output=True, text=True, env=run_env)
        if proc.returncode != 0:
            return None
        result[key] = [item[2:] for item in proc.stdout.split() if item.startswith(option[-2:])]
    return result

"""Step 6 of a build: the arguments of ``setuptools.setup()``, for a build
(``setup_arguments``, which also logs the decisions in one line) or for metadata only."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.version import Version

from .build_info import build_info
from .commands import make_build_ext, make_sdist
from .config import build_root, wheel_hook
from .errors import log
from .torch_facts import OLDEST_STABLE_TARGET, import_torch, stable_target

if TYPE_CHECKING:
    from .config import BuildConfig, PackageConfig
    from .cuda import CudaBuild
    from .torch_facts import TorchFacts


def runtime_requirements(
    config: PackageConfig, env: Mapping[str, str], torch_version: str | None
) -> list[str] | None:
    """The dependencies of a package that declares them dynamic, or None: torch (the release
    built against for the full ABI, whose C++ symbols change with every release; the stable
    target on for the stable ABI; the oldest a build takes for an sdist), packaging
    (_build_info.py imports it) and [tool.shared_build] dependencies."""
    if not config.dynamic_dependencies:
        return None
    if config.abi == "stable" and torch_version:
        torch_requirement = f"torch>={stable_target(env, torch_version)}"
    elif torch_version:
        torch_requirement = f"torch=={Version(torch_version).public}"
    else:
        oldest = env.get("SHARED_BUILD_STABLE_TARGET", "").strip() or OLDEST_STABLE_TARGET
        torch_requirement = f"torch>={oldest}"
    return [torch_requirement, "packaging", *config.dependencies]


def python_arguments(
    config: PackageConfig, env: Mapping[str, str], torch_version: str | None, base: Path
) -> dict[str, Any]:
    """The setup() arguments of the package's Python side: its packages under src/ (links
    followed: a Python folder shared by packages is a link in theirs), the sdist command,
    the dependencies, and egg_info's folder under base (not src/<name>.egg-info)."""
    src = config.root / "src"
    packages = sorted(
        Path(folder).relative_to(src).as_posix().replace("/", ".")
        for folder, _, names in os.walk(src, followlinks=True)
        if "__init__.py" in names
    )
    (base / "egg-info").mkdir(parents=True, exist_ok=True)
    kwargs = {
        "packages": packages,
        "package_dir": {"": "src"},
        "cmdclass": {"sdist": make_sdist(config.root)},
        "options": {"egg_info": {"egg_base": str(base / "egg-info")}},
    }
    if (requirements := runtime_requirements(config, env, torch_version)) is not None:
        kwargs["install_requires"] = requirements
    return kwargs


def build_tag(torch_version: str, cuda: bool, debug: bool, sanitize: Sequence[str]) -> str:
    """The build folder's name, one per torch/Python/CUDA/debug/sanitizer combination:
    switching torch never links stale objects, switching back recompiles nothing."""
    tag = (
        f"torch{torch_version}-{sys.implementation.cache_tag}{'-cuda' if cuda else ''}"
        f"{'-debug' if debug else ''}{''.join('-' + s for s in sanitize)}"
    )
    return tag.replace("+", "_")


def metadata_arguments(
    package: PackageConfig, env: Mapping[str, str], orig_argv: Sequence[str]
) -> dict[str, Any]:
    """setup()'s arguments for metadata or an sdist: no extension, no torch needed. A wheel
    cannot be built without torch: a wheel hook says so first, before the front end
    downloads the runtime dependencies."""
    metadata_torch = import_torch(package.name).__version__ if wheel_hook(orig_argv) else None
    return python_arguments(package, env, metadata_torch, build_root(env, package.name))


def setup_arguments(
    config: BuildConfig,
    facts: TorchFacts,
    cuda: CudaBuild,
    extensions: tuple[list[Any], str | None],
) -> dict[str, Any]:
    """setup()'s arguments for a build, from every step's result."""
    package, knobs, env = config.package, config.knobs, config.env
    modules, cuda_library = extensions
    jobs = knobs.max_jobs_cuda if cuda.enabled else knobs.max_jobs
    env["MAX_JOBS"] = str(jobs)
    # torch.utils.cpp_extension (2.13 on) puts ccache or sccache in front of c++ and nvcc
    # whenever one is on PATH; TORCH_NO_COMPILER_WRAPPER=1 stops it. USE_CCACHE decides.
    if knobs.launcher is None:
        env["TORCH_NO_COMPILER_WRAPPER"] = "1"
    else:
        env.pop("TORCH_NO_COMPILER_WRAPPER", None)
    tag = build_tag(facts.version, cuda.enabled, knobs.debug, knobs.sanitize)
    build_base = str(config.build_root / tag)
    toolkit = cuda.toolkit
    cuda_summary = (
        f"on (nvcc {toolkit.version} at {toolkit.nvcc}, {toolkit.origin}, "
        f"TORCH_CUDA_ARCH_LIST={cuda.arch_list} from {cuda.arch_origin})"
        if toolkit
        else "off"
    )
    log(
        f"{package.name}: CUDA {cuda_summary}, {'DEBUG -O0 -g' if knobs.debug else '-O3'}"
        f"{', WERROR -Wall -Wextra -Werror' if knobs.werror else ''}"
        f"{', SANITIZE=' + ','.join(knobs.sanitize) if knobs.sanitize else ''}, MAX_JOBS={jobs}, "
        f"compiler cache {knobs.launcher or 'off'}, torch {facts.version}, build folder {build_base}"
    )
    kwargs = python_arguments(package, env, facts.version, config.build_root)
    kwargs["ext_modules"] = modules
    info = build_info(config, facts, cuda, cuda_library)
    kwargs["cmdclass"]["build_ext"] = make_build_ext(info, package.python_module)
    kwargs["options"]["build"] = {"build_base": build_base}
    if package.limited_api:
        kwargs["options"]["bdist_wheel"] = {"py_limited_api": "cp310"}
    return kwargs

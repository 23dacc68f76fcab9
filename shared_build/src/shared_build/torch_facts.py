"""Step 2 of a build: what the build environment has.

torch (its version, its CUDA, the GPUs it sees and was built for, OpenMP, the
site-packages it lies in), the stable-ABI target that torch can build for, and ninja, which
torch.utils.cpp_extension builds with. ``torch_facts`` takes step 1's BuildConfig and
returns a ``TorchFacts``; the later steps ask it instead of torch.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import site
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.version import InvalidVersion, Version

from .errors import BuildError

if TYPE_CHECKING:
    from .config import BuildConfig

# The oldest torch a stable-ABI package supports (the first line of
# requirements/torch-matrix.txt; a test keeps the two equal). Its wheel is built with
# -DTORCH_TARGET_VERSION set to this release, so it may only use the stable API this
# release has, and loads on it and on every newer torch.
STABLE_TARGET = "2.13"

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


def import_torch(package: str) -> Any:
    """Import torch, or explain that pip's build isolation hid it."""
    try:
        import torch
    except ImportError as error:
        raise BuildError(
            f"building {package} needs torch, which is not importable in this build "
            f"environment ({error}); install torch first, then build with "
            f"pip install --no-build-isolation ./packages/{package} so that the build sees it"
        ) from None
    return torch


def require_ninja(env: dict[str, str]) -> str:
    """Find ninja, adding the pip ninja package's folder to PATH when it is not on it."""
    found = shutil.which("ninja", path=env.get("PATH"))
    if found:
        return found
    candidates = [os.path.dirname(sys.executable)]
    spec = importlib.util.find_spec("ninja")
    if spec is not None:
        try:
            import ninja  # type: ignore[import-not-found]

            candidates.insert(0, ninja.BIN_DIR)
        except (ImportError, AttributeError):
            pass
    for folder in candidates:
        path = shutil.which("ninja", path=folder)
        if path:
            env["PATH"] = folder + os.pathsep + env.get("PATH", "")
            return path
    raise BuildError(
        "ninja is required to build (it compiles in parallel and rebuilds only what "
        "changed); pip install ninja"
    )


def site_dirs(torch_module: Any) -> list[str]:
    """The site-packages folders where NVIDIA's pip packages may lie: torch's first."""
    dirs = [str(Path(torch_module.__file__).resolve().parents[1])]
    try:
        dirs += site.getsitepackages()
    except AttributeError:
        pass
    user = site.getusersitepackages()
    if isinstance(user, str):
        dirs.append(user)
    return [d for i, d in enumerate(dirs) if d not in dirs[:i]]


def arch_flags(torch_module: Any) -> str:
    """The nvcc -gencode flags this torch's own kernels were built with (read without a
    GPU); "" where torch does not say."""
    try:
        return torch_module._C._cuda_getArchFlags() or ""
    except (AttributeError, RuntimeError):
        return ""


def visible_capabilities(torch_module: Any) -> list[tuple[int, int]]:
    """The compute capabilities of the GPUs torch sees; [] without one."""
    try:
        if not torch_module.cuda.is_available():
            return []
        return [
            torch_module.cuda.get_device_capability(i)
            for i in range(torch_module.cuda.device_count())
        ]
    except Exception:  # a broken driver must not stop a build that targets other GPUs
        return []


@dataclass
class TorchFacts:
    """Step 2's result: the torch a build compiles against and what it tells."""

    version: str
    cuda: str | None = None  # torch.version.cuda: None for a CPU-only build
    site_dirs: list[str] = field(default_factory=list)
    arch_flags: str = ""
    openmp: bool = False  # torch's intra-op parallelism is OpenMP
    stable_target: str | None = None  # a stable-ABI build's TORCH_TARGET_VERSION
    torch: Any = field(default=None, repr=False, compare=False)

    @cached_property
    def visible(self) -> list[tuple[int, int]]:
        """The visible GPUs' capabilities, asked only by a build that compiles CUDA (asking
        initialises CUDA)."""
        return visible_capabilities(self.torch) if self.torch is not None else []


def torch_facts(config: BuildConfig) -> TorchFacts:
    """Import torch and read what the build needs of it; find ninja."""
    package = config.package
    torch = import_torch(package.name)
    require_ninja(config.env)
    target = None
    if package.abi == "stable":
        try:
            target = stable_target(config.env, STABLE_TARGET, torch.__version__)
        except BuildError as error:
            raise BuildError(f"{package.name}: {error}") from None
    return TorchFacts(
        version=torch.__version__,
        cuda=torch.version.cuda,
        site_dirs=site_dirs(torch),
        arch_flags=arch_flags(torch),
        openmp=torch.backends.openmp.is_available(),
        stable_target=target,
        torch=torch,
    )

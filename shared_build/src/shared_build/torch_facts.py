"""Step 2 of a build (``torch_facts``): torch's version, CUDA, GPUs, OpenMP and
site-packages, the stable-ABI target and ninja; the later steps ask it instead of torch."""

from __future__ import annotations

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

# The oldest torch whose stable-ABI headers compile our stable packages (stable_compat.h
# bridges what 2.11 lacks).
OLDEST_STABLE_TARGET = "2.11"


def stable_target(env: Mapping[str, str], torch_version: str) -> str:
    """The torch release a stable-ABI build targets (TORCH_TARGET_VERSION), whose wheel
    loads on it and every newer torch: SHARED_BUILD_STABLE_TARGET when set, else the torch
    built against; at least OLDEST_STABLE_TARGET, at most that torch."""
    installed = Version(Version(torch_version).base_version)
    raw = env.get("SHARED_BUILD_STABLE_TARGET", "").strip()
    target = raw or f"{installed.major}.{installed.minor}"
    try:
        parsed = Version(target)
    except InvalidVersion:
        parsed = None
    if parsed is None or len(parsed.release) != 2 or str(parsed) != target:
        raise BuildError(
            f"SHARED_BUILD_STABLE_TARGET={raw!r} is not a torch release such as "
            f"{OLDEST_STABLE_TARGET}; leave it unset to target the torch built against"
        )
    if parsed < Version(OLDEST_STABLE_TARGET):
        raise BuildError(
            f"a stable-ABI build for torch {target} is older than the stable API these "
            f"packages build for ({OLDEST_STABLE_TARGET} and newer); install torch>="
            f"{OLDEST_STABLE_TARGET}" + (" or unset SHARED_BUILD_STABLE_TARGET" if raw else "")
        )
    if installed < parsed:
        raise BuildError(
            f"a stable-ABI build for torch >= {target} needs torch {target} or newer to "
            f"build with, but the build environment has torch {torch_version}; install "
            f"torch>={target} or set SHARED_BUILD_STABLE_TARGET to an older release"
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
    if found := shutil.which("ninja", path=env.get("PATH")):
        return found
    candidates = [os.path.dirname(sys.executable)]
    try:
        import ninja  # type: ignore[import-not-found]

        candidates.insert(0, ninja.BIN_DIR)
    except (ImportError, AttributeError):
        pass
    for folder in candidates:
        if path := shutil.which("ninja", path=folder):
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
    return list(dict.fromkeys(dirs))


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
        cuda = torch_module.cuda
        if not cuda.is_available():
            return []
        return [cuda.get_device_capability(i) for i in range(cuda.device_count())]
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
            target = stable_target(config.env, torch.__version__)
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

"""A repository of packages as nox sees it: its folders, its torch matrix, its packages,
the digests that decide a rebuild, and the locks that let two sessions share .nox/."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

# The only names this package takes from the rest of shared_build (kept in one place).
from ..setup_helpers import STABLE_TARGET as RELEASE_STABLE_TARGET
from ..setup_helpers import read_config

# Build knobs (see shared_build): a change of any of them rebuilds every package.
BUILD_KNOBS = (
    "SHARED_BUILD_DIR",
    "SHARED_BUILD_STABLE_TARGET",
    "USE_CUDA",
    "FORCE_CUDA",
    "CUDA_HOME",
    "CUDA_PATH",
    "TORCH_CUDA_ARCH_LIST",
    "DEBUG",
    "CXX",
    "MAX_JOBS",
    "WERROR",
    "USE_CCACHE",
    "SANITIZE",
    "WARP_PERSPECTIVE_OPENCV",
)
_HASH_SKIP_DIRS = {"build", "dist", "__pycache__", ".pytest_cache", "_vendor"}


def read_matrix(path: Path) -> tuple[str, ...]:
    """The torch versions of a matrix file (`torch==X.Y.Z  # comment` a line), in its order."""
    return tuple(
        line.split("#")[0].strip().removeprefix("torch==")
        for line in path.read_text().splitlines()
        if line.split("#")[0].strip()
    )


@dataclass(frozen=True)
class Package:
    name: str
    root: Path
    cuda: str  # "none" | "optional" | "required", from [tool.shared_build]
    test_requires: tuple[str, ...]
    bench_requires: tuple[str, ...]
    common: Path | None = (
        None  # a source folder shared with other packages ([tool.shared_build] common)
    )
    abi: str = "full"  # "full" | "stable", from [tool.shared_build]


class Repo:
    """Where the packages are (packages/*), where nox keeps what it makes (.nox/), and the
    torch versions of a run: requirements/torch-matrix.txt, narrowed by TORCH_VERSIONS.

    ``release_knobs``: the build variables of a package's release wheel (nox -s release),
    by package name; part of that wheel's digest."""

    def __init__(
        self,
        root: Path,
        *,
        release_knobs: Mapping[str, Mapping[str, str]] | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        environ = os.environ if environ is None else environ
        self.root = Path(root)
        self.packages_dir = self.root / "packages"
        self.shared_build = self.root / "shared_build"
        self.matrix_file = self.root / "requirements" / "torch-matrix.txt"
        self.envs_dir = self.root / ".nox" / "envs"
        # Where nox's builds keep their objects between runs (shared_build's default is a
        # temporary folder, so that a plain pip install leaves nothing in the source tree).
        self.build_dir = self.root / ".nox" / "build"
        # ccache's store, kept between runs like the build folders (used when ccache is on PATH).
        self.ccache_dir = self.root / ".nox" / "ccache"
        # Each stable-ABI package's one wheel, by the digest of what it is built from.
        self.wheels_dir = self.root / ".nox" / "wheels"
        # Sessions run at once (CI's lanes) take these before they touch an environment or a wheel.
        self.locks_dir = self.root / ".nox" / "locks"
        # Each session's wall time and test counts, for CI's closing table (.ci/summary.py).
        self.reports_dir = self.root / ".nox" / "reports"
        # The release wheelhouse: per torch, one find-links folder with every package
        # (pyg-lib's layout), the sdists beside them.
        self.wheelhouse = self.root / "wheelhouse"
        # This package's nox machinery: no build reads it, so a change to it rebuilds nothing
        # (as when it was the noxfile); shared_build's own install still covers it.
        self.workspace_src = self.shared_build / "src" / "shared_build" / "workspace"
        self.release_knobs = {k: dict(v) for k, v in (release_knobs or {}).items()}
        # The torch releases of the matrix, oldest first (the one place that names them).
        self.supported_torch = read_matrix(self.matrix_file)
        self.torch_versions = [
            v.strip()
            for v in environ.get("TORCH_VERSIONS", ",".join(self.supported_torch)).split(",")
            if v.strip()
        ]
        # Seconds each stable-ABI wheel took to build in this nox process, for the Reports.
        self.stable_build_seconds: dict[str, float] = {}

    def discover_packages(self) -> list[Package]:
        """Every folder of packages/ with a pyproject.toml, in name order, read by
        shared_build's own reader (read_config), which validates it as a build would."""
        found = []
        for pyproject in sorted(self.packages_dir.glob("*/pyproject.toml")):
            config = read_config(pyproject.parent)
            extras = config.optional_dependencies
            found.append(
                Package(
                    name=config.name,
                    root=config.root,
                    cuda=config.cuda,
                    test_requires=tuple(extras.get("test", [])),
                    bench_requires=tuple(extras.get("bench", [])),
                    common=config.common,
                    abi=config.abi,
                )
            )
        return found

    @contextlib.contextmanager
    def locked(self, name: str) -> Iterator[None]:
        """Hold .nox/locks/<name>.lock: CI runs two nox sessions at once over the same .nox/."""
        self.locks_dir.mkdir(parents=True, exist_ok=True)
        with open(self.locks_dir / f"{name}.lock", "w") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def tree_hash(self, *roots: Path, extra: str = "", skip: tuple[Path, ...] = ()) -> str:
        """Hash of every file under roots (build outputs and the folders in skip excluded)
        plus extra."""
        digest = hashlib.sha256(extra.encode())
        for root in roots:
            for dirpath, dirnames, filenames in os.walk(root):
                dirnames[:] = sorted(
                    d
                    for d in dirnames
                    if d not in _HASH_SKIP_DIRS
                    and not d.endswith(".egg-info")
                    and Path(dirpath, d) not in skip
                )
                for filename in sorted(filenames):
                    if filename.endswith((".so", ".o", ".pyc")) or filename == "_build_info.py":
                        continue
                    path = Path(dirpath, filename)
                    digest.update(str(path.relative_to(self.root)).encode())
                    digest.update(path.read_bytes())
        return digest.hexdigest()

    def package_digest(self, package: Package, extra: str) -> str:
        """The digest of what a package's build reads: its folder, shared_build's sources
        (without this nox machinery), its common folder; plus extra."""
        roots = (package.root, self.shared_build / "src", *filter(None, [package.common]))
        return self.tree_hash(*roots, extra=extra, skip=(self.workspace_src,))

    def build_env(self) -> dict[str, str]:
        """Build knobs of every nox build: a kept build folder and compiler cache, and our
        sources warning-free."""
        return {
            "SHARED_BUILD_DIR": os.environ.get("SHARED_BUILD_DIR") or str(self.build_dir),
            "WERROR": os.environ.get("WERROR") or "1",
            "CCACHE_DIR": os.environ.get("CCACHE_DIR") or str(self.ccache_dir),
        }

    def stable_builder_version(self, package: Package) -> str:
        """The torch a stable-ABI package's one wheel is built under: the oldest of the
        matrix; for a package with CUDA code, which needs a CUDA torch to compile its
        _C_cuda library, the oldest CUDA build of the matrix."""
        has_cuda = package.cuda != "none" and any((package.root / "csrc").rglob("*.cu"))
        return self.supported_torch[1] if has_cuda else self.supported_torch[0]

    def packaging_torch(self) -> str:
        """The torch of the packaging tests: the second-newest of the run (a CUDA build)."""
        return packaging_torch(self.torch_versions)

    def once_torch_setting(self) -> str:
        """REPO_ONCE_TORCH (shared_build.testing.once_torch): where the once-marked tests run."""
        return f"{self.torch_versions[-1]},packaging={self.packaging_torch()}"


def packaging_torch(versions: Sequence[str]) -> str:
    """The torch of the packaging tests among versions (oldest first): the second-newest."""
    return versions[-2] if len(versions) > 1 else versions[-1]


def lowered_stable_target(environ: Mapping[str, str] | None = None) -> str | None:
    """Why this run builds no release wheels, or None: SHARED_BUILD_STABLE_TARGET below the
    release target makes stable-ABI builds for an older torch (the GPU machine's), which no
    release ships (they lose the pt2_compliant tag, and torch's headers reach the newer
    shims through dlsym, at the build machine's glibc)."""
    environ = os.environ if environ is None else environ
    target = environ.get("SHARED_BUILD_STABLE_TARGET", "").strip()
    if target and target != RELEASE_STABLE_TARGET:
        return (
            f"SHARED_BUILD_STABLE_TARGET={target}: release wheels target torch "
            f"{RELEASE_STABLE_TARGET}; unset it to build them"
        )
    return None

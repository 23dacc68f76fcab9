"""shared_build.workspace, the noxfile's machinery, on a fake nox session and tmp folders:
no nox, no virtual environment, no build."""

from __future__ import annotations

import contextlib
import fcntl
import json
import sys
import zipfile
from pathlib import Path

import pytest

from shared_build.workspace import envs, release, reports, suites
from shared_build.workspace.repo import RELEASE_STABLE_TARGET, Repo, lowered_stable_target


class SessionError(Exception):
    pass


class FakeSession:
    """What the machinery calls of a nox session: run (answered by the `answers` of the
    first matching argument), log, error, chdir. Builds write a wheel with one library."""

    def __init__(self, name: str = "tests(torch='2.13.0')", torch_cuda: str = "None") -> None:
        self.name = name
        self.calls: list[tuple[str, ...]] = []
        self.envs: list[dict[str, str]] = []
        self.logs: list[str] = []
        self.torch_cuda = torch_cuda
        self.library = b"library v1"

    def run(self, *args: str, **kwargs) -> str:
        self.calls.append(args)
        self.envs.append(kwargs.get("env", {}))
        if "venv" in args:  # a new environment: its interpreter
            Path(args[-1], "bin").mkdir(parents=True)
            Path(args[-1], "bin", "python").touch()
        if "import torch; print(torch.version.cuda)" in args:
            return f"{self.torch_cuda}\n"
        if "wheel" in args:
            out = Path(args[args.index("-w") + 1])
            out.mkdir(parents=True, exist_ok=True)
            name = Path(args[-1]).name
            with zipfile.ZipFile(out / f"{name}-0.1.0-cp39-abi3-linux_x86_64.whl", "w") as whl:
                whl.writestr(f"{name}/_C.so", self.library)
        if args[1:2] == ("-c",) and "find_spec" in args[2]:
            return json.dumps({"_C.so": _sha256(b"library v1")})
        return ""

    def log(self, message: str) -> None:
        self.logs.append(message)

    def error(self, message: str) -> None:
        raise SessionError(message)

    @contextlib.contextmanager
    def chdir(self, path: Path):
        yield

    def ran(self, *words: str) -> list[tuple[str, ...]]:
        return [c for c in self.calls if all(w in c for w in words)]


def _sha256(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


def _package(root: Path, name: str, *, table: str = "", cu: bool = False, extras: str = "") -> None:
    folder = root / "packages" / name
    (folder / "csrc").mkdir(parents=True)
    (folder / "csrc" / f"{name}.cpp").write_text("// op\n")
    if cu:
        (folder / "csrc" / f"{name}.cu").write_text("// kernel\n")
    (folder / "tests").mkdir()
    (folder / "pyproject.toml").write_text(
        f'[project]\nname = "{name}"\nversion = "0.1.0"\n{extras}\n[tool.shared_build]\n{table}\n'
    )


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Repo:
    """A repository of three torch versions, a full-ABI CPU package, a CUDA-only one and a
    stable-ABI one; no uv, so every install goes through the fake session's pip."""
    (tmp_path / "requirements").mkdir()
    (tmp_path / "requirements" / "torch-matrix.txt").write_text(
        "# the matrix\ntorch==2.13.0  # CPU\n\ntorch==2.14.1  # CUDA\ntorch==2.15.0\n"
    )
    (tmp_path / "shared_build" / "src" / "shared_build" / "workspace").mkdir(parents=True)
    (tmp_path / "shared_build" / "src" / "shared_build" / "setup_helpers.py").write_text("v1")
    _package(tmp_path, "plain", extras='[project.optional-dependencies]\ntest = ["scipy"]')
    _package(tmp_path, "cuda_only", table='cuda = "required"', cu=True)
    _package(tmp_path, "stable_op", table='abi = "stable"\ncuda = "optional"', cu=True)
    monkeypatch.setattr(envs, "UV", None)
    for knob in ("SHARED_BUILD_DIR", "WERROR", "CCACHE_DIR", "SHARED_BUILD_STABLE_TARGET"):
        monkeypatch.delenv(knob, raising=False)
    return Repo(tmp_path, release_knobs={"stable_op": {"STABLE_OP_FAST": "0"}}, environ={})


def _env(repo: Repo, session: FakeSession, version: str = "2.13.0") -> envs.TorchEnv:
    env = envs.TorchEnv(session, repo, version)
    env.bin.mkdir(parents=True)
    Path(env.python).touch()
    return env


# The repository


def test_the_matrix_and_the_run_s_versions(repo: Repo) -> None:
    assert repo.supported_torch == ("2.13.0", "2.14.1", "2.15.0")
    assert repo.torch_versions == ["2.13.0", "2.14.1", "2.15.0"]
    assert repo.once_torch_setting() == "2.15.0,packaging=2.14.1"
    narrowed = Repo(repo.root, environ={"TORCH_VERSIONS": " 2.15.0, ,2.13.0"})
    assert narrowed.torch_versions == ["2.15.0", "2.13.0"]
    assert narrowed.packaging_torch() == "2.15.0"
    assert Repo(repo.root, environ={"TORCH_VERSIONS": "2.13.0"}).packaging_torch() == "2.13.0"


def test_packages_are_discovered_from_their_pyprojects(repo: Repo) -> None:
    found = {p.name: p for p in repo.discover_packages()}
    assert sorted(found) == ["cuda_only", "plain", "stable_op"]
    assert found["plain"].test_requires == ("scipy",) and found["plain"].abi == "full"
    assert found["cuda_only"].cuda == "required"
    assert found["stable_op"].abi == "stable"
    # The stable wheel with CUDA code builds under the oldest CUDA torch of the matrix.
    assert repo.stable_builder_version(found["stable_op"]) == "2.14.1"
    assert repo.stable_builder_version(found["plain"]) == "2.13.0"


def test_a_digest_follows_the_sources_not_build_outputs_nor_the_nox_machinery(repo: Repo) -> None:
    (plain,) = [p for p in repo.discover_packages() if p.name == "plain"]
    before = repo.package_digest(plain, extra="knobs")
    for output in ("build/x.o", "plain.egg-info/PKG-INFO", "__pycache__/a.pyc", "csrc/_C.so",
                   "src/plain/_build_info.py", "_vendor/shared_build/a.py"):  # fmt: skip
        path = plain.root / output
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("output")
    (repo.workspace_src / "envs.py").write_text("the noxfile's machinery")
    assert repo.package_digest(plain, extra="knobs") == before
    assert repo.package_digest(plain, extra="other knobs") != before
    shared = repo.tree_hash(repo.shared_build)
    (repo.shared_build / "src" / "shared_build" / "setup_helpers.py").write_text("v2")
    assert repo.package_digest(plain, extra="knobs") != before
    # shared_build's own install covers its workspace package, which its tests import.
    assert repo.tree_hash(repo.shared_build) != shared


def test_a_lock_is_held_by_one_session_at_a_time(repo: Repo) -> None:
    with (
        repo.locked("torch-2.13.0"),
        open(repo.locks_dir / "torch-2.13.0.lock") as other,
        pytest.raises(BlockingIOError),
    ):
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
    with open(repo.locks_dir / "torch-2.13.0.lock") as other:
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)


def test_build_knobs_default_to_the_kept_folders(repo: Repo, monkeypatch) -> None:
    assert repo.build_env() == {
        "SHARED_BUILD_DIR": str(repo.root / ".nox" / "build"),
        "WERROR": "1",
        "CCACHE_DIR": str(repo.root / ".nox" / "ccache"),
    }
    monkeypatch.setenv("WERROR", "0")
    assert repo.build_env()["WERROR"] == "0"


def test_a_lowered_stable_target_builds_no_release() -> None:
    assert lowered_stable_target({}) is None
    assert lowered_stable_target({"SHARED_BUILD_STABLE_TARGET": RELEASE_STABLE_TARGET}) is None
    assert lowered_stable_target({"SHARED_BUILD_STABLE_TARGET": "2.11"}) == (
        f"SHARED_BUILD_STABLE_TARGET=2.11: release wheels target torch {RELEASE_STABLE_TARGET}; "
        "unset it to build them"
    )


# Torch environments


def test_pip_s_find_links_and_extra_indexes_reach_uv_once_each() -> None:
    out = (
        "global.find-links='/wheels /more'\n"
        "global.index-url='https://pypi.example/simple'\n"
        "user.find-links='/wheels'\n"
        "global.extra-index-url='https://download.example/cpu'\n"
    )
    assert envs._sources_from_config(out) == [
        "--find-links", "/wheels", "--find-links", "/more",
        "--extra-index-url", "https://download.example/cpu",
    ]  # fmt: skip


def test_an_environment_is_made_once_and_a_cuda_torch_gets_its_compiler(repo: Repo) -> None:
    session = FakeSession(torch_cuda="13.0")
    env = envs.TorchEnv(session, repo, "2.14.1")
    env.ensure(["scipy"])
    assert session.ran(sys.executable, "-m", "venv", str(env.path))
    (torch_install,) = session.ran("install", "torch==2.14.1")
    assert {"scipy", "pytest-xdist", "auditwheel>=6.1"} <= set(torch_install)
    assert session.ran("install", "nvidia-cuda-nvcc==13.0.*", "nvidia-cuda-cuobjdump>=13,<14")
    calls = len(session.calls)
    env.ensure(["scipy"])  # the same requirements, or fewer: nothing to install
    env.ensure([])
    assert session.logs[-1] == "torch 2.14.1 environment up to date"
    assert not any("install" in c for c in session.calls[calls:])
    env.ensure(["scipy", "networkx"])  # more: installed, and the stamp keeps both
    assert session.ran("install", "networkx")
    assert {"networkx", "scipy"} <= set(env.stamp("requirements").read_text().splitlines())


def test_a_package_is_rebuilt_only_when_its_digest_changes(repo: Repo, monkeypatch) -> None:
    session = FakeSession()
    env = _env(repo, session)
    (plain,) = [p for p in repo.discover_packages() if p.name == "plain"]
    env.install_package(plain)
    (build,) = session.ran("wheel", "--no-build-isolation", str(plain.root))
    assert session.envs[session.calls.index(build)]["WERROR"] == "1"
    assert session.logs[-1].startswith("plain: built in ")
    assert env.wheels() == {"plain": str(next((env.wheels_dir / "plain").glob("*.whl")))}
    again = envs.TorchEnv(session, repo, "2.13.0")
    again.install_package(plain)
    assert session.logs[-1] == "plain: unchanged since its last build here, not rebuilt"
    assert len(session.ran("wheel")) == 1 and again.built == ["plain"]
    monkeypatch.setenv("DEBUG", "1")  # a build knob: everything is rebuilt
    again.install_package(plain)
    assert len(session.ran("wheel")) == 2


def test_a_cuda_only_package_is_skipped_by_name_under_a_cpu_torch(repo: Repo) -> None:
    session = FakeSession()
    env = _env(repo, session)
    env.install_packages([p for p in repo.discover_packages() if p.abi == "full"])
    assert env.skipped == {"cuda_only": "CUDA-only, and torch 2.13.0 here is a CPU-only build"}
    assert "SKIPPED cuda_only: CUDA-only, and torch 2.13.0 here is a CPU-only build" in session.logs
    assert env.built == ["shared_build", "plain"]
    assert env.summary() == (
        "torch 2.13.0: built plain; skipped cuda_only (CUDA-only, and torch 2.13.0 here is a "
        "CPU-only build)"
    )
    assert suites.skipped_env(env) == {
        "REPO_SKIPPED_PACKAGES": "cuda_only=CUDA-only, and torch 2.13.0 here is a CPU-only build"
    }
    assert suites.package_suites(env, repo.discover_packages()) == [
        str(repo.packages_dir / "plain" / "tests"),
        str(repo.packages_dir / "stable_op" / "tests"),
    ]


def test_the_stable_wheel_is_built_once_and_its_file_installed_everywhere(repo: Repo) -> None:
    session = FakeSession(torch_cuda="13.0")
    _env(repo, session, "2.14.1")  # the builder
    (stable,) = [p for p in repo.discover_packages() if p.abi == "stable"]
    wheel = envs.stable_wheel(session, repo, stable)
    assert wheel.parent.parent == repo.wheels_dir and wheel.parent.name.startswith("stable_op-")
    assert envs.stable_wheel(session, repo, stable) == wheel
    assert len(session.ran("wheel")) == 1
    assert list(repo.stable_build_seconds) == ["stable_op (stable wheel) @ 2.14.1"]
    # A release build with its own knobs is another wheel, built once too.
    knobs = repo.release_knobs["stable_op"]
    assert envs.stable_wheel(session, repo, stable, knobs) != wheel
    assert "stable_op (stable wheel, STABLE_OP_FAST=0) @ 2.14.1" in repo.stable_build_seconds
    user = _env(repo, session, "2.15.0")
    user.install_packages([stable], {"stable_op": wheel})
    user.install_packages([stable], {"stable_op": wheel})
    assert session.logs[-1] == f"stable_op: {wheel.name} already installed here"
    assert len(session.ran("--force-reinstall", str(wheel))) == 1
    assert "stable_op (the stable wheel)" in user.summary()


def test_a_stable_wheel_whose_libraries_differ_once_installed_fails(repo: Repo) -> None:
    session = FakeSession(torch_cuda="13.0")
    (stable,) = [p for p in repo.discover_packages() if p.abi == "stable"]
    session.library = b"library v2"
    wheel = envs.stable_wheel(session, repo, stable)
    env = _env(repo, session, "2.15.0")
    with pytest.raises(SessionError, match=r"stable_op under torch 2.15.0: the installed "
                       r"libraries \['_C.so'\] are not those of .* \(rebuilt\?\)"):  # fmt: skip
        env.install_wheel(stable, wheel)


def test_prepared_env_builds_the_full_abi_packages_and_installs_the_stable_wheel(repo) -> None:
    session = FakeSession(torch_cuda="13.0")
    env, packages = envs.prepared_env(session, repo, "2.15.0")
    assert [p.name for p in packages] == ["cuda_only", "plain", "stable_op"]
    assert env.built == ["shared_build", "cuda_only", "plain", "shared_build", "stable_op"]
    assert env.from_wheel == ["stable_op"]
    # The stable wheel was built under its builder torch, not here.
    (build,) = session.ran("wheel", str(repo.packages_dir / "stable_op"))
    assert build[0] == str(repo.envs_dir / "torch-2.14.1" / "bin" / "python")


def test_a_sanitized_environment_is_its_own_and_preloads_the_runtime(repo, monkeypatch) -> None:
    session = FakeSession()
    env = envs.SanitizedEnv(session, repo, "2.13.0")
    assert env.path == repo.envs_dir / "torch-2.13.0-sanitize"
    assert env.env["SANITIZE"] == "address,undefined"
    monkeypatch.setenv("CXX", "g++-12")
    session.run = lambda *args, **kwargs: f"/usr/lib/{args[-1].split('=')[1]}\n"
    run_env = env.run_env(repo.root / "logs")
    assert run_env["LD_PRELOAD"] == "/usr/lib/libasan.so /usr/lib/libstdc++.so"
    assert run_env["ASAN_OPTIONS"].endswith(f":log_path={repo.root / 'logs' / 'asan'}")
    assert "halt_on_error=1" in run_env["UBSAN_OPTIONS"]
    session.run = lambda *args, **kwargs: "libasan.so\n"
    with pytest.raises(SessionError, match=r"g\+\+-12 has no libasan.so \(got 'libasan.so'\)"):
        env.run_env(repo.root / "logs")


def test_requirements_are_every_package_s_extras() -> None:
    packages = [
        envs.Package("a", Path("a"), "none", ("numpy",), ("scipy",)),
        envs.Package("b", Path("b"), "none", ("pytest",), ()),
    ]
    expected = ["hypothesis", "matplotlib", "numpy", "pytest", "pyyaml", "universalmutator==1.14.1"]
    assert envs.all_requirements(packages) == expected
    assert "scipy" in envs.all_requirements(packages, bench=True)


# Reports


def test_a_report_counts_the_junit_files_and_is_written_when_a_session_fails(repo) -> None:
    session = FakeSession()
    env = _env(repo, session)
    env.build_seconds = {"shared_build": 1.0, "plain": 12.34}
    repo.stable_build_seconds["stable_op (stable wheel) @ 2.13.0"] = 30.0
    (repo.reports_dir).mkdir(parents=True)
    (repo.reports_dir / "tests_torch__2.13.0-7.xml").write_text("<testsuites/>")
    with pytest.raises(SessionError), reports.reported(session, repo) as report:
        report.envs.append(env)
        report.pytest(env, "tests")
        report.xml_files[0].write_text(
            '<testsuites><testsuite tests="10" failures="1" errors="1" skipped="3"/>'
            '<testsuite tests="2" failures="0" errors="0" skipped="0"/></testsuites>'
        )
        session.error("a test failed")
    record = json.loads((repo.reports_dir / "tests_torch__2.13.0.json").read_text())
    assert record["session"] == "tests(torch='2.13.0')" and record["status"] == "failed"
    assert (record["passed"], record["failed"], record["skipped"]) == (7, 2, 3)
    assert record["builds_s"] == {"plain @ 2.13.0": 12.3, "stable_op (stable wheel) @ 2.13.0": 30.0}
    assert not (repo.reports_dir / "tests_torch__2.13.0-7.xml").exists()
    assert session.ran("-m", "pytest", f"--junitxml={report.xml_files[0]}", "tests")
    assert session.logs[-1].startswith("tests(torch='2.13.0'): failed in ")
    assert session.logs[-1].endswith(": 7 passed, 2 failed, 3 skipped")
    with reports.reported(session, repo):
        pass
    assert json.loads(report.path.read_text())["status"] == "passed"


# What the test sessions run


@pytest.mark.parametrize(
    ("workers", "expected"),
    [("", ["-n", "auto", "--dist", "loadfile"]), ("3", ["-n", "3", "--dist", "loadfile"]),
     ("0", ["-p", "no:xdist"])],
)  # fmt: skip
def test_pytest_workers(workers, expected, monkeypatch) -> None:
    monkeypatch.setenv("PYTEST_WORKERS", workers)
    assert suites.pytest_workers() == expected


def test_what_the_tests_learn_from_nox(repo: Repo, monkeypatch) -> None:
    session = FakeSession()
    env = _env(repo, session)
    monkeypatch.delenv("TORCHINDUCTOR_COMPILE_THREADS", raising=False)
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    found = suites.pytest_env(env, {"plain": "plain.whl"})
    assert found["REPO_ONCE_TORCH"] == "2.15.0,packaging=2.14.1"
    assert json.loads(found["REPO_RELEASE_WHEELS"]) == {"plain": "plain.whl"}
    assert json.loads(found["REPO_AUDITWHEEL"]) == release.auditwheel_args()
    assert json.loads(found["REPO_INSTALLER"]) == []  # no uv here
    assert found["TORCHINDUCTOR_COMPILE_THREADS"] == "1"
    assert found["OMP_WAIT_POLICY"] == "PASSIVE"
    assert json.loads(suites.pytest_env(env)["REPO_RELEASE_WHEELS"]) == {}
    monkeypatch.setattr(envs, "UV", "/bin/uv")
    monkeypatch.setattr(envs, "pip_sources", lambda: ["--find-links", "/wheels"])
    assert json.loads(suites.pytest_env(env)["REPO_INSTALLER"]) == [
        "/bin/uv", "pip", "install", "--index-strategy", "unsafe-best-match",
        "--find-links", "/wheels",
    ]  # fmt: skip
    found = suites.test_suites(env, repo.discover_packages())
    assert (found[0], found[-1]) == (str(repo.shared_build / "tests"), str(repo.root / "tests"))


def test_compiled_graphs_are_cached_per_set_of_wheels(repo: Repo, monkeypatch) -> None:
    """torch.compile's cache does not notice a rebuilt op library (a schema that lost
    arguments kept being called with the old ones): the tests get a cache folder per set of
    the wheels built here, and keep one the user set."""
    env = _env(repo, FakeSession())
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    wheel = env.wheels_dir / "demo" / "demo-0.1.0-cp310-abi3-linux_x86_64.whl"
    wheel.parent.mkdir(parents=True)
    wheel.write_bytes(b"one build")
    first = suites.pytest_env(env)["TORCHINDUCTOR_CACHE_DIR"]
    assert first.startswith(str(env.path)) and suites.inductor_cache_dir(env) == first
    wheel.write_bytes(b"another build")
    assert suites.inductor_cache_dir(env) != first
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "/mine")
    assert suites.pytest_env(env)["TORCHINDUCTOR_CACHE_DIR"] == "/mine"


def test_the_torch_a_session_s_arguments_name() -> None:
    assert suites.dev_torch(["add_ext", "-k", "x"], "2.13.0") == ("2.13.0", ["add_ext", "-k", "x"])
    assert suites.dev_torch(["gc_cpp", "--torch", "2.15.0"], "2.13.0") == ("2.15.0", ["gc_cpp"])
    # The version left out: a sentence, not an IndexError (nox -s dev -- my_op --torch).
    for args in (["my_op", "--torch"], ["my_op", "--torch", "-k", "x"]):
        with pytest.raises(ValueError, match=r"--torch needs a version, e\.g\. --torch 2\.13\.0"):
            suites.dev_torch(args, "2.13.0")
    versions = ["2.13.0", "2.14.1", "2.15.0"]
    assert suites.bench_versions(["--quick"], versions) == (["2.13.0"], ["--quick"])
    assert suites.bench_versions(["--all-torch"], versions) == (versions, [])
    assert suites.bench_versions(["--torch", "2.15.0", "--torch", "2.14.1"], versions) == (
        ["2.15.0", "2.14.1"],
        [],
    )


# Release


def test_auditwheel_leaves_torch_s_libraries_to_the_torch_wheel() -> None:
    args = release.auditwheel_args()
    assert args[:2] == ["--plat", "manylinux_2_28_x86_64"]
    assert args[2:6] == ["--exclude", "libtorch*.so*", "--exclude", "libc10*.so*"]


@pytest.mark.parametrize(
    ("name", "shown", "problem"),
    [
        ("a-0.1-cp39-abi3-manylinux_2_28_x86_64.whl", "", None),
        ("a-0.1-cp39-abi3-linux_x86_64.whl", "", "its tags lack manylinux_2_28_x86_64"),
        (
            "a-0.1-cp39-abi3-manylinux_2_28_x86_64.whl",
            'This constrains the platform tag to "manylinux_2_17_x86_64".',
            None,
        ),
        (
            "a-0.1-cp39-abi3-manylinux_2_28_x86_64.whl",
            'This constrains the platform tag to\n"manylinux_2_34_x86_64".',
            "needs glibc 2.34, newer than manylinux_2_28_x86_64 allows",
        ),
    ],
)
def test_a_repaired_wheel_must_be_manylinux_2_28(name, shown, problem) -> None:
    assert release.manylinux_problem(name, shown) == problem


def test_the_index_lists_the_wheels_and_sdists(tmp_path: Path) -> None:
    for name in ("b-1.whl", "a-1.tar.gz", "notes.txt"):
        (tmp_path / name).write_text("")
    release.write_index(tmp_path, "torch 2.13.0")
    page = (tmp_path / "index.html").read_text()
    assert "<title>torch 2.13.0</title>" in page and "notes" not in page
    assert page.index('<a href="a-1.tar.gz">') < page.index('<a href="b-1.whl">')


def test_the_release_takes_the_tested_wheels_and_the_stable_release_build(repo) -> None:
    session = FakeSession(torch_cuda="13.0")
    env, packages = envs.prepared_env(session, repo, "2.15.0")
    wheels = release.release_wheels(session, env, packages)
    assert wheels["plain"] == env.wheels()["plain"]
    # The stable package's release wheel has its release knobs: another build.
    (stable,) = [p for p in packages if p.abi == "stable"]
    assert Path(wheels["stable_op"]) != envs.stable_wheel(session, repo, stable)
    assert "stable_op (stable wheel, STABLE_OP_FAST=0) @ 2.14.1" in repo.stable_build_seconds

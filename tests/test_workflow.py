"""The workflow (.github/workflows/) and .ci/run run the same nox sessions with the same
command after the same setup: .ci/run runs lint and the sessions nox tags "ci", the workflow's
matrix reads them from `nox -l --json -t ci`, never listed by hand; each wheel is built in one
job and tested in others (the tests sessions on the full-ABI wheels their torch's release job
built, through the noxfile's PREBUILT_WHEELS); a tag publishes; the GPU job runs only a
reviewed commit. What the workflows' syntax and security need, actionlint and zizmor
(pedantic) check (nox -s lint)."""

from __future__ import annotations

import functools
import json
import os
import re
import runpy
import shlex
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
CI_RUN = (ROOT / ".ci" / "run").read_text()
WORKFLOWS = {
    p.name: yaml.safe_load(p.read_text()) for p in (ROOT / ".github/workflows").glob("*.yml")
}
JOBS = {
    f"{file}:{name}": job for file, flow in WORKFLOWS.items() for name, job in flow["jobs"].items()
}
# What the workflows add to .ci/run's sessions: the release wheels, built once per torch,
# those wheels under every CPython, and the GPU check's shipped wheels (gpu.yml).
WORKFLOW_ONLY = {"release", "cpython", "gpu_wheels"}
NOX = re.compile(r"python3 -m nox (?:--no-dependencies )?-s (\S+(?: (?!--)\S+)*)")
IMAGE = re.compile(r"python:3\.11-bookworm@sha256:[0-9a-f]{64}")  # .ci/run's CPython, by digest
TAG = "startsWith(github.ref, 'refs/tags/v')"
LIST_CI = "python3 -m nox -l --json -t ci"


def nox_list(*args: str) -> list[dict]:
    """nox's own list of the sessions (the whole matrix: TORCH_VERSIONS unset)."""
    env = {k: v for k, v in os.environ.items() if k != "TORCH_VERSIONS"}
    out = subprocess.run([sys.executable, "-m", "nox", "-l", "--json", *args], cwd=ROOT,
                         capture_output=True, text=True, check=True, env=env)  # fmt: skip
    return json.loads(out.stdout)


def ci_sessions() -> list[str]:
    return [s["session"] for s in nox_list("-t", "ci") if "ci" in s["tags"]]


def expression(text: str) -> str:
    """The expression inside `${{ ... }}`."""
    found = re.fullmatch(r"\$\{\{\s*(.*?)\s*\}\}", text.strip())
    assert found, f"not an expression: {text!r}"
    return found.group(1)


def steps(key: str, **where: str) -> list[dict]:
    """The steps of a job whose fields start with the values given (uses, run)."""
    return [s for s in JOBS[key]["steps"] if all(s.get(k, "").startswith(v) for k, v in where.items())]  # fmt: skip


@functools.cache
def outputs(job: str, step_id: str) -> dict[str, str]:
    """What a step of a ci.yml job writes to GITHUB_OUTPUT, the step run here (on a push)."""
    (step,) = [s for s in JOBS[f"ci.yml:{job}"]["steps"] if s.get("id") == step_id]
    with tempfile.TemporaryDirectory() as tmp:
        return _run_step(step["run"], Path(tmp), EVENT="push")


def sessions_of_matrix(file: str, job: dict, env: str) -> list[str]:
    """The sessions of a job whose matrix (matrix.session, matrix.ci.session,
    matrix.cpython.session) is an output of the job it needs: that job's step run here."""
    key = env.split(".")[1]
    found = re.fullmatch(
        r"fromJSON\(needs\.(\w+)\.outputs\.(\w+)\)", expression(job["strategy"]["matrix"][key])
    )
    assert found and file == "ci.yml", "the matrix is not nox's list"
    step_id, name = re.fullmatch(
        r"steps\.(\w+)\.outputs\.(\w+)",
        expression(JOBS[f"{file}:{found.group(1)}"]["outputs"][found.group(2)]),
    ).groups()
    listed = json.loads(outputs(found.group(1), step_id)[name])
    return [s if isinstance(s, str) else s["session"] for s in listed]


def workflow_sessions() -> dict[str, list[str]]:
    """Each nox session some workflow job runs, with the jobs that run it."""
    found: dict[str, list[str]] = {}
    for key, job in JOBS.items():
        for step in job["steps"]:
            for arg in NOX.findall(step.get("run", "")):
                for one in shlex.split(arg):
                    if one.startswith("$"):
                        env = expression(step["env"][one[1:]])
                        names = sessions_of_matrix(key.split(":")[0], job, env)
                    else:
                        names = [one]
                    for name in names:
                        found.setdefault(name, []).append(key)
    return found


def ci_run_sessions() -> set[str]:
    """What .ci/run runs: the sessions it names (lint), the ci-tagged ones and those they
    require (stable)."""
    code = "\n".join(line.split("#")[0] for line in CI_RUN.splitlines())
    named = {one for a in NOX.findall(code) for one in shlex.split(a)}
    assert "python3 -m nox -t ci --parallel 2" in code
    return named | {s["session"] for s in nox_list("-t", "ci")}


def test_the_workflow_runs_every_session_ci_run_runs_and_no_other() -> None:
    workflow = workflow_sessions()
    ci_run = ci_run_sessions()
    matrix = [line.split("#")[0].strip().removeprefix("torch==")
              for line in (ROOT / "requirements" / "torch-matrix.txt").read_text().splitlines()
              if line.split("#")[0].strip()]  # fmt: skip
    assert {"lint", "sanitize", "stable", *(f"tests(torch='{v}')" for v in matrix)} <= ci_run
    assert not ci_run - set(workflow), "run by .ci/run, not by the workflow"
    assert {s.split("(")[0] for s in set(workflow) - ci_run} == WORKFLOW_ONLY
    assert all(len(jobs) == 1 for jobs in workflow.values()), workflow


def test_every_session_the_workflow_runs_is_a_nox_session() -> None:
    env = {k: v for k, v in os.environ.items() if k != "TORCH_VERSIONS"}
    listed = subprocess.run([sys.executable, "-m", "nox", "-l"], cwd=ROOT, capture_output=True,
                            text=True, check=True, env=env).stdout  # fmt: skip
    # "* tests(torch='2.13.0') [ci] -> ...": every session, selected (*) or not (-).
    sessions = {m.group(1) for m in re.finditer(r"^[*-] (\S+)", listed, re.M)}
    sessions |= {s.split("(")[0] for s in sessions}
    assert {"lint", "release", "sanitize", "cpython"} <= sessions
    assert set(workflow_sessions()) <= sessions


def test_the_matrix_comes_from_the_matrix_file_not_by_hand() -> None:
    text = json.dumps(WORKFLOWS)  # what the workflows say, not their comments
    assert not re.search(r"\b2\.1\d\.\d\b", text), "a torch version named in a workflow"
    assert not re.search(r"tests\(|sanitize", text), "a session named by hand in a workflow"


def test_the_jobs_run_the_command_and_setup_of_ci_run() -> None:
    assert "bash .ci/without_system_cuda.sh python3 -m nox -t ci" in CI_RUN
    assert "\nbash .ci/setup.sh\n" in CI_RUN
    # .ci/run's command for one session; the sessions it requires (stable) come built.
    command = 'bash .ci/without_system_cuda.sh python3 -m nox --no-dependencies -s "$SESSION" --report .nox/report.json'  # fmt: skip
    assert command in [s.get("run") for s in JOBS["ci.yml:session"]["steps"]]
    for key, job in JOBS.items():
        runs = [s.get("run", "") for s in job["steps"]]
        if any(NOX.search(r) for r in runs):
            assert "bash .ci/setup.sh" in runs or "bash .ci/setup.sh --tools" in runs, key
            if "container" in job:  # .ci/run's Debian 12 and CPython 3.11, by digest
                assert IMAGE.fullmatch(job["container"]), key
            else:  # the CPython under test beside .ci/run's, which runs nox (listed last)
                (python,) = steps(key, uses="actions/setup-python@")
                assert python["with"]["python-version"].split() == ["${{", "matrix.cpython.python", "}}", "3.11"]  # fmt: skip


def test_each_wheel_is_built_once_and_tested_elsewhere_with_no_compiler() -> None:
    """stable builds the stable-ABI wheels once; the session and wheels jobs take them
    (--no-dependencies: nox does not build them again); wheels builds each torch's release
    once; cpython installs that artifact and runs nox -s cpython (tools/wheelhouse.py prove:
    no compiler reachable), under the torch it was built for."""
    sessions = workflow_sessions()
    assert sessions["stable"] == ["ci.yml:stable"] and sessions["release"] == ["ci.yml:wheels"]
    (upload,) = steps("ci.yml:stable", uses="actions/upload-artifact@")
    for key in ("ci.yml:session", "ci.yml:prebuilt", "ci.yml:wheels"):
        assert "stable" in JOBS[key]["needs"]
        downloads = [d["with"] for d in steps(key, uses="actions/download-artifact@")]
        assert {"name": upload["with"]["name"], "path": ".nox/wheelhouse/"} in downloads, key
        assert all("--no-dependencies" in r for r in (s.get("run", "") for s in JOBS[key]["steps"]) if NOX.search(r))  # fmt: skip
    assert upload["with"]["path"].split() == [".nox/wheelhouse/stable/", ".nox/wheelhouse/stable-release/"]  # fmt: skip
    (built,) = [s for s in steps("ci.yml:wheels", uses="actions/upload-artifact@") if s["with"]["path"] == "wheelhouse/"]  # fmt: skip
    (taken,) = steps("ci.yml:cpython", uses="actions/download-artifact@")
    assert built["with"]["name"] == taken["with"]["name"] == "wheelhouse-torch-${{ matrix.torch }}"
    (run,) = steps("ci.yml:cpython", run="python3 -m nox")
    assert run["env"]["TORCH_VERSIONS"] == "${{ matrix.torch }}"
    assert steps("ci.yml:cpython", run="bash .ci/setup.sh") == steps("ci.yml:cpython", run="bash .ci/setup.sh --tools")  # fmt: skip
    assert "no_compiler_env(" in (ROOT / "tools" / "wheelhouse.py").read_text()


def test_the_tests_sessions_take_their_torchs_wheels_and_sanitize_builds_its_own() -> None:
    """Each session under one torch (tests) runs in the prebuilt job, after the wheels jobs, on
    the raw full-ABI wheels (before the repair: tests/test_release.py repairs them) that its
    torch's wheels job uploads; the others (sanitize) run in the session job, which neither
    waits for nor takes them."""
    listed = nox_list("-t", "ci")
    (step,) = [s for s in JOBS["ci.yml:sessions"]["steps"] if s.get("id") == "ci"]
    assert LIST_CI in step["run"]  # nox's list, never one by hand
    own = json.loads(outputs("sessions", "ci")["ci"])
    assert json.loads(outputs("sessions", "ci")["prebuilt"]) == [
        {"session": s["session"], "torch": s["call_spec"]["torch"]} for s in listed if s["name"] == "tests"
    ]  # fmt: skip
    assert "sanitize" in own and not [s for s in own if s.startswith("tests")]
    prebuilt, session = JOBS["ci.yml:prebuilt"], JOBS["ci.yml:session"]
    assert "wheels" in prebuilt["needs"] and "wheels" not in session["needs"]
    assert "PREBUILT_WHEELS" not in json.dumps(session) and "raw-wheels" not in json.dumps(session)
    # release builds its raw wheels where the tests session builds its own, with BUILD_ENV.
    noxfile = (ROOT / "noxfile.py").read_text()
    assert re.search(r'def release\(.*?build_wheel\(session, p, NOX / "wheelhouse" / f"torch-\{torch\}"\)', noxfile, re.S)  # fmt: skip
    (raw,) = [u["with"] for u in steps("ci.yml:wheels", uses="actions/upload-artifact@") if u["with"]["name"].startswith("raw-")]  # fmt: skip
    assert raw["path"] == ".nox/wheelhouse/torch-${{ matrix.torch }}/" and raw["include-hidden-files"] is True  # fmt: skip
    (run,) = steps("ci.yml:prebuilt", run="bash .ci/without_system_cuda.sh python3 -m nox")
    assert run["env"]["SESSION"] == "${{ matrix.ci.session }}"
    taken = {"name": raw["name"].replace("matrix.torch", "matrix.ci.torch"),
             "path": run["env"]["PREBUILT_WHEELS"] + "/torch-${{ matrix.ci.torch }}/"}  # fmt: skip
    assert taken in [d["with"] for d in steps("ci.yml:prebuilt", uses="actions/download-artifact@")]


def test_prepared_takes_the_prebuilt_wheels_of_its_torch_or_says_why_not(tmp_path, monkeypatch) -> None:  # fmt: skip
    """PREBUILT_WHEELS set, the noxfile's prepared() installs the full-ABI wheels of
    $PREBUILT_WHEELS/torch-<v>/ and builds none; a missing wheel, or one that pins another
    torch, stops the session with a sentence; unset, it builds them (.ci/run, local use)."""
    import nox.registry

    monkeypatch.setattr(nox.registry, "_REGISTRY", {})  # the sessions runpy registers go too
    namespace = runpy.run_path(str(ROOT / "noxfile.py"))
    prepared, packages = namespace["prepared"], namespace["packages"]
    full = [p.name for p in packages() if p.abi == "full" and p.cuda != "required"]
    stable = {p.name: tmp_path / p.name for p in packages() if p.abi == "stable"}
    built = []
    for name, value in {
        "torch_env": lambda session, torch, *extras: None,  # a CPU-only torch
        "stable_wheels": lambda: stable,
        "install_built": lambda session, built: None,
        "build_wheel": lambda session, package, out: built.append(package.name) or out,
    }.items():
        monkeypatch.setitem(prepared.__globals__, name, value)

    class Session:
        def error(self, text: str) -> None:
            raise RuntimeError(text)

        def log(self, text: str) -> None:
            pass

    def wheel(name: str, pin: str) -> Path:
        path = tmp_path / "prebuilt" / "torch-2.13.0" / f"{name}-0.1.0-cp310-abi3-linux_x86_64.whl"
        path.parent.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(path, "w") as archive:
            archive.writestr(f"{name}-0.1.0.dist-info/METADATA", f"Name: {name}\nRequires-Dist: torch=={pin}\nRequires-Dist: packaging\n")  # fmt: skip
        return path

    monkeypatch.delenv("PREBUILT_WHEELS", raising=False)
    prepared(Session(), "2.13.0")
    assert built == full
    built.clear()
    monkeypatch.setenv("PREBUILT_WHEELS", str(tmp_path / "prebuilt"))
    with pytest.raises(RuntimeError, match=rf"0 wheels of {full[0]} in .*torch-2\.13\.0, not one \(nox -s release -- 2\.13\.0"):  # fmt: skip
        prepared(Session(), "2.13.0")
    wheels = {name: wheel(name, "2.13.0") for name in full}
    assert {n: w for n, w in prepared(Session(), "2.13.0")[0].items() if n in full} == wheels
    assert built == []
    wheel(full[-1], "2.14.1")
    with pytest.raises(RuntimeError, match=rf"{full[-1]}-.*\.whl pins torch 2\.14\.1, this session runs 2\.13\.0"):  # fmt: skip
        prepared(Session(), "2.13.0")


def test_the_tests_session_runs_what_compiles_nothing_with_no_compiler_reachable(tmp_path, monkeypatch) -> None:  # fmt: skip
    """nox -s tests runs every test that is not slow, once or compiler-marked on a PATH with
    no compiler (CC, CXX, CUDA_HOME nowhere), then those with the compiler; a narrowed run
    (posargs) is one pytest. no_compiler() links every other program on PATH."""
    import nox.registry

    from shared_build.testing import MARKERS

    monkeypatch.setattr(nox.registry, "_REGISTRY", {})
    namespace = runpy.run_path(str(ROOT / "noxfile.py"))
    assert set(re.split(r" or ", namespace["ON_PURPOSE"])) == {"slow", "once", "compiler"} <= set(MARKERS)  # fmt: skip
    system, own = tmp_path / "usr-bin", tmp_path / "venv" / "bin"
    for folder, names in ((system, ["gcc-12", "g++", "x86_64-linux-gnu-g++-12", "cc", "c++", "cpp", "nvcc",
                                    "clang++", "c++filt", "nm", "bash", "ccache"]),
                          (own, ["python", "pytest"])):  # fmt: skip
        folder.mkdir(parents=True)
        for name in names:
            (folder / name).write_text("#!/bin/sh\n")
            (folder / name).chmod(0o755)
    monkeypatch.setenv("PATH", os.pathsep.join([str(own), str(system)]))

    class Session:
        posargs: tuple[str, ...] = ()
        bin = str(own)
        virtualenv = type("Venv", (), {"location": str(tmp_path / "venv")})

        def error(self, text: str) -> None:
            raise RuntimeError(text)

    env = namespace["no_compiler"](Session())
    assert (env["CC"], env["CXX"], env["CUDA_HOME"], env["REPO_NO_COMPILER"]) == ("false", "false", "/nonexistent", "1")  # fmt: skip
    compilers = ("gcc", "gcc-12", "g++", "x86_64-linux-gnu-g++-12", "cc", "c++", "cpp", "nvcc", "clang++")  # fmt: skip
    for program in compilers:
        assert shutil.which(program, path=env["PATH"]) is None, program
    for program in ("c++filt", "nm", "bash", "ccache", "python", "pytest"):
        assert shutil.which(program, path=env["PATH"]), program
    (own / "g++").symlink_to(system / "g++")
    with pytest.raises(RuntimeError, match=r"bin folder .* holds compilers: g\+\+"):
        namespace["no_compiler"](Session())
    (own / "g++").unlink()

    runs = []
    tests = namespace["tests"].func
    for name, value in {
        "_clear_junit": lambda session: None,
        "prepared": lambda session, torch: ({}, {}),
        "pytest_env": lambda session, wheels, skipped: {"REPO": "1"},
        "pytest": lambda session, *args, env: runs.append((args[args.index("-m") + 1] if "-m" in args else None, env)),
    }.items():  # fmt: skip
        monkeypatch.setitem(tests.__globals__, name, value)
    Session.install = lambda self, *args: None
    tests(Session(), "2.13.0")
    assert [m for m, _ in runs] == ["not (slow or once or compiler)", "slow or once or compiler"]
    assert runs[0][1]["CXX"] == "false" and shutil.which("g++", path=runs[0][1]["PATH"]) is None
    assert runs[1][1] == {"REPO": "1"}
    runs.clear()
    Session.posargs = ("-k", "gradcheck")
    tests(Session(), "2.13.0")
    assert runs == [(None, {"REPO": "1"})]


def _run_step(run: str, tmp_path: Path, **env: str) -> dict[str, str]:
    """A step's script run here as the runner runs it: returns what it wrote to GITHUB_OUTPUT."""
    output = tmp_path / "output"
    output.write_text("")
    bin_folder = tmp_path / "bin"  # python3 is this interpreter, with nox
    bin_folder.mkdir(exist_ok=True)
    if not (bin_folder / "python3").exists():
        (bin_folder / "python3").symlink_to(sys.executable)
    path = f"{bin_folder}{os.pathsep}{os.environ['PATH']}"
    env = {**os.environ, "GITHUB_OUTPUT": str(output), "GITHUB_ENV": str(tmp_path / "env"),
           "PATH": path, **env}  # fmt: skip
    env.pop("TORCH_VERSIONS", None)
    subprocess.run(["bash", "-euo", "pipefail", "-c", run], cwd=ROOT, env=env, check=True,
                   capture_output=True, text=True)  # fmt: skip
    return dict(line.split("=", 1) for line in output.read_text().splitlines())


def test_a_pull_request_runs_the_lowest_and_the_highest_cpython_a_push_all(tmp_path) -> None:
    (step,) = [s for s in JOBS["ci.yml:sessions"]["steps"] if s.get("id") == "matrix"]
    assert step["env"] == {"EVENT": "${{ github.event_name }}"}
    pythons = [s["python"] for s in nox_list("-s", "cpython") if s["name"] == "cpython"]
    assert pythons == ["3.10", "3.11", "3.12", "3.13", "3.14"]
    for event, wanted in (("pull_request", ["3.10", "3.14"]), ("push", pythons)):
        out = _run_step(step["run"], tmp_path, EVENT=event)
        assert [c["python"] for c in json.loads(out["cpython"])] == wanted, event
        assert json.loads(out["torch"]) == [s.split("'")[1] for s in ci_sessions() if s.startswith("tests(")]  # fmt: skip


@pytest.mark.compiler
def test_the_caches_are_keyed_on_torch_tools_and_compiler_on_the_envs_filesystem(tmp_path) -> None:
    """uv's cache and ccache's persist (actions/cache), keyed on the torch (or session), the
    noxfile's test tools and the compiler; uv's sits under .nox beside the environments; no
    cache on a tag (what a tag publishes, .github/zizmor.yml); the summary has ccache -s."""
    out = _run_step("bash .ci/build_env.sh", tmp_path)
    compiler = subprocess.run(["c++", "-dumpfullversion"], capture_output=True, text=True).stdout.strip()  # fmt: skip
    assert f"-gcc{compiler}-" in out["key"]
    env = dict(line.split("=", 1) for line in (tmp_path / "env").read_text().splitlines())
    assert env["UV_CACHE_DIR"] == str(ROOT / ".nox" / "uv-cache")
    assert env["CCACHE_DIR"] == str(ROOT / ".nox" / "ccache")  # the noxfile's BUILD_ENV
    for key, matrix in (("stable", None), ("session", "session"), ("prebuilt", "ci.session"), ("wheels", "torch")):  # fmt: skip
        job = JOBS[f"ci.yml:{key}"]
        caches = steps(f"ci.yml:{key}", uses="actions/cache@")
        assert [c["with"]["path"] for c in caches] == [".nox/uv-cache", ".nox/ccache"], key
        for cache in caches:
            assert expression(cache["if"]) == "!startsWith(github.ref, 'refs/tags/')", key
            assert "${{ steps.build-env.outputs.key }}" in cache["with"]["key"], key
            assert matrix is None or f"${{{{ matrix.{matrix} }}}}" in cache["with"]["key"], key
        runs = [s.get("run", "") for s in job["steps"]]
        built = max(i for i, r in enumerate(runs) if NOX.search(r))
        assert "ccache -z" in runs[:built] and any("ccache -s" in r for r in runs[built:]), key
    assert not [k for k, j in JOBS.items() if "uses" in json.dumps(j) and "actions/cache@" in json.dumps(j) and k.split(":")[1] not in ("stable", "session", "prebuilt", "wheels")]  # fmt: skip


def test_every_checkout_keeps_no_credentials_and_every_action_is_pinned() -> None:
    for file, flow in WORKFLOWS.items():
        assert flow["permissions"] == {"contents": "read"}, file
        # Every action by full commit, with the release it is: dependabot reads the comment.
        uses = re.findall(r"^\s*(?:- )?uses: (.*)$", (ROOT / ".github/workflows" / file).read_text(), re.M)  # fmt: skip
        assert uses and all(re.fullmatch(r"[\w-]+/[\w-]+@[0-9a-f]{40} # v\d+\.\d+\.\d+", u) for u in uses), uses  # fmt: skip
    for key, job in JOBS.items():
        for step in job["steps"]:
            if step.get("uses", "").startswith("actions/checkout@"):
                assert step["with"]["persist-credentials"] is False, key
        # More than reading: only the jobs of a tag, which publish.
        if "permissions" in job:
            assert expression(job["if"]) == TAG, key


def test_a_tag_publishes_a_release_the_pages_and_the_stable_abi_wheels(tmp_path) -> None:
    """The publish job's script run here on a wheelhouse as the wheels jobs leave it: the
    Release gets the sdists, the stable-ABI wheels and one archive per torch build; PyPI gets
    the stable-ABI abi3 wheels alone; the pages and every file shipped get attestations."""
    import zipfile

    publish, pages, pypi = (JOBS[f"ci.yml:{k}"] for k in ("publish", "pages", "pypi"))
    assert expression(publish["if"]) == expression(pages["if"]) == expression(pypi["if"]) == TAG
    assert {"lint", "session", "prebuilt", "wheels", "cpython"} <= set(publish["needs"])
    (download,) = steps("ci.yml:publish", uses="actions/download-artifact@")
    assert download["with"] == {"pattern": "wheelhouse-torch-*", "merge-multiple": True, "path": "wheelhouse/"}  # fmt: skip
    house = tmp_path / "work" / "wheelhouse"
    (house / "sdist").mkdir(parents=True)
    for name in ("add_ext", "gc_cpp"):
        (house / "sdist" / f"{name}-0.1.0.tar.gz").write_bytes(b"")
    for torch, build in (("2.13.0", "2.13.0+cpu"), ("2.15.0", "2.15.0+cu132")):
        (house / f"torch-{torch}").mkdir()
        for name, info in (("add_ext", {"abi": "full", "torch": build}), ("gc_cpp", {"abi": "stable"})):  # fmt: skip
            with zipfile.ZipFile(house / f"torch-{torch}" / f"{name}-0.1.0-cp310-abi3-manylinux_2_28_x86_64.whl", "w") as wheel:  # fmt: skip
                wheel.writestr(f"{name}/_build_info.py", f"BUILD_INFO: dict = {info!r}\n")
        shutil.copy2(house / f"torch-{torch}" / "gc_cpp-0.1.0-cp310-abi3-manylinux_2_28_x86_64.whl", house / f"torch-{torch}" / "shared_build-0.1.0-py3-none-any.whl")  # fmt: skip
    (tmp_path / "work" / "tools").symlink_to(ROOT / "tools")
    (script,) = [s["run"] for s in publish["steps"] if "wheelhouse.py pages" in s.get("run", "")]
    subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path / "work", check=True, capture_output=True)  # fmt: skip
    work = tmp_path / "work"
    assert sorted(p.name for p in (work / "release").iterdir()) == [
        "add_ext-0.1.0.tar.gz", "gc_cpp-0.1.0-cp310-abi3-manylinux_2_28_x86_64.whl", "gc_cpp-0.1.0.tar.gz",
        "shared_build-0.1.0-py3-none-any.whl", "wheels-torch-2.13.0+cpu.tar.gz", "wheels-torch-2.15.0+cu132.tar.gz",
    ]  # fmt: skip
    assert [p.name for p in (work / "pypi").iterdir()] == ["gc_cpp-0.1.0-cp310-abi3-manylinux_2_28_x86_64.whl"]  # fmt: skip
    (attest,) = steps("ci.yml:publish", uses="actions/attest-build-provenance@")
    assert attest["with"]["subject-path"].split() == ["release/*", "site/torch-*/*.whl"]
    (release,) = steps("ci.yml:publish", run="gh release create")
    assert release["run"].endswith(" release/*") and "--verify-tag" in release["run"]
    (site,) = steps("ci.yml:publish", uses="actions/upload-pages-artifact@")
    assert site["with"]["path"] == "site/" and (work / "site" / "torch-2.15.0+cu132.html").exists()
    assert steps("ci.yml:pages", uses="actions/deploy-pages@")
    assert pages["environment"]["name"] == "github-pages" and pages["permissions"]["pages"] == "write"  # fmt: skip
    (upload,) = steps("ci.yml:publish", uses="actions/upload-artifact@")
    (taken,) = steps("ci.yml:pypi", uses="actions/download-artifact@")
    assert upload["with"]["path"] == "pypi/" and taken["with"] == {"name": upload["with"]["name"], "path": "dist/"}  # fmt: skip
    assert (
        steps("ci.yml:pypi", uses="pypa/gh-action-pypi-publish@") and pypi["environment"] == "pypi"
    )
    assert pypi["permissions"] == {"id-token": "write"}  # trusted publishing: no token


def test_release_day_tests_the_published_stable_wheels_under_the_newest_and_nightly_torch() -> None:
    flow = WORKFLOWS["release-day.yml"]
    assert flow[True]["schedule"] and "workflow_dispatch" in flow[True]  # yaml reads `on` as True
    (job,) = flow["jobs"].values()
    assert job["strategy"]["matrix"]["torch"] == ["release", "nightly"]
    script = "\n".join(s.get("run", "") for s in job["steps"])
    assert "--pre torch --index-url https://download.pytorch.org/whl/nightly/cpu" in script
    assert "torch --index-url https://download.pytorch.org/whl/cpu" in script
    stable = sorted(p.parent.name for p in ROOT.glob("packages/*/pyproject.toml") if 'abi = "stable"' in p.read_text())  # fmt: skip
    assert sorted(re.findall(r'--pattern "(\w+)-\*\.tar\.gz"', script)) == stable
    assert sorted(re.findall(r'"(\w+)\[test\]"', script)) == stable
    pages = {s["env"]["PAGES"] for s in job["steps"] if "PAGES" in s.get("env", {})}
    assert len(pages) == 1 and pages.pop().endswith("/stable.html")  # tools/wheelhouse.py pages
    assert "python tools/wheelhouse.py prove sdist sdist --find-links" in script


def test_dependabot_keeps_the_pinned_actions_and_the_python_requirements_current() -> None:
    updates = yaml.safe_load((ROOT / ".github" / "dependabot.yml").read_text())["updates"]
    assert {u["package-ecosystem"] for u in updates} == {"github-actions", "pip"}
    assert all(u["schedule"]["interval"] in ("daily", "weekly") for u in updates)
    (pip,) = [u for u in updates if u["package-ecosystem"] == "pip"]
    assert {"/shared_build", "/packages/*"} <= set(pip["directories"])
    assert [i["dependency-name"] for i in pip["ignore"]] == ["torch"]  # the matrix is by hand


def test_zizmor_runs_pedantic_and_each_ignore_says_why() -> None:
    assert '"zizmor", "--offline", "--persona=pedantic", ".github"' in (ROOT / "noxfile.py").read_text()  # fmt: skip
    lines = (ROOT / ".github" / "zizmor.yml").read_text().splitlines()
    ignores = [i for i, line in enumerate(lines) if re.match(r"\s+- \S+\.yml", line)]
    assert ignores and all(lines[i - 1].strip().startswith("#") for i in ignores)


def test_the_gpu_job_runs_only_a_reviewed_commit_on_an_ephemeral_runner(tmp_path) -> None:
    flow = WORKFLOWS["gpu.yml"]
    assert list(flow[True]) == ["workflow_dispatch"]  # never a push or a pull request
    assert flow[True]["workflow_dispatch"]["inputs"]["sha"]["required"] is True
    wheels, job = flow["jobs"]["wheels"], flow["jobs"]["gpu-check"]
    assert job["runs-on"] == ["self-hosted", "gpu", "ephemeral"] and "if" not in job
    (check_sha, checkout, same, download) = job["steps"][:4]
    # The shipped step's wheels: built on a hosted runner from the same commit, the GPU
    # runner's torch named, and put where .ci/gpu_check.py looks (SHIPPED).
    assert job["needs"] == "wheels" and wheels["runs-on"] == "ubuntu-24.04"
    assert wheels["steps"][0] == check_sha and wheels["steps"][1] == checkout
    (build,) = steps("gpu.yml:wheels", run="python3 -m nox -s gpu_wheels")
    assert build["run"].endswith('-- ${GPU_TORCH:+"$GPU_TORCH"}')  # unset: the session's torch
    assert expression(build["env"]["GPU_TORCH"]) == "vars.GPU_TORCH"
    (upload_wheels,) = steps("gpu.yml:wheels", uses="actions/upload-artifact@")
    assert upload_wheels["with"]["name"] == download["with"]["name"] == "gpu-wheels"
    assert upload_wheels["with"]["path"] == download["with"]["path"] == "gpu-wheels/"
    assert 'SHIPPED = ROOT / "gpu-wheels"' in (ROOT / ".ci" / "gpu_check.py").read_text()
    assert checkout["with"]["ref"] == "${{ inputs.sha }}"
    assert check_sha["env"]["SHA"] == same["env"]["SHA"] == "${{ inputs.sha }}"
    assert same["run"] == 'test "$(git rev-parse HEAD)" = "$SHA"'
    for sha, ok in (("a" * 40, True), ("main", False), ("a" * 39, False), ("A" * 40, False)):
        done = subprocess.run(["bash", "-c", check_sha["run"]], env={**os.environ, "SHA": sha}, capture_output=True)  # fmt: skip
        assert (done.returncode == 0) == ok, sha
    check = steps("gpu.yml:gpu-check", run="bash .ci/gpu_check.sh")
    assert len(check) == 1
    out = check[0]["env"]["OUT"]
    (upload,) = steps("gpu.yml:gpu-check", uses="actions/upload-artifact@")
    assert upload["with"]["path"].rstrip("/") == out and expression(upload["if"]) == "!cancelled()"

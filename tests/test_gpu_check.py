"""The GPU check (.ci/gpu_check.py), rehearsed without a GPU.

A lent GPU machine gives one call of a few minutes, rarely: what a run records, how its
verdict reads a cut, a crash or a skip, the plan, and the preflight and build in an image like
the lent machines' (compiler wrappers that link libstdc++ statically) are all proved here.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# The check, not torch: under one torch of a nox run.
pytestmark = pytest.mark.once


def _load(name: str):
    sys.path[:0] = [str(ROOT / ".ci")]
    try:
        spec = importlib.util.spec_from_file_location(name, ROOT / ".ci" / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(ROOT / ".ci"))


gpu_results = _load("gpu_results")
gpu_run = _load("gpu_run")
gpu_sanitize = _load("gpu_sanitize")
gpu_check = _load("gpu_check")

SUITE = """
import os, signal, time
import pytest

def test_passes():
    pass

def test_fails():
    assert 1 == 2

def test_one_gpu_is_enough():
    pytest.skip("needs two GPUs")

def test_no_gpu():
    pytest.skip("no CUDA GPU visible (torch.cuda.is_available() is False)")

def test_memory():
    pytest.skip("needs 21 GB of free GPU memory")
"""


def _pytest(folder: Path, results: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "GPU_RESULTS": str(results), "PYTHONPATH": str(ROOT / ".ci")}
    command = [sys.executable, "-m", "pytest", str(folder), "-q", "-p", "gpu_results"]
    command += ["-p", "no:cacheprovider", "--rootdir", str(folder), *args]
    return subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True)


@pytest.mark.parametrize("workers", [0, 2], ids=["one-process", "xdist"])
def test_a_run_records_every_outcome_and_skip(tmp_path, workers):
    if workers and importlib.util.find_spec("xdist") is None:
        pytest.skip("pytest-xdist is not installed")
    (tmp_path / "test_suite.py").write_text(SUITE)
    # A module that skips itself at collection: JUnit hides its reason in the element text.
    (tmp_path / "test_needs_a_module.py").write_text(
        'import pytest\npytest.importorskip("no_such_module_here")\ndef test_x(): pass\n'
    )
    results = tmp_path / "results.jsonl"
    xdist = ["-n", str(workers)] if workers else []
    done = _pytest(tmp_path, results, *xdist)
    assert done.returncode == 1, done.stdout
    run = gpu_results.Run.read(results)
    assert sorted(run.collected) == sorted(
        f"test_suite.py::{n}" for n in re.findall(r"def (test_\w+)", SUITE)
    )
    assert (run.count("passed"), run.count("failed"), run.count("skipped")) == (1, 1, 3)
    assert run.exitstatus == 1 and run.not_reached() == []
    line, status = gpu_results.verdict("test toy", run, done.returncode, gpu_memory_gb=80.0)
    assert status == gpu_results.FAILED
    assert line.startswith(
        "test toy: 1 passed, 1 failed, 3 skipped: FAILED (1 failed: test_suite.py::test_fails;"
    )
    assert "'no CUDA GPU visible" in line
    assert (
        "could not import 'no_such_module_here'" in line
        and "collection of test_needs_a_module.py" in line
    )
    assert "needs 21 GB of free GPU memory" in line  # 80 GB in all: a skip that hides a test
    assert "needs two GPUs" not in line  # allowed: these machines have one


def test_a_memory_skip_is_allowed_only_where_the_gpu_lacks_the_memory():
    run = gpu_results.Run(
        collected=["t.py::a", "t.py::big"], outcomes={"t.py::a": "passed", "t.py::big": "skipped"}
    )
    run.reasons["t.py::big"] = "needs 48 GB of free GPU memory"
    run.exitstatus = 0
    assert gpu_results.verdict("test x", run, 0, gpu_memory_gb=80.0)[1] == gpu_results.FAILED
    line, status = gpu_results.verdict("test x", run, 0, gpu_memory_gb=24.0)
    assert status == gpu_results.PASSED
    assert line == "test x: 1 passed, 0 failed, 1 skipped (1 x needs 48 GB of free GPU memory)"


def test_a_crash_names_the_test_it_hit_and_what_did_not_run(tmp_path):
    (tmp_path / "test_crash.py").write_text(
        "import os, signal\ndef test_a(): pass\n"
        "def test_b(): os.kill(os.getpid(), signal.SIGSEGV)\ndef test_c(): pass\n"
    )
    done = _pytest(tmp_path, tmp_path / "r.jsonl", "-p", "no:faulthandler")
    run = gpu_results.Run.read(tmp_path / "r.jsonl")
    line, status = gpu_results.verdict("test toy", run, done.returncode)
    assert status == gpu_results.FAILED
    assert line == (
        "test toy: 1 passed, 0 failed, 0 skipped: FAILED (crashed (killed by SIGSEGV) in "
        "test_crash.py::test_b; 2 tests not run)"
    )


def test_a_run_cut_by_the_deadline_keeps_its_results_and_says_what_it_did_not_reach(tmp_path):
    (tmp_path / "test_slow.py").write_text(
        "import time\ndef test_a(): pass\ndef test_b(): time.sleep(60)\ndef test_c(): pass\n"
    )
    (tmp_path / "test_zlater.py").write_text("def test_d(): pass\n")
    results = tmp_path / "r.jsonl"
    env = {**os.environ, "GPU_RESULTS": str(results), "PYTHONPATH": str(ROOT / ".ci")}
    command = [
        sys.executable,
        "-m",
        "pytest",
        str(tmp_path),
        "-q",
        "-p",
        "gpu_results",
        "-p",
        "no:cacheprovider",
        # The test ids are relative to the rootdir, which an ini file above tmp_path (some
        # other test's, in /tmp) would otherwise move.
        "--rootdir",
        str(tmp_path),
    ]
    job = gpu_check.Job("toy", command, tmp_path / "log", env)
    never = gpu_check.Job("after", ["true"], tmp_path / "log2", env)
    started = time.monotonic()
    deadline = started + 12  # pytest starts and passes test_a in seconds, even on a busy machine
    gpu_check.run_jobs([job, never], deadline, slots=1)
    assert job.cut and job.started and not never.started and never.cut
    assert time.monotonic() - started < 40
    run = gpu_results.Run.read(results)
    line, status = gpu_results.verdict("test toy", run, job.rc, cut=True)
    assert status == gpu_results.CUT
    assert line == (
        "test toy: 1 passed, 0 failed, 0 skipped: NOT REACHED (cut by the deadline: 3 of 4 "
        "tests not run: test_slow.py (2), test_zlater.py (1))"
    )


@pytest.mark.parametrize(
    ("run", "rc", "words"),
    [
        (gpu_results.Run(collected=[], exitstatus=5), 5, "no test ran"),
        (
            gpu_results.Run(collected=["t::a"], outcomes={"t::a": "passed"}, exitstatus=2),
            2,
            "pytest exit 2",
        ),
        (gpu_results.Run(collected=None), -9, "crashed (killed by SIGKILL)"),
    ],
)
def test_a_run_that_proves_nothing_fails(run, rc, words):
    line, status = gpu_results.verdict("test x", run, rc)
    assert status == gpu_results.FAILED and words in line


def test_a_run_cut_before_collection_is_not_reached():
    line, status = gpu_results.verdict("test x", gpu_results.Run(), None, cut=True)
    assert status == gpu_results.CUT and "before its tests were collected" in line


def test_a_torn_last_line_is_ignored(tmp_path):
    results = tmp_path / "r.jsonl"
    results.write_text(
        '{"event": "collected", "ids": ["t::a"]}\n{"event": "start", "id": "t::a"}\n{"event": "res'
    )
    run = gpu_results.Run.read(results)
    assert run.collected == ["t::a"] and run.running_at_the_end() == "t::a"


def _check(tmp_path: Path, steps=gpu_check.STEPS, **status: str):
    check = gpu_check.Check(tmp_path, 480, list(steps), ["add_ext"])
    check.status.update(status)
    return check


def _venv_of_this_python(folder: Path) -> None:
    """A folder the check takes for its venv, whose python is this one (its packages too)."""
    (folder / "bin").mkdir(parents=True)
    (folder / "bin" / "python").write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    (folder / "bin" / "python").chmod(0o755)


def test_the_exit_status_says_pass_defect_or_incomplete(tmp_path):
    P, F, C = gpu_results.PASSED, gpu_results.FAILED, gpu_results.CUT
    assert _check(tmp_path, build=P, test=P, shipped=P, sanitize=P, bench=P).write_verdict() == 0
    assert _check(tmp_path, build=P, test=P, sanitize=P, bench=P).write_verdict() == 3
    assert _check(tmp_path, build=P, test=F, sanitize=C, bench=P).write_verdict() == 1
    assert _check(tmp_path, build=P, test=P, sanitize=C, bench=C).write_verdict() == 3
    assert _check(tmp_path, build=P, test=P, shipped=P).write_verdict(running="sanitize") == 3
    verdict = (tmp_path / "verdict.txt").read_text().splitlines()
    assert verdict[0].startswith("incomplete, no defect found so far")
    assert verdict[1:] == [
        "  build: passed",
        "  test: passed",
        "  shipped: passed",
        "  sanitize: running",
        "  bench: NOT REACHED",
    ]


def test_hand_back_keeps_three_files_and_packs_every_log(tmp_path):
    """The lent machines hand back 8 files of $OUT: with --hand-back the logs go elsewhere,
    and $OUT holds summary, verdict and the logs packed, each replaced whole."""
    check = _check(tmp_path / "logs", build=gpu_results.PASSED)
    check.out.mkdir()
    check.hand_back = tmp_path / "out"
    check.hand_back.mkdir()
    check.say("build: ok")
    for n in range(12):
        (check.out / f"test-{n}.log").write_text(f"log {n}\n")
    check.write_verdict(running="test")
    check.pack()
    assert sorted(os.listdir(check.hand_back)) == ["gpu-check.tar.gz", "summary.txt", "verdict.txt"]
    with tarfile.open(check.hand_back / "gpu-check.tar.gz") as archive:
        names = archive.getnames()
        assert archive.extractfile("gpu-check/test-11.log").read() == b"log 11\n"
    assert len([n for n in names if n.endswith(".log")]) == 12
    assert (check.hand_back / "verdict.txt").read_text().splitlines()[2] == "  test: running"


def test_a_sanitizer_log_cut_before_its_summary_counts_its_reports(tmp_path):
    log = tmp_path / "x.sanitizer.log"
    report = "========= Uninitialized __global__ memory read of size 2 bytes\n=========     at f\n"
    log.write_text("========= COMPUTE-SANITIZER\n" + report * 3)
    assert gpu_sanitize.sanitizer_errors(log) == 3
    log.write_text("========= COMPUTE-SANITIZER\n" + report + "========= ERROR SUMMARY: 7 errors\n")
    assert gpu_sanitize.sanitizer_errors(log) == 7
    log.write_text(
        "========= ERROR SUMMARY: 5180 errors were not printed. Use --print-limit option to adjust"
        " the number of printed errors\n========= ERROR SUMMARY: 5280 errors\n"
    )
    assert gpu_sanitize.sanitizer_errors(log) == 5280
    log.write_text("========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n")
    assert gpu_sanitize.sanitizer_errors(log) == 0


def test_each_step_ends_by_the_budget_less_what_the_chosen_later_steps_are_left(tmp_path):
    every = _check(tmp_path)
    assert [every.budget - every.reserve(s) for s in gpu_check.STEPS] == [90, 220, 310, 395, 472]
    some = _check(tmp_path, steps=["build", "test", "sanitize"])
    some.budget = 300
    assert [some.budget - some.reserve(s) for s in some.steps] == [77, 207, 292]


def test_without_gpu_durations_the_cores_follow_the_tests_collected():
    lanes = gpu_check.test_lanes(
        ["add_ext", "warp_perspective"],
        16,
        {},
        {"add_ext": 10, "warp_perspective": 30, "shared_build": 1, "repo": 1},
    )
    workers = {lane.name: lane.workers for lane in lanes}
    assert workers["warp_perspective"] > workers["add_ext"] > workers["shared_build"] >= 1


def _cuda_test_files() -> list[str]:
    """The test files with CUDA tests, by collecting them: the cuda-marked ids under a
    nox-like run (the plan finds them by reading the files)."""
    found = set()
    for folder in ("packages", "tests", "shared_build/tests"):
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "cuda", "-p", "no:cacheprovider", folder],
            cwd=ROOT, capture_output=True, text=True,
        )  # fmt: skip
        found |= {line.split("::")[0] for line in done.stdout.splitlines() if "::" in line}
    return sorted(found)


def test_the_dry_run_lists_every_cuda_test_file_with_its_expected_time(tmp_path, monkeypatch):
    files = _cuda_test_files()
    assert "packages/add_ext/tests/test_add_ext.py" in files
    durations = tmp_path / "durations.json"
    durations.write_text(json.dumps({
        "packages/add_ext/tests/test_add_ext.py::test_a": 10.0,
        "packages/add_ext/tests/test_add_ext.py::test_b[cuda]": 2.5,
        "packages/add_ext/tests/test_add_ext.py::test_cuda_past_2_to_the_31_elements": 30.0,
        "add_ext-memcheck packages/add_ext/tests/test_add_ext.py::test_a": 40.0,
        "step preflight": 12.0, "step build": 60.0, "step test": 250.0,
    }))  # fmt: skip
    monkeypatch.setattr(gpu_run, "DURATIONS", durations)
    every = sorted(p.parent.name for p in (ROOT / "packages").glob("*/pyproject.toml"))
    lines = gpu_check.plan(gpu_check.Check(tmp_path, 480, list(gpu_check.STEPS), every), 16)
    text = "\n".join(lines)
    assert "  preflight: expected 12 s" in lines
    assert "  build: ends by 90 s; expected 60 s, to end at 72 s" in lines
    assert "  test: ends by 220 s; expected 250 s, to end at 322 s - after its deadline" in lines
    assert "  shipped: ends by 310 s; not timed: to end at 412 s - after its deadline" in lines
    assert "  sanitize: ends by 395 s; not timed: to end at 497 s - after its deadline" in lines
    assert lines[-1] == (
        "  total: expected 574 s of 480 s (not timed, so their reserves: shipped, sanitize, bench)"
    )
    assert "(2 process(es); 40 s of tests)" in text  # every run the mean, 40 s: 16 x 1/9
    for path in files:  # every file with CUDA tests (those collected here)
        assert f"      {path}: " in text, path
    assert "tests/test_gpu_check.py" not in text  # it names the markers in its text only
    assert "      packages/add_ext/tests/test_add_ext.py: 12 s in 2 tests" in text
    assert "      packages/add_ext/tests/test_add_ext.py: 30 s in 1 tests" in text  # the large lane
    assert "bench: ends by 472 s" in text
    for package in ("add_ext", "lltm_cuda", "warp_perspective"):
        assert f"    {package} with USE_CUDA=1 (CUDA sources)" in text
    assert (
        "racecheck: packages/warp_perspective" in text and "racecheck: packages/add_ext" not in text
    )


def test_the_sanitizer_runs_share_the_cores_by_the_seconds_they_took(tmp_path, monkeypatch):
    """Each run's processes in proportion to its tests' seconds in the last GPU run, one at
    least; a run not timed yet counts as the mean; about as many processes as cores."""
    durations = tmp_path / "durations.json"
    test = "packages/warp_perspective/tests/test_warp_perspective.py::test_a"
    seconds = {"memcheck": 300.0, "initcheck": 100.0, "racecheck": 20.0}
    durations.write_text(
        json.dumps({f"warp_perspective-{k} {test}": s for k, s in seconds.items()})
    )
    monkeypatch.setattr(gpu_run, "DURATIONS", durations)
    check = gpu_check.Check(tmp_path, 480, ["sanitize"], ["warp_perspective"], facts={})
    workers = {lane.name: lane.workers for lane, _ in gpu_sanitize.sanitizer_runs(check, 16)}
    assert workers == {
        "warp_perspective-memcheck": 9,  # 16 x 300 / 560
        "warp_perspective-initcheck": 3,
        "warp_perspective-racecheck": 1,
        "warp_perspective-synccheck": 4,  # the mean, 140 s
    }


def test_a_run_records_each_steps_and_each_sanitized_tests_seconds(tmp_path, monkeypatch):
    """durations.json starts as the last run's; each step replaces what it measured."""
    last = tmp_path / "last.json"
    last.write_text(json.dumps({"tests/a.py::t[x y]": 1.0, "add_ext-memcheck tests/a.py::t": 9.0,
                                "step test": 50.0}))  # fmt: skip
    monkeypatch.setattr(gpu_run, "DURATIONS", last)
    check = _check(tmp_path)
    gpu_run.record(check, {"tests/b.py::u": 2.0}, lambda key: "/" in key.split(" ")[0])
    gpu_run.step_seconds(check, "test", 61.04)
    assert json.loads((tmp_path / "durations.json").read_text()) == {
        "tests/b.py::u": 2.0, "add_ext-memcheck tests/a.py::t": 9.0, "step test": 61.0,
    }  # fmt: skip


def test_the_shipped_step_is_not_reached_without_the_release_way_wheels(tmp_path, monkeypatch):
    monkeypatch.setattr(gpu_check, "SHIPPED", tmp_path / "gpu-wheels")
    monkeypatch.setattr(gpu_run, "DURATIONS", tmp_path / "none.json")
    (tmp_path / "gpu-wheels").mkdir()
    (tmp_path / "gpu-wheels" / "lltm_cuda-0.1.0-cp310-abi3-linux_x86_64.whl").write_text("")
    check = _check(tmp_path)
    assert gpu_check.step_shipped(check) == gpu_results.PASSED  # add_ext's tests: not its
    check.packages = ["add_ext", "lltm_cuda", "warp_perspective"]
    assert gpu_check.step_shipped(check) == gpu_results.CUT
    assert (tmp_path / "summary.txt").read_text().splitlines() == [
        "gpu_check: shipped: nothing to run (its packages, lltm_cuda, warp_perspective, are not "
        "this run's)",
        "gpu_check: shipped: NOT REACHED (no wheel of warp_perspective in gpu-wheels/: "
        "nox -s gpu_wheels builds them)",
    ]
    (tmp_path / "gpu-wheels" / "lltm_cuda-0.1.0-cp310-abi3-linux_x86_64.whl").unlink()
    plan = gpu_check.plan(check, 16)
    assert plan[plan.index("  shipped: ends by 310 s; not timed: to end at 220 s") + 1] == (
        "    no wheels: nox -s gpu_wheels builds them"
    )


def test_the_command_line_runs_a_dry_run_and_refuses_an_unknown_step(tmp_path):
    run = [sys.executable, str(ROOT / ".ci" / "gpu_check.py")]
    env = {**os.environ, "OUT": str(tmp_path / "out")}
    plan = subprocess.run([*run, "--dry-run"], capture_output=True, text=True, env=env)
    assert plan.returncode == 0 and plan.stdout.startswith("gpu_check plan: budget 480 s")
    assert not (tmp_path / "out").exists()  # a dry run writes nothing
    bad = subprocess.run([*run, "--steps", "build,tset"], capture_output=True, text=True, env=env)
    assert bad.returncode == 2 and "unknown step 'tset'" in bad.stderr


def _test_functions():
    suites = [*ROOT.glob("packages/*/tests/*.py"), *ROOT.glob("lltm_common/tests/**/*.py")]
    suites += [p for p in ROOT.glob("tests/*.py") if p.name != Path(__file__).name]
    for path in suites:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                yield path, node, ast.unparse(node)


def test_every_graph_capture_test_is_deselected_under_the_sanitizer():
    """compute-sanitizer runs without the caching allocator, under which CUDA-graph capture
    fails by design; the check deselects those tests by the name part `graph_capture`."""
    capturing = [
        (p.name, n.name) for p, n, source in _test_functions() if "torch.cuda.graph(" in source
    ]
    assert len(capturing) >= 3, capturing  # add_ext, lltm_cuda, warp_perspective
    assert [c for c in capturing if gpu_sanitize.GRAPH_CAPTURE not in c[1]] == []


def test_every_test_that_needs_most_of_the_gpu_runs_alone():
    """The tests that need tens of GB run alone after the suites (a skip for want of
    memory the GPU has is a failure), chosen by the name part `2_to_the_31`; none of them
    may run under the sanitizer (marked slow)."""
    large = [(p.name, n, s) for p, n, s in _test_functions() if "need_free_gpu_memory(" in s]
    assert len(large) >= 5, large  # add_ext; forward and backward of lltm_cuda and warp
    for name, node, _ in large:
        assert gpu_check.LARGE in node.name, (name, node.name)
        marks = {ast.unparse(d) for d in node.decorator_list}
        assert "pytest.mark.slow" in marks, (name, node.name)
    named = [(p.name, n.name) for p, n, s in _test_functions() if gpu_check.LARGE in n.name]
    assert len(named) == len(large)


def _static_image(tmp_path: Path) -> Path:
    """A folder for PATH like the lent machines': c++ and g++ wrappers that link libstdc++
    statically, one of them dropping every *stdc++* argument, around g++-real."""
    real = shutil.which("g++")
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "g++-real").symlink_to(real)
    drop = 'args=""; for a in "$@"; do case "$a" in *stdc++*) ;; *) args="$args $a";; esac; done\n'
    for name, script in (
        ("c++", f'exec {real} "$@" -static-libstdc++\n'),
        ("g++", f"{drop}exec {real} $args -static-libstdc++\n"),
    ):
        (folder / name).write_text("#!/bin/sh\n" + script)
        (folder / name).chmod(0o755)
    return folder


def test_a_venv_left_for_another_python_is_made_again(tmp_path):
    """The check's venv reuses an earlier run's only when it has the same parent python: one
    left by another (the default /tmp/gpu-check-venv, from an earlier run) made the build fail
    with "shared_build does not install"."""
    gpu_run = sys.modules["gpu_run"]
    check = gpu_check.Check(tmp_path, 480, ["build"], ["add_ext"], venv=tmp_path / "venv")
    gpu_run.make_venv(check)
    (pth,) = (tmp_path / "venv").rglob("_gpu_check_parent.pth")
    ours = pth.read_text()
    assert ours.strip()
    gpu_run.make_venv(check)  # the same python: reused as it is
    assert pth.read_text() == ours
    pth.write_text("/another/python/site-packages\n")
    marker = tmp_path / "venv" / "left-by-the-other"
    marker.write_text("")
    gpu_run.make_venv(check)
    assert pth.read_text() == ours and not marker.exists()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ELF and g++")
def test_preflight_fails_with_a_sentence_where_no_compiler_links_the_shared_libstdcxx(tmp_path):
    if shutil.which("g++") is None or shutil.which("readelf") is None:
        pytest.skip("needs g++ and readelf")
    folder = _static_image(tmp_path)
    (folder / "g++-real").unlink()
    (folder / "g++-real").write_text((folder / "g++").read_text())
    (folder / "g++-real").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "CXX"}
    env.update(PATH=f"{folder}{os.pathsep}{os.environ['PATH']}", OUT=str(tmp_path / "out"),
               GPU_VENV=str(tmp_path / "venv"))  # not the default /tmp one: a run's leftover  # fmt: skip
    hidden = [n for n in os.listdir("/usr/bin") if re.fullmatch(r"g\+\+-\d+", n)]
    for name in [*hidden, "c++"]:  # none may link the shared one, nor obey our link line
        (folder / name).write_text((folder / "g++").read_text())
        (folder / name).chmod(0o755)
    done = subprocess.run([sys.executable, str(ROOT / ".ci" / "gpu_check.py"), "--simulate", "--steps", "build"],
                          capture_output=True, text=True, env=env)  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    summary = (tmp_path / "out" / "summary.txt").read_text()
    assert (
        summary
        == "gpu_check: preflight: FAILED: no C++ compiler here links the shared libstdc++ (facts.txt)\n"
    )
    facts = (tmp_path / "out" / "facts.txt").read_text()
    assert (
        "c++: " in facts and "g++-real: " in facts and "even when the shared one is named" in facts
    )


MINI = {
    "pyproject.toml": '[build-system]\nrequires = ["setuptools>=77"]\nbuild-backend = "setuptools.build_meta"\n'
    '[project]\nname = "mini"\nversion = "0.1.0"\n[tool.shared_build]\n',
    "setup.py": "from pathlib import Path\nfrom setuptools import setup\n"
    "from shared_build import setup_kwargs\nsetup(**setup_kwargs(Path(__file__).resolve().parent))\n",
    # A C++ stream, where a second libstdc++ would crash; no torch header (seconds to build).
    "csrc/mini.cpp": "#include <Python.h>\n#include <sstream>\n"
    "static PyObject* text(PyObject*, PyObject* n) { std::ostringstream s; s << PyLong_AsLong(n);\n"
    "  return PyUnicode_FromString(s.str().c_str()); }\n"
    'static PyMethodDef methods[] = {{"text", text, METH_O, nullptr}, {nullptr, nullptr, 0, nullptr}};\n'
    'static PyModuleDef module = {PyModuleDef_HEAD_INIT, "_C", nullptr, -1, methods};\n'
    "PyMODINIT_FUNC PyInit__C() { return PyModule_Create(&module); }\n",
    # torch first, as every package: under torch 2.11 the library keeps libtorch as needed.
    "src/mini/__init__.py": "import torch\nfrom ._build_info import BUILD_INFO\nfrom ._C import text\n",
}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ELF and g++")
def test_preflight_and_build_in_an_image_like_the_lent_gpu_machines(tmp_path):
    """c++ and g++ link libstdc++ statically, g++-real does not; the python is a venv with
    torch (as /opt/torch/.venv there), and nothing to install from. In a copy of the check
    with one small package, the check must take g++-real, link the library with it against
    the shared libstdc++, import it in a fresh process, and log each compiler's facts."""
    if shutil.which("g++") is None or shutil.which("readelf") is None:
        pytest.skip("needs g++ and readelf")
    pytest.importorskip("torch")
    repo = tmp_path / "repo"
    shutil.copytree(ROOT / ".ci", repo / ".ci")
    shutil.copytree(
        ROOT / "shared_build",
        repo / "shared_build",
        ignore=shutil.ignore_patterns("tests", "build", "*.egg-info"),
    )
    for name, text in MINI.items():
        (repo / "packages" / "mini" / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / "packages" / "mini" / name).write_text(text)
    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if k not in ("CXX", "CC", "LDSHARED", "PYTHONPATH")}
    env.update(
        PATH=f"{_static_image(tmp_path)}{os.pathsep}{os.environ['PATH']}",
        OUT=str(out),
        GPU_VENV=str(tmp_path / "venv"),
        PIP_NO_INDEX="1",
        USE_CCACHE="0",
    )
    command = [sys.executable, str(repo / ".ci" / "gpu_check.py"), "--simulate", "--steps", "build"]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    summary = (out / "summary.txt").read_text()
    assert done.returncode == 0, summary + (out / "build-mini.log").read_text()[-3000:]
    facts = (out / "facts.txt").read_text()
    assert re.search(r"^  c\+\+: .*links libstdc\+\+ statically by default", facts, re.M)
    assert re.search(r"^  g\+\+: .*even when the shared one is named", facts, re.M)
    assert re.search(r"^  g\+\+-real: .*links the shared libstdc\+\+", facts, re.M)
    assert "chosen: CXX=g++-real" in facts
    link = re.search(r"^link line of mini: (.*)$", facts, re.M).group(1)
    assert link.startswith("g++-real ") and "-l:libstdc++.so.6" in link
    assert "preflight: ok (CXX=g++-real;" in summary
    assert (
        "build: mini: g++-real" in summary
        and "1 libraries, each on the shared libstdc++" in summary
    )
    assert "build: ok for sm_90" in summary
    (library,) = (tmp_path / "venv").rglob("mini/_C*.so")
    dynamic = subprocess.run(["readelf", "-d", str(library)], capture_output=True, text=True)
    assert "[libstdc++.so.6]" in dynamic.stdout


@pytest.mark.parametrize(
    ("init", "words"),
    [
        ("import ctypes\nctypes.string_at(0)\n", "crashy crashed at import (killed by SIGSEGV;"),
        (
            "raise ImportError('undefined symbol: _ZN3c10')\n",
            "crashy does not import: ImportError: undefined symbol",
        ),
        ("BUILD_INFO = {'cuda': None}\n", "crashy was built without its CUDA kernels"),
    ],
)
def test_an_import_crash_is_reported_as_a_crash(tmp_path, monkeypatch, init, words):
    """On the lent H100 a library that crashed at import read as 'built without CUDA
    kernels'."""
    (tmp_path / "site" / "crashy").mkdir(parents=True)
    (tmp_path / "site" / "crashy" / "__init__.py").write_text(init)
    _venv_of_this_python(tmp_path / "venv")
    monkeypatch.setattr(gpu_check, "is_cuda_package", lambda package: True)
    check = gpu_check.Check(tmp_path, 480, ["build"], ["crashy"], venv=tmp_path / "venv")
    check.env["PYTHONPATH"] = str(tmp_path / "site")
    problem, _, _ = gpu_check.installed_right(check, "crashy")
    assert problem is not None and problem.startswith(words)


def test_the_bench_step_reads_its_rows_and_fails_where_cuda_is_missing(tmp_path):
    """The bench step's command and its reading of the rows file, on a machine without CUDA:
    the headline rows cannot be measured, which fails the step with the reason."""
    pytest.importorskip("add_ext", reason="add_ext is not installed here")
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is visible: the headline rows would be measured")
    _venv_of_this_python(tmp_path / "venv")
    check = gpu_check.Check(tmp_path, 480, ["bench"], ["add_ext"], venv=tmp_path / "venv")
    assert gpu_check.step_bench(check) == gpu_results.FAILED
    summary = (tmp_path / "summary.txt").read_text()
    assert summary.startswith("gpu_check: bench: FAILED (exit 1; 0 rows; add_ext: ")
    assert (tmp_path / "bench-rows.jsonl").exists() and (tmp_path / "bench-report.md").exists()


def test_the_memory_skip_says_what_the_verdict_reads(monkeypatch):
    """shared_build.testing.need_free_gpu_memory's sentence is the one the verdict fails on
    a GPU that has the memory."""
    import torch

    from shared_build.testing import need_free_gpu_memory

    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda: (20e9, 80e9))
    need_free_gpu_memory(16)  # enough: no skip
    with pytest.raises(pytest.skip.Exception) as skipped:
        need_free_gpu_memory(21)
    reason = str(skipped.value)
    assert reason == "needs 21 GB of free GPU memory"
    assert gpu_results.forbidden_skip(reason, 80.0) and not gpu_results.forbidden_skip(reason, 20.0)


def test_initcheck_leaves_out_what_it_cannot_judge_and_probes_why(tmp_path):
    """initcheck cannot see cuBLAS's half-precision writes, and lltm_cuda's property tests
    draw float16 and bfloat16 inside one test id (H200, 2026-11-27: 13,458 reports in
    lltm_forward_kernel<BFloat16>): its initcheck run deselects those dtypes and tells the
    battery to draw none. torch's multi-block sums read staging slots no block wrote (7,698
    reports from the grid-stride test): those tests run apart, in every dtype, where reports
    may be in torch's reduce_kernel only. A probe of each finding runs with no kernel of ours,
    every report printed; memcheck runs everything."""
    check = gpu_check.Check(tmp_path, 480, ["sanitize"], ["lltm_cuda"], facts={})
    lanes = {lane.name: lane for lane, _ in gpu_sanitize.sanitizer_runs(check)}
    initcheck, memcheck = lanes["lltm_cuda-initcheck"], lanes["lltm_cuda-memcheck"]
    apart = lanes["lltm_cuda-initcheck-grid_stride"]
    assert initcheck.wrapper == ["env", "SHARED_BUILD_BATTERY_SKIP_DTYPES=float16,bfloat16"]
    for name in ("float16", "bfloat16", "grid_stride"):
        assert f"not {name}" in initcheck.keyword
        assert name not in memcheck.keyword and f"not {name}" not in apart.keyword
    assert apart.keyword.startswith("grid_stride and not graph_capture")
    assert apart.allowed == ("reduce_kernel",) and initcheck.allowed == memcheck.allowed == ()
    assert memcheck.wrapper == apart.wrapper == []
    check.facts = {"sanitizer": "compute-sanitizer", "bulk_copy": True, "print_limit": True}
    jobs = {job.name: job for job in gpu_sanitize.initcheck_probes(check)}
    assert sorted(jobs) == [
        "cublas-probe", "cublas-probe-bulk-copy", "cublas_no_lt-probe", "reduce-probe",
    ]  # fmt: skip
    script = (ROOT / ".ci" / "gpu_initcheck_probe.py").read_text()
    for job in jobs.values():
        part = job.command[-1]
        assert f'"{part}": ' in script.split("parts = ")[1]
        assert job.command[job.command.index("--print-limit") + 1] == str(gpu_sanitize.PRINT_LIMIT)
        assert part in gpu_sanitize.PROBES
        no_lt = {k: job.env.get(k) for k in gpu_sanitize.NO_LT}
        assert (no_lt == gpu_sanitize.NO_LT) == (part == "cublas_no_lt"), (part, no_lt)


def test_the_grid_stride_tests_run_apart_under_initcheck_in_every_dtype():
    """The apart run selects lltm_cuda's grid-stride tests, its pointwise one in all four
    dtypes; the main initcheck run selects none of them."""
    pytest.importorskip("lltm_cuda", reason="collecting lltm_cuda's tests needs it installed")
    check = gpu_check.Check(ROOT, 480, ["sanitize"], ["lltm_cuda"], facts={})
    lanes = {lane.name: lane for lane, _ in gpu_sanitize.sanitizer_runs(check)}
    chosen = {}
    for name in ("lltm_cuda-initcheck", "lltm_cuda-initcheck-grid_stride"):
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
             *lanes[name].selection()],
            cwd=ROOT, capture_output=True, text=True,
        )  # fmt: skip
        chosen[name] = [ln for ln in done.stdout.splitlines() if "::" in ln]
    apart = chosen["lltm_cuda-initcheck-grid_stride"]
    assert len(apart) == 3 + 3 * 4, apart
    for dtype in ("float32", "float64", "float16", "bfloat16"):
        assert sum(ln.endswith(f"-torch.{dtype}]") for ln in apart) == 3, (dtype, apart)
    assert chosen["lltm_cuda-initcheck"] and not [
        ln for ln in chosen["lltm_cuda-initcheck"] if "grid_stride" in ln or "float16" in ln
    ]


# A report as initcheck prints it with --show-backtrace device (run 3 of 2026-11-27).
INLINED = (
    "========= Uninitialized __global__ memory read of size 2 bytes\n"
    "=========     at c10::BFloat16::operator float() const+0x410 in BFloat16.h:143\n"
    "=========     by thread (96,0,0) in block (0,0,0)\n"
    "=========     Address 0x7f150c92a040\n"
    "=========         Device Frame: void lltm_cuda::<unnamed>::lltm_forward_kernel"
    "<c10::BFloat16>(lltm::ForwardData<T1>, long, long)+0x110 in lltm_kernel.cu:71\n"
    "========= \n"
)
REDUCE = (
    "========= Uninitialized __global__ memory read of size 4 bytes\n"
    "=========     at void at::native::reduce_kernel<(int)128, (int)4, at::native::ReduceOp<float>>"
    "(T3)+0x1c0 in Reduce.cuh:900\n"
    "=========     by thread (0,0,0) in block (3,0,0)\n"
    "========= \n"
)


def _log(tmp_path: Path, *reports: str, errors: int | None = None) -> Path:
    log = tmp_path / "x.sanitizer.log"
    summary = "" if errors is None else f"========= ERROR SUMMARY: {errors} errors\n"
    log.write_text("========= COMPUTE-SANITIZER\n" + "".join(reports) + summary)
    return log


def test_each_report_counts_for_the_kernel_it_is_in(tmp_path):
    """A report's kernel is its last frame (the device frames follow the inlined function);
    a report with no frame is counted as such; a log cut before its summary counts too."""
    api = "========= Program hit cudaErrorInvalidValue on CUDA API call to cudaMemcpy\n"
    counts = gpu_sanitize.kernel_counts(_log(tmp_path, INLINED * 2, REDUCE, api, errors=4))
    assert counts == {
        "void lltm_cuda::<unnamed>::lltm_forward_kernel<c10::BFloat16>(lltm::ForwardData<T1>, "
        "long, long)": 2,
        "void at::native::reduce_kernel<(int)128, (int)4, at::native::ReduceOp<float>>(T3)": 1,
        "no kernel named": 1,
    }
    assert sum(gpu_sanitize.kernel_counts(_log(tmp_path, REDUCE * 3)).values()) == 3


def test_reports_pass_only_where_the_run_allows_that_kernel_of_torchs_and_all_are_printed(tmp_path):
    verdict = gpu_sanitize.sanitizer_verdict
    allowed = ("reduce_kernel",)
    assert verdict(_log(tmp_path, errors=0), (), False) == ("", False)
    line, failed = verdict(_log(tmp_path, REDUCE * 2, errors=2), allowed, False)
    assert not failed and line.startswith("2 reports, all in torch's reduce_kernel")
    line, failed = verdict(_log(tmp_path, REDUCE * 2, errors=2), (), True)
    assert failed and line == (
        "FAILED: 2 sanitizer errors: 2 in void at::native::reduce_kernel<(int)128, (int)4, "
        "at::native::ReduceOp<float>>(T3)"
    )
    line, failed = verdict(_log(tmp_path, REDUCE, INLINED, errors=2), allowed, False)
    assert failed and "1 in void lltm_cuda::<unnamed>::lltm_forward_kernel" in line
    line, failed = verdict(_log(tmp_path, REDUCE, errors=5), allowed, False)
    assert failed and line.endswith("; 4 not printed")


@pytest.mark.parametrize(
    ("gpu", "reports", "rc", "cut", "status", "words"),
    [
        ("NVIDIA H200 sm_90", 3, 0, False, "passed", "3 reports, all in torch's reduce_kernel, as"),
        ("NVIDIA H200 sm_90", 2, 0, False, "FAILED", "not the 3 measured on NVIDIA H200 with"),
        ("NVIDIA H100 80GB HBM3 sm_90", 2, 0, False, "passed", "never measured on NVIDIA H100"),
        ("NVIDIA H200 sm_90", 3, 1, False, "FAILED", "FAILED: it exited 1 (p.log)"),
        ("NVIDIA H200 sm_90", 1, None, True, "NOT REACHED", "NOT REACHED in full (1 reports"),
    ],
)
def test_a_probe_fails_where_it_finds_other_than_was_measured(
    tmp_path, monkeypatch, gpu, reports, rc, cut, status, words
):
    monkeypatch.setitem(
        gpu_sanitize.PROBES, "reduce", ("reduce_kernel", {("NVIDIA H200", "2.11.0+cu130"): 3})
    )
    check = gpu_check.Check(tmp_path, 480, ["sanitize"], ["lltm_cuda"], facts={})
    check.facts = {"gpu": gpu, "torch": "2.11.0+cu130 (CUDA 13.0)"}
    probe = gpu_check.Job("reduce-probe", ["python", "probe.py", "reduce"], tmp_path / "p.log", {})
    probe.rc, probe.cut, probe.started = rc, cut, True
    line, got = gpu_sanitize.probe_verdict(
        check, probe, _log(tmp_path, REDUCE * reports, errors=None if cut else reports)
    )
    assert got == status and words in line, line
    line, got = gpu_sanitize.probe_verdict(check, probe, _log(tmp_path, REDUCE, INLINED, errors=2))
    assert got == ("NOT REACHED" if cut else "FAILED"), line


def test_a_predicted_probe_count_is_reported_not_judged(tmp_path, monkeypatch):
    """ "N?": what the tests gave where the probe never ran; reports elsewhere still fail."""
    monkeypatch.setitem(
        gpu_sanitize.PROBES, "reduce", ("reduce_kernel", {("NVIDIA H200", "2.11.0+cu130"): "3?"})
    )
    check = gpu_check.Check(tmp_path, 480, ["sanitize"], ["lltm_cuda"], facts={})
    check.facts = {"gpu": "NVIDIA H200 sm_90", "torch": "2.11.0+cu130 (CUDA 13.0)"}
    probe = gpu_check.Job("reduce-probe", ["python", "probe.py", "reduce"], tmp_path / "p.log", {})
    probe.rc, probe.started = 0, True
    for reports, words in ((3, ", as predicted"), (2, ", not 3 as predicted")):
        line, got = gpu_sanitize.probe_verdict(
            check, probe, _log(tmp_path, REDUCE * reports, errors=reports)
        )
        assert got == "passed" and words in line, line
    line, got = gpu_sanitize.probe_verdict(check, probe, _log(tmp_path, REDUCE, INLINED, errors=2))
    assert got == "FAILED", line

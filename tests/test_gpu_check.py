""".ci/gpu_check.sh's logic that runs without a GPU: the per-step verdict on pytest's JUnit
report (.ci/gpu_junit.py), the dry-run plan and the refusal of unknown steps.

The GPU check runs on a lent machine, rarely and against a clock; a verdict that passes a
step which ran nothing, or skipped its CUDA tests for want of a module, would waste the run.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load():
    spec = importlib.util.spec_from_file_location("gpu_junit", ROOT / ".ci" / "gpu_junit.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


gpu_junit = _load()


def _xml(passed: int = 0, failed: int = 0, errors: int = 0, skips: tuple[str, ...] = ()) -> str:
    cases = [f'<testcase classname="t" name="ok{i}"/>' for i in range(passed)]
    cases += [
        f'<testcase classname="t" name="bad{i}"><failure message="assert 1 == 2"/></testcase>'
        for i in range(failed)
    ]
    cases += [
        f'<testcase classname="t" name="err{i}"><error message="fixture"/></testcase>'
        for i in range(errors)
    ]
    cases += [
        f'<testcase classname="t" name="skip{i}"><skipped type="pytest.skip" message="{m}"/>'
        "</testcase>"
        for i, m in enumerate(skips)
    ]
    return '<testsuites><testsuite name="pytest">' + "".join(cases) + "</testsuite></testsuites>"


def test_a_clean_run_passes_and_counts():
    line, ok = gpu_junit.verdict("test add_ext", _xml(passed=3, skips=("needs two GPUs",)), 0)
    assert ok
    assert line == "gpu_check: test add_ext: 3 passed, 0 failed, 1 skipped"


@pytest.mark.parametrize(
    ("xml", "rc", "why"),
    [
        (_xml(passed=3, failed=1), 1, "1 failed"),
        (_xml(passed=3, errors=2), 1, "2 failed"),
        (_xml(), 5, "no test ran"),
        (_xml(skips=("needs two GPUs",)), 0, "no test ran"),
        (_xml(passed=1), 2, "pytest exited 2"),
        (
            _xml(passed=5, skips=("could not import 'cv2': No module named 'cv2'",)),
            0,
            "skipped for want of what this machine must have: 1 x \"could not import 'cv2'",
        ),
        (
            _xml(passed=5, skips=("no CUDA GPU visible (torch.cuda.is_available() is False)",) * 2),
            0,
            "2 x 'no CUDA GPU visible",
        ),
        (_xml(passed=5, skips=("lltm_cpu is not installed here",)), 0, "is not installed"),
    ],
)
def test_a_run_that_proves_nothing_fails(xml, rc, why):
    line, ok = gpu_junit.verdict("test x", xml, rc)
    assert not ok
    assert "FAILED" in line and why in line


def test_no_report_fails_with_the_exit_status():
    line, ok = gpu_junit.verdict("sanitize add_ext memcheck", None, 139)
    assert not ok
    assert line == "gpu_check: sanitize add_ext memcheck: FAILED, pytest wrote no report (exit 139)"


def test_command_line_exit_status(tmp_path, capsys):
    report = tmp_path / "t.xml"
    report.write_text(_xml(passed=2))
    assert gpu_junit.main(["test repo", str(report)]) == 0
    assert gpu_junit.main(["test repo", str(report), "--rc", "1"]) == 1
    assert gpu_junit.main(["test repo", str(tmp_path / "missing.xml"), "--rc", "5"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "gpu_check: test repo: 2 passed, 0 failed, 0 skipped"
    assert out[2].endswith("pytest wrote no report (exit 5)")


def _gpu_check(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(ROOT / ".ci" / "gpu_check.sh"), *args],
        capture_output=True,
        text=True,
        env={**os.environ, "OUT": env.pop("OUT"), **env},
        timeout=60,
    )


def test_dry_run_prints_the_plan_and_runs_nothing(tmp_path):
    result = _gpu_check(OUT=str(tmp_path / "out"), GPU_CHECK_DRY_RUN="1")
    assert result.returncode == 0, result.stderr
    plan = result.stdout
    assert "steps: preflight build test sanitize bench" in plan
    for package in ("add_ext", "lltm_cuda", "warp_perspective"):
        assert f"build {package} with USE_CUDA=1 (CUDA sources)" in plan
    for package in ("gc_cpp", "lltm_cpu"):
        assert f"build {package} (no CUDA sources)" in plan
    assert "-k 'not graph_capture'" in plan
    assert not (tmp_path / "out" / "tests-repo.xml").exists()


def test_an_unknown_step_is_refused(tmp_path):
    result = _gpu_check("build", "tset", OUT=str(tmp_path / "out"), GPU_CHECK_DRY_RUN="1")
    assert result.returncode == 2
    assert "unknown step 'tset'" in result.stderr


def test_every_graph_capture_test_is_deselected_under_the_sanitizer():
    """compute-sanitizer runs without the caching allocator, under which CUDA-graph capture
    fails by design; gpu_check.sh deselects those tests by the name part `graph_capture`.
    A capture test named otherwise would fail the sanitize step on every GPU machine."""
    import ast

    capturing = []
    suites = [*ROOT.glob("packages/*/tests/*.py"), *ROOT.glob("lltm_common/tests/**/*.py")]
    suites += [p for p in ROOT.glob("tests/*.py") if p.name != Path(__file__).name]
    for path in suites:
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.FunctionDef)
                and node.name.startswith("test_")
                and "torch.cuda.graph(" in ast.unparse(node)
            ):
                capturing.append((path.name, node.name))
    assert len(capturing) >= 3, capturing  # add_ext, lltm_cuda, warp_perspective
    assert [c for c in capturing if "graph_capture" not in c[1]] == []


def _shell_function(name: str) -> str:
    """The definition of gpu_check.sh's function NAME, to run alone."""
    script = (ROOT / ".ci" / "gpu_check.sh").read_text()
    start = script.index(f"{name}() {{")
    return script[start : script.index("\n}\n", start) + 3]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ELF and g++")
def test_pick_cxx_passes_over_a_compiler_that_links_libstdcxx_statically(tmp_path):
    """The H100's build compiler linked libstdc++ statically, and every library crashed at
    its first error message: the preflight must take the next compiler instead."""
    import shutil

    if shutil.which("c++") is None or shutil.which("readelf") is None:
        pytest.skip("needs c++ and readelf")
    wrapper = tmp_path / "g++-real"
    wrapper.write_text('#!/bin/sh\nexec c++ "$@" -static-libstdc++\n')
    wrapper.chmod(0o755)

    def pick(cxx: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["bash", "-c", _shell_function("pick_cxx") + "pick_cxx"],
            env={**os.environ, "CXX": cxx, "PY": sys.executable},
            cwd=ROOT,
            capture_output=True,
            text=True,
        )

    static = pick(str(wrapper))
    assert static.returncode == 0 and static.stdout.strip() == "c++"
    assert "g++-real" in static.stderr and "links libstdc++ statically" in static.stderr
    assert pick("c++").stdout.strip() == "c++"
    # A CXX of several words is one candidate, kept whole.
    assert pick("env c++").stdout.strip() == "env c++"


def test_a_step_takes_its_share_of_the_time_left():
    """Under GPU_CHECK_DEADLINE a slow test step must leave the sanitizer and the bench
    their time: on the H100 the test step's crashes took it all."""
    probe = (
        _shell_function("budget")
        + _shell_function("step_share")
        + "now=$(date +%s); for step in test sanitize bench; do "
        'STEP_DEADLINE=$((now + 1000 * $(step_share "$step") / 100)); '
        'echo "$step $(budget 5000) $(budget 30)"; done; '
        "STEP_DEADLINE=$((now - 5)); budget 30"
    )
    out = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, check=True)
    lines = out.stdout.split("\n")
    shares = {line.split()[0]: [int(v) for v in line.split()[1:]] for line in lines[:3]}
    # 1000 s left: test may take 45% of it, sanitize 65%, the last step all; a step's own
    # smaller cap still wins; a deadline already past leaves 1 s, never 0 or less.
    assert 440 <= shares["test"][0] <= 450 and shares["test"][1] == 30
    assert 640 <= shares["sanitize"][0] <= 650
    assert 990 <= shares["bench"][0] <= 1000
    assert lines[3] == "1"

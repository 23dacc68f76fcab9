"""The workflow (.github/workflows/) and .ci/run run the same nox sessions with the same
command after the same setup: .ci/run runs lint and the sessions nox tags "ci", the workflow's
matrix reads them from `nox -l --json -t ci`, never listed by hand; the GPU job runs the GPU
check only when asked. What the workflows' syntax and security need, actionlint and zizmor
check (nox -s lint)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
CI_RUN = (ROOT / ".ci" / "run").read_text()
WORKFLOWS = {
    p.name: yaml.safe_load(p.read_text()) for p in (ROOT / ".github/workflows").glob("*.yml")
}
JOBS = {
    f"{file}:{name}": job for file, flow in WORKFLOWS.items() for name, job in flow["jobs"].items()
}
# What the workflow adds to .ci/run's sessions: the wheelhouse as an artifact, and the
# wheels under the other CPythons.
WORKFLOW_ONLY = {"release", "cpython"}
NOX = re.compile(r"python3 -m nox -s (\S+(?: (?!--)\S+)*)")
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


def sessions_of_matrix(file: str, job: dict) -> list[str]:
    """The sessions of a job whose matrix is the output of the job it needs: the step behind
    that output must list nox's ci-tagged sessions."""
    found = re.fullmatch(
        r"fromJSON\(needs\.(\w+)\.outputs\.(\w+)\)",
        expression(job["strategy"]["matrix"]["session"]),
    )
    assert found, "the matrix is not nox's list"
    source = JOBS[f"{file}:{found.group(1)}"]
    step_id, name = re.fullmatch(
        r"steps\.(\w+)\.outputs\.(\w+)", expression(source["outputs"][found.group(2)])
    ).groups()
    (step,) = [s for s in source["steps"] if s.get("id") == step_id]
    assert LIST_CI in step["run"] and '"ci" in s["tags"]' in step["run"]
    assert f'echo "{name}=$sessions" >>"$GITHUB_OUTPUT"' in step["run"]
    return ci_sessions()


def workflow_sessions() -> dict[str, list[str]]:
    """Each nox session some workflow job runs, with the jobs that run it."""
    found: dict[str, list[str]] = {}
    for key, job in JOBS.items():
        for step in job["steps"]:
            for arg in NOX.findall(step.get("run", "")):
                for one in shlex.split(arg):
                    if one.startswith("$"):
                        assert expression(step["env"][one[1:]]) == "matrix.session"
                        names = sessions_of_matrix(key.split(":")[0], job)
                    else:
                        names = [one]
                    for name in names:
                        found.setdefault(name, []).append(key)
    return found


def ci_run_sessions() -> set[str]:
    """What .ci/run runs: the sessions it names (lint) and the ci-tagged ones."""
    code = "\n".join(line.split("#")[0] for line in CI_RUN.splitlines())
    named = {one for a in NOX.findall(code) for one in shlex.split(a)}
    assert "python3 -m nox -t ci --parallel 2" in code
    return named | set(ci_sessions())


def test_the_workflow_runs_every_session_ci_run_runs_and_no_other() -> None:
    workflow = workflow_sessions()
    ci_run = ci_run_sessions()
    matrix = [line.split("#")[0].strip().removeprefix("torch==")
              for line in (ROOT / "requirements" / "torch-matrix.txt").read_text().splitlines()
              if line.split("#")[0].strip()]  # fmt: skip
    assert {"lint", "sanitize", *(f"tests(torch='{v}')" for v in matrix)} <= ci_run
    assert not ci_run - set(workflow), "run by .ci/run, not by the workflow"
    assert set(workflow) - ci_run == WORKFLOW_ONLY
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
    command = (
        'bash .ci/without_system_cuda.sh python3 -m nox -s "$SESSION" --report .nox/report.json'
    )
    for key, job in JOBS.items():
        runs = [s.get("run", "") for s in job["steps"]]
        if "strategy" in job:  # the session jobs: .ci/run's command, one session
            assert command in runs, key
        if any(NOX.search(r) for r in runs):
            assert "bash .ci/setup.sh" in runs or "bash .ci/setup.sh --tools" in runs, key
            assert job["container"] == "python:3.11-bookworm", key  # .ci/run's Python


def test_every_checkout_keeps_no_credentials_and_every_action_is_pinned() -> None:
    for flow in WORKFLOWS.values():
        assert flow["permissions"] == {"contents": "read"}
    for key, job in JOBS.items():
        for step in job["steps"]:
            if "uses" in step:
                assert re.fullmatch(r"actions/[\w-]+@[0-9a-f]{40}", step["uses"]), key
            if step.get("uses", "").startswith("actions/checkout@"):
                assert step["with"]["persist-credentials"] is False, key


def test_dependabot_keeps_the_pinned_actions_current() -> None:
    updates = yaml.safe_load((ROOT / ".github" / "dependabot.yml").read_text())["updates"]
    assert {(u["package-ecosystem"], u["directory"]) for u in updates} == {("github-actions", "/")}
    assert all(u["schedule"]["interval"] in ("daily", "weekly") for u in updates)


def test_the_gpu_job_runs_the_gpu_check_on_a_self_hosted_runner_only_when_asked() -> None:
    (job,) = [j for j in JOBS.values() if "self-hosted" in j["runs-on"]]
    assert job["runs-on"] == ["self-hosted", "gpu"]
    # Never on a push or a plain pull request: a fork would wait for a runner it has none of.
    assert expression(job["if"]) == (
        "github.event_name == 'workflow_dispatch' || github.event.label.name == 'gpu'"
    )
    check = [s for s in job["steps"] if s.get("run") == "bash .ci/gpu_check.sh"]
    assert len(check) == 1
    out = check[0]["env"]["OUT"]
    (upload,) = [
        s for s in job["steps"] if s.get("uses", "").startswith("actions/upload-artifact@")
    ]
    assert upload["with"]["path"].rstrip("/") == out and expression(upload["if"]) == "!cancelled()"

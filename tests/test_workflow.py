"""The workflow (.github/workflows/) and .ci/run run the same nox sessions with the same
command after the same setup, the workflow's matrix read from the torch matrix through
`shared_build.workspace ci-sessions`, never listed by hand; the GPU job runs the GPU check
only when asked. What the workflows' syntax and security need, actionlint and zizmor check
(nox -s lint)."""

from __future__ import annotations

import ast
import json
import re
import shlex
from pathlib import Path

import yaml

from shared_build.workspace import ci
from shared_build.workspace.repo import Repo

ROOT = Path(__file__).resolve().parents[1]
CI_RUN = (ROOT / ".ci" / "run").read_text()
WORKFLOWS = {
    p.name: yaml.safe_load(p.read_text()) for p in (ROOT / ".github/workflows").glob("*.yml")
}
JOBS = {
    f"{file}:{name}": job for file, flow in WORKFLOWS.items() for name, job in flow["jobs"].items()
}
# The one session the workflow adds to .ci/run's: the wheelhouse as an artifact (.ci/run's
# packaging tests build the same wheels and install them, but keep none).
WORKFLOW_ONLY = {"release", "wheels_cpython"}
NOX = re.compile(r"python3 -m nox -s (\S+)")


def matrix_sessions() -> list[str]:
    """What `ci-sessions` prints for the whole matrix, as the workflow runs it (no
    TORCH_VERSIONS): every session of every lane."""
    split = ci.lanes(Repo(ROOT, environ={}).torch_versions)
    return [s for lane in split for s in lane]


def expression(text: str) -> str:
    """The expression inside `${{ ... }}`."""
    found = re.fullmatch(r"\$\{\{\s*(.*?)\s*\}\}", text.strip())
    assert found, f"not an expression: {text!r}"
    return found.group(1)


def sessions_of_matrix(file: str, job: dict) -> list[str]:
    """The sessions of a job whose matrix is the `sessions` output of the job it needs: the
    step behind that output must run ci-sessions."""
    found = re.fullmatch(
        r"fromJSON\(needs\.(\w+)\.outputs\.(\w+)\)\.sessions",
        expression(job["strategy"]["matrix"]["session"]),
    )
    assert found, "the matrix is not a ci-sessions output"
    source = JOBS[f"{file}:{found.group(1)}"]
    step_id, name = re.fullmatch(
        r"steps\.(\w+)\.outputs\.(\w+)", expression(source["outputs"][found.group(2)])
    ).groups()
    (step,) = [s for s in source["steps"] if s.get("id") == step_id]
    assert "python3 -m shared_build.workspace ci-sessions)" in step["run"]
    assert f'echo "{name}=$sessions" >>"$GITHUB_OUTPUT"' in step["run"]
    return matrix_sessions()


def workflow_sessions() -> dict[str, list[str]]:
    """Each nox session some workflow job runs, with the jobs that run it."""
    found: dict[str, list[str]] = {}
    for key, job in JOBS.items():
        for step in job["steps"]:
            for arg in NOX.findall(step.get("run", "")):
                (arg,) = shlex.split(arg)
                if arg.startswith("$"):
                    assert expression(step["env"][arg[1:]]) == "matrix.session"
                    names = sessions_of_matrix(key.split(":")[0], job)
                else:
                    names = [arg]
                for name in names:
                    found.setdefault(name, []).append(key)
    return found


def ci_run_sessions() -> set[str]:
    """What .ci/run runs: the sessions it names (lint) and those of its lanes."""
    code = "\n".join(line.split("#")[0] for line in CI_RUN.splitlines())
    named = {shlex.split(a)[0] for a in NOX.findall(code) if not a.startswith('"$')}
    assert "ci-sessions --lane 0" in code and "ci-sessions --lane 1" in code
    return named | set(matrix_sessions())


def nox_sessions() -> set[str]:
    """The noxfile's sessions as `nox -l` lists them for the whole matrix: a parametrized
    session once per torch, under the ids ci.torch_id gives (tests/test_ci_sessions.py)."""
    tree = ast.parse((ROOT / "noxfile.py").read_text())
    names = set()
    for node in tree.body:
        decorators = [ast.unparse(d) for d in getattr(node, "decorator_list", [])]
        if not any(d.startswith("nox.session") for d in decorators):
            continue
        if any(d.startswith("nox.parametrize('torch'") for d in decorators):
            names |= {
                f"{node.name}({ci.torch_id(v)})" for v in Repo(ROOT, environ={}).torch_versions
            }
        else:
            names.add(node.name)
    return names


def test_the_workflow_runs_every_session_ci_run_runs_and_no_other() -> None:
    workflow = workflow_sessions()
    ci_run = ci_run_sessions()
    assert {
        "lint",
        "sanitize",
        *map(ci.tests_session, Repo(ROOT, environ={}).supported_torch),
    } <= ci_run
    assert not ci_run - set(workflow), "run by .ci/run, not by the workflow"
    assert set(workflow) - ci_run == WORKFLOW_ONLY
    assert all(len(jobs) == 1 for jobs in workflow.values()), workflow


def test_every_session_the_workflow_runs_is_a_nox_session() -> None:
    sessions = nox_sessions()
    assert {"lint", "release", "sanitize", "tests(torch='2.13.0')"} <= sessions
    assert set(workflow_sessions()) <= sessions


def test_the_matrix_comes_from_the_matrix_file_not_by_hand() -> None:
    text = json.dumps(WORKFLOWS)  # what the workflows say, not their comments
    for version in Repo(ROOT, environ={}).supported_torch:
        assert version not in text, f"torch {version} named in a workflow"
    assert not re.search(r"tests\(|sanitize", text), "a session named by hand in a workflow"


def test_the_jobs_run_the_command_and_setup_of_ci_run() -> None:
    lane_command = 'bash .ci/without_system_cuda.sh python3 -m nox -s "$session"'
    assert lane_command in CI_RUN and "\nbash .ci/setup.sh\n" in CI_RUN
    for key, job in JOBS.items():
        runs = [s.get("run", "") for s in job["steps"]]
        if "strategy" in job:  # the session jobs: .ci/run's lane command
            assert lane_command.replace("$session", "$SESSION") in runs, key
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

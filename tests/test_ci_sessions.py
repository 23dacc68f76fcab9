"""CI runs every torch of requirements/torch-matrix.txt: .ci/run takes its sessions from the
matrix (shared_build.workspace.ci), under the names the noxfile gives them."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from shared_build.workspace import ci
from shared_build.workspace.repo import Repo

ROOT = Path(__file__).resolve().parents[1]
CI_RUN = (ROOT / ".ci" / "run").read_text()


def test_every_matrix_version_runs_in_a_ci_lane() -> None:
    repo = Repo(ROOT, environ={})  # the whole matrix, whatever this run's TORCH_VERSIONS
    sessions = [s for lane in ci.lanes(repo.torch_versions) for s in lane]
    for version in repo.supported_torch:
        assert sessions.count(f"tests(torch='{version}')") == 1, f"torch {version} is not in CI"
    assert sessions.count("sanitize") == 1


def test_ci_run_runs_the_lanes_of_the_matrix_and_names_no_session_itself() -> None:
    assert "shared_build.workspace ci-sessions --lane 0" in CI_RUN
    assert "shared_build.workspace ci-sessions --lane 1" in CI_RUN
    code = "\n".join(line.split("#")[0] for line in CI_RUN.splitlines())
    assert not re.search(r"tests\(|sanitize", code), "a session named by hand in .ci/run"
    # Its closing table has a row for every session of both lanes.
    assert '.ci/summary.py .nox/reports "${lane_a[@]}" "${lane_b[@]}"' in CI_RUN


def test_the_sessions_ci_names_are_the_noxfile_s() -> None:
    """tests(torch='<v>'): the noxfile's `tests`, parametrized with ci.torch_id's ids."""
    tree = ast.parse((ROOT / "noxfile.py").read_text())
    sessions = {
        node.name: node
        for node in tree.body
        if isinstance(node, ast.FunctionDef)
        and any("nox.session" in ast.unparse(d) for d in node.decorator_list)
    }
    assert {"tests", "sanitize"} <= set(sessions)
    (parametrize,) = [
        d for d in sessions["tests"].decorator_list if "parametrize" in ast.unparse(d)
    ]
    ids = next(k.value for k in parametrize.keywords if k.arg == "ids")
    assert ast.unparse(ids) == "[ci.torch_id(v) for v in TORCH_VERSIONS]"
    assert ast.unparse(parametrize.args[1]) == "TORCH_VERSIONS"

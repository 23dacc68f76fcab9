"""The repository's machinery: CI runs every torch of the one matrix file, the facts it
reads live in that file alone, CI's closing table, the wheelhouse's manylinux rule."""

from __future__ import annotations

import json
import os
import re
import runpy
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MATRIX_FILE = ROOT / "requirements" / "torch-matrix.txt"


def matrix(path: Path = MATRIX_FILE) -> list[str]:
    lines = (line.split("#")[0].strip() for line in path.read_text().splitlines())
    return [line.removeprefix("torch==") for line in lines if line]


def nox_list(noxfile: Path, *args: str) -> list[dict]:
    env = {k: v for k, v in os.environ.items() if k != "TORCH_VERSIONS"}
    out = subprocess.run([sys.executable, "-m", "nox", "-f", str(noxfile), "-l", "--json", *args],
                         capture_output=True, text=True, check=True, env=env)  # fmt: skip
    return json.loads(out.stdout)


def test_ci_runs_tests_under_every_torch_of_the_matrix_and_sanitize() -> None:
    tagged = [s["session"] for s in nox_list(ROOT / "noxfile.py", "-t", "ci") if "ci" in s["tags"]]
    assert tagged == [f"tests(torch='{v}')" for v in matrix()] + ["sanitize"]
    code = "\n".join(line.split("#")[0] for line in (ROOT / ".ci" / "run").read_text().splitlines())
    assert "python3 -m nox -t ci --parallel 2 --report .nox/report.json" in code
    assert not re.search(r"tests\(|sanitize", code), "a session named by hand in .ci/run"
    assert "python3 tools/ci_summary.py .nox/report.json" in code


def test_the_matrix_is_one_file_that_everything_reads(tmp_path) -> None:
    """Changing requirements/torch-matrix.txt alone changes the sessions and the stable-ABI
    target; no build file names the oldest torch."""
    (tmp_path / "requirements").mkdir()
    shutil.copy(ROOT / "noxfile.py", tmp_path)
    (tmp_path / "requirements" / "torch-matrix.txt").write_text(
        "torch==9.1.0  # old\ntorch==9.2.3\n"
    )
    sessions = [s["session"] for s in nox_list(tmp_path / "noxfile.py", "-s", "tests")]
    assert sessions == ["stable", "tests(torch='9.1.0')", "tests(torch='9.2.3')"]
    assert runpy.run_path(str(tmp_path / "noxfile.py"))["STABLE_TARGET"] == "9.1"
    oldest = matrix()[0]
    builds = [*ROOT.glob("packages/*/pyproject.toml"), *ROOT.glob("packages/*/setup.py"),
              *(ROOT / "shared_build" / "src").rglob("*.py"), *(ROOT / "shared_build" / "src").rglob("*.tmpl")]  # fmt: skip
    for path in builds:
        text = path.read_text()
        assert not re.search(rf"torch\s*[=>]=\s*{re.escape(oldest[:4])}", text), (
            f"{path} pins the oldest torch"
        )
        assert not re.search(r"^STABLE_TARGET\s*=", text, re.M), f"{path} names the stable target"


def _junit(path: Path, tests: int, failures: int = 0, skipped: int = 0) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f'<testsuites><testsuite tests="{tests}" failures="{failures}" errors="0" skipped="{skipped}"/></testsuites>'
    )


def test_ci_summary_rows_totals_lines_and_failures(tmp_path) -> None:
    report = tmp_path / "report.json"
    # As nox writes them: a parametrized session's name is its function's, its signature
    # the parametrized name.
    sessions = [{"name": "tests", "signatures": ["tests(torch='2.13.0')"], "result": "success", "duration": 612.4},
                {"name": "sanitize", "signatures": ["sanitize"], "result": "success", "duration": 301.0}]  # fmt: skip
    report.write_text(json.dumps({"result": 1, "sessions": sessions}))
    _junit(tmp_path / "junit" / "tests_torch__2_13_0-0.xml", 12, skipped=2)  # the noxfile's name
    _junit(tmp_path / "junit" / "sanitize-0.xml", 7, skipped=1)
    _junit(tmp_path / "junit" / "sanitize-1.xml", 3)
    summary = [sys.executable, str(ROOT / "tools" / "ci_summary.py"), str(report)]
    done = subprocess.run(summary, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "| tests(torch='2.13.0') | success | 612 | 10 | 2 | 0 |" in done.stdout
    assert "| sanitize | success | 301 | 9 | 1 | 0 |" in done.stdout
    assert re.search(
        r"source lines \(non-blank\): ops \d+, library \d+, machinery \d+, total \d+", done.stdout
    )
    assert done.stdout.strip().splitlines()[-1] == "total: 19 passed, 0 failed, 3 skipped"
    # A failed test fails the summary, though nox counted the session a success.
    _junit(tmp_path / "junit" / "sanitize-1.xml", 3, failures=1)
    assert subprocess.run(summary, capture_output=True).returncode == 1
    report.write_text(json.dumps({"result": 0, "sessions": [{**sessions[0], "result": "failed"}]}))
    assert subprocess.run(summary, capture_output=True).returncode == 1


def test_a_wheel_is_manylinux_only_by_its_tags_and_its_glibc() -> None:
    problem = runpy.run_path(str(ROOT / "tools" / "wheelhouse.py"))["manylinux_problem"]
    good = "add_ext-0.1.0-cp310-abi3-manylinux_2_28_x86_64.whl"
    assert problem(good, "is consistent with the following platform tag: linux_x86_64") is None
    assert "lack" in problem("add_ext-0.1.0-cp310-abi3-linux_x86_64.whl", "")
    shown = 'This constrains the platform tag to "manylinux_2_34_x86_64".'
    assert problem(good, shown) == "needs glibc 2.34, newer than manylinux_2_28_x86_64 allows"


def documented_nox_commands() -> list[tuple[dict[str, str], list[str]]]:
    """Each `nox -s` the README, the noxfile's docstring (what `nox -l` prints first) and the
    README's session table name: (its environment, the sessions it names)."""
    texts = [(ROOT / "README.md").read_text(), runpy.run_path(str(ROOT / "noxfile.py"))["__doc__"]]
    found = []
    for text in texts:
        command = r"((?:[A-Z_]+=\S+ )*)(?:python3 -m )?nox -s (\"[^\"]+\"|\w+(?: \| \w+)*)"
        for env, names in re.findall(command, text):
            sessions = [n.strip().strip('"') for n in names.split("|")]
            found.append((dict(v.split("=", 1) for v in env.split()), sessions))
        for row in re.findall(r"^\| `([^`]+)`(?:, `([^`]+)`)* \|", text, re.M):
            found += [({}, [name.split(" ")[0]]) for name in row if name and "nox" not in name]
    return found


def test_every_documented_nox_command_selects_what_it_names() -> None:
    """`nox -l` with each documented selection lists those sessions (and what they require),
    nothing else; a `-k` would override `-s` and select everything."""
    commands = documented_nox_commands()
    assert len(commands) >= 15, commands
    every = {s["session"] for s in nox_list(ROOT / "noxfile.py")}
    for env, sessions in commands:
        assert not any(" -k " in f" {s} " for s in sessions), sessions
        names = [n for s in sessions for n in s.split()]
        os_env = {**os.environ, **env}
        out = subprocess.run([sys.executable, "-m", "nox", "-f", str(ROOT / "noxfile.py"), "-l",
                              "--json", "-s", *names], capture_output=True, text=True, env=os_env)  # fmt: skip
        assert out.returncode == 0, (sessions, out.stderr)
        listed = {s["session"] for s in json.loads(out.stdout)} - ({"stable"} - set(names))
        wanted = {n for n in names if n in every or "(" in n}
        wanted |= {s for s in listed if s.split("(")[0] in names}
        assert listed == wanted and listed, (env, sessions, listed)
        if "TORCH_VERSIONS" in env:
            versions = env["TORCH_VERSIONS"].split(",")
            assert {s for s in listed if s.startswith("tests(")} == {
                f"tests(torch='{v}')" for v in versions
            }, (env, listed)


def test_test_modules_have_unique_names() -> None:
    """pytest imports test modules by basename (rootdir's prepend import mode, no __init__.py):
    two suites' test_x.py in one run fail to collect."""
    files = subprocess.run(["git", "ls-files", "*test_*.py"], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout.split()  # fmt: skip
    names = [Path(f).name for f in files if "/tests/" in f"/{f}" and "/templates/" not in f]
    assert len(names) > 20 and len(set(names)) == len(names), sorted(names)

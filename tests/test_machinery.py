"""The repository's machinery: CI runs every torch of the one matrix file, the facts it
reads live in that file alone, CI's closing table, the wheelhouse's manylinux rule."""

from __future__ import annotations

import ast
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


def test_the_matrix_is_one_file_that_everything_reads(tmp_path, monkeypatch) -> None:
    """Changing requirements/torch-matrix.txt alone changes the sessions and the stable-ABI
    target (older when a run names an older torch); no build file names the oldest torch."""
    monkeypatch.delenv("TORCH_VERSIONS", raising=False)  # a narrowed run's own
    (tmp_path / "requirements").mkdir()
    shutil.copy(ROOT / "noxfile.py", tmp_path)
    (tmp_path / "requirements" / "torch-matrix.txt").write_text(
        "torch==9.1.0  # old\ntorch==9.2.3\n"
    )
    sessions = [s["session"] for s in nox_list(tmp_path / "noxfile.py", "-s", "tests")]
    assert sessions == ["stable", "tests(torch='9.1.0')", "tests(torch='9.2.3')"]
    assert runpy.run_path(str(tmp_path / "noxfile.py"))["STABLE_TARGET"] == "9.1"
    for run, target in (("9.2.3", "9.1"), ("9.1.0,9.10.1", "9.1"), ("9.0.5,9.2.3", "9.0")):
        monkeypatch.setenv("TORCH_VERSIONS", run)
        assert runpy.run_path(str(tmp_path / "noxfile.py"))["STABLE_TARGET"] == target, run
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


# Every command-line tool a user is pointed at, asked for --help as its usage says.
HELPS = [["shared-build", "--help"], *(["shared-build", c, "--help"] for c in ("new", "doctor", "info")),
         ["-m", "benchmarks.run", "--help"], ["-m", "benchmarks.report", "--help"],
         *([f"tools/{t}.py", "--help"] for t in ("mutants", "wheelhouse", "abi_overhead", "ci_summary")),
         ["examples/run_all.py", "--help"], ["examples/measure_build_times.py", "--help"],
         [".ci/gpu_check.py", "--help"]]  # fmt: skip
NOX_COMMAND = re.compile(r"((?:[A-Z_]+=\S+ )*)(?:python3 -m )?nox -s (\"[^\"]+\"|\w+(?: \| \w+)*)"
                         r"((?: \[?--? ?[^`#\n|;&)]*)?)")  # fmt: skip


def helps() -> dict[str, str]:
    """Each tool's --help text; a tool that fails to print one fails here."""
    texts = {}
    for args in HELPS:
        command = ([str(Path(sys.executable).with_name(args[0]))] if args[0] == "shared-build"
                   else [sys.executable]) + args[args[0] == "shared-build":]  # fmt: skip
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0 and "Traceback" not in done.stderr, (args, done.stderr[-2000:])
        assert len(done.stdout) > 80, (args, done.stdout)
        texts[" ".join(args)] = done.stdout
    return texts


def error_hints(tmp_path: Path) -> str:
    """What the noxfile's errors print, from real runs: a bare `nox -s dev`, and the static
    sentences of the others (they name a command to run first)."""
    run = [
        sys.executable,
        "-m",
        "nox",
        "-f",
        str(ROOT / "noxfile.py"),
        "--envdir",
        str(tmp_path),
        "-s",
        "dev",
    ]
    done = subprocess.run(run, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1 and "name a package first: nox -s dev -- {" in done.stderr, (
        done.stderr
    )
    source = (ROOT / "noxfile.py").read_text()
    static = [
        m
        for m in re.findall(r'session\.error\(f?"([^"]*)"', source)
        if "nox -s" in m and "{{" not in m
    ]
    assert len(static) >= 3, static
    return done.stderr + "\n".join(m.replace("{torch}", matrix()[-1]) for m in static)


Command = tuple[str, dict[str, str], list[str], list[str]]


def documented_nox_commands(extra: str = "", repository: bool = True) -> list[Command]:
    """Each `nox -s` that a Markdown file, the noxfile (its docstrings, what `nox -l` prints,
    and its errors) or `extra` names: (the text, its environment, the sessions with any nox
    option written after them, what follows `--`)."""
    texts = [extra]
    if repository:
        files = subprocess.run(["git", "ls-files", "*.md"], cwd=ROOT, capture_output=True,
                               text=True, check=True).stdout.split()  # fmt: skip
        texts += [(ROOT / f).read_text() for f in files if not f.startswith("benchmarks/results/")]
        tree = ast.parse((ROOT / "noxfile.py").read_text())
        texts += [ast.get_docstring(n) or "" for n in [tree, *ast.walk(tree)] if isinstance(
                  n, (ast.Module, ast.FunctionDef))]  # fmt: skip
    found = []
    for text in texts:
        for whole, env, names, rest in (
            (m.group(0), *m.groups()) for m in NOX_COMMAND.finditer(text)
        ):
            args = rest.rstrip(".,:;").replace("[", " ").replace("]", " ").split()
            nox_args, args = (
                (args[: args.index("--")], args[args.index("--") + 1 :])
                if "--" in args
                else (args, [])
            )
            sessions = [n.strip().strip('"') for n in names.split("|")] + nox_args
            found.append((whole, dict(v.split("=", 1) for v in env.split()), sessions, args))
        sessions_table = text.split("## Sessions\n", 1)[1] if "## Sessions\n" in text else ""
        for row in re.findall(r"^\| `([^`]+)`(?:, `([^`]+)`)* \|", sessions_table, re.M):
            for name in (n for n in row if n and "nox" not in n):  # a session table's row
                found += documented_nox_commands(f"nox -s {name}", repository=False)
    return found


def posargs_problem(session: str, args: list[str], flags: dict[str, set[str]]) -> str | None:
    """Why a documented `nox -s SESSION -- ARGS` would not do what it says, or None."""
    packages = {p.parent.name for p in ROOT.glob("packages/*/src")} | {"<package>", "my_op"}
    names = [a for a in args if not a.startswith(("-", "<")) and a not in ("...", "ARGS")]
    if session == "dev":
        first = args[0].strip("{}").split(",") if args else ["(none)"]
        if not set(first) <= packages:
            return f"dev needs a package first, got {args[:1]}"
        if "--torch" in args and args[args.index("--torch") + 1] not in matrix():
            return f"--torch {args[args.index('--torch') + 1]} is not in the matrix"
    elif session == "release":
        return next((f"{a} is not a torch of the matrix" for a in names if a not in matrix()), None)
    elif session in flags:  # its flags are the tool's own (or nox's for bench)
        unknown = [
            a.split("=")[0]
            for a in args
            if a.startswith("--") and a.split("=")[0] not in flags[session]
        ]
        if unknown:
            return f"{session} knows no {unknown}"
        if session == "mutants" and not set(names) <= packages:
            return f"mutants of {names}: not packages"
    return None


def test_every_documented_nox_command_selects_what_it_names(tmp_path) -> None:
    """`nox -l` with each documented selection (the READMEs, docs, the noxfile's docstrings and
    errors, every tool's --help) lists those sessions (and what they require), nothing else;
    a `-k` would override `-s` and select everything. What follows `--` is checked too: a
    package that exists, a torch of the matrix, flags the session's tool knows."""
    texts = helps()
    commands = documented_nox_commands("\n".join(texts.values()) + error_hints(tmp_path))
    assert len(commands) >= 60, commands
    wordy = {k: set(re.findall(r"--[a-z][a-z-]*", v)) for k, v in texts.items()}
    flags = {"bench": wordy["-m benchmarks.run --help"] | {"--all-torch", "--publish", "--torch"},
             "mutants": wordy["tools/mutants.py --help"], "gpu": wordy[".ci/gpu_check.py --help"],
             "examples": wordy["examples/run_all.py --help"]}  # fmt: skip
    every = {s["session"] for s in nox_list(ROOT / "noxfile.py")}
    seen = set()
    for whole, env, sessions, args in commands:
        assert "-k" not in sessions, f"{whole}: nox's -k overrides -s and selects every session"
        assert (problem := posargs_problem(sessions[0], args, flags)) is None, (whole, problem)
        names = [n for s in sessions for n in s.split() if not n.startswith("-")]
        if (key := (str(env), *names)) in seen:
            continue
        seen.add(key)
        os_env = {**os.environ, **env}
        out = subprocess.run([sys.executable, "-m", "nox", "-f", str(ROOT / "noxfile.py"), "-l",
                              "--json", "-s", *names], capture_output=True, text=True, env=os_env)  # fmt: skip
        assert out.returncode == 0, (whole, out.stderr)
        listed = {s["session"] for s in json.loads(out.stdout)} - ({"stable"} - set(names))
        wanted = {n for n in names if n in every or "(" in n}
        wanted |= {s for s in listed if s.split("(")[0] in names}
        assert listed == wanted and listed, (whole, listed)
        if "TORCH_VERSIONS" in env:
            versions = env["TORCH_VERSIONS"].split(",")
            assert {s for s in listed if s.startswith("tests(")} == {
                f"tests(torch='{v}')" for v in versions
            }, (env, listed)


def test_the_hint_checks_can_fail() -> None:
    """What the test above rejects: a -k before --, a package that is not one, a torch not in
    the matrix, a flag the session's tool does not know."""
    flags = {"bench": {"--quick", "--all-torch", "--publish", "--torch"}}

    def problems(text: str) -> list[str | None]:
        return [posargs_problem(sessions[0], args, flags) if "-k" not in sessions else "-k"
                for _, _, sessions, args in documented_nox_commands(text, repository=False)]  # fmt: skip

    oldest = matrix()[0]
    good = f"`nox -s dev -- add_ext [-k gradcheck] [--torch {oldest}]` `nox -s bench -- --quick`"
    assert problems(good) == [None, None]
    assert problems(f"`nox -s tests -k {oldest[:4]}`") == ["-k"]
    assert problems("`nox -s dev -- ad_ext -q`")[0]
    assert problems("`nox -s dev -- add_ext --torch 9.9`")[0]
    assert problems("`nox -s release -- 9.9`")[0]
    assert problems("`nox -s bench -- --quik`")[0]


def test_test_modules_have_unique_names() -> None:
    """pytest imports test modules by basename (rootdir's prepend import mode, no __init__.py):
    two suites' test_x.py in one run fail to collect."""
    files = subprocess.run(["git", "ls-files", "*test_*.py"], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout.split()  # fmt: skip
    names = [Path(f).name for f in files if "/tests/" in f"/{f}" and "/templates/" not in f]
    assert len(names) > 20 and len(set(names)) == len(names), sorted(names)

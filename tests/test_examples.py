"""The examples keep working: each examples/*/run.sh runs through examples/run_all.py.

The slow tests run one example each (they compile C++; see examples/README.md for times).
The fast ones check the runner itself on throwaway examples made in tmp_path.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RUNNER = ROOT / "examples" / "run_all.py"


def _load_runner():
    spec = importlib.util.spec_from_file_location("examples_run_all", RUNNER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while being made
    spec.loader.exec_module(module)
    return module


run_all = _load_runner()
EXAMPLES = run_all.discover()


def _run(*args: str, env: dict[str, str] | None = None, timeout: float = 120):
    return subprocess.run(
        [sys.executable, str(RUNNER), *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=timeout,
        check=False,
    )


def _tail(text: str, lines: int = 60) -> str:
    return "\n".join(text.splitlines()[-lines:])


def test_examples_are_discovered() -> None:
    names = [e.name for e in EXAMPLES]
    assert names == sorted(names)
    assert {"01_jit_load", "02_jit_inline", "03_setuptools_aot"} <= set(names)
    for example in EXAMPLES:
        assert (example.folder / "README.md").is_file(), f"{example.name} has no README.md"


# What an example must print beyond passing, and the files it must leave in its
# EXAMPLE_WORKDIR (path, first characters). Each example runs once per torch version, here
# only: a package's own suite does not run the same run.sh again.
EXPECTED_OUTPUT = {
    # The C++ apps built with CMake against the installed torch run the TorchScript model
    # and the AOTInductor package of warp_perspective, with the same results as Python's.
    "05_torchscript_cpp": [
        "warp_perspective::warp_perspective registered: yes",
        "python_output.pt: identical",
        "cpp_output.pt: identical",
        "cpp_aoti_output.pt: identical",
        "AOTInductor and TorchScript: equal",
    ],
    # The GCN built from gc_cpp.GraphConv learns the karate club split.
    "09_gcn_karate": ["accuracy on the 30 unlabelled members: 0.9"],
}
EXPECTED_FILES = {"09_gcn_karate": {"karate_predictions.csv": "member,faction"}}


@pytest.mark.slow
@pytest.mark.parametrize("example", EXAMPLES, ids=[e.name for e in EXAMPLES])
def test_example_runs(example, tmp_path: Path) -> None:
    reason = run_all.missing_requirements(example)
    if reason:
        pytest.skip(f"{example.name}: {reason}")
    proc = _run(
        example.name, "--keep", "--workdir-root", str(tmp_path),
        timeout=run_all.DEFAULT_TIMEOUT_S + 60,
    )  # fmt: skip
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"{example.name} failed:\n{_tail(output)}"
    assert "1 passed, 0 failed, 0 skipped" in output, _tail(output)
    for line in EXPECTED_OUTPUT.get(example.name, []):
        assert line in proc.stdout, f"{example.name} did not print {line!r}:\n{_tail(output)}"
    (workdir,) = tmp_path.glob(f"{example.name}-*")
    for name, start in EXPECTED_FILES.get(example.name, {}).items():
        assert (workdir / name).read_text().startswith(start), name


# The runner itself, on examples made here.


def _example(root: Path, name: str, body: str) -> None:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "run.sh").write_text("#!/usr/bin/env bash\nset -euo pipefail\n" + body)
    (folder / "README.md").write_text(f"# {name}\n")


def test_requires_lines_are_parsed() -> None:
    text = "#!/bin/bash\n# requires: warp_perspective cmake\n#requires: gpu, cmake\necho hi\n"
    assert run_all.parse_requires(text) == ("warp_perspective", "cmake", "gpu")
    assert run_all.parse_requires("echo '# not a requires line'\n") == ()


def test_requirements_are_modules_or_programs() -> None:
    path = run_all.child_path()
    assert run_all.missing_requirement("pytest", path) is None  # a module
    assert run_all.missing_requirement("bash", path) is None  # a program
    reason = run_all.missing_requirement("no_such_thing_4a7c", path)
    assert "needs no_such_thing_4a7c" in reason


def test_every_example_needs_torch(monkeypatch) -> None:
    """Without torch no example is ready, though no `# requires:` line names it."""
    real = run_all.importlib.util.find_spec
    monkeypatch.setattr(
        run_all.importlib.util, "find_spec", lambda n: None if n == "torch" else real(n)
    )
    (first, *_) = run_all.discover()
    assert "torch" not in first.requires
    assert run_all.missing_requirements(first).startswith("needs torch, which is neither")


def test_runs_in_order_with_fresh_workdir_and_python_first(tmp_path: Path) -> None:
    check = (
        'test "$(command -v python)" = "$EXPECTED_PYTHON"\n'
        'test -d "$EXAMPLE_WORKDIR" && test -z "$(ls -A "$EXAMPLE_WORKDIR")"\n'
        'touch "$EXAMPLE_WORKDIR/scratch"\n'
        'test "$(pwd)" = "$(cd "$(dirname "$0")" && pwd)"\n'
        'echo "ran $(basename "$(pwd)")"\n'
    )
    _example(tmp_path, "02_b", check)
    _example(tmp_path, "01_a", check)
    expected = os.path.join(os.path.dirname(os.path.abspath(sys.executable)), "python")
    workdirs = tmp_path / "workdirs"
    workdirs.mkdir()
    proc = _run(
        "--examples-dir",
        str(tmp_path),
        "--workdir-root",
        str(workdirs),
        env={"EXPECTED_PYTHON": expected},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.index("ran 01_a") < proc.stdout.index("ran 02_b")
    assert proc.stdout.rstrip().endswith("2 passed, 0 failed, 0 skipped")
    assert list(workdirs.iterdir()) == []  # removed after a pass


def test_stops_at_first_failure(tmp_path: Path) -> None:
    _example(tmp_path, "01_ok", "echo fine\n")
    _example(tmp_path, "02_broken", "echo about to fail; exit 3\n")
    _example(tmp_path, "03_never", "echo SHOULD-NOT-RUN\n")
    proc = _run("--examples-dir", str(tmp_path))
    assert proc.returncode == 1
    assert "SHOULD-NOT-RUN" not in proc.stdout
    lines = proc.stdout.splitlines()
    assert any(
        "02_broken" in line and "FAILED" in line and "exit status 3" in line for line in lines
    )
    assert any("03_never" in line and "not run" in line for line in lines)
    assert lines[-1] == "1 passed, 1 failed, 0 skipped"


def test_missing_requirement_skips_with_reason(tmp_path: Path) -> None:
    _example(tmp_path, "01_needs", "# requires: no_such_module_4a7c\necho SHOULD-NOT-RUN\n")
    _example(tmp_path, "02_plain", "echo fine\n")
    proc = _run("--examples-dir", str(tmp_path))
    assert proc.returncode == 0
    assert "SHOULD-NOT-RUN" not in proc.stdout
    assert any(
        "01_needs" in line and "skipped" in line and "needs no_such_module_4a7c" in line
        for line in proc.stdout.splitlines()
    )
    assert proc.stdout.rstrip().endswith("1 passed, 0 failed, 1 skipped")


def test_names_and_filters_select(tmp_path: Path) -> None:
    for name in ("01_jit_thing", "02_jit_other", "03_cmake"):
        _example(tmp_path, name, f"echo ran-{name}\n")
    proc = _run("--examples-dir", str(tmp_path), "jit")
    assert "ran-01_jit_thing" in proc.stdout and "ran-02_jit_other" in proc.stdout
    assert "ran-03_cmake" not in proc.stdout
    proc = _run("--examples-dir", str(tmp_path), "03_cmake")
    assert proc.stdout.rstrip().endswith("1 passed, 0 failed, 0 skipped")
    proc = _run("--examples-dir", str(tmp_path), "nothing_like_it")
    assert proc.returncode == 2
    assert "no example matches 'nothing_like_it'" in proc.stderr


def test_timeout_stops_the_example(tmp_path: Path) -> None:
    _example(tmp_path, "01_hangs", "sleep 60 & wait\n")
    proc = _run("--examples-dir", str(tmp_path), "--timeout", "1")
    assert proc.returncode == 1
    assert "timed out after 1 s" in proc.stdout


def test_files_left_in_the_example_folder_are_reported(tmp_path: Path) -> None:
    _example(tmp_path, "01_messy", 'touch "$(dirname "$0")/stray.txt"\n')
    proc = _run("--examples-dir", str(tmp_path))
    assert proc.returncode == 0
    assert "left 1 new file(s) in its folder (stray.txt)" in proc.stdout

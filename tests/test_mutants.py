"""tools/mutants.py, the mutation-testing driver, on small files of its own: a mutant applied
and restored byte for byte (also when the run is interrupted), the verdicts of fake nox runs,
a seeded and stratified sample, and universalmutator's mutants of a small C++ and Python file,
those that cannot compile or change only a comment or a string left out. Nothing is built."""

from __future__ import annotations

import importlib.util
import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load():
    spec = importlib.util.spec_from_file_location("mutants", ROOT / "tools" / "mutants.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


mutants = _load()

CPP = """#include <cstdint>
// a + b, in a comment
int64_t total(const int64_t* x, int64_t n) {
  int64_t s = 0;
  for (int64_t i = 0; i < n; ++i) {
    s += x[i];
  }
  TORCH_CHECK(n >= 0, "n must be >= 0 and < 2, got ", n);
  return s;
}
"""
PY = '''def scale(x, factor=2):
    """Scale x by 2 or more."""
    # a comment: x * 2
    return x * factor
'''


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(mutants, "ROOT", tmp_path)
    (tmp_path / "total.cpp").write_bytes(CPP.replace("\n", "\r\n").encode())  # exact bytes back
    (tmp_path / "scale.py").write_text(PY)
    return tmp_path


def test_a_mutant_is_applied_and_the_file_restored_byte_for_byte(tree: Path) -> None:
    path = tree / "total.cpp"
    original = path.read_bytes()
    mutant = {
        "file": "total.cpp",
        "line": 6,
        "original": "    s += x[i];",
        "mutated": "    s -= x[i];",
    }
    with mutants.applied(mutant):
        assert path.read_bytes() == original.replace(b"s += x[i];", b"s -= x[i];")
    assert path.read_bytes() == original
    with pytest.raises(KeyboardInterrupt), mutants.applied(mutant):
        raise KeyboardInterrupt
    assert path.read_bytes() == original
    path.write_bytes(b"// a line more\r\n" + original)  # lines moved: the mutant follows its line
    with mutants.applied(mutant):
        assert b"s -= x[i];\r\n  }" in path.read_bytes()
    path.write_bytes(original)
    stale = {**mutant, "original": "    s += y[i];"}  # the file changed since the sample
    with pytest.raises(RuntimeError, match="changed since it was sampled"), mutants.applied(stale):
        pass
    assert path.read_bytes() == original


@pytest.mark.parametrize(
    ("script", "verdict"),
    [
        (
            "print('nox > python -m pytest -x -q'); print('FAILED t.py::test_a'); sys.exit(1)",
            "killed",
        ),
        ("print('nox > python -m pytest -x -q'); print('3 passed')", "survived"),
        ("print('total.cpp:6: error: expected ;'); sys.exit(1)", "stillborn"),
        ("print('nox > python -m pytest -x -q', flush=True); time.sleep(60)", "timeout"),
    ],
)
def test_a_nox_run_is_classified(tree: Path, script: str, verdict: str) -> None:
    command = [sys.executable, "-c", f"import sys, time; {script}"]
    got, why = mutants.measure(command, test_limit=1.0)
    assert got == verdict
    if verdict == "killed":
        assert why == "FAILED t.py::test_a"


def test_the_sample_is_seeded_and_stratified_over_files_and_kinds() -> None:
    found = [
        {"file": file, "line": i, "kind": kind, "mutated": f"{file}{kind}{i}"}
        for file, kinds, n in (
            ("a.cpp", ("compare", "constant", "swap"), 30),
            ("b.py", ("value",), 10),
        )
        for kind in kinds
        for i in range(n)
    ]
    first = mutants.sample(found, 20, seed=0)
    assert first == mutants.sample(found, 20, seed=0)
    assert first != mutants.sample(found, 20, seed=1)
    files = Counter(m["file"] for m in first)
    assert abs(files["a.cpp"] - 18) <= 1 and abs(files["b.py"] - 2) <= 1  # 90 and 10 mutants
    kinds = Counter(m["kind"] for m in first if m["file"] == "a.cpp")
    assert max(kinds.values()) - min(kinds.values()) <= 1


def test_universalmutator_s_mutants_that_can_compile_and_change_code(tree: Path) -> None:
    cpp = mutants.candidates(tree / "total.cpp")
    lines = CPP.splitlines()
    assert {m["line"] for m in cpp} <= {3, 4, 5, 6, 8, 9}  # not #include, comment or braces
    mutated = {(m["line"], m["mutated"].strip()) for m in cpp}
    assert (5, "for (int64_t i = 0; i <= n; ++i) {") in mutated  # off by one
    assert (4, "int64_t s = 1;") in mutated  # a constant
    assert {
        (6, "s -= x[i];"),
        (6, "s =+ x[i];"),
        (8, 'TORCH_CHECK(n > 0, "n must be >= 0 and < 2, got ", n);'),
    } <= mutated
    assert not [m for m in cpp if "int(64" in m["mutated"] or "int0_t" in m["mutated"]]  # garbled
    assert not [m for m in cpp if m["line"] == 3 and "int64_t/" in m["mutated"]]  # a declarator
    for m in cpp:  # the message is never what changed
        assert mutants.STRING.sub("", m["mutated"]) != mutants.STRING.sub("", lines[m["line"] - 1])
    assert {"off-by-one", "constant", "compare", "operator", "statement"} <= {
        m["kind"] for m in cpp
    }
    py = mutants.candidates(tree / "scale.py")
    assert py and {m["line"] for m in py} <= {1, 4}  # not the docstring or the comment
    assert (4, "return x / factor") in {(m["line"], m["mutated"].strip()) for m in py}

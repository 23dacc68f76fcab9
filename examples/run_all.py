"""Run the examples: every examples/<NN>_<name>/run.sh, in name order, stopping at the first failure.

    python examples/run_all.py                  # every example
    python examples/run_all.py 01 jit_inline    # those whose folder name is or contains a word
    python examples/run_all.py --list           # what there is and what each needs; runs nothing
    nox -s examples                             # the same, in the first torch version's environment

Each run.sh runs with bash, in its own folder, with this Python's folder first on PATH (so
`python` is this interpreter) and EXAMPLE_WORKDIR set to a fresh empty folder for its scratch
files, removed after a pass and kept after a failure. A line `# requires: NAME ...` in run.sh
names what the example needs; each NAME is an importable Python module or a program on PATH,
or `gpu` (a visible CUDA GPU) or `torch-cuda` (a CUDA build of torch). An example whose
requirement is missing is skipped, with the reason printed. The run ends with one summary
line per example and a count; the exit status is 0 when nothing failed.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

EXAMPLES_DIR = Path(__file__).resolve().parent
REQUIRES = re.compile(r"^\s*#\s*requires:(.*)$", re.MULTILINE)
DEFAULT_TIMEOUT_S = 1200.0


@dataclass(frozen=True)
class Example:
    name: str
    folder: Path
    requires: tuple[str, ...]

    @property
    def script(self) -> Path:
        return self.folder / "run.sh"


@dataclass
class Result:
    example: Example
    status: str  # "passed" | "failed" | "skipped" | "not run"
    seconds: float = 0.0
    detail: str = ""


def parse_requires(text: str) -> tuple[str, ...]:
    """The names on every `# requires:` line, in order, without duplicates."""
    names: list[str] = []
    for line in REQUIRES.findall(text):
        for name in re.split(r"[\s,]+", line.strip()):
            if name and name not in names:
                names.append(name)
    return tuple(names)


def discover(examples_dir: Path = EXAMPLES_DIR) -> list[Example]:
    """Every folder of examples_dir that has a run.sh, in name order."""
    return [
        Example(
            name=script.parent.name,
            folder=script.parent,
            requires=parse_requires(script.read_text(encoding="utf-8")),
        )
        for script in sorted(examples_dir.glob("*/run.sh"))
    ]


def select(examples: Sequence[Example], words: Sequence[str]) -> list[Example]:
    """The examples named by words: an exact folder name, else every name containing the word."""
    if not words:
        return list(examples)
    chosen: set[str] = set()
    for word in words:
        exact = [e.name for e in examples if e.name == word]
        matches = exact or [e.name for e in examples if word in e.name]
        if not matches:
            known = ", ".join(e.name for e in examples) or "none"
            raise LookupError(f"no example matches {word!r}; the examples are: {known}")
        chosen.update(matches)
    return [e for e in examples if e.name in chosen]


def child_path(environ: Mapping[str, str] | None = None) -> str:
    """PATH for run.sh: this interpreter's folder first, so that `python` is this Python."""
    environ = os.environ if environ is None else environ
    # Not resolved: a virtual environment's bin/python is a symlink to the base interpreter.
    folder = os.path.dirname(os.path.abspath(sys.executable))
    return os.pathsep.join([folder, environ.get("PATH", "")])


def _torch_cuda() -> tuple[bool, bool]:
    """(torch is a CUDA build, a CUDA GPU is visible), imported only when asked."""
    try:
        import torch
    except ImportError:
        return False, False
    return torch.version.cuda is not None, bool(torch.cuda.is_available())


def missing_requirement(name: str, path: str) -> str | None:
    """Why the requirement `name` is not met here, or None when it is."""
    if name == "gpu":
        return None if _torch_cuda()[1] else "needs a CUDA GPU (torch.cuda.is_available() is False)"
    if name == "torch-cuda":
        return None if _torch_cuda()[0] else "needs a CUDA build of torch (this one is CPU-only)"
    try:
        if importlib.util.find_spec(name) is not None:
            return None
    except (ImportError, ValueError):
        pass
    if shutil.which(name, path=path) is not None:
        return None
    return f"needs {name}, which is neither an importable Python module nor a program on PATH"


def missing_requirements(example: Example, path: str | None = None) -> str | None:
    """Every unmet requirement of the example, torch first (every example needs it), joined,
    or None when all are met."""
    path = child_path() if path is None else path
    names = dict.fromkeys(("torch", *example.requires))
    reasons = [r for r in (missing_requirement(n, path) for n in names) if r]
    return "; ".join(reasons) or None


def _snapshot(folder: Path) -> set[str]:
    return {
        str(p.relative_to(folder))
        for p in folder.rglob("*")
        if "__pycache__" not in p.relative_to(folder).parts
    }


def _stop(process: subprocess.Popen) -> None:
    """End run.sh and everything it started (it runs in its own process group)."""
    for sig, grace in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


def run_example(
    example: Example, *, timeout: float | None, keep: bool, workdir_root: str | None
) -> Result:
    """Run one example's run.sh; never raises for a failing example."""
    path = child_path()
    reason = missing_requirements(example, path)
    if reason:
        return Result(example, "skipped", detail=reason)
    workdir = tempfile.mkdtemp(prefix=f"{example.name}-", dir=workdir_root)
    env = {
        **os.environ,
        "PATH": path,
        "EXAMPLE_WORKDIR": workdir,
        "PYTHONUNBUFFERED": "1",
    }
    before = _snapshot(example.folder)
    sys.stdout.flush()
    start = time.perf_counter()
    process = subprocess.Popen(
        ["bash", str(example.script)], cwd=example.folder, env=env, start_new_session=True
    )
    try:
        returncode = process.wait(timeout=timeout)
        detail = "" if returncode == 0 else f"exit status {returncode}"
    except subprocess.TimeoutExpired:
        _stop(process)
        returncode = None
        detail = f"timed out after {timeout:.0f} s (--timeout)"
    except BaseException:
        _stop(process)
        raise
    seconds = time.perf_counter() - start
    stray = sorted(_snapshot(example.folder) - before)
    if stray:
        note = f"left {len(stray)} new file(s) in its folder ({', '.join(stray[:3])}); scratch files belong in $EXAMPLE_WORKDIR"
        detail = f"{detail}; {note}" if detail else note
    if returncode == 0:
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            detail = f"{detail}; workdir kept: {workdir}" if detail else f"workdir kept: {workdir}"
        return Result(example, "passed", seconds, detail)
    return Result(example, "failed", seconds, f"{detail}; workdir kept: {workdir}")


def summary(results: Sequence[Result]) -> list[str]:
    """One line per example, then 'N passed, N failed, N skipped'."""
    width = max((len(r.example.name) for r in results), default=0)
    lines = []
    for r in results:
        seconds = f"{r.seconds:7.1f} s" if r.status in ("passed", "failed") else " " * 9
        status = "FAILED" if r.status == "failed" else r.status
        lines.append(f"  {r.example.name:<{width}}  {status:<7}  {seconds}  {r.detail}".rstrip())
    counts = {s: sum(r.status == s for r in results) for s in ("passed", "failed", "skipped")}
    lines.append(
        f"{counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped"
    )
    return lines


def _torch_version() -> str:
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("names", nargs="*", help="example folder names, or words they contain")
    parser.add_argument("--list", action="store_true", help="list the examples; run nothing")
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        help=f"seconds one example may run before it is stopped and failed (default {DEFAULT_TIMEOUT_S:.0f}; 0: no limit)",
    )
    parser.add_argument(
        "--keep",
        action="store_true",
        help="keep every EXAMPLE_WORKDIR (a failed one is always kept)",
    )
    parser.add_argument("--workdir-root", help="make the EXAMPLE_WORKDIRs in this folder")
    parser.add_argument("--examples-dir", type=Path, default=EXAMPLES_DIR, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    try:
        examples = select(discover(args.examples_dir), args.names)
    except LookupError as error:
        print(f"run_all.py: {error}", file=sys.stderr)
        return 2
    if not examples:
        print(f"run_all.py: no examples (no */run.sh) under {args.examples_dir}", file=sys.stderr)
        return 2

    if args.list:
        for example in examples:
            reason = missing_requirements(example)
            needs = " ".join(example.requires) or "-"
            print(
                f"{example.name:<28} requires: {needs:<30} {'SKIP: ' + reason if reason else 'ready'}"
            )
        return 0

    print(
        f"examples: {len(examples)}, python {sys.executable}, torch {_torch_version()}", flush=True
    )
    timeout = args.timeout if args.timeout > 0 else None
    results: list[Result] = []
    for index, example in enumerate(examples, 1):
        print(f"\n=== [{index}/{len(examples)}] {example.name}", flush=True)
        result = run_example(
            example, timeout=timeout, keep=args.keep, workdir_root=args.workdir_root
        )
        results.append(result)
        shown = f"{result.seconds:.1f} s" if result.status != "skipped" else ""
        print(f"--- {example.name}: {result.status} {shown} {result.detail}".rstrip(), flush=True)
        if result.status == "failed":
            results += [
                Result(e, "not run", detail="after the failure above") for e in examples[index:]
            ]
            break

    print("\nsummary:")
    print("\n".join(summary(results)), flush=True)
    return 1 if any(r.status == "failed" for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())

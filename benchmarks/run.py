"""Run every package's benchmark in this environment, writing each event as it happens.

    python -m benchmarks.run --output benchmarks/results/raw/torch-2.13.0.json [--quick]
        [--only add_ext] [--no-build-times] [--skipped '{"lltm_cuda": "why"}']
    python -m benchmarks.run --headline --rows OUT/bench-rows.jsonl   # the GPU check's
    python -m benchmarks.run --headline --plan      # the rows it would time; no GPU needed

The rows file (--rows, else a temporary one) gets a JSON line per event as it happens: a
run killed midway keeps what it measured; ``read`` turns it into the dictionary --output
writes. Exits 1 when a package failed or a headline row was not measured. On glibc it
re-executes itself with fixed malloc thresholds (ALLOCATOR): under glibc's defaults the
implementations timed round-robin fragment the heap for each other (lltm_cpu's large step
paid fresh pages in 8 to 19 of 61 steps, 0 to 3 with these: packages/lltm_cpu/README.md).
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import importlib
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import asdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# glibc's largest mmap threshold (32 MiB), and a trim threshold no heap reaches.
ALLOCATOR = "glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=4294967296"
if __name__ == "__main__" and sys.platform == "linux" and "GLIBC_TUNABLES" not in os.environ:
    os.execve(sys.executable, [sys.executable, "-m", "benchmarks.run", *sys.argv[1:]],
              {**os.environ, "GLIBC_TUNABLES": ALLOCATOR})  # fmt: skip

FORMAT = 2  # 2: measurements carry clock, rounds and machine; "check" lines
# Events that set one value per package: the run's key, and the field holding the value.
_PER_PACKAGE = {"failure": ("failures", "error"), "skipped": ("skipped", "reason"),
                "missing": ("missing", "rows"), "build": ("builds", None),
                "check": ("checks", None)}  # fmt: skip


def read(path: Path) -> list[dict[str, Any]]:
    """The runs of a rows file, each as --output's dictionary plus complete (its end line was
    written), seconds, packages (to run), started (reached) and headline_rows; a last line
    cut mid-write is dropped."""
    runs: list[dict[str, Any]] = []
    lines = [text for text in path.read_text(encoding="utf-8").splitlines() if text.strip()]
    for number, text in enumerate(lines, 1):
        try:
            line = json.loads(text)
        except json.JSONDecodeError:
            if number < len(lines):
                raise
            break  # the process died while writing it
        kind, package = line.pop("kind", None), line.pop("package", None)
        if kind == "run":
            runs.append({"machine": {}, "torch": "?", "cuda": None, "quick": False,
                         "headline": False, "packages": [], **line, "measurements": [],
                         "goals": [], "notes": [], "started": [], "headline_rows": {},
                         "complete": False, "seconds": None,
                         **{key: {} for key, _ in _PER_PACKAGE.values()}})  # fmt: skip
            continue
        run = runs[-1]
        if package is not None and package not in run["started"]:
            run["started"].append(package)
        if kind == "package":
            run["goals"] += [{"package": package, **goal} for goal in line["goals"]]
            if line.get("headline"):
                run["headline_rows"][package] = [tuple(row) for row in line["headline"]]
        elif kind == "measurement":
            run["measurements"].append({"package": package, **line})
        elif kind == "note":
            run["notes"].append(f"{package}: {line['text']}")
        elif kind == "end":
            run.update(complete=True, seconds=line.get("seconds"))
            run["machine"]["load_after"] = line.get("load_after")
        else:
            key, name = _PER_PACKAGE[kind]
            run[key][package] = line[name] if name else line
    return runs


def discover() -> list[Path]:
    return sorted(ROOT.glob("packages/*/bench/bench_*.py"))


def load(path: Path):
    spec = importlib.util.spec_from_file_location(f"bench_{path.parent.parent.name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def headline_rows(module) -> list[tuple[str, str, str]]:
    """The module's HEADLINE rows, (op, case) on CUDA, as (op, case, device) keys."""
    return [(op, case, "cuda") for op, case in getattr(module, "HEADLINE", [])]


def build_times(package_root: Path) -> dict[str, float]:
    """Wall seconds of a clean `pip wheel` (fresh build folder) and of the same again (no-op),
    and the wheel's size."""
    with tempfile.TemporaryDirectory(prefix="bench-build-") as scratch:
        env = {**os.environ, "SHARED_BUILD_DIR": f"{scratch}/build"}
        command = [sys.executable, "-m", "pip", "wheel", "-q", "--no-build-isolation",
                   "--no-deps", "-w", f"{scratch}/wheels", str(package_root)]  # fmt: skip
        seconds = []
        for _ in range(2):
            start = time.perf_counter()
            subprocess.run(command, check=True, env=env, capture_output=True)
            seconds.append(round(time.perf_counter() - start, 2))
        (wheel,) = Path(scratch, "wheels").glob("*.whl")
        return {"clean_build_s": seconds[0], "noop_rebuild_s": seconds[1],
                "wheel_mb": round(wheel.stat().st_size / 1e6, 3)}  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add = parser.add_argument
    add("--output", type=Path, help="the JSON report, written at the end")
    add("--rows", type=Path, help="append every event to this JSON Lines file as it happens")
    add("--quick", action="store_true", help="fewer sizes, short timing: a smoke run")
    add("--headline", action="store_true", help="only HEADLINE rows, on CUDA, short timing")
    add("--plan", action="store_true", help="time nothing: list the rows a run would time")
    add("--min-run-time", type=float, help="seconds per implementation, clock and round")
    add("--only", action="append", default=[], help="package name (repeatable)")
    add("--no-build-times", action="store_true", help="skip the clean/no-op build timing")
    add("--device", action="append", default=[], choices=["cpu", "cuda"],
        help="time only on this device (repeatable; default: every one here; --headline: cuda)")  # fmt: skip
    add("--skipped", default="{}", help="JSON {package: reason} not built here")
    add("--as-is", action="store_true", help="leave free page reporting as is (machine.pages_held)")
    args = parser.parse_args()
    if not (args.output or args.rows or args.plan):
        parser.error("name where results go: --output, --rows, or both (or --plan)")
    if args.plan and args.output:
        parser.error("--plan times nothing: it writes no --output")

    import torch

    from benchmarks import machine
    from benchmarks.harness import Context

    started = time.perf_counter()
    skipped: dict[str, str] = json.loads(args.skipped)
    devices = args.device or (["cuda"] if args.headline else [])
    # Headline: three rounds of five 10 ms blocks per implementation and clock.
    min_run_time = args.min_run_time or (0.05 if args.headline else None)
    paths = [path for path in discover() if not args.only or path.parent.parent.name in args.only]
    rows_path = args.rows or Path(tempfile.mkdtemp(prefix="bench-")) / "rows.jsonl"
    rows_path.parent.mkdir(parents=True, exist_ok=True)
    # Line-buffered: each event is in the file once written, for a run killed midway.
    sink = open(rows_path, "a", buffering=1, encoding="utf-8")  # noqa: SIM115

    def emit(kind: str, **fields: Any) -> None:
        if not args.plan:
            sink.write(json.dumps({"kind": kind, **fields}) + "\n")

    if not (args.plan or args.as_is):  # this VM kind's host takes back pages freed 2 s ago
        held = contextlib.ExitStack()
        held.enter_context(machine.pages_held())
        atexit.register(held.close)  # at exit, Ctrl-C and SIGTERM too (SIGKILL leaves it held)
        signal.signal(signal.SIGTERM, lambda signum, _: sys.exit(128 + signum))
    emit("run", format=FORMAT, torch=torch.__version__, cuda=torch.version.cuda,
         machine=machine.describe(), quick=args.quick, headline=args.headline,
         argv=sys.argv[1:], packages=[path.parent.parent.name for path in paths])  # fmt: skip
    print(f"benchmarks under torch {torch.__version__}", flush=True)
    failed, planned = False, 0
    for path in paths:
        package = path.parent.parent.name
        if package in skipped:
            print(f"SKIPPED {package}: {skipped[package]}", flush=True)
            emit("skipped", package=package, reason=skipped[package])
            continue
        print(f"{package}:", flush=True)
        try:
            if not args.plan:  # a plan lists the rows of packages not built here too
                importlib.import_module(package)
            module = load(path)
            wanted = headline_rows(module) if args.headline else None
            emit("package", package=package, goals=[asdict(g) for g in module.GOALS],
                 headline=wanted)  # fmt: skip
            if wanted == []:
                print("  no headline rows", flush=True)
                continue
            if not args.plan:
                emit("check", package=package, **machine.quiet())
            ctx = Context(quick=args.quick, min_run_time=min_run_time, devices=devices,
                          only=wanted, plan=args.plan,
                          on_event=lambda kind, p=package, **f: emit(kind, package=p, **f))  # fmt: skip
            module.run(ctx)
        except Exception as error:  # one broken benchmark must not hide the others
            traceback.print_exc()
            failed = True
            emit("failure", package=package, error=f"{type(error).__name__}: {error}")
            continue
        for op, case, device in ctx.planned:
            print(f"  plan: {op:<26} {case:<28} {device}", flush=True)
        planned += len(ctx.planned)
        done = ctx.planned if args.plan else [(m.op, m.case, m.device) for m in ctx.measurements]
        missing = [key for key in wanted or [] if key not in done]
        if missing:
            failed = True
            print(f"  headline rows not {'planned' if args.plan else 'measured'}: {missing}")
            emit("missing", package=package, rows=missing)
        if not (args.no_build_times or args.headline or args.plan):
            times = build_times(path.parent.parent)
            print(f"  build times: {times}", flush=True)
            emit("build", package=package, **times)
    seconds = round(time.perf_counter() - started, 1)
    emit("end", seconds=seconds, load_after=round(os.getloadavg()[0], 2))
    sink.close()
    if args.plan:
        print(f"plan: {planned} rows", flush=True)
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(read(rows_path)[-1], indent=1) + "\n")
        print(f"wrote {args.output}", flush=True)
    if not args.rows:
        shutil.rmtree(rows_path.parent)
    print(f"benchmarks: {seconds} s", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

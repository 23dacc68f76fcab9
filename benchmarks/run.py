"""Run every package's benchmark in this Python environment and write one raw JSON file.

    python -m benchmarks.run --output benchmarks/results/raw/torch-2.13.0.json [--quick]
        [--only add_ext] [--no-build-times] [--skipped '{"lltm_cuda": "why"}']
    python -m benchmarks.run --headline --rows OUT/bench-rows.jsonl [--output OUT/bench.json]
    python -m benchmarks.run --headline --plan       # the rows it would time; no GPU needed

(from the repository's root, in an environment with the packages installed).

Called by `nox -s bench` once per torch version; benchmarks.report merges the files.
Benchmarks live in packages/<name>/bench/bench_<name>.py (see benchmarks/harness.py).
--headline times only each benchmark's HEADLINE rows, on CUDA, with short timing: the GPU
check's bench. --rows appends every row to a JSON Lines file the moment it is measured
(benchmarks/rows.py), so a run killed midway keeps what it measured. Exits 1 when a
package failed or a headline row was not measured.

On glibc the run re-executes itself with fixed malloc thresholds (ALLOCATOR), unless
GLIBC_TUNABLES is already set. By default glibc hands a heap's free top of more than twice
its largest freed block back to the kernel, and the next block that no free piece can hold
is page-faulted in afresh. Timed round-robin in one process, implementations fragment the
heap for each other. At lltm_cpu's large shape (2-core AMD EPYC, torches 2.13.0, 2.14.1
and 2.15.0, 2026-11-28; benchmarks/results/cpu/2026-11-28-epyc-lltm) its step's 15.7 MB
weight gradient came back as fresh pages (3,840 minor faults, some 5 ms on a 15-20 ms
step) in 8 to 19 of 61 steps when eager's steps ran between them, in 0 to 26 of 61 when it
ran alone (eager alone: 0 to 4), and in 0 to 3 with these thresholds.
What a row then measures is the order of the rows, not the code timed.
The report prints the setting beside each machine.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# glibc's largest mmap threshold (32 MiB), and a trim threshold no heap reaches: a freed
# block stays in the heap for the next call.
ALLOCATOR = "glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=4294967296"
if __name__ == "__main__" and sys.platform == "linux" and "GLIBC_TUNABLES" not in os.environ:
    os.execve(
        sys.executable,
        [sys.executable, "-m", "benchmarks.run", *sys.argv[1:]],
        {**os.environ, "GLIBC_TUNABLES": ALLOCATOR},
    )

from benchmarks import machine  # noqa: E402
from benchmarks.harness import Context  # noqa: E402
from benchmarks.rows import FORMAT as ROWS_FORMAT  # noqa: E402
from benchmarks.rows import RowsFile  # noqa: E402


def discover() -> list[Path]:
    return sorted(ROOT.glob("packages/*/bench/bench_*.py"))


def load(path: Path):
    spec = importlib.util.spec_from_file_location(f"bench_{path.parent.parent.name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build_times(package_root: Path) -> dict[str, float]:
    """Wall seconds of a clean `pip wheel` (fresh build folder) and of the same again (no-op),
    and the size of the wheel."""
    with tempfile.TemporaryDirectory(prefix="bench-build-") as scratch:
        env = {**os.environ, "SHARED_BUILD_DIR": str(Path(scratch) / "build")}
        command = [
            sys.executable, "-m", "pip", "wheel", "-q", "--no-build-isolation", "--no-deps",
            "-w", str(Path(scratch) / "wheels"), str(package_root),
        ]  # fmt: skip
        seconds = []
        for _ in range(2):
            start = time.perf_counter()
            subprocess.run(command, check=True, env=env, capture_output=True)
            seconds.append(time.perf_counter() - start)
        (wheel,) = (Path(scratch) / "wheels").glob("*.whl")
        size = wheel.stat().st_size
    return {
        "clean_build_s": round(seconds[0], 2),
        "noop_rebuild_s": round(seconds[1], 2),
        "wheel_mb": round(size / 1e6, 3),
    }


def headline_rows(module) -> list[tuple[str, str, str]]:
    """The module's HEADLINE rows, (op, case) on CUDA, as (op, case, device) keys."""
    return [(op, case, "cuda") for op, case in getattr(module, "HEADLINE", [])]


def _writers(rows: RowsFile | None, package: str):
    """The Context's on_record and on_note: each row and note to the rows file, if any."""
    if rows is None:
        return None, None
    return (
        lambda m: rows.write("measurement", package=package, **m.to_json()),
        lambda text: rows.write("note", package=package, text=text),
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--output", type=Path, help="the JSON report, written at the end")
    parser.add_argument(
        "--rows",
        type=Path,
        help="append every row to this JSON Lines file as it is measured (benchmarks/rows.py)",
    )
    parser.add_argument(
        "--quick", action="store_true", help="fewer sizes, short timing: a smoke run"
    )
    parser.add_argument(
        "--headline",
        action="store_true",
        help="only each benchmark's HEADLINE rows, on CUDA, with short timing (the GPU check's)",
    )
    parser.add_argument(
        "--plan",
        action="store_true",
        help="time nothing: list the rows a run would time (no device needed)",
    )
    parser.add_argument(
        "--min-run-time", type=float, help="seconds each implementation is timed per round"
    )
    parser.add_argument("--only", action="append", default=[], help="package name (repeatable)")
    parser.add_argument(
        "--no-build-times", action="store_true", help="skip the clean/no-op build timing"
    )
    parser.add_argument(
        "--device",
        action="append",
        default=[],
        choices=["cpu", "cuda"],
        help="time only on this device (repeatable; default: cpu and, if visible, cuda;"
        " with --headline: cuda)",
    )
    parser.add_argument("--skipped", default="{}", help="JSON {package: reason} not built here")
    args = parser.parse_args()
    if not (args.output or args.rows or args.plan):
        parser.error("name where results go: --output, --rows, or both (or --plan)")

    import torch

    started = time.perf_counter()
    skipped: dict[str, str] = json.loads(args.skipped)
    devices = args.device or (["cuda"] if args.headline else [])
    # Headline timing: three rounds of ten 10 ms blocks per implementation, enough for a
    # median and its spread on a GPU, short enough for every headline row in about a minute.
    min_run_time = args.min_run_time or (0.1 if args.headline else None)
    block_time = 0.01 if args.headline else None
    build_times_too = not (args.no_build_times or args.headline or args.plan)
    report = {
        "machine": machine.describe(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "quick": args.quick,
        "headline": args.headline,
        "measurements": [],
        "goals": [],
        "notes": [],
        "skipped": dict(skipped),
        "builds": {},
        "failures": {},
        "missing": {},
    }
    paths = [path for path in discover() if not args.only or path.parent.parent.name in args.only]
    rows = RowsFile(args.rows) if args.rows and not args.plan else None
    if rows:
        rows.write(
            "run",
            format=ROWS_FORMAT,
            torch=report["torch"],
            cuda=report["cuda"],
            machine=report["machine"],
            quick=args.quick,
            headline=args.headline,
            argv=sys.argv[1:],
            packages=[path.parent.parent.name for path in paths],
        )
    planned: list[tuple[str, str, str, str]] = []
    print(f"benchmarks under torch {torch.__version__} on {report['machine']['cpu']}", flush=True)
    for path in paths:
        package = path.parent.parent.name
        if package in skipped:
            print(f"SKIPPED {package}: {skipped[package]}", flush=True)
            if rows:
                rows.write("skipped", package=package, reason=skipped[package])
            continue
        print(f"{package}:", flush=True)
        try:
            if not args.plan:  # a plan lists the rows of packages not built here too
                importlib.import_module(package)
            module = load(path)
            wanted = headline_rows(module) if args.headline else None
            if rows:
                rows.write(
                    "package",
                    package=package,
                    goals=[g.to_json() for g in getattr(module, "GOALS", [])],
                    size_label=getattr(module, "SIZE_LABEL", "size"),
                    headline=wanted,
                )
            if wanted == []:
                print("  no headline rows", flush=True)
                continue
            on_record, on_note = _writers(rows, package)
            ctx = Context(
                quick=args.quick,
                min_run_time=min_run_time,
                devices=devices,
                block_time=block_time,
                only=wanted,
                plan=args.plan,
                on_record=on_record,
                on_note=on_note,
            )
            module.run(ctx)
        except Exception as error:  # one broken benchmark must not hide the others
            traceback.print_exc()
            report["failures"][package] = f"{type(error).__name__}: {error}"
            if rows:
                rows.write("failure", package=package, error=report["failures"][package])
            continue
        if args.plan:
            for op, case, device in ctx.planned:
                print(f"  plan: {op:<26} {case:<28} {device}", flush=True)
            planned += [(package, *key) for key in ctx.planned]
            done = ctx.planned
        else:
            done = [(m.op, m.case, m.device) for m in ctx.measurements]
        missing = [key for key in wanted or [] if key not in done]
        if missing:
            report["missing"][package] = missing
            print(f"  headline rows not {'planned' if args.plan else 'measured'}: {missing}")
            if rows:
                rows.write("missing", package=package, rows=missing)
        for m in ctx.measurements:
            report["measurements"].append({"package": package, **m.to_json()})
        report["goals"] += [
            {"package": package, **g.to_json()} for g in getattr(module, "GOALS", [])
        ]
        report["notes"] += [f"{package}: {n}" for n in ctx.notes]
        report.setdefault("size_labels", {})[package] = getattr(module, "SIZE_LABEL", "size")
        if build_times_too:
            report["builds"][package] = build_times(path.parent.parent)
            print(f"  build times: {report['builds'][package]}", flush=True)
            if rows:
                rows.write("build", package=package, **report["builds"][package])
    report["machine"]["load_after"] = machine.load_average()
    seconds = round(time.perf_counter() - started, 1)
    if rows:
        rows.write("end", seconds=seconds, load_after=report["machine"]["load_after"])
        rows.close()
    if args.plan:
        print(f"plan: {len(planned)} rows", flush=True)
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(report, indent=1) + "\n")
        print(f"wrote {args.output}", flush=True)
    print(f"benchmarks: {seconds} s", flush=True)
    return 1 if report["failures"] or report["missing"] else 0


if __name__ == "__main__":
    sys.exit(main())

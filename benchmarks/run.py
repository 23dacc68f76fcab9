"""Run every package's benchmark in this Python environment and write one raw JSON file.

    python benchmarks/run.py --output benchmarks/results/raw/torch-2.13.0.json [--quick]
        [--only add_ext] [--no-build-times] [--skipped '{"lltm_cuda": "why"}']

Called by `nox -s bench` once per torch version; benchmarks/report.py merges the files.
Benchmarks live in packages/<name>/bench/bench_<name>.py (see benchmarks/harness.py).
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
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import machine  # noqa: E402
from benchmarks.harness import Context  # noqa: E402


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


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--output", required=True, type=Path)
    parser.add_argument(
        "--quick", action="store_true", help="fewer sizes, short timing: a smoke run"
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
        help="time only on this device (repeatable; default: cpu and, if visible, cuda)",
    )
    parser.add_argument("--skipped", default="{}", help="JSON {package: reason} not built here")
    args = parser.parse_args()

    import torch

    skipped: dict[str, str] = json.loads(args.skipped)
    report = {
        "machine": machine.describe(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "quick": args.quick,
        "measurements": [],
        "goals": [],
        "notes": [],
        "skipped": dict(skipped),
        "builds": {},
        "failures": {},
    }
    print(f"benchmarks under torch {torch.__version__} on {report['machine']['cpu']}", flush=True)
    for path in discover():
        package = path.parent.parent.name
        if args.only and package not in args.only:
            continue
        if package in skipped:
            print(f"SKIPPED {package}: {skipped[package]}", flush=True)
            continue
        print(f"{package}:", flush=True)
        try:
            importlib.import_module(package)
            module = load(path)
            ctx = Context(quick=args.quick, devices=args.device)
            module.run(ctx)
        except Exception as error:  # one broken benchmark must not hide the others
            traceback.print_exc()
            report["failures"][package] = f"{type(error).__name__}: {error}"
            continue
        for m in ctx.measurements:
            report["measurements"].append({"package": package, **m.to_json()})
        report["goals"] += [
            {"package": package, **g.to_json()} for g in getattr(module, "GOALS", [])
        ]
        report["notes"] += [f"{package}: {n}" for n in ctx.notes]
        report.setdefault("size_labels", {})[package] = getattr(module, "SIZE_LABEL", "size")
        if not args.no_build_times:
            report["builds"][package] = build_times(path.parent.parent)
            print(f"  build times: {report['builds'][package]}", flush=True)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    report["machine"]["load_after"] = machine.load_average()
    args.output.write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {args.output}", flush=True)
    return 1 if report["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())

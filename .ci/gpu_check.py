"""The GPU check (docs/gpu-check.md): offline, on a machine with an NVIDIA GPU, with the
python3 that runs it and its torch (2.11 or newer): preflight, then build, test, shipped,
sanitize (gpu_sanitize.py) and bench, each ending by its deadline within the budget, every
log under $OUT (./gpu-check/ when unset) as it is written. Exit status: 0 every step ran in
full and passed; 1 a defect; 2 preflight failed; 3 no defect, but the deadline cut a step.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import gpu_results  # beside this file: on sys.path as the script's own folder
import gpu_run
from gpu_results import CUT, FAILED, PASSED
from gpu_run import (
    DURATIONS,
    LARGE,
    PIP_INSTALL,
    TEST_PATH,
    Check,
    Job,
    Lane,
    append,
    capture,
    cuda_test_files,
    is_cuda_package,
    judge,
    last_durations,
    lines_of,
    preflight,
    record,
    run_jobs,
    share_cores,
    step_seconds,
)
from gpu_sanitize import sanitizer_runs, sanitizer_seconds, step_sanitize  # noqa: F401 (by name)

ROOT = Path(__file__).resolve().parents[1]

STEPS = ("build", "test", "shipped", "sanitize", "bench")
# The wheels built the release way for this torch (nox -s gpu_wheels), and the packages whose
# CUDA tests the shipped step runs with them (issue 58: the LLTM's and the warp's kernels;
# the time left for it holds no more).
SHIPPED = ROOT / "gpu-wheels"
SHIPPED_TESTS = ("lltm_cuda", "warp_perspective")


OWN_LIBSTDCXX = (
    "import json, sys; from shared_build.knobs import loads_shared_libstdcxx as shared; "
    "print(json.dumps([p for p in sys.argv[1:] if shared(p) is False]))"
)


def step_build(check: Check) -> str:
    """Every package built side by side, then checked in a fresh process (installed_right)."""
    arch = check.env.get("TORCH_CUDA_ARCH_LIST", check.facts["arch"])
    cores = str((os.cpu_count() or 2) // len(check.packages) + 1)
    jobs = []
    for package in check.packages:
        cuda = "1" if is_cuda_package(package) and not check.simulate else "auto"
        command = [check.python, *PIP_INSTALL.split(), f"packages/{package}"]
        env = {"TORCH_CUDA_ARCH_LIST": arch, "MAX_JOBS": cores, "USE_CUDA": cuda}
        jobs.append(check.job(package, command, f"build-{package}.log", **env))
    run_jobs(jobs, check.deadline("build"), slots=len(jobs))
    bad, notes = [], []
    for job in jobs:
        if job.cut:
            bad.append(f"{job.name} (cut at the deadline)")
        elif job.rc != 0:
            bad.append(f"{job.name} ({gpu_results.describe_exit(job.rc)}, build-{job.name}.log)")
        else:
            problem, note, _ = installed_right(check, job.name)
            (bad if problem else notes).append(problem or note)
        check.note(f"link line of {job.name}: {link_line(job.log)}\n")
    times = ", ".join(f"{j.name} {j.seconds:.0f} s" for j in jobs)
    if bad:
        check.say(f"build: FAILED: {'; '.join(bad)} ({times})")
        return CUT if all("cut at" in b for b in bad) else FAILED
    for note in notes:
        check.say(f"build: {note}")
    check.say(f"build: ok for sm_{check.facts['arch'].replace('.', '')} ({times})")
    return PASSED


IMPORT_PROBE = (
    "import json, sys, {0} as p; "
    "print(json.dumps({{'file': p.__file__, 'info': p.BUILD_INFO}}, default=str))"
)


def installed_right(check: Check, package: str, log: str = "") -> tuple[str | None, str, dict]:
    """(problem, note, its BUILD_INFO): the package imports in a fresh process, with its CUDA
    kernels where it has CUDA sources, and every library of it loads the shared libstdc++."""
    probe = capture(
        check.python, "-X", "faulthandler", "-c", IMPORT_PROBE.format(package), env=check.env
    )
    log = log or f"build-{package}.log"
    append(check.out / log, f"\n== import check of {package}\n{probe.stdout}{probe.stderr}")
    if probe.returncode < 0 or probe.returncode > 128:
        exit_text = gpu_results.describe_exit(probe.returncode)
        return f"{package} crashed at import ({exit_text}; {log})", "", {}
    if probe.returncode != 0:
        return (
            f"{package} does not import: {(probe.stderr.strip().splitlines() or ['?'])[-1]}",
            "",
            {},
        )
    found = json.loads(probe.stdout.splitlines()[-1])
    info = found["info"]
    if is_cuda_package(package) and not check.simulate and not info.get("cuda"):
        return f"{package} was built without its CUDA kernels ({log})", "", info
    libraries = sorted(Path(found["file"]).parent.rglob("*.so"))
    own = json.loads(capture(check.python, "-c", OWN_LIBSTDCXX, *map(str, libraries)).stdout)
    own = [Path(lib).name for lib in own]
    if own:
        return f"{package}: {', '.join(own)} carry a libstdc++ of their own, not torch's", "", info
    return (
        None,
        (
            f"{package}: {info.get('compiler')}; nvcc {info.get('cuda')}; arch "
            f"{info.get('arch_list')}; {len(libraries)} libraries, each on the shared libstdc++; "
            f"from {info.get('git_commit') or '?'}{' (changed)' if info.get('git_dirty') else ''}"
        ),
        info,
    )


def link_line(log: Path) -> str:
    """The command that linked the package's first library, as pip -v logged it."""
    for line in lines_of(log):
        if " -shared" in line and re.search(r"-o \S+\.so\b", line):
            return line.strip()
    return "not found in the build log"


def test_lanes(
    packages: list[str],
    cores: int,
    durations: dict[str, float],
    counts: dict[str, int] | None = None,
    beside: bool = True,
) -> list[Lane]:
    """The suites side by side: each package's (its test battery's CUDA cases among them)
    and, ``beside``, the cross-package one and shared_build's, where they have CUDA tests;
    the cores shared by the time the last GPU run took, else by how many tests each collects
    (``counts``), else evenly."""
    folders = {p: f"packages/{p}/tests" for p in packages}
    folders |= {"repo": "tests", "shared_build": "shared_build/tests"} if beside else {}
    suites = {name: files for name, folder in folders.items() if (files := cuda_test_files(folder))}
    took = {
        n: sum(s for t, s in durations.items() if t.split("::")[0] in f) for n, f in suites.items()
    }
    if not all(took.values()) and counts:
        took = {n: float(counts.get(n, 1)) for n in suites}
    workers = share_cores(cores, took)
    return [Lane(n, files, "cuda", f"not {LARGE}", workers[n]) for n, files in suites.items()]


def count_tests(check: Check, lanes: list[Lane]) -> dict[str, int]:
    """How many tests each lane collects, all collected at once (a few seconds)."""
    env = {**check.env, "PYTHONPATH": TEST_PATH}
    collect = [check.python, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
    processes = {}
    for lane in lanes:
        processes[lane.name] = subprocess.Popen(
            [*collect, *lane.selection()], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True, env=env, cwd=ROOT,
        )  # fmt: skip
    return {
        name: max(1, sum("::" in line for line in process.communicate()[0].splitlines()))
        for name, process in processes.items()
    }


def large_lane(lanes: list[Lane]) -> Lane:
    files = [p for lane in lanes for p in lane.paths if LARGE in (ROOT / p).read_text()]
    return Lane("large", files, "cuda", LARGE)


def step_test(check: Check) -> str:
    """The suites side by side, then the tests past 2^31 elements alone."""
    jobs = run_suites(check, "test", check.packages)
    seconds: dict[str, float] = {}
    for job in jobs:
        seconds |= gpu_results.Run.read(check.out / f"test-{job.name}.jsonl").seconds
    ran = {path for job in jobs for path in job.command if path.endswith(".py")}  # test files
    record(check, seconds, lambda key: key.split("::")[0] in ran)  # their tests' last times
    status = judge(check, "test", jobs)
    crashed = [j for j in jobs if j.started and not j.cut and j.rc not in (0, 1)]
    if crashed:
        backtrace(check, crashed[0])
    return status


def run_suites(check: Check, step: str, packages: list[str], whole: bool = True) -> list[Job]:
    """The CUDA tests of the packages' suites side by side; ``whole``, with the cross-package
    one and shared_build's, then the tests past 2^31 elements alone."""
    durations, cores = last_durations(), os.cpu_count() or 2
    lanes = test_lanes(packages, cores, durations, beside=whole)
    if not durations:
        counts = count_tests(check, lanes)
        lanes = test_lanes(packages, cores, durations, counts, beside=whole)
        shares = ", ".join(
            f"{lane.name} {counts[lane.name]} tests, {lane.workers}" for lane in lanes
        )
        check.say(f"{step}: no GPU durations yet; workers by tests collected: {shares}")
    jobs = [lane.job(check, step) for lane in lanes]
    run_jobs(jobs, check.deadline(step), len(jobs))
    if whole:
        jobs.append(large_lane(lanes).job(check, step))
        run_jobs(jobs[-1:], check.deadline(step), 1)
    return jobs


def step_shipped(check: Check) -> str:
    """The wheels built the release way (SHIPPED), installed in a venv of their own (no build
    of this run in it), SHIPPED_TESTS' checked as the build step checks its own and carrying
    many archs and PTX; then their CUDA tests there (not those past 2^31 elements)."""
    wheels = sorted(SHIPPED.glob("*.whl"))
    names = [p for p in SHIPPED_TESTS if p in check.packages]
    if missing := [p for p in names if not any(w.name.startswith(f"{p}-") for w in wheels)]:
        check.say(f"shipped: NOT REACHED (no wheel of {', '.join(missing)} in gpu-wheels/: "
                  "nox -s gpu_wheels builds them)")  # fmt: skip
        return CUT
    if not names:
        check.say(
            f"shipped: nothing to run (its packages, {', '.join(SHIPPED_TESTS)}, are not this run's)"
        )
        return PASSED
    shipped = replace(check, venv=check.venv.with_name(check.venv.name + "-shipped"))
    gpu_run.make_venv(shipped)
    install = [shipped.python, *PIP_INSTALL.split(), str(ROOT / "shared_build"), *map(str, wheels)]
    installed = capture(*install, env=check.env)
    append(check.out / "shipped-install.log", installed.stdout + installed.stderr)
    if installed.returncode:
        check.say("shipped: FAILED: the wheels do not install (shipped-install.log)")
        return FAILED
    for name in names:
        problem, note, info = installed_right(shipped, name, "shipped-install.log")
        archs = (info.get("arch_list") or "").split(";")
        if problem or len(archs) < 2 or not archs[-1].endswith("+PTX"):
            check.say(f"shipped: FAILED: {problem or note} (not a release's many archs and PTX)")
            return FAILED
        runs = "its code" if check.facts.get("arch") in archs else "the PTX"
        check.say(f"shipped: {note}; this GPU runs {runs}")
    return judge(shipped, "shipped", run_suites(shipped, "shipped", names, whole=False))


def backtrace(check: Check, job: Job) -> None:
    """A native backtrace of the first crash, the crashing test rerun alone under cuda-gdb."""
    test = gpu_results.Run.read(check.out / f"test-{job.name}.jsonl").running_at_the_end()
    gdb = check.facts.get("cuda_gdb")
    later = check.steps[check.steps.index("test") + 1 :]  # its time, which it may take
    seconds = min(
        120, (check.deadline(later[0]) if later else check.start + check.budget) - time.monotonic()
    )
    if not (gdb and test and seconds > 20):
        check.say(
            f"test {job.name}: no native backtrace ({test}, cuda-gdb {gdb}, {seconds:.0f} s left)"
        )
        return
    command = [gdb, "-q", "-batch", "-ex", "run", "-ex", "bt 40", "--args", check.python, "-m",
               "pytest", test, "-x", "-q", "-p", "no:cacheprovider", "-p", "no:xdist"]  # fmt: skip
    gdb_job = Job("gdb", command, check.out / f"crash-{job.name}-gdb.txt", job.env)
    run_jobs([gdb_job], time.monotonic() + seconds, 1)
    frames = [
        ln[:160] for ln in lines_of(gdb_job.log) if ln.startswith("#") or "received signal" in ln
    ]
    shown = " | ".join(frames[:6])
    check.say(f"test {job.name}: native backtrace of {test} (crash-{job.name}-gdb.txt): {shown}")


def step_bench(check: Check) -> str:
    """The headline rows, each appended to bench-rows.jsonl as it is measured, then their
    goal verdicts (bench-report.md). A missed goal is information, not a defect."""
    rows = check.out / "bench-rows.jsonl"
    only = [a for p in check.packages for a in ("--only", p)]
    command = [check.python, "-m", "benchmarks.run", "--headline", "--rows", str(rows), *only]
    job = check.job("bench", command, "bench.log", PYTHONUNBUFFERED="1")
    run_jobs([job], check.deadline("bench"), 1)
    report = capture(
        check.python, "-m", "benchmarks.report", "--gpu-rows", str(rows), env=check.env
    )
    (check.out / "bench-report.md").write_text(report.stdout + report.stderr)
    records = [json.loads(line) for line in lines_of(rows) if line.strip().endswith("}")]
    measured = sum(r["kind"] == "measurement" for r in records)
    failures = [f"{r['package']}: {r['error']}" for r in records if r["kind"] == "failure"]
    missing = [f"{r['package']}: {len(r['rows'])} rows" for r in records if r["kind"] == "missing"]
    if failures or (not job.cut and job.rc != 0):
        named = "; ".join(failures + [f"not measured: {m}" for m in missing])
        named = named or (lines_of(job.log) or ["no output"])[-1]
        check.say(f"bench: FAILED ({gpu_results.describe_exit(job.rc)}; {measured} rows; {named})")
        return FAILED
    if job.cut:
        check.say(f"bench: NOT REACHED in full (cut by the deadline after {measured} rows)")
        return CUT
    check.say(f"bench: ok, {measured} CUDA rows (bench-rows.jsonl; goals in bench-report.md)")
    return PASSED


def plan(check: Check, cores: int = 0) -> list[str]:
    """What a run would do on ``cores`` cores (this machine's), with each test file's expected
    time and each step's expected end, from the last GPU run's times."""
    durations, cores = last_durations(), cores or os.cpu_count() or 2
    source = (
        os.path.relpath(DURATIONS, ROOT) if durations else "none: no GPU run has timed these tests"
    )
    lines = [f"gpu_check plan: budget {check.budget:.0f} s; expected times from {source}"]
    at, untimed = durations.get("step preflight", 0.0), []
    lines.append(f"  preflight: expected {at:.0f} s" if at else "  preflight: not timed apart")
    for step in check.steps:
        deadline, took = check.budget - check.reserve(step), durations.get(f"step {step}")
        if took is None:
            untimed.append(step)
        at += took or gpu_run.LEFT.get(step, 0)
        late = " - after its deadline" if at > deadline else ""
        expected = f"to end at {at:.0f} s{late}"
        expected = f"expected {took:.0f} s, {expected}" if took else f"not timed: {expected}"
        lines.append(f"  {step}: ends by {deadline:.0f} s; {expected}")
        if step == "build":
            cuda = " with USE_CUDA=1 (CUDA sources)"
            lines += [f"    {p}{cuda if is_cuda_package(p) else ''}" for p in check.packages]
        elif step == "test":
            lanes = test_lanes(check.packages, cores, durations)
            for lane in [*lanes, large_lane(lanes)]:
                lines.append(f"    {lane.name}: {lane.shown()}, {max(1, lane.workers)} process(es)")
                ours = {
                    t: s for t, s in durations.items() if (LARGE in t) == (lane.name == "large")
                }
                for path in lane.paths:
                    timed = [s for t, s in ours.items() if t.startswith(f"{path}::")]
                    expected = f"{sum(timed):.0f} s in {len(timed)} tests"
                    lines.append(f"      {path}: {expected if timed else 'not timed on a GPU yet'}")
        elif step == "sanitize":
            runs = sanitizer_runs(check, cores)
            took_each = sanitizer_seconds([lane for lane, _ in runs], durations)
            for lane, tool in runs:
                env = " ".join(w for w in lane.wrapper if "=" in w)
                shown = f"    {' '.join(tool)}: {' '.join(lane.paths)} {lane.shown()}"
                took = took_each[lane.name]
                extra = [
                    f"{lane.workers} process(es)",
                    f"{took:.0f} s of tests" if took else "not timed",
                ]
                extra += [env] if env else []
                extra += [f"reports allowed in {', '.join(lane.allowed)}"] if lane.allowed else []
                lines.append(f"{shown} ({'; '.join(extra)})")
        elif step == "shipped":
            wheels = [w.name for w in sorted(SHIPPED.glob("*.whl"))]
            lines.append(f"    {', '.join(wheels) or 'no wheels: nox -s gpu_wheels builds them'}")
        else:
            lines.append("    benchmarks.run --device cuda --headline, rows into bench-rows.jsonl")
    not_timed = f" (not timed, so their reserves: {', '.join(untimed)})" if untimed else ""
    lines.append(f"  total: expected {at:.0f} s of {check.budget:.0f} s{not_timed}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--budget", type=float, default=480.0, help="seconds in all (480)")
    parser.add_argument("--steps", default=",".join(STEPS), help=f"some of {','.join(STEPS)}")
    parser.add_argument("--packages", default="", help="comma-separated; default every package")
    parser.add_argument("--dry-run", action="store_true", help="print the plan, run nothing")
    parser.add_argument("--cores", type=int, default=0, help="the plan's cores (this machine's)")
    parser.add_argument("--simulate", action="store_true", help="rehearse on a CPU machine")
    parser.add_argument(
        "--hand-back",
        action="store_true",
        help="logs in a folder of their own; $OUT keeps summary.txt, verdict.txt, gpu-check.tar.gz",
    )
    args = parser.parse_args(argv)
    steps = args.steps.replace(",", " ").split()
    if unknown := [step for step in steps if step not in STEPS]:
        parser.error(f"unknown step {unknown[0]!r} (of {', '.join(STEPS)})")
    every = sorted(p.parent.name for p in (ROOT / "packages").glob("*/pyproject.toml"))
    packages = args.packages.replace(",", " ").split() or every
    out = Path(os.environ.get("OUT") or ROOT / "gpu-check")
    hand_back = None
    if args.hand_back:
        hand_back, out = out, Path("/tmp/gpu-check-logs")
        hand_back.mkdir(parents=True, exist_ok=True)
    check = Check(
        out, args.budget, [s for s in STEPS if s in steps], packages, args.simulate, hand_back
    )
    if args.dry_run:
        print("\n".join(plan(check, args.cores)))
        return 0
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.txt").write_text("")
    (out / "plan.txt").write_text("\n".join(plan(check)) + "\n")
    check.write_verdict(running="preflight")
    check.pack_every(15)
    try:
        return run_steps(check)
    finally:
        check.pack()


def run_steps(check: Check) -> int:
    out = check.out
    if not preflight(check):
        (out / "verdict.txt").write_text("FAILED: preflight (summary.txt, facts.txt)\n")
        return 2
    step_seconds(check, "preflight", time.monotonic() - check.start)
    for step in check.steps:
        if check.status.get("build", PASSED) != PASSED:
            check.say(f"{step}: NOT REACHED (the build did not pass: its libraries prove nothing)")
            check.status[step] = CUT
            continue
        if time.monotonic() >= check.deadline(step):
            check.say(f"{step}: NOT REACHED (its deadline passed before it could start)")
            check.status[step] = CUT
            continue
        check.write_verdict(running=step)
        started = time.monotonic()
        check.status[step] = globals()[f"step_{step}"](check)
        if time.monotonic() < check.deadline(step):  # a step cut short would read as fast
            step_seconds(check, step, time.monotonic() - started)
        check.write_verdict()
    code = check.write_verdict()
    check.say(f"done: {(out / 'verdict.txt').read_text().splitlines()[0]}")
    return code


if __name__ == "__main__":
    sys.exit(main())

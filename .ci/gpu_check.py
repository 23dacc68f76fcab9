"""The GPU check (docs/gpu-check.md): offline, on a machine with an NVIDIA GPU, with the
python3 that runs it and its torch (2.11 or newer): preflight, then build, test, shipped,
sanitize and bench, each ending by its deadline within the budget, every log under $OUT
(./gpu-check/ when unset) as it is written. Exit status: 0 every step ran in full and passed; 1 a defect; 2
preflight failed; 3 no defect, but the deadline cut a step.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import gpu_results  # beside this file: on sys.path as the script's own folder
import gpu_run
from gpu_results import CUT, FAILED, PASSED
from gpu_run import PIP_INSTALL, Check, Job, append, capture, lines_of, preflight, run_jobs

ROOT = Path(__file__).resolve().parents[1]

STEPS = ("build", "test", "shipped", "sanitize", "bench")
# The name part of the tests that need most of a GPU's memory: they run alone, after the suites.
LARGE = "2_to_the_31"
# CUDA-graph captures need the caching allocator, which the sanitizer runs turn off.
GRAPH_CAPTURE = "graph_capture"
# Not sanitized: checks that re-run, through torch's machinery, samples the other tests drive
# through our kernels, each many times slower under the tool; the test step runs them.
NOT_SANITIZED = ("gradcheck", "opcheck", "threads", "compile", "export", "aoti", "torchscript")
# A cuda marker on a test, a module or a parameter, or the test battery (its CUDA cases are).
CUDA_TESTS = re.compile(
    r"^\s*@pytest\.mark\.cuda\b|^pytestmark = .*pytest\.mark\.cuda|marks=pytest\.mark\.cuda"
    r"|^test_battery = battery\(",
    re.M,
)
# What initcheck cannot judge in a package's tests (docs/gpu-check.md; memcheck runs them all).
# "dtypes": left out, for the forward kernel reads cuBLAS's outputs, whose float16 and bfloat16
# writes initcheck does not see. "apart": tests run under initcheck on their own, in every
# dtype (no GEMM writes what their kernels read), where reports may be in those kernels of
# torch's only: its multi-block column sums read staging slots no block wrote.
INITCHECK_BLIND = {
    "lltm_cuda": {"dtypes": ("float16", "bfloat16"), "apart": ("grid_stride", ("reduce_kernel",))},
}
# The probes of those findings (.ci/gpu_initcheck_probe.py), with no kernel of ours: the kernel
# of torch's their reports must all be in, and how many there were on the GPU and torch each
# was measured with. Another count there, or a report elsewhere, fails the step: the grounds
# of INITCHECK_BLIND changed. reduce repeats the grid-stride test's sums (7,680 + 0 + 18).
PROBES = {
    "cublas": ("direct_copy_kernel_cuda", {("NVIDIA H200", "2.11.0+cu130"): 5280}),
    "reduce": ("reduce_kernel", {("NVIDIA H200", "2.11.0+cu130"): 7698}),
}
# Reports a sanitizer prints (its default, 100, named one kernel of 13,458 reports): enough to
# count every report by kernel, which a run whose reports may be in torch's kernels needs.
PRINT_LIMIT = 200_000
DURATIONS = ROOT / "benchmarks" / "results" / "gpu" / "durations.json"
# The CUDA packages' wheels built the release way for this torch (nox -s gpu_wheels).
SHIPPED = ROOT / "gpu-wheels"
TEST_PATH = str(ROOT / ".ci")  # where a test run's python finds the results plugin


def last_durations() -> dict[str, float]:
    """Seconds in the last GPU run (DURATIONS), where one timed it: each test's (its id),
    each test's under each sanitizer run ("<run> <id>") and each step's ("step <step>")."""
    return json.loads(DURATIONS.read_text()) if DURATIONS.exists() else {}


def record(check: Check, seconds: dict[str, float], replaced: Callable[[str], bool]) -> None:
    """``seconds`` into this run's durations.json (the last run's, until this one writes),
    in place of the entries ``replaced`` picks."""
    path = check.out / "durations.json"
    known = json.loads(path.read_text()) if path.exists() else last_durations()
    known = {k: v for k, v in known.items() if not replaced(k)} | seconds
    path.write_text(json.dumps(known, indent=0, sort_keys=True))


def step_seconds(check: Check, step: str, seconds: float) -> None:
    record(check, {f"step {step}": round(seconds, 1)}, lambda key: False)


def share_cores(cores: int, took: dict[str, float]) -> dict[str, int]:
    """Workers per run: the cores in proportion to the seconds each took, at least one."""
    total = sum(took.values())
    return {
        name: max(1, round(cores * s / total) if total else cores // len(took))
        for name, s in took.items()
    }


def is_cuda_package(package: str) -> bool:
    return any((ROOT / "packages" / package / "csrc").rglob("*.cu"))


def shares_memory(package: str) -> bool:
    """Whether its kernels use shared memory or barriers: racecheck's and synccheck's subject."""
    sources = (ROOT / "packages" / package / "csrc").rglob("*.cu")
    return any(
        re.search(r"__shared__|__syncthreads|cooperative_groups", f.read_text()) for f in sources
    )


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
            problem, note = installed_right(check, job.name)
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


def installed_right(check: Check, package: str, log: str = "") -> tuple[str | None, str]:
    """(problem, note): the package imports in a fresh process, with its CUDA kernels where
    it has CUDA sources, and every library of it loads the shared libstdc++."""
    probe = capture(
        check.python, "-X", "faulthandler", "-c", IMPORT_PROBE.format(package), env=check.env
    )
    log = log or f"build-{package}.log"
    append(check.out / log, f"\n== import check of {package}\n{probe.stdout}{probe.stderr}")
    if probe.returncode < 0 or probe.returncode > 128:
        exit_text = gpu_results.describe_exit(probe.returncode)
        return f"{package} crashed at import ({exit_text}; {log})", ""
    if probe.returncode != 0:
        return f"{package} does not import: {(probe.stderr.strip().splitlines() or ['?'])[-1]}", ""
    found = json.loads(probe.stdout.splitlines()[-1])
    info = found["info"]
    if is_cuda_package(package) and not check.simulate and not info.get("cuda"):
        return f"{package} was built without its CUDA kernels ({log})", ""
    libraries = sorted(Path(found["file"]).parent.rglob("*.so"))
    own = json.loads(capture(check.python, "-c", OWN_LIBSTDCXX, *map(str, libraries)).stdout)
    own = [Path(lib).name for lib in own]
    if own:
        return f"{package}: {', '.join(own)} carry a libstdc++ of their own, not torch's", ""
    return None, (
        f"{package}: {info.get('compiler')}; nvcc {info.get('cuda')}; arch "
        f"{info.get('arch_list')}; {len(libraries)} libraries, each on the shared libstdc++"
    )


def link_line(log: Path) -> str:
    """The command that linked the package's first library, as pip -v logged it."""
    for line in lines_of(log):
        if " -shared" in line and re.search(r"-o \S+\.so\b", line):
            return line.strip()
    return "not found in the build log"


@dataclass
class Lane:
    """One pytest run: test files, marker and keyword expressions, xdist workers."""

    name: str
    paths: list[str]
    marks: str
    keyword: str
    workers: int = 0  # 0: one process
    wrapper: list[str] = field(default_factory=list)  # e.g. compute-sanitizer and its flags
    allowed: tuple[str, ...] = ()  # kernels of torch's that a sanitizer may report in

    def selection(self) -> list[str]:
        return [*self.paths, "-m", self.marks, "-k", self.keyword]

    def shown(self) -> str:
        return f"-m '{self.marks}' -k '{self.keyword}'"

    def job(self, check: Check, prefix: str, **env: str) -> Job:
        """The run, its results into {prefix}-{name}.jsonl, its log and JUnit XML beside."""
        xdist = f"-n {self.workers} --dist load --max-worker-restart 2" if self.workers else ""
        command = [
            *self.wrapper, check.python, "-X", "faulthandler", "-m", "pytest", *self.selection(),
            "-q", "-p", "no:cacheprovider", "-p", "gpu_results",
            "--junitxml", str(check.out / f"{prefix}-{self.name}.xml"), *xdist.split(),
        ]  # fmt: skip
        env |= {
            "GPU_RESULTS": str(check.out / f"{prefix}-{self.name}.jsonl"),
            "PYTHONPATH": TEST_PATH,
            "PYTHONUNBUFFERED": "1",
            # Inductor's compile workers, one per core per test process, would swamp the cores.
            "TORCHINDUCTOR_COMPILE_THREADS": "1",
        }
        return check.job(self.name, command, f"{prefix}-{self.name}.log", **env)


def cuda_test_files(folder: str) -> list[str]:
    """The test files under ``folder`` with CUDA-marked tests. Only those are collected: a
    file of CPU tests that skips itself for want of a module the GPU machine need not have
    (networkx, nox) would read as a forbidden skip."""
    files = sorted((ROOT / folder).rglob("test_*.py"))
    return [str(f.relative_to(ROOT)) for f in files if CUDA_TESTS.search(f.read_text())]


def test_lanes(
    packages: list[str],
    cores: int,
    durations: dict[str, float],
    counts: dict[str, int] | None = None,
) -> list[Lane]:
    """The suites side by side: each package's (its test battery's CUDA cases among them),
    the cross-package one and shared_build's, where they have CUDA tests; the cores shared
    by the time the last GPU run took, else by how many tests each collects (``counts``),
    else evenly."""
    folders = {p: f"packages/{p}/tests" for p in packages}
    folders |= {"repo": "tests", "shared_build": "shared_build/tests"}
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


def judge(check: Check, prefix: str, jobs: list[Job]) -> str:
    """One summary line per run, and the step's status."""
    statuses = []
    memory = check.facts.get("gpu_memory_gb")
    for job in jobs:
        run = gpu_results.Run.read(check.out / f"{prefix}-{job.name}.jsonl")
        line, status = gpu_results.verdict(
            f"{prefix} {job.name}", run, job.rc, cut=job.cut, gpu_memory_gb=memory
        )
        if not job.started:
            line = f"{prefix} {job.name}: NOT REACHED (not started before the deadline)"
        check.say(line)
        statuses.append(status)
    return FAILED if FAILED in statuses else CUT if CUT in statuses else PASSED


def step_test(check: Check) -> str:
    """The suites side by side, then the tests past 2^31 elements alone."""
    jobs = run_suites(check, "test", check.packages)
    seconds: dict[str, float] = {}
    for job in jobs:
        seconds |= gpu_results.Run.read(check.out / f"test-{job.name}.jsonl").seconds
    record(check, seconds, lambda key: "/" in key.split(" ")[0])  # a test's id, no prefix
    status = judge(check, "test", jobs)
    crashed = [j for j in jobs if j.started and not j.cut and j.rc not in (0, 1)]
    if crashed:
        backtrace(check, crashed[0])
    return status


def run_suites(check: Check, step: str, packages: list[str], only: bool = False) -> list[Job]:
    """The CUDA tests of the packages' suites side by side (with the cross-package one and
    shared_build's unless ``only``), then those past 2^31 elements alone."""
    durations, cores = last_durations(), os.cpu_count() or 2
    pick = (lambda lanes: [lane for lane in lanes if lane.name in packages]) if only else list
    lanes = pick(test_lanes(packages, cores, durations))
    if not durations:
        counts = count_tests(check, lanes)
        lanes = pick(test_lanes(packages, cores, durations, counts))
        shares = ", ".join(
            f"{lane.name} {counts[lane.name]} tests, {lane.workers}" for lane in lanes
        )
        check.say(f"{step}: no GPU durations yet; workers by tests collected: {shares}")
    jobs = [lane.job(check, step) for lane in lanes]
    run_jobs(jobs, check.deadline(step), len(jobs))
    jobs.append(large_lane(lanes).job(check, step))
    run_jobs(jobs[-1:], check.deadline(step), 1)
    return jobs


def step_shipped(check: Check) -> str:
    """The wheels built the release way (SHIPPED), installed in a venv of their own (no build
    of this run in it), each CUDA package's checked as the build step checks its own and
    carrying many archs and PTX; then those packages' CUDA tests there."""
    wheels = sorted(SHIPPED.glob("*.whl"))
    found = {w.name.split("-")[0] for w in wheels}
    names = [p for p in check.packages if is_cuda_package(p) and p in found]
    if not names:
        cuda = ", ".join(filter(is_cuda_package, check.packages)) or "none of these packages"
        check.say(f"shipped: NOT REACHED (no wheel of {cuda} in gpu-wheels/: "
                  "nox -s gpu_wheels builds them)")  # fmt: skip
        return CUT
    shipped = replace(check, venv=check.venv.with_name(check.venv.name + "-shipped"))
    gpu_run.make_venv(shipped)
    install = [shipped.python, *PIP_INSTALL.split(), str(ROOT / "shared_build"), *map(str, wheels)]
    installed = capture(*install, env=check.env)
    append(check.out / "shipped-install.log", installed.stdout + installed.stderr)
    if installed.returncode:
        check.say("shipped: FAILED: the wheels do not install (shipped-install.log)")
        return FAILED
    for name in names:
        problem, note = installed_right(shipped, name, "shipped-install.log")
        archs = (re.findall(r"arch (\S+);", note) or [""])[0].split(";")
        if problem or len(archs) < 2 or not archs[-1].endswith("+PTX"):
            check.say(f"shipped: FAILED: {problem or note} (not a release's many archs and PTX)")
            return FAILED
        runs = "its code" if check.facts.get("arch") in archs else "the PTX"
        check.say(f"shipped: {note}; this GPU runs {runs}")
    return judge(shipped, "shipped", run_suites(shipped, "shipped", names, only=True))


def backtrace(check: Check, job: Job) -> None:
    """A native backtrace of the first crash, the crashing test rerun alone under cuda-gdb."""
    test = gpu_results.Run.read(check.out / f"test-{job.name}.jsonl").running_at_the_end()
    gdb = check.facts.get("cuda_gdb")
    seconds = min(120, check.deadline("sanitize") - time.monotonic())
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


def bulk_copy(check: Check) -> list[str]:
    """initcheck's --check-bulk-copy, where this compute-sanitizer has it."""
    return ["--check-bulk-copy", "yes"] if check.facts.get("bulk_copy") else []


def sanitizer_runs(check: Check, cores: int = 0) -> list[tuple[Lane, list[str]]]:
    """(lane, tool arguments): memcheck and initcheck over the CUDA tests of each package
    with CUDA sources (its test battery's property tests draw inputs for every kernel);
    racecheck and synccheck over the packages whose kernels share memory. The cores are
    shared by the seconds each run's tests took in the last GPU run (a run not timed yet is
    given the mean)."""
    runs = []
    for name in filter(is_cuda_package, check.packages):
        files = cuda_test_files(f"packages/{name}/tests")
        tools = [["memcheck"], ["initcheck", *bulk_copy(check)]]
        for tool in tools + ([["racecheck"], ["synccheck"]] if shares_memory(name) else []):
            blind = INITCHECK_BLIND.get(name, {}) if tool[0] == "initcheck" else {}
            dtypes, (apart, allowed) = blind.get("dtypes", ()), blind.get("apart", ("", ()))
            left_out = (GRAPH_CAPTURE, LARGE, *NOT_SANITIZED)
            keyword = " and ".join(f"not {k}" for k in (*left_out, *dtypes, *filter(None, [apart])))
            lane = Lane(f"{name}-{tool[0]}", files, "cuda and not slow", keyword, workers=3)
            if dtypes:
                lane.wrapper = ["env", f"SHARED_BUILD_BATTERY_SKIP_DTYPES={','.join(dtypes)}"]
            runs.append((lane, tool))
            if apart:
                keyword = " and ".join([apart, *(f"not {k}" for k in left_out)])
                runs.append((Lane(f"{lane.name}-{apart}", files, "cuda and not slow", keyword,
                                  allowed=allowed), tool))  # fmt: skip
    took = sanitizer_seconds([lane for lane, _ in runs], last_durations())
    timed = [s for s in took.values() if s]
    took = {name: s or (sum(timed) / len(timed) if timed else 0.0) for name, s in took.items()}
    workers = share_cores(max(cores or os.cpu_count() or 2, len(took)), took) if took else {}
    for lane, _ in runs:
        lane.workers = workers.get(lane.name, 1)
    return runs


def sanitizer_seconds(lanes: list[Lane], durations: dict[str, float]) -> dict[str, float]:
    """Each sanitizer run's tests' seconds in the last GPU run."""
    return {
        lane.name: sum(s for key, s in durations.items() if key.startswith(f"{lane.name} "))
        for lane in lanes
    }


def step_sanitize(check: Check) -> str:
    """Every sanitizer run at once, beside the initcheck probes; a report fails the step
    unless its run allows that kernel of torch's, and a probe that finds what it did not
    expect fails it too."""
    runs, jobs = sanitizer_runs(check), []
    for lane, tool in runs:
        log = check.out / f"sanitize-{lane.name}.sanitizer.log"
        # Device frames only: a host backtrace through torch per report costs seconds. A run
        # whose reports may be torch's is judged by its log alone, kernel by kernel.
        exit_code = [] if lane.allowed else ["--error-exitcode", "99"]
        lane.wrapper += [check.facts["sanitizer"], "--tool", *tool, *exit_code, *print_limit(check),
                        "--target-processes", "all", "--show-backtrace", "device",
                        "--log-file", str(log)]  # fmt: skip
        # No caching allocator: each tensor its own allocation, so a read past its end is caught.
        jobs.append(lane.job(check, "sanitize", PYTORCH_NO_CUDA_MEMORY_CACHING="1"))
    probes = initcheck_probes(check)
    # All at once, the probes first (a few seconds each).
    run_jobs(probes + jobs, check.deadline("sanitize"), len(probes) + len(jobs))
    statuses = [judge(check, "sanitize", jobs)]
    for job in jobs:
        run = gpu_results.Run.read(check.out / f"sanitize-{job.name}.jsonl")
        seconds = {f"{job.name} {test}": s for test, s in run.seconds.items()}
        record(check, seconds, lambda key, name=job.name: key.startswith(f"{name} "))
    for (lane, _), job in zip(runs, jobs, strict=True):
        log = check.out / f"sanitize-{job.name}.sanitizer.log"
        line, failed = sanitizer_verdict(log, lane.allowed, job.rc == 99)
        if line:
            check.say(f"sanitize {job.name}: {line} ({log.name})")
        statuses.append(FAILED if failed else PASSED)
    for probe in probes:
        log = check.out / f"{probe.name}.sanitizer.log"
        line, status = probe_verdict(check, probe, log)
        check.say(f"sanitize {probe.name}: {line} ({log.name})")
        statuses.append(status)
    return FAILED if FAILED in statuses else CUT if CUT in statuses else PASSED


def print_limit(check: Check) -> list[str]:
    return ["--print-limit", str(PRINT_LIMIT)] if check.facts.get("print_limit") else []


def kernel_counts(log: Path) -> Counter[str]:
    """How many of a sanitizer log's printed reports are in each kernel: a report's last frame
    (its "at" line, then with --show-backtrace device its "Device Frame:" lines, the kernel
    last)."""
    counts: Counter[str] = Counter()
    kernel = None  # the last frame of the report being read; None outside one
    for line in [*lines_of(log), "========= ERROR SUMMARY"]:  # the end of a cut log too
        if REPORT.match(line) or "ERROR SUMMARY" in line:
            if kernel is not None:
                counts[kernel or "no kernel named"] += 1
            kernel = "" if REPORT.match(line) else None
        elif kernel is not None and (frame := FRAME.match(line)):
            kernel = frame.group(1)
    return counts


def named(counts: Counter[str]) -> str:
    return "; ".join(f"{n} in {kernel[:100]}" for kernel, n in counts.most_common(6))


def sanitizer_verdict(log: Path, allowed: tuple[str, ...], exit_99: bool) -> tuple[str, bool]:
    """(the summary line, failed) of a sanitizer run: no report, or reports only in the
    kernels of torch's ``allowed`` (every one printed and counted)."""
    errors, counts = sanitizer_errors(log), kernel_counts(log)
    unprinted = errors - sum(counts.values())
    theirs = [k for k in counts if any(a in k for a in allowed)]
    if not errors and not exit_99:
        return "", False
    if allowed and not unprinted and len(theirs) == len(counts):
        return f"{errors} reports, all in torch's {', '.join(allowed)} (its probe's finding)", False
    more = f"; {unprinted} not printed" if unprinted > 0 else ""
    return f"FAILED: {errors} sanitizer errors: {named(counts) or 'no kernel named'}{more}", True


def probe_verdict(check: Check, probe: Job, log: Path) -> tuple[str, str]:
    """A probe's summary line and status: its reports all in its kernel of torch's, and as
    many as PROBES says where that GPU and torch were measured."""
    kernel, measured = PROBES[probe.command[-1]]
    errors, counts = sanitizer_errors(log), kernel_counts(log)
    gpu = check.facts.get("gpu", "").rsplit(" sm_", 1)[0]
    torch = check.facts.get("torch", "").split(" ")[0]
    expected = measured.get((gpu, torch))
    elsewhere = Counter({k: n for k, n in counts.items() if kernel not in k})
    unprinted = errors - sum(counts.values())
    if probe.cut or not probe.started:
        return f"NOT REACHED in full ({errors} reports before the cut)", CUT
    problems = [named(elsewhere)] if elsewhere else []
    problems += [f"{unprinted} reports not printed"] if unprinted > 0 else []
    problems += [f"it exited {probe.rc} ({probe.log.name})"] if probe.rc != 0 else []
    if problems:
        return f"FAILED: {'; '.join(problems)}", FAILED
    found = f"{errors} reports, all in torch's {kernel}"
    if expected is None:
        return f"{found}; never measured on {gpu} with torch {torch}: add it to PROBES", PASSED
    if errors != expected:
        return (f"FAILED: {found}, not the {expected} measured on {gpu} with torch {torch}: "
                "look at what INITCHECK_BLIND leaves out again"), FAILED  # fmt: skip
    return f"{found}, as measured: INITCHECK_BLIND holds", PASSED


def initcheck_probes(check: Check) -> list[Job]:
    """What initcheck flags in torch's own kernels (.ci/gpu_initcheck_probe.py says why):
    cuBLAS's writes, with and without --check-bulk-copy, and torch's multi-block sums."""
    bulk = bulk_copy(check)
    probes = []
    for part, flags in [("cublas", []), *([("cublas", bulk)] if bulk else []), ("reduce", [])]:
        name = f"{part}-probe" + ("-bulk-copy" if flags else "")
        log = check.out / f"{name}.sanitizer.log"
        command = [check.facts["sanitizer"], "--tool", "initcheck", *flags, *print_limit(check),
                   "--show-backtrace", "device", "--log-file", str(log), check.python,
                   str(ROOT / ".ci" / "gpu_initcheck_probe.py"), part]  # fmt: skip
        probes.append(check.job(name, command, f"{name}.log", PYTORCH_NO_CUDA_MEMORY_CACHING="1"))
    return probes


# A frame of a report: "at <function>+0x.. in <file>:<line>", or "Device Frame: ..." after it.
FRAME = re.compile(r"^=+\s+(?:at|Device Frame:) (.+?)(?:\+0x[0-9a-f]+)?(?: in \S+)?$")
# A report's first line, per tool (memcheck, initcheck, racecheck, synccheck, API errors).
REPORT = re.compile(
    r"^=+ +(Invalid |Uninitialized |Error: |Barrier error|Program hit |Malloc/Free error|Leaked )"
)


def sanitizer_errors(log: Path) -> int:
    """The tool's ERROR SUMMARY; where the run was cut before it, the reports it printed."""
    lines = lines_of(log)
    # Past the print limit a second "ERROR SUMMARY: N errors were not printed" line follows.
    summaries = [
        int(m.group(1)) for ln in lines if (m := re.search(r"ERROR SUMMARY: (\d+) errors?$", ln))
    ]
    return sum(summaries) if summaries else sum(bool(REPORT.match(ln)) for ln in lines)


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
                extra = [f"{lane.workers} process(es)", f"{took_each[lane.name]:.0f} s of tests"]
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
        if check.status[step] != CUT:  # a step cut short would read as a fast one
            step_seconds(check, step, time.monotonic() - started)
        check.write_verdict()
    code = check.write_verdict()
    check.say(f"done: {(out / 'verdict.txt').read_text().splitlines()[0]}")
    return code


if __name__ == "__main__":
    sys.exit(main())

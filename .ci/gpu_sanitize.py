"""The GPU check's sanitize step (gpu_check.py, docs/gpu-check.md): compute-sanitizer's tools
over each CUDA package's tests side by side, the initcheck probes of torch's own kernels, and
the verdicts: every report counted by the kernel it is in."""

from __future__ import annotations

import os
import re
from collections import Counter
from pathlib import Path

import gpu_results
from gpu_results import CUT, FAILED, PASSED
from gpu_run import (
    LARGE,
    ROOT,
    Check,
    Job,
    Lane,
    cuda_test_files,
    is_cuda_package,
    judge,
    last_durations,
    lines_of,
    record,
    run_jobs,
    share_cores,
    shares_memory,
)

# CUDA-graph captures need the caching allocator, which the sanitizer runs turn off.
GRAPH_CAPTURE = "graph_capture"
# Not sanitized: checks that re-run, through torch's machinery, samples the other tests drive
# through our kernels, each many times slower under the tool; the test step runs them.
NOT_SANITIZED = ("gradcheck", "opcheck", "threads", "compile", "export", "aoti", "torchscript")
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
# of INITCHECK_BLIND changed. "N?": predicted, not yet measured by the probe (reduce repeats
# the grid-stride test's sums, which gave 7,680 + 0 + 18), so a count line, not a verdict.
PROBES = {
    "cublas": ("direct_copy_kernel_cuda", {("NVIDIA H200", "2.11.0+cu130"): 5280}),
    "reduce": ("reduce_kernel", {("NVIDIA H200", "2.11.0+cu130"): "7698?"}),
    # Information: addmm off cuBLASLt (NO_LT), where torch copies the bias into the output
    # before cuBLAS adds the product: if initcheck then reports none, the float16 and
    # bfloat16 tests can come back to lltm_cuda's initcheck run under NO_LT.
    "cublas_no_lt": ("", {}),
}
NO_LT = {"DISABLE_ADDMM_CUDA_LT": "1", "TORCH_BLAS_PREFER_CUBLASLT": "0"}
# Reports a sanitizer prints (its default, 100, named one kernel of 13,458 reports): enough to
# count every report by kernel, which a run whose reports may be in torch's kernels needs.
PRINT_LIMIT = 200_000


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
            lane = Lane(f"{name}-{tool[0]}", files, "cuda and not slow", keyword)
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
    found = f"{errors} reports" + (f", all in torch's {kernel}" if kernel else "")
    if expected is None:
        return f"{found}; never measured on {gpu} with torch {torch}: add it to PROBES", PASSED
    if isinstance(expected, str):  # "N?": what the tests gave, the probe never ran there
        agree = "as" if str(errors) == expected[:-1] else f"not {expected[:-1]} as"
        return f"{found}, {agree} predicted: record it in PROBES, measured", PASSED
    if errors != expected:
        return (f"FAILED: {found}, not the {expected} measured on {gpu} with torch {torch}: "
                "look at what INITCHECK_BLIND leaves out again"), FAILED  # fmt: skip
    return f"{found}, as measured: INITCHECK_BLIND holds", PASSED


def initcheck_probes(check: Check) -> list[Job]:
    """What initcheck flags in torch's own kernels (.ci/gpu_initcheck_probe.py says why):
    cuBLAS's writes, with and without --check-bulk-copy and off cuBLASLt, and torch's
    multi-block sums."""
    bulk = bulk_copy(check)
    probes = []
    for part, flags in [("cublas", []), *([("cublas", bulk)] if bulk else []), ("reduce", []),
                        ("cublas_no_lt", [])]:  # fmt: skip
        name = f"{part}-probe" + ("-bulk-copy" if flags else "")
        env = NO_LT if part == "cublas_no_lt" else {}
        log = check.out / f"{name}.sanitizer.log"
        command = [check.facts["sanitizer"], "--tool", "initcheck", *flags, *print_limit(check),
                   "--show-backtrace", "device", "--log-file", str(log), check.python,
                   str(ROOT / ".ci" / "gpu_initcheck_probe.py"), part]  # fmt: skip
        probes.append(
            check.job(name, command, f"{name}.log", PYTORCH_NO_CUDA_MEMORY_CACHING="1", **env)
        )
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

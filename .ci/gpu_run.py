"""The GPU check's run (gpu_check.py): its state, deadlines, verdict and packed logs (Check),
its processes (Job, run_jobs), each ended by its deadline, the preflight, and what its steps
share: the test runs (Lane), their judgement, and the last GPU run's times."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import gpu_results
from gpu_results import CUT, FAILED, PASSED

ROOT = Path(__file__).resolve().parents[1]
PIP_INSTALL = "-m pip install -v --no-index --no-build-isolation --no-deps --force-reinstall"

# A step ends by the budget less these seconds for the end and for each chosen step after it.
LEFT = {"test": 130, "shipped": 90, "sanitize": 85, "bench": 77, "end": 8}


def append(path: Path, text: str) -> None:
    """``text`` added to a log, as it happens."""
    with open(path, "a", encoding="utf-8") as file:
        file.write(text)


@dataclass
class Check:
    out: Path
    budget: float
    steps: list[str]
    packages: list[str]
    simulate: bool = False  # a CPU machine rehearsing preflight and build
    hand_back: Path | None = None  # where summary, verdict and the packed logs go (--hand-back)
    venv: Path = Path(os.environ.get("GPU_VENV", "/tmp/gpu-check-venv"))
    start: float = field(default_factory=time.monotonic)
    env: dict[str, str] = field(default_factory=lambda: dict(os.environ))
    facts: dict = field(default_factory=dict)
    status: dict[str, str] = field(default_factory=dict)  # step -> PASSED, FAILED or CUT

    @property
    def python(self) -> str:
        return str(self.venv / "bin" / "python")

    def reserve(self, step: str) -> float:
        """Seconds before the end of the budget by which ``step`` must end."""
        later = self.steps[self.steps.index(step) + 1 :]
        return LEFT["end"] + sum(LEFT[s] for s in later)

    def deadline(self, step: str) -> float:
        return self.start + self.budget - self.reserve(step)

    def say(self, line: str) -> None:
        print(f"gpu_check: {line}", flush=True)
        append(self.out / "summary.txt", f"gpu_check: {line}\n")

    def note(self, text: str) -> None:
        """``text`` added to facts.txt."""
        append(self.out / "facts.txt", text)

    def job(self, name: str, command: list[str], log: str, **env: str) -> Job:
        """A process with this check's environment and ``env``, its output into out/``log``."""
        return Job(name, command, self.out / log, {**self.env, **env})

    def write_verdict(self, running: str | None = None) -> int:
        """verdict.txt as things stand, and the exit status they give."""
        failed = [s for s, v in self.status.items() if v == FAILED]
        if failed:
            code, text = 1, f"FAILED: {', '.join(failed)}"
        elif running or CUT in self.status.values() or len(self.status) < len(self.steps):
            code, text = 3, "incomplete, no defect found so far"
        else:
            code, text = 0, "passed: every step ran in full"
        lines = [f"{text} ({time.monotonic() - self.start:.0f} s of {self.budget:.0f} s)"]
        for step in self.steps:
            state = "running" if step == running else self.status.get(step, CUT)
            lines.append(f"  {step}: {state}")
        (self.out / "verdict.txt").write_text("\n".join(lines) + "\n")
        return code

    def pack(self) -> None:
        """With --hand-back: summary.txt and verdict.txt copied, and every log packed into
        gpu-check.tar.gz, each replaced whole (a call cut mid-pack keeps the last one)."""
        if self.hand_back is None:
            return
        for name in ("summary.txt", "verdict.txt"):
            if (self.out / name).exists():
                shutil.copyfile(self.out / name, self.hand_back / f".{name}")
                os.replace(self.hand_back / f".{name}", self.hand_back / name)
        with tarfile.open(self.hand_back / ".gpu-check.tar.gz", "w:gz") as archive:
            archive.add(self.out, arcname="gpu-check")
        os.replace(self.hand_back / ".gpu-check.tar.gz", self.hand_back / "gpu-check.tar.gz")

    def pack_every(self, seconds: float) -> None:
        def loop() -> None:
            while True:
                time.sleep(seconds)
                with contextlib.suppress(OSError):  # a log written while packed: the next round
                    self.pack()

        if self.hand_back is not None:
            threading.Thread(target=loop, daemon=True).start()


def capture(*command: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(command, capture_output=True, text=True, check=False, env=env)


def lines_of(path: Path) -> list[str]:
    return path.read_text(errors="replace").splitlines() if path.exists() else []


@dataclass
class Job:
    name: str
    command: list[str]
    log: Path
    env: dict[str, str]
    rc: int | None = None
    cut: bool = False  # killed at the deadline, or not started before it
    started: bool = False
    seconds: float = 0.0


def run_jobs(jobs: list[Job], deadline: float, slots: int) -> None:
    """Run the jobs, ``slots`` at a time, each in a process group of its own; at the
    deadline kill what runs (SIGTERM, then SIGKILL) and mark it and what waits as cut."""
    waiting, running = list(jobs), []
    while waiting or running:
        while waiting and len(running) < slots and time.monotonic() < deadline:
            job = waiting.pop(0)
            with open(job.log, "ab") as log:
                process = subprocess.Popen(
                    job.command, stdout=log, stderr=subprocess.STDOUT, env=job.env, cwd=ROOT,
                    start_new_session=True,
                )  # fmt: skip
            job.started, job.seconds = True, time.monotonic()
            running.append((job, process))
        if time.monotonic() >= deadline:
            for job in [*waiting, *(job for job, _ in running)]:
                job.cut = True
            waiting = []
            for _, process in running:
                for sig in (signal.SIGTERM, signal.SIGKILL):
                    try:
                        os.killpg(process.pid, sig)
                        process.wait(5)
                        break
                    except (ProcessLookupError, subprocess.TimeoutExpired):
                        continue
        for job, process in list(running):
            if process.poll() is not None:
                job.rc, job.seconds = process.returncode, time.monotonic() - job.seconds
                running.remove((job, process))
        time.sleep(0.2)


# shared_build's doctor, asked in the venv, where shared_build is installed.
PICK_CXX = (
    "import json, os; from shared_build import doctor; "
    "chosen, tried = doctor.pick_cxx(dict(os.environ)); "
    "print(json.dumps([chosen, [[n, f and [f.status, f.text]] for n, f in tried]]))"
)


def pick_compiler(check: Check) -> str | None:
    """The compiler for the builds: the first candidate that links the shared libstdc++ by
    default, else one that obeys our link line. Each candidate's facts go to facts.txt."""
    chosen, tried = json.loads(capture(check.python, "-c", PICK_CXX, env=check.env).stdout)
    check.note("C++ compilers tried, in order:\n")
    for name, finding in tried:
        path = shutil.which(name.split()[0]) or "?"
        version = (capture(*name.split(), "--version").stdout.splitlines() or ["?"])[0]
        verdict = finding[1] if finding else "no verdict (it does not compile, or no readelf)"
        check.note(f"  {name}: {path} -> {os.path.realpath(path)} ({version}): {verdict}\n")
    if chosen is None:
        chosen = next((n for n, f in tried if f is not None and f[0] == "warn"), None)
    return chosen


def make_venv(check: Check) -> None:
    """A venv that sees this python's packages: --system-site-packages reaches only the base
    interpreter's where this python is itself a venv (the GPU machine's is), so a .pth file
    adds its site-packages. --without-pip: pip comes from there too. A venv an earlier run
    left for another python (another parent) is made again, not reused."""
    sites = capture(sys.executable, "-c", "import site; print(*site.getsitepackages(), sep='\\n')")

    def parent_pth() -> Path:
        purelib = capture(
            check.python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"
        )
        return Path(purelib.stdout.strip(), "_gpu_check_parent.pth")

    if (check.venv / "bin" / "python").exists():
        pth = parent_pth()
        if pth.exists() and pth.read_text() == sites.stdout:
            return
        shutil.rmtree(check.venv)
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip",
                    str(check.venv)], check=True)  # fmt: skip
    parent_pth().write_text(sites.stdout)


def preflight(check: Check) -> bool:
    if not check.simulate:
        smi = capture("nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv")
        (check.out / "gpu.txt").write_text(smi.stdout + smi.stderr)
    make_venv(check)
    # shared_build (the builds' requirement, the tests' plugin), with the machine's setuptools.
    installed = capture(
        check.python, *PIP_INSTALL.split(), str(ROOT / "shared_build"), env=check.env
    )
    if installed.returncode:
        check.say("preflight: FAILED: shared_build does not install (facts.txt)")
        (check.out / "facts.txt").write_text(installed.stdout[-3000:] + installed.stderr[-3000:])
        return False
    (check.out / "facts.txt").write_text("")
    cxx = pick_compiler(check)
    if cxx is None:
        check.say("preflight: FAILED: no C++ compiler here links the shared libstdc++ (facts.txt)")
        return False
    # Else setuptools links C++ with its own setting (sysconfig's LDCXXSHARED).
    check.env.update(CXX=cxx, LDSHARED=f"{cxx} -shared", LDCXXSHARED=f"{cxx} -shared")
    probe = capture(check.python, str(ROOT / ".ci" / "gpu_facts.py"), env=check.env)
    try:
        found = json.loads(probe.stdout.splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        exit_text = gpu_results.describe_exit(probe.returncode)
        check.say(f"preflight: FAILED: {check.python} .ci/gpu_facts.py: {exit_text}")
        check.note(probe.stderr)
        return False
    check.facts, missing = found["facts"], found["missing"]
    if check.simulate:  # no GPU, nvcc or sanitizer expected
        missing = [m for m in missing if not re.match(r"a GPU|nvcc|compute-sanitizer", m)]
        check.facts.setdefault("arch", "9.0")
    check.note(f"chosen: CXX={cxx}, LDSHARED and LDCXXSHARED {cxx} -shared\n")
    check.note("".join(f"{key}: {value}\n" for key, value in check.facts.items()))
    if missing:
        check.say(f"preflight: FAILED: missing {len(missing)}: {'; '.join(missing)}")
        return False
    if check.facts.get("sanitizer"):  # its kernel filters, to sanitize only our kernels later
        found = capture(check.facts["sanitizer"], "--help").stdout.splitlines()
        filters = [f"  {ln.strip()}\n" for ln in found if re.search(r"kernel|filter", ln, re.I)]
        check.note("compute-sanitizer --help, its kernel filters:\n" + "".join(filters))
    if "stable_target" in check.facts:
        check.env["SHARED_BUILD_STABLE_TARGET"] = check.facts["stable_target"]
    shown = [f"{k} {check.facts[k]}" for k in ("torch", "gpu", "nvcc") if k in check.facts]
    check.say(f"preflight: ok (CXX={cxx}; {', '.join(shown)})")
    return True


# The name part of the tests that need most of a GPU's memory: they run alone, after the suites.
LARGE = "2_to_the_31"


# A cuda marker on a test, a module or a parameter, or the test battery (its CUDA cases are).
CUDA_TESTS = re.compile(
    r"^\s*@pytest\.mark\.cuda\b|^pytestmark = .*pytest\.mark\.cuda|marks=pytest\.mark\.cuda"
    r"|^test_battery = battery\(",
    re.M,
)


DURATIONS = ROOT / "benchmarks" / "results" / "gpu" / "durations.json"


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

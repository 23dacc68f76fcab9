"""The machine a benchmark ran on, and what else ran on it while it timed."""

from __future__ import annotations

import contextlib
import os
import platform
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch


def _read(path: str, field: str | None = None) -> str | None:
    """A file's text, or the value of its first "field: value" line; None where absent."""
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    if field is None:
        return text.strip() or None
    values = [line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith(field)]
    return values[0] if values else None


def free_page_reporting(devices: str = "/sys/bus/virtio/devices") -> bool | None:
    """Whether a virtio balloon reports freed memory to the host (feature bit 5, REPORTING),
    which may take it back: a fresh output on such pages then pays the host's faults, 12-14x
    the guest's own (benchmarks/results/cpu/2026-11-29-epyc-fresh-pages). None: no sysfs."""
    folder = Path(devices)
    if not folder.is_dir():
        return None
    return any(_read(str(d / "device")) == "0x0005" and (_read(str(d / "features")) or "")[5:6] == "1"
               for d in folder.iterdir())  # fmt: skip


# This VM kind's kernel delays a freed block's report by min_free_ms (0 there; upstream has
# no such knob and reports after about 2 s).
REPORTING = "/sys/module/page_reporting/parameters"
HOLD_MS = 60_000


def reporting_delay(params: str = REPORTING) -> int | None:
    """How long (ms) a freed block stays free before the host hears of it; None: no knob."""
    value = _read(f"{params}/min_free_ms")
    return int(value) if value and value.isdigit() else None


@contextlib.contextmanager
def pages_held(params: str = REPORTING, hold_ms: int = HOLD_MS) -> Iterator[int | None]:
    """Freed memory reported to the host only after hold_ms while timing, where the knob is
    and may be written (root); restored after. Then a call seldom gets pages the host took
    back: after 3 s pauses a fresh 4K output cost 1070 ms with the knob at 0 and 89 ms at
    60 s (results/cpu/2026-11-29-epyc-fresh-pages). Yields the delay in effect."""
    knob, before = Path(params) / "min_free_ms", reporting_delay(params)
    held = before is not None and before < hold_ms
    if held:
        try:
            knob.write_text(str(hold_ms))
        except OSError:  # not root: the report says what the calls may pay
            held = False
    try:
        yield hold_ms if held else before
    finally:
        if held:
            knob.write_text(str(before))


def describe() -> dict[str, Any]:
    props = torch.cuda.get_device_properties(0) if torch.cuda.is_available() else None
    gpu = props and {"name": props.name, "count": torch.cuda.device_count(),
                     "memory_gib": round(props.total_memory / (1 << 30), 1),
                     "capability": f"{props.major}.{props.minor}",
                     "multiprocessors": props.multi_processor_count}  # fmt: skip
    memory = _read("/proc/meminfo", "MemTotal")
    return {
        "cpu": _read("/proc/cpuinfo", "model name") or platform.machine(),
        "cores": len(os.sched_getaffinity(0)),
        "torch_threads": torch.get_num_threads(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "memory_gib": memory and round(int(memory.split()[0]) / (1 << 20), 1),
        "gpu": gpu,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "load_before": round(os.getloadavg()[0], 2),
        "governor": _read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
        "clocksource": _read("/sys/devices/system/clocksource/clocksource0/current_clocksource"),
        "malloc": os.environ.get("GLIBC_TUNABLES"),  # benchmarks.run sets glibc's thresholds
        "free_page_reporting": free_page_reporting(),
        "reporting_delay_ms": reporting_delay(),
    }


def sample() -> dict[str, float]:
    """CPU counters now: jiffies (/proc/stat) of the CPUs this process may run on, busy,
    stolen and in all; this process's CPU seconds; the 1-minute load average."""
    cpus, busy, steal, total = {f"cpu{i}" for i in os.sched_getaffinity(0)}, 0, 0, 0
    for line in (_read("/proc/stat") or "").splitlines():
        name, *values = line.split()
        if name in cpus:  # user nice system idle iowait irq softirq steal
            jiffies = [int(v) for v in values[:8]]
            busy += sum(jiffies[:3]) + jiffies[5] + jiffies[6]
            steal, total = steal + jiffies[7], total + sum(jiffies)
    own = sum(os.times()[:2])
    return {"busy": busy, "steal": steal, "total": total, "own": own, "load": os.getloadavg()[0]}


def window(before: dict[str, float], after: dict[str, float]) -> dict[str, Any]:
    """What else ran between two samples: others, the share of those CPUs' time that other
    processes used, and steal, the share the hypervisor gave to other machines (None
    without /proc/stat); the load average at the end; tick_us, time.perf_counter's step."""
    total = after["total"] - before["total"]
    own = (after["own"] - before["own"]) * os.sysconf("SC_CLK_TCK")
    others = (after["busy"] - before["busy"] - own) / total if total > 0 else None
    steal = (after["steal"] - before["steal"]) / total if total > 0 else None
    return {"others": None if others is None else round(max(others, 0.0), 3),
            "steal": None if steal is None else round(steal, 3),
            "load": round(after["load"], 2), "tick_us": round(tick() * 1e6, 3)}  # fmt: skip


def quiet(seconds: float = 0.5) -> dict[str, Any]:
    """A window in which this process sleeps: what the rest of the machine does (and with
    a GPU, what else runs on it and its clock; the window then outlasts nvidia-smi's
    utilization period, up to 1 s, so none of this process's own work is in it)."""
    gpu = torch.cuda.is_available()
    if gpu:
        torch.cuda.synchronize()
    before = sample()
    time.sleep(max(seconds, 1.2) if gpu else seconds)
    return window(before, sample()) | (gpu_now() if gpu else {})


def gpu_now() -> dict[str, Any]:
    """nvidia-smi's word on GPU 0: its utilization (this process asleep), SM clock and the
    clock's maximum (MHz), and the compute processes on it as it names them ("pid name"; in
    a container its pids need not be this process's); {} without nvidia-smi."""

    def query(what: str) -> list[str]:
        done = subprocess.run(["nvidia-smi", what, "--format=csv,noheader,nounits", "-i", "0"],
                              capture_output=True, text=True, timeout=10, check=True)  # fmt: skip
        return [line.strip() for line in done.stdout.splitlines() if line.strip()]

    try:
        processes = query("--query-compute-apps=pid,process_name")
        (row,) = query("--query-gpu=utilization.gpu,clocks.sm,clocks.max.sm")
        util, clock, top = map(float, row.split(", "))
    except (OSError, subprocess.SubprocessError, ValueError):
        return {}
    return {"gpu_util": util, "sm_clock_mhz": clock, "sm_clock_max_mhz": top,
            "gpu_processes": [p.replace(", ", " ", 1) for p in processes]}  # fmt: skip


def tick() -> float:
    """The smallest step of time.perf_counter in a few reads: a VM whose clock fell back to
    a coarse source (jiffies: 4-10 ms) rounds every short time to a multiple of it."""
    steps, first = [], time.perf_counter()
    last = now = first
    while len(steps) < 5 and now - first < 0.05:
        now = time.perf_counter()
        if now != last:
            steps.append(now - last)
            last = now
    return min(steps, default=last - first)

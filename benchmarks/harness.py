"""What a package benchmark uses: a Context that times callables and records Measurements.

A package's benchmark is ``packages/<name>/bench/bench_<name>.py`` with

    PACKAGE = "add_ext"                      # must import for the benchmark to run
    GOALS = [Goal(op="add", ours="add_ext", peer="torch.add", min_speedup=0.95, device="cpu")]
    HEADLINE = [("add", "n=1e+07")]          # optional: the CUDA rows of run.py --headline

    def run(ctx: Context) -> None:
        if not ctx.wants("add", "n=1e+06", "cpu"):
            return
        x, y = torch.randn(10**6), torch.randn(10**6)
        ctx.compare(op="add", case="n=1e+06", size=1e6, device="cpu", dtype=torch.float32,
                    impls={"add_ext": lambda: add_ext.add(x, y), "torch.add": lambda: torch.add(y, x)},
                    ours="add_ext")

``ctx.wants(op, case, device)`` comes before anything is allocated for a case: a run limited
to some rows (``benchmarks/run.py --headline``) then sets up nothing else, and a plan
(``--plan``) lists the rows without touching a device.

Every implementation of one (op, case, device, dtype) is timed in the same process,
round-robin, so that ratios compare like with like. Times are medians of
torch.utils.benchmark's blocked_autorange, which synchronizes CUDA around each block; the
spread is the interquartile range of the per-call times of every round together.
"""

from __future__ import annotations

import math
import statistics
import time
import timeit
from collections.abc import Callable, Collection, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from torch.utils import benchmark as tbench


@dataclass
class Measurement:
    """One implementation timed on one case."""

    op: str  # what is computed, e.g. "add" or "lltm forward+backward"
    case: str  # the input, e.g. "n=1e6" or "B=16 in=32 state=128"
    size: float  # a number for the x-axis of plots (elements, nodes, pixels ...)
    impl: str  # who computes it, e.g. "add_ext", "torch.add", "eager", "torch.compile"
    ours: bool  # True for this repository's implementation
    device: str
    dtype: str
    seconds: float  # median time per call: the median round's
    iqr: float  # interquartile range of the per-call times of all rounds (0.0: under 4)
    runs: int  # how many calls the median is over
    extra: dict[str, float] = field(default_factory=dict)  # e.g. {"GB/s": 812.0}
    # How many per-call times (one per timed block, all rounds) the IQR is over; raw files
    # from before it was recorded hold the IQR of the median round alone, and no samples.
    samples: int | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Goal:
    """A target from an issue, checked in the report for every matching case.

    By default: ours must be at least min_speedup times as fast as peer (time of peer /
    time of ours). With metric set, ours' extra[metric] must be at least min_speedup
    instead (e.g. metric="fraction of copy", min_speedup=0.9). With max_extra_us set, a
    budget: ours may take at most that many microseconds more than peer (a cost that does
    not grow with the work, e.g. a call path; min_speedup is not used).
    """

    op: str
    ours: str
    peer: str
    min_speedup: float
    device: str = "cpu"
    case: str | None = None  # None: every case of the op
    metric: str | None = None
    note: str = ""
    # A tie: ours as fast as peer, within the noise min_speedup (< 1) allows.
    tie: bool = False
    max_extra_us: float | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class Context:
    """Handed to each benchmark's run(); collects its Measurements."""

    def __init__(
        self,
        quick: bool = False,
        min_run_time: float | None = None,
        devices: Sequence[str] | None = None,
        *,
        rounds: int | None = None,
        block_time: float | None = None,
        only: Collection[tuple[str, str, str]] | None = None,
        plan: bool = False,
        on_record: Callable[[Measurement], None] | None = None,
        on_note: Callable[[str], None] | None = None,
    ) -> None:
        """rounds: round-robin rounds per case. block_time: time blocks of this many seconds
        (None: torch.utils.benchmark's blocked_autorange sizes them). only: the (op, case,
        device) rows to run, None for all. plan: time nothing, list in ``planned`` the rows
        that would run (devices need not be present). on_record and on_note: called with
        each Measurement and note the moment it is recorded."""
        self.quick = quick
        self.min_run_time = min_run_time if min_run_time is not None else (0.05 if quick else 0.5)
        self.rounds = rounds if rounds is not None else (1 if quick else 3)
        self.block_time = block_time
        self.only = None if only is None else set(only)
        self.plan = plan
        self.planned: list[tuple[str, str, str]] = []
        self.measurements: list[Measurement] = []
        self._on_record = on_record
        self._on_note = on_note
        available = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
        if plan:  # nothing runs: any device may be planned for
            available = ["cpu", "cuda"]
        missing = [d for d in devices or () if d not in available]
        if missing:
            raise ValueError(f"benchmark devices {missing} are not available here ({available})")
        self.devices = [d for d in available if not devices or d in devices]
        self.notes: list[str] = []

    def wants(self, op: str, case: str, device: str) -> bool:
        """Whether to set up and time this row: asked before allocating anything for it. In a
        plan, records the row (if selected) and answers False."""
        key = (op, case, device)
        selected = device in self.devices and (self.only is None or key in self.only)
        if self.plan:
            if selected and key not in self.planned:
                self.planned.append(key)
            return False
        return selected

    def time(self, fn: Callable[[], Any], *, warmup: int = 3) -> tuple[float, float, int]:
        """(median seconds, IQR, number of runs) of fn() after warmup calls."""
        median, runs, times = self._blocks(fn, warmup=warmup)
        return median, iqr(times), runs

    def _blocks(self, fn: Callable[[], Any], *, warmup: int) -> tuple[float, int, list[float]]:
        """(median seconds, number of runs, the per-call time of each block) of fn()."""
        for _ in range(warmup):
            fn()
        _sync()
        if self.block_time is None:
            timer = tbench.Timer(
                stmt="fn()", globals={"fn": fn}, num_threads=torch.get_num_threads()
            )
            result = timer.blocked_autorange(min_run_time=self.min_run_time)
            runs = len(result.times) * result.number_per_run
            return result.median, runs, list(result.times)
        # Blocks of about block_time each, until min_run_time is spent (at least 5). With a CUDA
        # device, blocked_autorange sizes its blocks until the timer's own synchronize is
        # 1e-4 of one, about 0.1 s, so a short min_run_time gets one or two blocks and no
        # spread; a 10 ms block pays about 0.1% for it. (timeit.Timer, not tbench.Timer's
        # timeit, which adds two or more warm-up calls to every block.)
        clock = timeit.Timer(fn, timer=_synchronized_clock)
        number = 1
        while True:
            total = clock.timeit(number)
            if total >= self.block_time / 10 or number >= 10**6:
                break
            number *= 10
        number = max(1, math.ceil(self.block_time * number / total))
        times: list[float] = []  # per call, one per block
        while len(times) < 5 or sum(times) * number < self.min_run_time:
            times.append(clock.timeit(number) / number)
        return statistics.median(times), len(times) * number, times

    def compare(
        self,
        *,
        op: str,
        case: str,
        size: float,
        device: str,
        dtype: str | torch.dtype,
        impls: dict[str, Callable[[], Any]],
        ours: str | Sequence[str],
        extra: Callable[[float], dict[str, float]] | None = None,
        rounds: int | None = None,
    ) -> dict[str, Measurement]:
        """Time every implementation of one case, side by side, and record them.

        All are warmed up first, then timed round-robin (A B C, A B C, ...) and each one's
        median over the rounds is kept: whatever drifts during the run (allocator state,
        clocks, the other tenant of the machine) falls on every implementation alike,
        rather than on whichever happened to run first.
        """
        if self.plan or (self.only is not None and (op, case, device) not in self.only):
            return {}  # a benchmark that did not ask wants() first: not a selected row
        ours_set = {ours} if isinstance(ours, str) else set(ours)
        rounds = rounds if rounds is not None else self.rounds
        for fn in impls.values():
            for _ in range(3):
                fn()
        _sync()
        samples: dict[str, list[tuple]] = {name: [] for name in impls}
        for _ in range(rounds):
            for name, fn in impls.items():
                samples[name].append(self._blocks(fn, warmup=1))
        dtype_name = str(dtype).replace("torch.", "")
        recorded = {}
        for name, runs in samples.items():
            runs.sort(key=lambda r: r[0])
            seconds = runs[len(runs) // 2][0]
            # The spread across rounds: a slow row gives one or two blocks a round, too few
            # for quartiles alone, and a drift between rounds belongs in it.
            pooled = [t for r in runs for t in r[2]]
            measurement = Measurement(
                op=op,
                case=case,
                size=float(size),
                impl=name,
                ours=name in ours_set,
                device=device,
                dtype=dtype_name,
                seconds=seconds,
                iqr=iqr(pooled),
                runs=sum(r[1] for r in runs),
                extra=extra(seconds) if extra else {},
                samples=len(pooled),
            )
            self.measurements.append(measurement)
            if self._on_record is not None:
                self._on_record(measurement)
            recorded[name] = measurement
            print(
                f"  {op:<26} {case:<28} {device:<4} {dtype_name:<8} {name:<22} {format_seconds(seconds):>10}",
                flush=True,
            )
        return recorded

    def note(self, text: str) -> None:
        """A sentence for the report (e.g. why a peer was not timed)."""
        self.notes.append(text)
        if self._on_note is not None:
            self._on_note(text)
        print(f"  note: {text}", flush=True)


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _synchronized_clock() -> float:
    """time.perf_counter once the GPU's queued work is done: a block's time includes its
    kernels (torch.utils.benchmark's timer does the same)."""
    _sync()
    return time.perf_counter()


MIN_SAMPLES = 4  # quartiles of fewer per-call times say nothing: the IQR is not computed


def iqr(times: Sequence[float]) -> float:
    """The interquartile range of per-call times; 0.0 for fewer than MIN_SAMPLES."""
    if len(times) < MIN_SAMPLES:
        return 0.0
    low, _, high = statistics.quantiles(times, n=4, method="inclusive")
    return high - low


def format_seconds(seconds: float) -> str:
    if seconds is None or math.isnan(seconds):
        return "n/a"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"

"""What a package benchmark uses: Goal, and a Context that times callables side by side.

``packages/<name>/bench/bench_<name>.py`` defines PACKAGE (imported first), GOALS, maybe
HEADLINE (the (op, case) rows ``benchmarks.run --headline`` times on CUDA), and run(ctx):
``ctx.wants(op, case, device)`` before allocating a case, then ``ctx.compare``. A case's
implementations are warmed up, then timed round-robin (A B C, A B C): what drifts falls on
all alike. CPU: torch.utils.benchmark. CUDA, in blocks of 10 ms: "wall" (host time: what a
training loop sees), "cuda-events" (GPU time) and, for the implementations named in
``graph`` (launch-bound ones), "cuda-graph" (GPU time of replays of a CUDA graph of a call).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from torch.utils import benchmark as tbench

from benchmarks import machine

BLOCK = 0.01  # seconds per block of CUDA calls: a synchronize is 0.1 % of it
MIN_SAMPLES = 4  # quartiles of fewer per-call times say nothing: no IQR is computed


@dataclass
class Measurement:
    """One implementation timed on one case by one clock."""

    op: str  # what is computed, e.g. "add"
    case: str  # the input, e.g. "n=1e+06"
    size: float  # what the work grows with (elements, nodes, pixels): the scaling check's
    impl: str  # who computes it, e.g. "add_ext", "torch.add"
    ours: bool
    device: str
    dtype: str
    seconds: float  # median per call: the median round's
    iqr: float  # interquartile range of the per-call times of all rounds (0.0: too few)
    runs: int  # calls timed
    extra: dict[str, float] = field(default_factory=dict)  # e.g. {"GB/s": 812.0}
    samples: int | None = None  # per-call times (one per block) the IQR is over
    clock: str = "wall"  # "wall", "cuda-events" or "cuda-graph"
    rounds: list[float] = field(default_factory=list)  # each round's median: re-times
    machine: dict[str, Any] = field(default_factory=dict)  # machine.window over the case


@dataclass
class Goal:
    """A target from an issue, judged in the report on every matching case: ours at least
    min_speedup times as fast as peer (peer's time / ours') by clock; or, with max_extra_us,
    at most that many microseconds slower than peer (a cost that does not grow with the
    work, e.g. a call path; min_speedup unused). tie: the goal states a tie with peer."""

    op: str
    ours: str
    peer: str
    min_speedup: float
    device: str = "cpu"
    case: str | None = None  # None: every case of the op
    note: str = ""
    tie: bool = False
    max_extra_us: float | None = None
    clock: str = "wall"


class Context:
    """Handed to each benchmark's run(); collects its Measurements and notes."""

    def __init__(
        self,
        quick: bool = False,
        min_run_time: float | None = None,
        devices: Sequence[str] | None = None,
        *,
        rounds: int | None = None,
        only: Collection[tuple[str, str, str]] | None = None,
        plan: bool = False,
        on_event: Callable[..., None] = lambda kind, **fields: None,
    ) -> None:
        """min_run_time: seconds per implementation, clock and round. only: the (op, case,
        device) rows to run (None: all). plan: time nothing, list in ``planned`` the rows a
        run would time, on any device. on_event: called with each ("measurement", **its
        fields) and ("note", text=...) as it is made."""
        self.quick = quick
        self.min_run_time = min_run_time or (0.05 if quick else 0.5)
        self.rounds = rounds or (1 if quick else 3)
        self.only = None if only is None else set(only)
        self.plan = plan
        self.planned: list[tuple[str, str, str]] = []
        self.measurements: list[Measurement] = []
        self.notes: list[str] = []
        self.on_event = on_event
        available = ["cpu", "cuda"] if plan or torch.cuda.is_available() else ["cpu"]
        missing = [d for d in devices or () if d not in available]
        if missing:
            raise ValueError(f"benchmark devices {missing} are not available here ({available})")
        self.devices = [d for d in available if not devices or d in devices]

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
        extra: dict[str, float] | None = None,
        rounds: int | None = None,
        graph: Collection[str] | bool = (),
    ) -> dict[str, Measurement]:
        """Time every implementation of one case side by side and record them; returns them
        by implementation (and " [clock]" for a CUDA clock but wall). extra: a figure's
        amount per call, recorded over the time ({"GB/s": GB moved}). graph: the
        implementations (True: all) also timed as CUDA-graph replays on CUDA."""
        if self.plan or (self.only is not None and (op, case, device) not in self.only):
            return {}  # a benchmark that did not ask wants() first: not a selected row
        for fn in impls.values():
            for _ in range(3):
                fn()
        timers: dict[tuple[str, str], Callable[[int], float] | None] = {}
        graphs = {}  # kept alive (with their memory pools) until the case is timed
        for name, fn in impls.items():
            if device != "cuda":
                timers[name, "wall"] = None  # torch.utils.benchmark's blocked_autorange
                continue
            timers[name, "wall"], timers[name, "cuda-events"] = _wall(fn), _wall(fn, events=True)
            if graph is True or name in graph:
                try:
                    graphs[name] = _capture(fn)
                    timers[name, "cuda-graph"] = _wall(graphs[name].replay, events=True)
                except Exception as error:  # e.g. an op that synchronizes
                    self.note(f"{op} {case}: {name} not captured as a CUDA graph ({error})")
        results = {key: [] for key in timers}  # per round: (per-call times, calls per time)
        before = machine.sample()
        for _ in range(rounds or self.rounds):
            for key, timer in timers.items():
                results[key].append(self._time(impls[key[0]], timer))
        window = machine.window(before, machine.sample())
        ours_set = {ours} if isinstance(ours, str) else set(ours)
        dtype_name = str(dtype).replace("torch.", "")
        recorded = {}
        for (name, clock), per_round in results.items():
            medians = [statistics.median(times) for times, _ in per_round]
            times = [t for ts, _ in per_round for t in ts]
            seconds = sorted(medians)[len(medians) // 2]
            m = Measurement(op=op, case=case, size=float(size), impl=name, ours=name in ours_set,
                            device=device, dtype=dtype_name, seconds=seconds, iqr=iqr(times),
                            runs=sum(len(ts) * number for ts, number in per_round),
                            samples=len(times), clock=clock, rounds=medians, machine=window,
                            extra={k: x / seconds for k, x in (extra or {}).items()})  # fmt: skip
            self.measurements.append(m)
            self.on_event("measurement", **asdict(m))
            label = name if clock == "wall" else f"{name} [{clock}]"
            recorded[label] = m
            print(f"  {op:<26} {case:<28} {device:<4} {dtype_name:<8} {label:<22} "
                  f"{format_seconds(seconds):>10}", flush=True)  # fmt: skip
        return recorded

    def _time(self, fn: Callable[[], Any], timer: Callable[[int], float] | None):
        """(per-call times, calls per time) of one round of fn."""
        if timer is None:
            # num_threads: Timer's default of 1 would time every row on one thread.
            t = tbench.Timer("fn()", globals={"fn": fn}, num_threads=torch.get_num_threads())
            result = t.blocked_autorange(min_run_time=self.min_run_time)
            return list(result.times), result.number_per_run
        # blocked_autorange grows a CUDA block until its synchronize is 1e-4 of it (0.1 s):
        # a short round would get one or two blocks, and no spread.
        number = 1
        while (total := timer(number)) < BLOCK / 10 and number < 10**6:
            number *= 10
        number = max(1, math.ceil(BLOCK * number / max(total, 1e-9)))
        times: list[float] = []
        while len(times) < 5 or sum(times) * number < self.min_run_time:
            times.append(timer(number) / number)
        return times, number

    def note(self, text: str) -> None:
        """A sentence for the report (e.g. why a peer was not timed)."""
        self.notes.append(text)
        self.on_event("note", text=text)
        print(f"  note: {text}", flush=True)


def _wall(fn: Callable[[], Any], events: bool = False) -> Callable[[int], float]:
    """Seconds of `number` calls: host time, the GPU's queue drained before and after; or
    with events, GPU time between CUDA events recorded before and after them."""

    def timer(number: int) -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        wall = time.perf_counter()
        for _ in range(number):
            fn()
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) / 1e3 if events else time.perf_counter() - wall

    return timer


def _capture(fn: Callable[[], Any]) -> torch.cuda.CUDAGraph:
    """A CUDA graph of one call of fn, warmed up on a side stream first (the recipe of
    torch.cuda.graph's documentation)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph


def iqr(times: Sequence[float]) -> float:
    """The interquartile range of per-call times; 0.0 for fewer than MIN_SAMPLES."""
    if len(times) < MIN_SAMPLES:
        return 0.0
    low, _, high = statistics.quantiles(times, n=4, method="inclusive")
    return high - low


def format_seconds(seconds: float | None) -> str:
    if seconds is None or math.isnan(seconds):
        return "n/a"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"

"""What a package benchmark uses: a Context that times callables and records Measurements.

A package's benchmark is ``packages/<name>/bench/bench_<name>.py`` with

    PACKAGE = "add_ext"                      # must import for the benchmark to run
    GOALS = [Goal(op="add", ours="add_ext", peer="torch.add", min_speedup=0.95, device="cpu")]

    def run(ctx: Context) -> None:
        ctx.compare(op="add", case="n=1e+06", size=1e6, device="cpu", dtype=torch.float32,
                    impls={"add_ext": lambda: add_ext.add(x, y), "torch.add": lambda: torch.add(y, x)},
                    ours="add_ext")

Every implementation of one (op, case, device, dtype) is timed in the same process,
round-robin, so that ratios compare like with like. Times are medians of
torch.utils.benchmark's blocked_autorange, which synchronizes CUDA around each block.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
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
    seconds: float  # median time per call
    iqr: float  # interquartile range of the per-call times
    runs: int  # how many calls the median is over
    extra: dict[str, float] = field(default_factory=dict)  # e.g. {"GB/s": 812.0}

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Goal:
    """A target from an issue, checked in the report for every matching case.

    By default: ours must be at least min_speedup times as fast as peer (time of peer /
    time of ours). With metric set, ours' extra[metric] must be at least min_speedup
    instead (e.g. metric="fraction of copy", min_speedup=0.9).
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

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class Context:
    """Handed to each benchmark's run(); collects its Measurements."""

    def __init__(
        self,
        quick: bool = False,
        min_run_time: float | None = None,
        devices: Sequence[str] | None = None,
    ) -> None:
        self.quick = quick
        self.min_run_time = min_run_time if min_run_time is not None else (0.05 if quick else 0.5)
        self.measurements: list[Measurement] = []
        available = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
        missing = [d for d in devices or () if d not in available]
        if missing:
            raise ValueError(f"benchmark devices {missing} are not available here ({available})")
        self.devices = [d for d in available if not devices or d in devices]
        self.notes: list[str] = []

    def time(self, fn: Callable[[], Any], *, warmup: int = 3) -> tuple[float, float, int]:
        """(median seconds, IQR, number of runs) of fn() after warmup calls."""
        for _ in range(warmup):
            fn()
        _sync()
        timer = tbench.Timer(stmt="fn()", globals={"fn": fn}, num_threads=torch.get_num_threads())
        result = timer.blocked_autorange(min_run_time=self.min_run_time)
        return result.median, result.iqr, len(result.times) * result.number_per_run

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
        ours_set = {ours} if isinstance(ours, str) else set(ours)
        rounds = rounds if rounds is not None else (1 if self.quick else 3)
        for fn in impls.values():
            for _ in range(3):
                fn()
        _sync()
        samples: dict[str, list[tuple[float, float, int]]] = {name: [] for name in impls}
        for _ in range(rounds):
            for name, fn in impls.items():
                samples[name].append(self.time(fn, warmup=1))
        dtype_name = str(dtype).replace("torch.", "")
        recorded = {}
        for name, runs in samples.items():
            runs.sort()
            seconds, iqr, _ = runs[len(runs) // 2]
            measurement = Measurement(
                op=op,
                case=case,
                size=float(size),
                impl=name,
                ours=name in ours_set,
                device=device,
                dtype=dtype_name,
                seconds=seconds,
                iqr=iqr,
                runs=sum(r[2] for r in runs),
                extra=extra(seconds) if extra else {},
            )
            self.measurements.append(measurement)
            recorded[name] = measurement
            print(
                f"  {op:<26} {case:<28} {device:<4} {dtype_name:<8} {name:<22} {format_seconds(seconds):>10}",
                flush=True,
            )
        return recorded

    def note(self, text: str) -> None:
        """A sentence for the report (e.g. why a peer was not timed)."""
        self.notes.append(text)
        print(f"  note: {text}", flush=True)


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def format_seconds(seconds: float) -> str:
    if seconds is None or math.isnan(seconds):
        return "n/a"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"

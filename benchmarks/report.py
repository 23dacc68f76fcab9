"""Merge raw benchmark files (one per torch version) into one report.

    python -m benchmarks.report --output-dir benchmarks/results raw/torch-2.13.0.json raw/torch-2.14.1.json
    python -m benchmarks.report --from-raw    # re-render the committed report from its raw files
    python -m benchmarks.report --gpu-rows OUT/bench-rows.jsonl   # a GPU run's section only

Writes report.md (also printed), results.json (every raw figure, by torch version) and, where
matplotlib is installed, one PNG per op under plots/ (linked from the report): our speedup
over each peer against size with the goal lines, and the times, error bars from the IQR,
one panel per torch version. Columns put the torch versions side by side, so that a
regression of an op or of a peer between torch releases shows in one row.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote

from benchmarks import rows
from benchmarks.harness import MIN_SAMPLES, format_seconds

ROOT = Path(__file__).resolve().parents[1]

REGRESSION = 1.10  # a time more than 10% above the first version's is flagged


def load(paths: list[Path]) -> dict[str, dict[str, Any]]:
    """{torch version: raw report}, in the order given: benchmarks.run's JSON files, or its
    rows files (.jsonl, also of a run killed midway; a later run of one torch wins)."""
    runs = {}
    for path in paths:
        for data in rows.read(path) if path.suffix == ".jsonl" else [json.loads(path.read_text())]:
            runs[data["torch"]] = data
    return runs


def group(runs: dict[str, dict]) -> dict[tuple, dict[str, dict[str, dict]]]:
    """{(package, op, device, dtype): {case: {impl: {version: measurement}}}}, in first-seen order."""
    table: dict[tuple, dict[str, dict[str, dict]]] = {}
    for version, data in runs.items():
        for m in data["measurements"]:
            key = (m["package"], m["op"], m["device"], m["dtype"])
            cases = table.setdefault(key, {})
            cases.setdefault(m["case"], {}).setdefault(m["impl"], {})[version] = m
    return table


SPREAD_LIMIT = 0.10  # an interquartile range over 10% of the median flags the time
FEW_SAMPLES = 20  # a time resting on fewer per-call times says how many


def spread(m: dict) -> float | None:
    """A time's spread: the IQR of its per-call times (seconds), None where too few were
    taken for one. Raw files from before the harness pooled the rounds (no "samples")
    hold the median round's IQR, 0.0 where that round timed a single block."""
    if m.get("samples") is not None:
        return m["iqr"] if m["samples"] >= MIN_SAMPLES else None
    return m["iqr"] if m.get("iqr") else None


def format_time(m: dict) -> str:
    """A time with its spread, as every table prints it: "7.02 us IQR 1%", "505 ms IQR n/a"."""
    text = format_seconds(m["seconds"])
    iqr = spread(m)
    if iqr is None or not m["seconds"]:
        text += " IQR n/a"
    else:
        percent = 100 * iqr / m["seconds"]
        text += f" IQR {percent:.1f}%" if round(percent, 1) < 1 else f" IQR {percent:.0f}%"
    n = m.get("samples", m.get("runs"))
    if n is not None and n < FEW_SAMPLES:
        text += f" (n={n})"
    return text


def impl_label(package: str, case: str, impl: str) -> str:
    """An implementation's name as the report prints it. gc_cpp's bench names its eager
    baseline "eager a@(x@w)+b" on every shape, but runs (a@x)@w+b where F_out >= F_in
    (the cheaper order there): the label names what ran."""
    if package == "gc_cpp" and impl == "eager a@(x@w)+b":
        f_in, _, f_out = case_family(case).partition("->")
        if f_in.isdigit() and f_out.isdigit() and int(f_out) >= int(f_in):
            return "eager (a@x)@w+b"
    return impl


# The op that times forward and backward together, for an op that times the forward alone.
_WITH_BACKWARD = (" fwd+bwd", "+backward")


def _row(version: str, m: dict, reason: str) -> dict:
    keys = ("package", "op", "case", "impl", "device", "dtype")
    return {"version": version, **{k: m[k] for k in keys}, "reason": reason}


def sanity_flags(runs: dict[str, dict]) -> list[dict]:
    """Rows whose figures cannot all be right, so that a report never publishes them silently.

    - spread: the IQR over SPREAD_LIMIT of the median (a noisy machine), or no IQR at all
      (too few per-call times to compute one);
    - a forward slower than the same implementation's forward+backward on the same case;
    - a floor (an implementation named "... floor ...") slower than our kernel it bounds.
    """
    flags = []
    for version, data in runs.items():
        by_key: dict[tuple, dict] = {}
        for m in data["measurements"]:
            by_key[(m["package"], m["op"], m["case"], m["impl"], m["device"], m["dtype"])] = m
        for m in data["measurements"]:
            iqr = spread(m)
            if iqr is None:
                flags.append(_row(version, m, f"no IQR: fewer than {MIN_SAMPLES} per-call times"))
            elif m["seconds"] and iqr / m["seconds"] > SPREAD_LIMIT:
                flags.append(_row(version, m, f"IQR {100 * iqr / m['seconds']:.0f}% of the median"))
            for suffix in _WITH_BACKWARD:
                both = by_key.get(
                    (m["package"], m["op"] + suffix, m["case"], m["impl"], m["device"], m["dtype"])
                )
                if both and m["seconds"] > both["seconds"]:
                    flags.append(
                        _row(
                            version,
                            m,
                            f"forward {format_seconds(m['seconds'])} slower than its "
                            f"forward+backward {format_seconds(both['seconds'])}",
                        )
                    )
            if "floor" in m["impl"] and not m["ours"]:
                ours = [
                    o
                    for o in data["measurements"]
                    if o["ours"]
                    and (o["package"], o["op"], o["case"], o["device"], o["dtype"])
                    == (m["package"], m["op"], m["case"], m["device"], m["dtype"])
                ]
                fastest = min(ours, key=lambda o: o["seconds"], default=None)
                if fastest and m["seconds"] > fastest["seconds"]:
                    flags.append(
                        _row(
                            version,
                            m,
                            f"floor {format_seconds(m['seconds'])} slower than "
                            f"{fastest['impl']} {format_seconds(fastest['seconds'])}, which it bounds",
                        )
                    )
    return flags


def speedup_interval(ours: dict | None, peer: dict | None) -> tuple[float, float] | None:
    """The speedup's range when each time may lie anywhere within half its IQR of its
    median; (0, inf) where either time has no IQR (nothing can be ruled out)."""
    if not ours or not peer or not ours["seconds"] or not peer["seconds"]:
        return None
    if spread(ours) is None or spread(peer) is None:
        return 0.0, math.inf
    half_ours, half_peer = spread(ours) / 2, spread(peer) / 2
    low = (peer["seconds"] - half_peer) / (ours["seconds"] + half_ours)
    high_den = ours["seconds"] - half_ours
    high = (peer["seconds"] + half_peer) / high_den if high_den > 0 else math.inf
    return low, high


def extra_us(ours: dict | None, peer: dict | None) -> float | None:
    """How many microseconds ours takes more than peer (a budget goal's value)."""
    if not ours or not peer:
        return None
    return (ours["seconds"] - peer["seconds"]) * 1e6


def extra_us_interval(ours: dict | None, peer: dict | None) -> tuple[float, float] | None:
    """extra_us's range when each time may lie anywhere within half its IQR of its median;
    (-inf, inf) where either time has no IQR."""
    value = extra_us(ours, peer)
    if value is None:
        return None
    if spread(ours) is None or spread(peer) is None:
        return -math.inf, math.inf
    half = (spread(ours) + spread(peer)) / 2 * 1e6
    return value - half, value + half


def speedup(ours: dict | None, peer: dict | None) -> float | None:
    if not ours or not peer or not ours["seconds"] or not peer["seconds"]:
        return None
    return peer["seconds"] / ours["seconds"]


def fmt_ratio(value: float | None) -> str:
    return "n/a" if value is None or math.isnan(value) else f"{value:.2f}x"


def fmt_speedup(ours: dict | None, peer: dict | None) -> str:
    """A speedup cell: "1.02x (tie)" where the range of speedups the IQRs allow holds 1."""
    cell = fmt_ratio(speedup(ours, peer))
    interval = speedup_interval(ours, peer)
    known = interval and spread(ours) is not None and spread(peer) is not None
    if known and interval[0] <= 1.0 <= interval[1]:
        cell += " (tie)"
    return cell


VERDICT_RULE = (
    "A goal's verdict over the torch versions: **missed** if any version missed it, met only "
    "if every version that ran it met it, inconclusive otherwise (none missed, one or more "
    "inconclusive)."
)


def judge(value: float | None, interval: tuple[float, float] | None, line: float) -> str | None:
    """One torch version's verdict on a goal: met, missed or inconclusive (None: not run)."""
    if interval is None:
        return None
    low, high = interval
    if low >= line:
        return "met"
    if high < line:
        return "missed"
    # The IQRs straddle the goal line: this run cannot tell met from missed.
    return "inconclusive"


def judge_budget(interval: tuple[float, float] | None, budget: float) -> str | None:
    """A budget goal's verdict: met where every extra the IQRs allow is within the budget,
    missed where none is, inconclusive otherwise (None: not run)."""
    if interval is None:
        return None
    low, high = interval
    if high <= budget:
        return "met"
    if low > budget:
        return "missed"
    return "inconclusive"


def combine(verdicts: list[str | None]) -> str:
    """The verdict over torch versions (VERDICT_RULE)."""
    ran = [v for v in verdicts if v is not None]
    if not ran:
        return "not measured"
    if "missed" in ran:
        return "missed"
    return "met" if all(v == "met" for v in ran) else "inconclusive"


def judge_goals(runs: dict[str, dict], table) -> list[dict]:
    """Every goal judged on every case it names, under each torch version: a dict with the
    goal, case ("-" where not run), per-version (value, interval, verdict) and the verdict.
    A goal none of the runs measured (CUDA, with no GPU) is one entry, its cases listed."""
    versions = list(runs)
    goals: dict[tuple, dict] = {}
    for data in runs.values():
        for goal in data.get("goals", []):
            goals.setdefault(tuple(sorted((k, str(v)) for k, v in goal.items())), goal)
    judged: list[dict] = []
    not_run: dict[tuple[str, str], dict] = {}
    for goal in goals.values():
        matching = [
            (key, case, impls)
            for key, cases in table.items()
            if key[0] == goal["package"] and key[1] == goal["op"] and key[2] == goal["device"]
            for case, impls in cases.items()
            if goal.get("case") in (None, case)
        ]
        if not matching:
            entry = not_run.get((goal["package"], describe_goal(goal)))
            if entry is None:
                entry = {
                    "package": goal["package"],
                    "goal": describe_goal(goal),
                    "cases": [],
                    "per_version": [(None, None, None)] * len(versions),
                    "verdict": "not measured",
                }
                not_run[(goal["package"], describe_goal(goal))] = entry
                judged.append(entry)
            entry["cases"].append(goal.get("case") or "every case")
            continue
        for key, case, impls in matching:
            per_version = []
            for version in versions:
                ours = impls.get(goal["ours"], {}).get(version)
                peer = impls.get(goal["peer"], {}).get(version)
                if goal.get("max_extra_us") is not None:
                    value, interval = extra_us(ours, peer), extra_us_interval(ours, peer)
                    verdict = judge_budget(interval, goal["max_extra_us"])
                elif goal.get("metric"):
                    value = ours["extra"].get(goal["metric"]) if ours else None
                    interval = None if value is None else (value, value)
                    verdict = judge(value, interval, goal["min_speedup"])
                else:
                    value, interval = speedup(ours, peer), speedup_interval(ours, peer)
                    verdict = judge(value, interval, goal["min_speedup"])
                per_version.append((value, interval, verdict))
            judged.append(
                {
                    "package": goal["package"],
                    "goal": describe_goal(goal),
                    "cases": [f"{case} ({key[3]})"],
                    "per_version": per_version,
                    "verdict": combine([v for _, _, v in per_version]),
                    "unit": "us" if goal.get("max_extra_us") is not None else "x",
                }
            )
    return judged


def fmt_range(value: float | None, interval: tuple[float, float] | None, unit: str = "x") -> str:
    """A measured goal value with its range within the IQRs: "0.96x [0.95, 0.98]", or for
    a budget (unit "us") "+41.2 us [+30.5, +51.9]"."""
    if unit == "us":
        if value is None:
            return "n/a"
        if interval is None or math.isinf(interval[1]):
            return f"{value:+.1f} us no IQR"
        return f"{value:+.1f} us [{interval[0]:+.1f}, {interval[1]:+.1f}]"
    if interval is None:
        return fmt_ratio(value)
    low, high = interval
    if low == high:  # a metric: no interval
        return fmt_ratio(value)
    if low == 0 and math.isinf(high):
        return f"{fmt_ratio(value)} no IQR"
    return f"{fmt_ratio(value)} [{low:.2f}, {high:.2f}]"


def fmt_judged(
    value: float | None,
    interval: tuple[float, float] | None,
    verdict: str | None,
    unit: str = "x",
):
    """One version's cell of the goal table: "0.96x [0.95, 0.98] inconclusive"."""
    if verdict is None:
        return "not run"
    return f"{fmt_range(value, interval, unit)} {fmt_verdict(verdict)}"


def fmt_verdict(verdict: str) -> str:
    return "**missed**" if verdict == "missed" else verdict


def goal_rows(runs: dict[str, dict], table) -> list[list[str]]:
    """The goal table's rows: goal, case, one cell per torch version, the verdict."""
    return [
        [
            entry["package"],
            entry["goal"],
            ", ".join(entry["cases"]),
            *(fmt_judged(*cell, entry.get("unit", "x")) for cell in entry["per_version"]),
            fmt_verdict(entry["verdict"]),
        ]
        for entry in judge_goals(runs, table)
    ]  # fmt: skip


def describe_goal(goal: dict) -> str:
    if goal.get("max_extra_us") is not None:
        return (f"{goal['op']} {goal['device']}: {goal['ours']} at most "
                f"{goal['max_extra_us']:g} us over {goal['peer']}")  # fmt: skip
    if goal.get("tie"):
        return f"{goal['op']} {goal['device']}: {goal['ours']} ties {goal['peer']} (>= {goal['min_speedup']:.3g}x)"
    if goal.get("metric"):
        return f"{goal['op']} {goal['device']}: {goal['ours']} {goal['metric']} >= {goal['min_speedup']:.3g}"
    return f"{goal['op']} {goal['device']}: {goal['ours']} >= {goal['min_speedup']:.3g}x {goal['peer']}"


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def machine_section(runs: dict[str, dict]) -> str:
    lines = []
    for version, data in runs.items():
        m = data["machine"]
        gpu = m["gpu"]["name"] + f" x{m['gpu']['count']}" if m.get("gpu") else "no GPU"
        lines.append(
            f"- torch {version} (CUDA {data['cuda'] or 'none'}): {m['cpu']}, {m['cores']} cores "
            f"({m['torch_threads']} torch threads, {m['cpu_capability']}), {m['memory_gib']} GiB, {gpu}; "
            f"Python {m['python']}; {m['date']}{' (quick run)' if data.get('quick') else ''}"
            + (
                f"; load average {m['load_before']} before, {m.get('load_after')} after"
                if m.get("load_before") is not None
                else ""
            )
            + (f"; governor {m['governor']}" if m.get("governor") else "")
            + (f"; GLIBC_TUNABLES={m['malloc']}" if m.get("malloc") else "")
        )
    return "\n".join(lines)


def render(
    runs: dict[str, dict], *, plots: dict[tuple, str] | None = None, source: str | None = None
) -> str:
    """The report. plots: {(package, op, device, dtype): path relative to the report} to
    link from each op's section; source: where the raw files of an earlier run were read
    from, when re-rendering it (the header then says whose numbers these are)."""
    versions = list(runs)
    table = group(runs)
    flags = sanity_flags(runs)
    flagged = {
        (f["version"], f["package"], f["op"], f["case"], f["impl"], f["device"], f["dtype"])
        for f in flags
    }
    times = sum(len(data["measurements"]) for data in runs.values())
    row_count = sum(len(impls) for cases in table.values() for impls in cases.values())
    out = ["# Benchmark report", ""]
    if source:
        out += [
            "**The numbers are those of the last published run** (its machine and date below), "
            f"re-rendered from its raw files in `{source}` by `python -m benchmarks.report "
            "--from-raw`: nothing was timed for this rendering.",
            "",
        ]
    out += [machine_section(runs), ""]
    out += [
        "Times are medians (torch.utils.benchmark, CUDA synchronized), every implementation of a",
        "case timed round-robin in one process. **speedup** = peer's time / ours: above 1 ours is",
        f"faster. A time more than {int((REGRESSION - 1) * 100)}% above the first torch version's is marked ▲.",
        "",
        "**Spread**, the one figure of noise in this report: the IQR (interquartile range) of a",
        "time's per-call times (one per timed block, all its rounds together) as a percentage of",
        f"its median, e.g. `7.02 us IQR 1%`; `IQR n/a` where fewer than {MIN_SAMPLES} per-call "
        "times were taken,",
        f"and `(n=6)` after a time that rests on fewer than {FEW_SAMPLES} of them. The same IQR "
        f"flags a noisy time (⚠, over {int(SPREAD_LIMIT * 100)}%)",
        "and bounds every verdict: each time may lie anywhere within half its IQR of its median;",
        "the speedup's range so taken decides a goal (met above the line, missed below it,",
        "inconclusive across it, or where a time has no IQR) and marks a tie, (tie), where it",
        "contains 1.00x.",
    ]
    if any("samples" not in m for data in runs.values() for m in data["measurements"]):
        out += [
            "Raw files from before the harness pooled its rounds (no `samples` count in them, as",
            "here) hold the IQR of each time's median round alone, and their `n` is",
            "the calls of all rounds: a slow time's IQR there rests on a third of them.",
        ]
    out += [
        "",
        f"**Sanity checks: {len(flagged)} of {times} times flagged** ({row_count} rows × "
        f"{len(versions)} torch version{'s' * (len(versions) != 1)}"
        + (", not every row under every version" if row_count * len(versions) != times else "")
        + f"; {len(flags)} flag{'s' * (len(flags) != 1)}, ⚠ below): "
        + (
            "their figures cannot all be right (noise, or a machine busy with other work); "
            "rerun on a quiet machine before quoting them."
            if flags
            else "no IQR over "
            f"{int(SPREAD_LIMIT * 100)}% or missing, no forward slower than its forward+backward, "
            "no floor slower than the kernel it bounds."
        ),
        "",
        "## Goals",
        "",
        "The goals are those of the open issues. Each torch version's cell is our speedup, its",
        "range [low, high] within the IQRs, and that version's verdict; a budget goal's",
        "cell (at most N us over a peer) is our time minus the peer's, in microseconds, with",
        "its range. " + VERDICT_RULE,
        "",
    ]
    out.append(
        markdown_table(
            ["package", "goal", "case", *[f"torch {v}" for v in versions], "verdict"],
            goal_rows(runs, table),
        )
    )
    if flags:
        out += ["", "## Sanity checks", ""]
        out.append(
            markdown_table(
                ["torch", "package", "op", "case", "impl", "device", "why flagged"],
                [
                    [f["version"], f["package"], f["op"], f["case"],
                     impl_label(f["package"], f["case"], f["impl"]), f["device"], f["reason"]]
                    for f in flags
                ],
            )
        )  # fmt: skip
    for key, cases in table.items():
        package, op, device, dtype = key
        out += ["", f"## {package}: {op} ({device}, {dtype})", ""]
        if plots and key in plots:
            out += [
                f"Plot: [speedup against the goal lines, and times]({quote(plots[key])}).",
                "",
            ]
        rows = []
        for case, impls in cases.items():
            ours_name = next(
                (name for name, per in impls.items() if any(m["ours"] for m in per.values())), None
            )
            for impl, per_version in impls.items():
                label = impl_label(package, case, impl)
                row = [case, f"**{label}**" if impl == ours_name else label]
                first = None
                for version in versions:
                    m = per_version.get(version)
                    if m is None:
                        row.append("-")
                        continue
                    cell = format_time(m)
                    if (version, package, op, case, impl, device, dtype) in flagged:
                        cell += " ⚠"
                    if first is None:
                        first = m["seconds"]
                    elif m["seconds"] > first * REGRESSION:
                        cell += " ▲"
                    row.append(cell)
                for version in versions:
                    if impl == ours_name:
                        row.append("-")
                    else:
                        ours = impls.get(ours_name, {}).get(version) if ours_name else None
                        row.append(fmt_speedup(ours, per_version.get(version)))
                extras = per_version.get(versions[-1]) or next(iter(per_version.values()))
                row.append(", ".join(f"{k} {v:.3g}" for k, v in extras["extra"].items()) or "")
                rows.append(row)
        header = [
            "case",
            "impl",
            *[f"time {v}" for v in versions],
            *[f"speedup {v}" for v in versions],
            "extra",
        ]
        out.append(markdown_table(header, rows))
    builds = [
        [
            package,
            version,
            f"{b['clean_build_s']:.1f}",
            f"{b['noop_rebuild_s']:.1f}",
            f"{b['wheel_mb']:.2f}" if "wheel_mb" in b else "-",  # raw files before sizes
        ]
        for version, data in runs.items()
        for package, b in data.get("builds", {}).items()
    ]
    if builds:
        out += [
            "",
            "## Builds",
            "",
            "`pip wheel --no-build-isolation` with a fresh build folder, then again (no-op);"
            " the wheel's size (release build, no debug info; - in runs from before it was measured).",
            "",
        ]
        out.append(
            markdown_table(
                ["package", "torch", "clean build (s)", "no-op rebuild (s)", "wheel (MB)"], builds
            )
        )
    out += rebuild_section(REBUILDS)
    out += gpu_section(GPU_LOGS)
    skipped = [
        f"- torch {v}: {p} skipped: {why}"
        for v, d in runs.items()
        for p, why in d.get("skipped", {}).items()
    ]
    failures = [
        f"- torch {v}: {p} FAILED: {why}"
        for v, d in runs.items()
        for p, why in d.get("failures", {}).items()
    ]
    missing = [
        f"- torch {v}: {p} did not measure its headline rows {', '.join(map(_key, keys))}"
        for v, d in runs.items()
        for p, keys in d.get("missing", {}).items()
    ]
    cut = [f"- torch {v}: {_cut_short(d)}" for v, d in runs.items() if not d.get("complete", True)]
    notes = [f"- torch {v}: {n}" for v, d in runs.items() for n in d.get("notes", [])]
    if skipped or failures or missing or cut or notes:
        out += ["", "## Skipped, failed, notes", "", *cut, *skipped, *failures, *missing, *notes]
    return "\n".join(out) + "\n"


REBUILDS = ROOT / "benchmarks" / "results" / "rebuilds.txt"
GPU_LOGS = ROOT / "benchmarks" / "results" / "gpu"


def gpu_section(folder: Path) -> list[str]:
    """The committed results of GPU runs (.ci/gpu_check.sh's bench step on a lent GPU
    machine), each named by its date, machine and torch: CI has no GPU, so no report run
    measures CUDA here; these say where CUDA figures come from and when. A .log is the
    step's output (listed); a .jsonl its rows file (benchmarks.run --rows), shown with
    the machine, the date and the CUDA goals' verdicts."""
    logs = sorted(folder.glob("*.log")) if folder.is_dir() else []
    rows_files = sorted(folder.glob("*.jsonl")) if folder.is_dir() else []
    if not logs and not rows_files:
        return []
    out = [
        "",
        "## CUDA, from GPU runs",
        "",
        "Not measured by this run: the bench step of `.ci/gpu_check.sh` on a GPU machine, "
        "committed as its log (first lines: the machine and what was cut short) or as its "
        "rows file (`benchmarks.run --rows`: every row written as it was measured).",
        "",
    ]
    for log in logs:
        lines = log.read_text().splitlines()
        count = sum("cuda " in line and line.startswith("  ") for line in lines)
        header = " ".join(line.lstrip("# ") for line in lines if line.startswith("#"))
        out.append(f"- `benchmarks/results/gpu/{log.name}`: {count} CUDA rows. {header}")
    for path in rows_files:
        out += gpu_rows_section(path, f"benchmarks/results/gpu/{path.name}")
    return out


def _key(key: tuple | list) -> str:
    op, case, device = key
    return f"{op} {case} ({device})"


def _cut_short(data: dict) -> str:
    """What a run that never wrote its end line did not reach."""
    started = data.get("started", [])
    not_reached = [p for p in data.get("packages", []) if p not in started]
    measured = {(m["op"], m["case"], m["device"]) for m in data["measurements"]}
    unmeasured = [
        _key(key)
        for package in started[-1:]  # the package it was in when it stopped, unless it failed
        if package not in data.get("failures", {})
        for key in data.get("headline_rows", {}).get(package, [])
        if tuple(key) not in measured
    ]
    return (
        f"**cut short** after {len(data['measurements'])} rows (no end line)"
        + (f"; rows of {started[-1]} not measured: {', '.join(unmeasured)}" if unmeasured else "")
        + (f"; not reached: {', '.join(not_reached)}" if not_reached else "")
    )


def gpu_machine(data: dict) -> str:
    """One line: the GPU, torch, CUDA, Python and date of a run."""
    m = data.get("machine", {})
    gpu = m.get("gpu")
    name = (
        f"{gpu['name']} (sm_{gpu['capability'].replace('.', '')}, {gpu['memory_gib']} GiB)"
        if gpu
        else "no GPU visible"
    )
    return (
        f"{name}, torch {data['torch']} (CUDA {data.get('cuda') or 'none'}), "
        f"Python {m.get('python', '?')}, {m.get('cpu', '?')}; {m.get('date', 'date unknown')}"
    )


def gpu_rows_section(path: Path, name: str | None = None) -> list[str]:
    """A rows file's CUDA runs: machine and date, whether the run finished, the verdict of
    every CUDA goal it measured, and each CUDA row with its spread and speedup."""
    out = []
    for data in rows.read(path):
        measured = [m for m in data["measurements"] if m["device"] == "cuda"]
        wanted = [k for keys in data.get("headline_rows", {}).values() for k in keys]
        done = {(m["op"], m["case"], m["device"]) for m in measured}
        what = (
            f"headline rows, {sum(tuple(k) in done for k in wanted)} of {len(wanted)} measured"
            if data.get("headline")
            else f"{len(measured)} CUDA rows"
        )
        state = f"complete in {data['seconds']} s" if data.get("complete") else _cut_short(data)
        out += ["", f"### `{name or path}`", "", f"{gpu_machine(data)}. {what}; {state}."]
        for package, error in data.get("failures", {}).items():
            out.append(f"- {package} FAILED: {error}")
        for package, keys in data.get("missing", {}).items():
            out.append(f"- {package} did not measure {', '.join(map(_key, keys))}")
        cuda_goals = [g for g in data.get("goals", []) if g["device"] == "cuda"]
        runs = {data["torch"]: {**data, "measurements": measured, "goals": cuda_goals}}
        judged = judge_goals(runs, group(runs))
        not_measured = sorted({e["goal"] for e in judged if e["verdict"] == "not measured"})
        judged = [e for e in judged if e["verdict"] != "not measured"]
        if judged:
            out += ["", markdown_table(
                ["package", "goal", "case", "measured", "verdict"],
                [[e["package"], e["goal"], e["cases"][0],
                  fmt_range(*e["per_version"][0][:2], e.get("unit", "x")),
                  fmt_verdict(e["verdict"])] for e in judged],
            )]  # fmt: skip
        if not_measured:
            out += ["", "CUDA goals this run did not measure: " + "; ".join(not_measured) + "."]
        if measured:
            out += ["", markdown_table(
                ["package", "op", "case", "impl", "time", "speedup"], _gpu_rows(measured)
            )]  # fmt: skip
    return out


def _gpu_rows(measured: list[dict]) -> list[list[str]]:
    """One row per measurement: time with its IQR, and peer's time over ours (bold)."""
    ours_of: dict[tuple, dict] = {}
    for m in measured:
        key = (m["package"], m["op"], m["case"], m["dtype"])
        if m["ours"] and key not in ours_of:
            ours_of[key] = m
    table = []
    for m in measured:
        ours = ours_of.get((m["package"], m["op"], m["case"], m["dtype"]))
        ratio = "-" if m is ours else fmt_speedup(ours, m)
        label = impl_label(m["package"], m["case"], m["impl"])
        impl = f"**{label}**" if m is ours else label
        table.append([m["package"], m["op"], m["case"], impl, format_time(m), ratio])
    return table


def _committed_on(path: Path) -> str:
    """The date of the commit that last changed path, else its modification date."""
    import subprocess
    from datetime import datetime, timezone

    try:
        date = subprocess.run(
            ["git", "log", "-1", "--format=%cs", "--", path.name],
            cwd=path.parent, capture_output=True, text=True, check=False,
        ).stdout.strip()  # fmt: skip
    except OSError:
        date = ""
    return date or datetime.fromtimestamp(path.stat().st_mtime, timezone.utc).strftime("%Y-%m-%d")


def rebuild_section(path: Path) -> list[str]:
    """The compiler-cache table from benchmarks/rebuild_cache.sh's output, when committed."""
    if not path.is_file():
        return []
    lines = path.read_text().splitlines()
    header = [line.lstrip("# ") for line in lines if line.startswith("#")]
    times: dict[str, dict[str, str]] = {}
    for line in lines:
        parts = line.split()
        if len(parts) == 3 and not line.startswith("#"):
            times.setdefault(parts[1], {})[parts[0]] = parts[2]
    rows = []
    for step, by_mode in times.items():
        off, on = by_mode.get("off"), by_mode.get("on")
        ratio = f"{float(off) / float(on):.1f}x" if off and on and float(on) > 0 else "-"
        rows.append([step, off or "-", on or "-", ratio])
    return [
        "",
        "### Rebuilds with a compiler cache",
        "",
        f"Not measured by this run: the output of a separate, manual run ({_committed_on(path)}) of "
        f"`bash benchmarks/rebuild_cache.sh PYTHON` ({'; '.join(header)}): `pip install "
        "--no-build-isolation` with `USE_CCACHE=0` and with ccache (empty cache at the first "
        "build); the build folder emptied is what a new torch tag, `rm -rf build` or another "
        "checkout costs.",
        "",
        markdown_table(["build", "no cache (s)", "ccache (s)", "speed-up"], rows),
    ]


def case_family(case: str) -> str:
    """What a case holds fixed besides its size: every token but the first ("N=1024 64->512"
    -> "64->512"). Only points of one family are joined by a line: two shapes of a problem
    are not one curve (gc_cpp's 512->64 and 64->512 at the same N)."""
    return " ".join(case.split()[1:])


def plot_name(key: tuple) -> str:
    """The PNG of one (package, op, device, dtype) under plots/."""
    parts = (part.replace(" ", "_").replace("/", "_").replace("+", "plus") for part in key)
    return "-".join(parts) + ".png"


def plot(runs: dict[str, dict], out_dir: Path) -> dict[tuple, Path] | None:
    """One PNG per (package, op, device, dtype), a column per torch version: above, our
    speedup over each peer against size, error bars its range within the IQRs, the goal
    lines dashed in the peer's colour, ours the line at 1 (bold); below, the times, error
    bars the IQR, ours bold. One line per implementation and case family. None where
    matplotlib is not installed."""
    try:
        import matplotlib
    except ImportError:
        return None

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import (
        FixedLocator,
        FuncFormatter,
        LogLocator,
        NullFormatter,
        NullLocator,
    )

    versions = list(runs)
    table = group(runs)
    labels: dict[str, str] = {}
    goals: list[dict] = []
    for data in runs.values():
        labels.update(data.get("size_labels", {}))
        goals += [g for g in data.get("goals", []) if g not in goals]
    written: dict[tuple, Path] = {}
    out_dir.mkdir(parents=True, exist_ok=True)
    for key, cases in table.items():
        package, op, device, _ = key
        impls = list(dict.fromkeys(impl for per_impl in cases.values() for impl in per_impl))
        ours_name = next(
            (
                impl
                for per_impl in cases.values()
                for impl, per in per_impl.items()
                if any(m["ours"] for m in per.values())
            ),
            None,
        )
        families = sorted({case_family(case) for case in cases})
        colour = {impl: f"C{i % 10}" for i, impl in enumerate(i for i in impls if i != ours_name)}
        colour[ours_name] = "black"
        style = {f: ("-", "--", ":", "-.")[i % 4] for i, f in enumerate(families)}
        marker = {f: "osd^v"[i % 5] for i, f in enumerate(families)}
        sizes = sorted(
            {m["size"] for per in cases.values() for v in per.values() for m in v.values()}
        )
        fig, axes = plt.subplots(
            2, len(versions), figsize=(6 * len(versions), 8.5), squeeze=False, sharex=True,
            sharey="row",
        )  # fmt: skip
        for column, version in enumerate(versions):
            top, bottom = axes[0][column], axes[1][column]
            for impl in impls:
                for family in families:
                    points = []
                    for case, per_impl in cases.items():
                        m = per_impl.get(impl, {}).get(version)
                        ours = per_impl.get(ours_name, {}).get(version)
                        if m is None or case_family(case) != family:
                            continue
                        points.append((m["size"], case, m, ours))
                    if not points:
                        continue
                    points.sort(key=lambda p: p[0])
                    name = impl_label(package, points[0][1], impl)
                    label = f"{name} ({family})" if family else name
                    bold = impl == ours_name
                    line = {
                        "color": colour[impl], "linestyle": style[family],
                        "marker": marker[family], "linewidth": 2.5 if bold else 1.2,
                        "markersize": 7 if bold else 4, "capsize": 3,
                    }  # fmt: skip
                    xs = [p[0] for p in points]
                    ys = [p[2]["seconds"] for p in points]
                    half = [(spread(p[2]) or 0.0) / 2 for p in points]
                    bottom.errorbar(xs, ys, yerr=half, label=label, **line)
                    if bold:
                        continue
                    ratios, low_err, high_err = [], [], []
                    for _, _, m, ours in points:
                        value = speedup(ours, m)
                        interval = speedup_interval(ours, m)
                        if value is None or interval is None:
                            value, interval = math.nan, (math.nan, math.nan)
                        if math.isinf(interval[1]):  # no IQR: no bar
                            interval = (value, value)
                        ratios.append(value)
                        low_err.append(max(0.0, value - interval[0]))
                        high_err.append(max(0.0, interval[1] - value))
                    top.errorbar(xs, ratios, yerr=[low_err, high_err], label=label, **line)
            top.axhline(1.0, color="black", linewidth=2.5, label=f"{ours_name} (ours) = 1")
            # A goal on every case is a dashed line; goals on some cases, a tick at each
            # (one legend entry per peer and line).
            ticks: dict[tuple[str, float], list[float]] = {}
            for goal in goals:
                if (goal["package"], goal["op"], goal["device"]) != (package, op, device):
                    continue
                if (goal.get("metric") or goal.get("max_extra_us") is not None
                        or goal["ours"] != ours_name or goal["peer"] not in colour):  # fmt: skip
                    continue
                if goal.get("case") is None:
                    top.axhline(goal["min_speedup"], color=colour[goal["peer"]], linestyle="--",
                                linewidth=1, label=f"goal: >= {goal['min_speedup']:.3g}x "
                                f"{goal['peer']}")  # fmt: skip
                    continue
                ticks.setdefault((goal["peer"], goal["min_speedup"]), []).extend(
                    m["size"]
                    for case, per_impl in cases.items()
                    if case == goal["case"]
                    for m in per_impl.get(goal["peer"], {}).values()
                )
            for (peer, line), at in ticks.items():
                if at:
                    top.plot(sorted(set(at)), [line] * len(set(at)), linestyle="", marker="_",
                             markersize=22, markeredgewidth=2, color=colour[peer],
                             label=f"goal: >= {line:.3g}x {peer} (its cases)")  # fmt: skip
            top.set_title(f"torch {version}")
            for ax in (top, bottom):
                ax.set_xscale("log")
                ax.set_yscale("log")
                # Ticks at the measured sizes only, written out: log axes over a decade or
                # less otherwise print overlapping minor labels ("2x10^3 3x10^4x10^3").
                ax.xaxis.set_major_locator(FixedLocator(sizes))
                ax.xaxis.set_minor_locator(NullLocator())
                ax.xaxis.set_minor_formatter(NullFormatter())
                ax.set_xticks(sizes, [f"{x:,.0f}" if x < 1e5 else f"{x:.3g}" for x in sizes])
                ax.grid(True, which="both", alpha=0.3)
            # Speedups span a decade or two: ticks at 1, 2 and 5 of each, written "0.5x".
            top.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
            top.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:.3g}x"))
            top.yaxis.set_minor_formatter(NullFormatter())
            bottom.set_xlabel(labels.get(package, "size"))
        axes[0][0].set_ylabel("speedup of ours (peer's time / ours)")
        axes[1][0].set_ylabel("seconds per call (median; bars: IQR)")
        axes[0][-1].legend(fontsize=7)
        axes[1][-1].legend(fontsize=7)
        fig.suptitle(f"{package}: {op} ({key[2]}, {key[3]})")
        fig.tight_layout()
        path = out_dir / plot_name(key)
        fig.savefig(path, dpi=80)
        plt.close(fig)
        written[key] = path
    return written


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "raw", nargs="*", type=Path, help="raw files from benchmarks.run (--output or --rows)"
    )
    parser.add_argument("--output-dir", type=Path, default=ROOT / "benchmarks" / "results")
    parser.add_argument("--no-plots", action="store_true")
    parser.add_argument(
        "--from-raw",
        action="store_true",
        help="re-render the report from the raw files under OUTPUT_DIR/raw (the last "
        "published run's), timing nothing",
    )
    parser.add_argument(
        "--gpu-rows",
        nargs="+",
        type=Path,
        help="print only the GPU section for these rows files (benchmarks.run --rows), "
        "also of a run that was cut short; writes nothing",
    )
    args = parser.parse_args()
    if args.gpu_rows:
        print("\n".join(["## CUDA, from GPU runs", *(
            line for path in args.gpu_rows for line in gpu_rows_section(path)
        )]))  # fmt: skip
        return 0
    source = None
    if args.from_raw:
        if args.raw:
            parser.error("--from-raw reads OUTPUT_DIR/raw: name no raw files")
        raw_dir = args.output_dir / "raw"
        args.raw = sorted(raw_dir.glob("*.json"), key=_torch_version)
        if not args.raw:
            parser.error(f"--from-raw: no raw files in {raw_dir}")
        source = str(raw_dir.relative_to(ROOT) if raw_dir.is_relative_to(ROOT) else raw_dir) + "/"
    if not args.raw:
        parser.error("name the raw files to report (or --from-raw, or --gpu-rows)")
    runs = load(args.raw)
    args.output_dir.mkdir(parents=True, exist_ok=True)
    written = None if args.no_plots else plot(runs, args.output_dir / "plots")
    links = {
        key: path.relative_to(args.output_dir).as_posix() for key, path in (written or {}).items()
    }
    text = render(runs, plots=links, source=source)
    (args.output_dir / "report.md").write_text(text)
    (args.output_dir / "results.json").write_text(
        json.dumps({"versions": runs, "flags": sanity_flags(runs)}, indent=1) + "\n"
    )
    print(text)
    if not args.no_plots and written is None:
        print("plots: skipped, matplotlib is not installed (pip install matplotlib)")
    for path in (written or {}).values():
        print(f"plot: {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    print(f"report: {args.output_dir / 'report.md'}")
    return 0


def _torch_version(path: Path):
    """Raw files in torch-version order (torch-2.9.0 before torch-2.13.0)."""
    from packaging.version import InvalidVersion, Version

    try:
        return (0, Version(path.stem.removeprefix("torch-")), path.name)
    except InvalidVersion:
        return (1, Version("0"), path.name)


if __name__ == "__main__":
    sys.exit(main())

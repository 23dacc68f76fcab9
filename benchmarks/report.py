"""Merge raw benchmark files (one per torch version) into one report.

    python benchmarks/report.py --output-dir benchmarks/results raw/torch-2.13.0.json raw/torch-2.14.1.json
    python benchmarks/report.py --gpu-rows OUT/bench-rows.jsonl   # a GPU run's section only

Writes report.md (also printed), results.json (every raw figure, by torch version) and, where
matplotlib is installed, one PNG per op under plots/: time against size, one line per
implementation, one panel per torch version. Columns put the torch versions side by side,
so that a regression of an op or of a peer between torch releases shows in one row.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import rows  # noqa: E402
from benchmarks.harness import format_seconds  # noqa: E402

REGRESSION = 1.10  # a time more than 10% above the first version's is flagged


def load(paths: list[Path]) -> dict[str, dict[str, Any]]:
    """{torch version: raw report}, in the order given: benchmarks/run.py's JSON files, or its
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


SPREAD_LIMIT = 0.10  # an interquartile range over 10% of the median flags the row

# The op that times forward and backward together, for an op that times the forward alone.
_WITH_BACKWARD = (" fwd+bwd", "+backward")


def _row(version: str, m: dict, reason: str) -> dict:
    keys = ("package", "op", "case", "impl", "device", "dtype")
    return {"version": version, **{k: m[k] for k in keys}, "reason": reason}


def sanity_flags(runs: dict[str, dict]) -> list[dict]:
    """Rows whose figures cannot all be right, so that a report never publishes them silently.

    - spread: the interquartile range over SPREAD_LIMIT of the median (a noisy machine);
    - a forward slower than the same implementation's forward+backward on the same case;
    - a floor (an implementation named "... floor ...") slower than our kernel it bounds.
    """
    flags = []
    for version, data in runs.items():
        by_key: dict[tuple, dict] = {}
        for m in data["measurements"]:
            by_key[(m["package"], m["op"], m["case"], m["impl"], m["device"], m["dtype"])] = m
        for m in data["measurements"]:
            if m["seconds"] and m.get("iqr", 0) / m["seconds"] > SPREAD_LIMIT:
                flags.append(
                    _row(version, m, f"spread {100 * m['iqr'] / m['seconds']:.0f}% of the median")
                )
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
    """The speedup's range when each time may lie anywhere in its interquartile range."""
    if not ours or not peer or not ours["seconds"] or not peer["seconds"]:
        return None
    half_ours, half_peer = ours.get("iqr", 0) / 2, peer.get("iqr", 0) / 2
    low = (peer["seconds"] - half_peer) / (ours["seconds"] + half_ours)
    high_den = ours["seconds"] - half_ours
    high = (peer["seconds"] + half_peer) / high_den if high_den > 0 else math.inf
    return low, high


def speedup(ours: dict | None, peer: dict | None) -> float | None:
    if not ours or not peer or not ours["seconds"] or not peer["seconds"]:
        return None
    return peer["seconds"] / ours["seconds"]


def fmt_ratio(value: float | None) -> str:
    return "n/a" if value is None or math.isnan(value) else f"{value:.2f}x"


def goal_rows(runs: dict[str, dict], table) -> list[list[str]]:
    """One row per goal and case: the measured value per torch version and the verdict."""
    versions = list(runs)
    goals: dict[tuple, dict] = {}
    for data in runs.values():
        for goal in data.get("goals", []):
            goals.setdefault(tuple(sorted((k, str(v)) for k, v in goal.items())), goal)
    rows = []
    for goal in goals.values():
        matching = [
            (key, case, impls)
            for key, cases in table.items()
            if key[0] == goal["package"] and key[1] == goal["op"] and key[2] == goal["device"]
            for case, impls in cases.items()
            if goal.get("case") in (None, case)
        ]
        if not matching:
            rows.append(
                [
                    goal["package"],
                    describe_goal(goal),
                    "-",
                    *["not run"] * len(versions),
                    "-",
                    "not measured",
                ]
            )
            continue
        for key, case, impls in matching:
            values, intervals = [], []
            for version in versions:
                ours = impls.get(goal["ours"], {}).get(version)
                if goal.get("metric"):
                    value = ours["extra"].get(goal["metric"]) if ours else None
                    values.append(value)
                    intervals.append(None if value is None else (value, value))
                else:
                    peer = impls.get(goal["peer"], {}).get(version)
                    values.append(speedup(ours, peer))
                    intervals.append(speedup_interval(ours, peer))
            measured = [i for i in intervals if i is not None]
            line = goal["min_speedup"]
            met = sum(low >= line for low, _ in measured)
            if not measured:
                verdict = "not measured"
            elif met == len(measured):
                verdict = "met"
            elif any(high < line for _, high in measured):
                verdict = "**missed**"
            else:
                # Some version's interquartile ranges straddle the goal line: this run
                # cannot tell met from missed.
                verdict = "inconclusive"
            rows.append(
                [
                    goal["package"],
                    describe_goal(goal),
                    f"{case} ({key[3]})",
                    *map(fmt_ratio, values),
                    f"{met} of {len(measured)}" if measured else "-",
                    verdict,
                ]
            )
    return rows


def describe_goal(goal: dict) -> str:
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
        )
    return "\n".join(lines)


def render(runs: dict[str, dict]) -> str:
    versions = list(runs)
    table = group(runs)
    flags = sanity_flags(runs)
    flagged = {
        (f["version"], f["package"], f["op"], f["case"], f["impl"], f["device"], f["dtype"])
        for f in flags
    }
    total = sum(len(data["measurements"]) for data in runs.values())
    out = ["# Benchmark report", "", machine_section(runs), ""]
    out += [
        "Times are medians (torch.utils.benchmark, CUDA synchronized), every implementation of a",
        "case timed round-robin in one process. **speedup** = peer's time / ours: above 1 ours is",
        f"faster. A time more than {int((REGRESSION - 1) * 100)}% above the first torch version's is marked ▲.",
        "A goal is met when the speedup is above the line with every time anywhere in its",
        "interquartile range, missed when it is below it so, and inconclusive in between; a",
        "speedup whose range so taken contains 1.00x is a tie, marked (tie). The goals are",
        'those of the open issues; "versions met" counts the torch versions that met one.',
        "",
        f"**Sanity checks: {len(flags)} of {total} rows flagged** (⚠ below): "
        + (
            "their figures cannot all be right (noise, or a machine busy with other work); "
            "rerun on a quiet machine before quoting them."
            if flags
            else "no spread over "
            f"{int(SPREAD_LIMIT * 100)}%, no forward slower than its forward+backward, no "
            "floor slower than the kernel it bounds."
        ),
        "",
        "## Goals",
        "",
    ]
    out.append(
        markdown_table(
            [
                "package",
                "goal",
                "case",
                *[f"torch {v}" for v in versions],
                "versions met",
                "verdict",
            ],
            goal_rows(runs, table),
        )
    )
    if flags:
        out += ["", "## Sanity checks", ""]
        out.append(
            markdown_table(
                ["torch", "package", "op", "case", "impl", "device", "why flagged"],
                [
                    [f["version"], f["package"], f["op"], f["case"], f["impl"], f["device"],
                     f["reason"]]
                    for f in flags
                ],
            )
        )  # fmt: skip
    for (package, op, device, dtype), cases in table.items():
        out += ["", f"## {package}: {op} ({device}, {dtype})", ""]
        rows = []
        for case, impls in cases.items():
            ours_name = next(
                (name for name, per in impls.items() if any(m["ours"] for m in per.values())), None
            )
            for impl, per_version in impls.items():
                row = [case, f"**{impl}**" if impl == ours_name else impl]
                first = None
                for version in versions:
                    m = per_version.get(version)
                    if m is None:
                        row.append("-")
                        continue
                    cell = format_seconds(m["seconds"])
                    if m.get("iqr") and m["seconds"]:
                        cell += f" ±{100 * m['iqr'] / m['seconds'] / 2:.0f}%"
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
                        peer = per_version.get(version)
                        cell = fmt_ratio(speedup(ours, peer))
                        interval = speedup_interval(ours, peer)
                        if interval and interval[0] <= 1.0 <= interval[1]:
                            cell += " (tie)"
                        row.append(cell)
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
    step's output (listed); a .jsonl its rows file (benchmarks/run.py --rows), shown with
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
        "rows file (`benchmarks/run.py --rows`: every row written as it was measured).",
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
        judged = goal_rows(runs, group(runs))
        not_measured = sorted({row[1] for row in judged if row[-1] == "not measured"})
        judged = [row for row in judged if row[-1] != "not measured"]
        if judged:
            out += ["", markdown_table(
                ["package", "goal", "case", "measured", "verdict"],
                [[*row[:4], row[-1]] for row in judged],
            )]  # fmt: skip
        if not_measured:
            out += ["", "CUDA goals this run did not measure: " + "; ".join(not_measured) + "."]
        if measured:
            out += ["", markdown_table(
                ["package", "op", "case", "impl", "time", "speedup"], _gpu_rows(measured)
            )]  # fmt: skip
    return out


def _gpu_rows(measured: list[dict]) -> list[list[str]]:
    """One row per measurement: time ± half its IQR, and peer's time over ours (bold)."""
    ours_of: dict[tuple, dict] = {}
    for m in measured:
        key = (m["package"], m["op"], m["case"], m["dtype"])
        if m["ours"] and key not in ours_of:
            ours_of[key] = m
    table = []
    for m in measured:
        ours = ours_of.get((m["package"], m["op"], m["case"], m["dtype"]))
        time = format_seconds(m["seconds"])
        if m.get("iqr") and m["seconds"]:
            time += f" ±{100 * m['iqr'] / m['seconds'] / 2:.0f}%"
        if m is ours:
            ratio = "-"
        else:
            ratio = fmt_ratio(speedup(ours, m))
            interval = speedup_interval(ours, m)
            if interval and interval[0] <= 1.0 <= interval[1]:
                ratio += " (tie)"
        impl = f"**{m['impl']}**" if m is ours else m["impl"]
        table.append([m["package"], m["op"], m["case"], impl, time, ratio])
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


def plot(runs: dict[str, dict], out_dir: Path) -> list[Path] | None:
    """One PNG per (package, op, device, dtype): time against size, a panel per torch version,
    one line per implementation and case family. None where matplotlib is not installed."""
    try:
        import matplotlib
    except ImportError:
        return None

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, NullFormatter, NullLocator

    versions = list(runs)
    written = []
    series: dict[tuple, dict[str, dict[tuple[str, str], list[tuple[float, float]]]]] = defaultdict(
        lambda: defaultdict(dict)
    )
    labels: dict[str, str] = {}
    for version, data in runs.items():
        labels.update(data.get("size_labels", {}))
        for m in data["measurements"]:
            key = (m["package"], m["op"], m["device"], m["dtype"])
            line = (m["impl"], case_family(m["case"]))
            series[key][version].setdefault(line, []).append((m["size"], m["seconds"]))
    out_dir.mkdir(parents=True, exist_ok=True)
    for key, per_version in series.items():
        fig, axes = plt.subplots(
            1, len(versions), figsize=(6 * len(versions), 4.5), squeeze=False, sharey=True
        )
        sizes = sorted({x for lines in per_version.values() for p in lines.values() for x, _ in p})
        # One colour per implementation, one line style (and marker) per case family.
        impls = sorted({impl for lines in per_version.values() for impl, _ in lines})
        families = sorted({family for lines in per_version.values() for _, family in lines})
        colour = {impl: f"C{i % 10}" for i, impl in enumerate(impls)}
        style = {f: ("-", "--", ":", "-.")[i % 4] for i, f in enumerate(families)}
        marker = {f: "osd^v"[i % 5] for i, f in enumerate(families)}
        for ax, version in zip(axes[0], versions, strict=True):
            for (impl, family), points in sorted(per_version.get(version, {}).items()):
                points.sort()
                xs, ys = zip(*points, strict=True)
                ax.plot(
                    xs,
                    ys,
                    color=colour[impl],
                    linestyle=style[family],
                    marker=marker[family],
                    label=f"{impl} ({family})" if family else impl,
                )
            ax.set_xscale("log")
            ax.set_yscale("log")
            # Ticks at the measured sizes only, written out: log axes over a decade or less
            # otherwise print overlapping minor labels ("2x10^3 3x10^4x10^3").
            ax.xaxis.set_major_locator(FixedLocator(sizes))
            ax.xaxis.set_minor_locator(NullLocator())
            ax.xaxis.set_minor_formatter(NullFormatter())
            ax.set_xticks(sizes, [f"{x:,.0f}" if x < 1e5 else f"{x:.3g}" for x in sizes])
            ax.set_title(f"torch {version}")
            ax.set_xlabel(labels.get(key[0], "size"))
            ax.grid(True, which="both", alpha=0.3)
        axes[0][0].set_ylabel("seconds per call (median)")
        axes[0][-1].legend(fontsize=7)
        fig.suptitle(f"{key[0]}: {key[1]} ({key[2]}, {key[3]})")
        fig.tight_layout()
        name = (
            "-".join(part.replace(" ", "_").replace("/", "_").replace("+", "plus") for part in key)
            + ".png"
        )
        path = out_dir / name
        fig.savefig(path, dpi=90)
        plt.close(fig)
        written.append(path)
    return written


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "raw", nargs="*", type=Path, help="raw files from benchmarks/run.py (--output or --rows)"
    )
    parser.add_argument("--output-dir", type=Path, default=ROOT / "benchmarks" / "results")
    parser.add_argument("--no-plots", action="store_true")
    parser.add_argument(
        "--gpu-rows",
        nargs="+",
        type=Path,
        help="print only the GPU section for these rows files (benchmarks/run.py --rows), "
        "also of a run that was cut short; writes nothing",
    )
    args = parser.parse_args()
    if args.gpu_rows:
        print("\n".join(["## CUDA, from GPU runs", *(
            line for path in args.gpu_rows for line in gpu_rows_section(path)
        )]))  # fmt: skip
        return 0
    if not args.raw:
        parser.error("name the raw files to report (or --gpu-rows)")
    runs = load(args.raw)
    text = render(runs)
    args.output_dir.mkdir(parents=True, exist_ok=True)
    (args.output_dir / "report.md").write_text(text)
    (args.output_dir / "results.json").write_text(
        json.dumps({"versions": runs, "flags": sanity_flags(runs)}, indent=1) + "\n"
    )
    print(text)
    if not args.no_plots:
        written = plot(runs, args.output_dir / "plots")
        if written is None:
            print("plots: skipped, matplotlib is not installed (pip install matplotlib)")
        for path in written or []:
            print(f"plot: {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    print(f"report: {args.output_dir / 'report.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

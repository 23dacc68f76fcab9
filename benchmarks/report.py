"""The bench report: raw files of benchmarks.run (one per torch version) side by side.

    python -m benchmarks.report --output-dir benchmarks/results raw/torch-2.13.0.json ...
    python -m benchmarks.report --from-raw     # re-render the report from OUTPUT_DIR/raw
    python -m benchmarks.report --gpu-rows OUT/bench-rows.jsonl   # a GPU run, printed only

Writes report.md (also printed) and results.json (every raw figure and flag). Every time
is checked before any verdict (``flags``); a goal with a flagged input is inconclusive.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from benchmarks.harness import MIN_SAMPLES, format_seconds
from benchmarks.machine import HOLD_MS
from benchmarks.run import read

ROOT = Path(__file__).resolve().parents[1]
GPU_LOGS = ROOT / "benchmarks" / "results" / "gpu"
REGRESSION = 1.10  # ▲: a time more than 10% above the first torch version's
FEW_SAMPLES = 20  # a time resting on fewer per-call times says how many
# A time is flagged when its IQR is over SPREAD of its median (issue 58: CUDA rows at 22-54 %
# got verdicts on goals of 3-10 %); when, while it or its package's check ran, other
# processes used over OTHERS of the CPUs, the hypervisor stole over STEAL, or the timer
# stepped by over TICK_US (issue 61: at a load of 3 on 2 cores 91 of 123 times were flagged,
# many sat on multiples of 8 ms, and "met" still came out), or the GPU was over GPU_BUSY
# utilized while the bench slept (issue 58: a bench that shares it with a sanitizer run's
# tests times them, not ours); when its rounds are over RETIME
# apart; or when a bigger case of it takes under 1/SHRINK, or over GROWTH x (size ratio)^2, of
# a smaller one's time (issue 61: add_ext 3.77 us at 1e4, 7.97 ms at 1e5).
SPREAD, OTHERS, STEAL, TICK_US, GPU_BUSY = {"cpu": 0.10, "cuda": 0.05}, 0.10, 0.05, 1.0, 5.0
RETIME, SHRINK, GROWTH = 1.5, 1.5, 10.0
METHOD = f"""Times are medians, every implementation of a case timed round-robin in one process
(CPU: torch.utils.benchmark; CUDA: 10 ms blocks by three clocks, wall: host time,
[cuda-events]: GPU time, [cuda-graph]: CUDA-graph replays). **speedup** = peer's time / ours
by the same clock; ▲: over {REGRESSION - 1:.0%} above the first torch version's time. **Spread**: the IQR of a time's per-call times (one per block, all rounds)
over its median (`IQR n/a`: under {MIN_SAMPLES}; `(n=6)`: under {FEW_SAMPLES} of them). A time may
lie from median / r to median x r, r = 1 + IQR/2/median: the range so taken decides a goal
(met above the line, missed below, inconclusive across) and marks a (tie) where it holds 1.
⚠: a time flagged (the table under the goals says why), which leaves its goals inconclusive.
A goal's verdict over the torch versions: **missed** if any version missed it, met only if
every version that ran it met it, inconclusive otherwise."""


def load(paths: list[Path]) -> dict[str, dict[str, Any]]:
    """{torch version: raw run} of benchmarks.run's JSON files or rows files (.jsonl, also
    of a run killed midway); a later run of one torch wins."""
    runs = {}
    for path in paths:
        for data in read(path) if path.suffix == ".jsonl" else [json.loads(path.read_text())]:
            runs[data["torch"]] = data
    return runs


def label(m: dict) -> str:
    """An implementation as the tables name it: its clock after it, where not wall."""
    clock = m.get("clock", "wall")
    return m["impl"] if clock == "wall" else f"{m['impl']} [{clock}]"


def ident(version: str, m: dict) -> tuple:
    return (version, m["package"], m["op"], m["case"], label(m), m["device"], m["dtype"])


def group(runs: dict[str, dict]) -> dict[tuple, dict[str, dict[str, dict[str, dict]]]]:
    """{(package, op, device, dtype): {case: {label: {version: measurement}}}}."""
    table: dict[tuple, dict] = {}
    for version, data in runs.items():
        for m in data["measurements"]:
            cases = table.setdefault((m["package"], m["op"], m["device"], m["dtype"]), {})
            cases.setdefault(m["case"], {}).setdefault(label(m), {})[version] = m
    return table


def spread(m: dict) -> float | None:
    """A time's IQR in seconds; None where fewer than MIN_SAMPLES per-call times (or, in
    raw files from before the rounds were pooled, no count) were taken."""
    return m["iqr"] if (m.get("samples") or 0) >= MIN_SAMPLES else None


def bounds(m: dict | None) -> tuple[float, float] | None:
    """Where a time may lie: its median divided and multiplied by 1 + half its relative
    IQR (never below zero, as median - IQR/2 can be)."""
    if not m or spread(m) is None or not m["seconds"]:
        return None
    r = 1 + spread(m) / m["seconds"] / 2
    return m["seconds"] / r, m["seconds"] * r


def format_time(m: dict) -> str:
    """A time and its spread: "7.02 us IQR 1%", "505 ms IQR n/a (n=3)"."""
    text, iqr = format_seconds(m["seconds"]), spread(m)
    if iqr is None or not m["seconds"]:
        text += " IQR n/a"
    else:
        percent = 100 * iqr / m["seconds"]
        text += f" IQR {percent:.1f}%" if round(percent, 1) < 1 else f" IQR {percent:.0f}%"
    n = m.get("samples", m.get("runs"))
    return text + (f" (n={n})" if n is not None and n < FEW_SAMPLES else "")


def busy(window: dict | None, where: str = "") -> list[str]:
    """Why the machine cannot be trusted over a window (benchmarks.machine.window)."""
    w = {k: v for k, v in (window or {}).items() if v is not None}
    return [f"machine: {text.format(w[key])}{where}" for key, limit, text in (
        ("others", OTHERS, "other processes used {:.0%} of the CPUs"),
        ("steal", STEAL, "{:.0%} of the CPUs stolen"),
        ("tick_us", TICK_US, "timer steps of {:g} us"),
        ("gpu_util", GPU_BUSY, "the GPU {:.0f}% busy while the bench slept")) if w.get(key, 0) > limit]  # fmt: skip


def _in_line(a: dict, b: dict) -> bool:
    """Whether two times of one implementation at two sizes can both be right."""
    small, big = sorted((a, b), key=lambda m: m["size"])
    ratio, growth = big["seconds"] / small["seconds"], big["size"] / small["size"]
    return growth == 1 or 1 / SHRINK <= ratio <= GROWTH * growth**2


def flags(runs: dict[str, dict]) -> dict[tuple, str]:
    """{ident: why} of every time that cannot be taken at its word (METHOD lists the checks)."""
    out = {}
    for version, data in runs.items():
        ms, lines = data["measurements"], {}
        by_id = {ident(version, m): m for m in ms}
        for m in ms:  # one implementation's sizes
            lines.setdefault(ident(version, {**m, "case": ""}), []).append(m)
        for m in ms:
            iqr, limit = spread(m), SPREAD.get(m["device"], SPREAD["cpu"])
            why = [f"no IQR: fewer than {MIN_SAMPLES} per-call times"] if iqr is None else []
            if iqr and iqr > limit * m["seconds"]:
                why.append(f"IQR {100 * iqr / m['seconds']:.0f}% of the median")
            why += busy(m.get("machine"))
            why += busy(data.get("checks", {}).get(m["package"]), " in its package's check")
            rounds = m.get("rounds") or [1]
            if max(rounds) > RETIME * min(rounds):
                why.append(f"rounds {format_seconds(min(rounds))} to {format_seconds(max(rounds))}")
            for suffix in (" fwd+bwd", "+backward"):
                both = by_id.get(ident(version, {**m, "op": m["op"] + suffix}))
                if both and m["seconds"] > both["seconds"]:
                    why.append(f"forward {format_seconds(m['seconds'])} slower than its "
                               f"forward+backward {format_seconds(both['seconds'])}")  # fmt: skip
            if "floor" in m["impl"] and not m["ours"]:
                ours = [o for o in ms if o["ours"] and _where(o) == _where(m)]
                fastest = min(ours, key=lambda o: o["seconds"], default=None)
                if fastest and m["seconds"] > fastest["seconds"]:
                    why.append(f"floor {format_seconds(m['seconds'])} slower than {label(fastest)} "
                               f"{format_seconds(fastest['seconds'])}, which it bounds")  # fmt: skip
            points = lines[ident(version, {**m, "case": ""})]
            sizes = sorted({n["size"] for n in points})
            at = sizes.index(m["size"])
            near = [n for n in points if n["size"] in sizes[max(at - 2, 0) : at + 3]]
            off = [n for n in near if n["size"] != m["size"] and not _in_line(m, n)]
            if 2 * len(off) > len(near) - sum(n["size"] == m["size"] for n in near):
                cases = ", ".join(f"{n['case']} {format_seconds(n['seconds'])}" for n in off)
                why.append(f"out of line with {cases}")  # with most of its nearest sizes
            if why:
                out[ident(version, m)] = "; ".join(why)
    return out


def _where(m: dict) -> tuple:
    """A case and clock: what a speedup compares across implementations."""
    return m["package"], m["op"], m["case"], m["device"], m["dtype"], m.get("clock", "wall")


def trust(runs: dict[str, dict], flagged: dict[tuple, str]) -> str:
    """The report's first line: whether these runs can be trusted."""
    times = sum(len(data["measurements"]) for data in runs.values())
    counted = f"{len(flagged)} of {times} times flagged"
    busy_times = sum("machine: " in why for why in flagged.values())
    if not all(
        d.get("checks") or any(m.get("machine") for m in d["measurements"]) for d in runs.values()
    ):
        return (f"**Trust: not checked.** These runs predate the machine checks (load, CPU "
                f"steal, timer); {counted} by the others, their goals inconclusive.")  # fmt: skip
    if busy_times:
        return (f"**Trust: no.** The machine was busy or its timer coarse for {busy_times} of "
                f"{times} times ({counted} in all): no goal they feed has a verdict; rerun on "
                "a quiet machine.")  # fmt: skip
    if flagged:
        noisy = sum(bool(re.search(r"(^|; )IQR \d", why)) for why in flagged.values())
        hint = (f"; {noisy} of them vary between calls though load and steal looked quiet (noise "
                "those checks cannot see: a VM's neighbours, clock changes), so rerun before "
                "reading a verdict") if 2 * noisy > len(flagged) else ""  # fmt: skip
        return f"**Trust: partly.** A quiet machine; {counted}, their goals inconclusive{hint}."
    return f"**Trust: yes.** A quiet machine, and none of {times} times flagged."


def judge(
    goal: dict, ours: dict | None, peer: dict | None, flagged: bool
) -> tuple[str, str] | None:
    """One version's (cell, verdict) on a goal, None where it did not run: the value, its
    range with each time anywhere within its bounds, and the verdict that range gives,
    inconclusive where an input is flagged."""
    if not ours or not peer or not ours["seconds"] or not peer["seconds"]:
        return None
    o, p = bounds(ours), bounds(peer)
    if goal.get("max_extra_us") is not None:
        line, value = goal["max_extra_us"], (ours["seconds"] - peer["seconds"]) * 1e6
        low, high = ((o[0] - p[1]) * 1e6, (o[1] - p[0]) * 1e6) if o and p else (value, value)
        cell = f"{value:+.1f} us" + (f" [{low:+.1f}, {high:+.1f}]" if o and p else " no IQR")
        verdict = "met" if high <= line else "missed" if low > line else "inconclusive"
    else:
        line, value = goal["min_speedup"], peer["seconds"] / ours["seconds"]
        low, high = (p[0] / o[1], p[1] / o[0]) if o and p else (value, value)
        cell = f"{value:.2f}x" + (f" [{low:.2f}, {high:.2f}]" if o and p else " no IQR")
        verdict = "met" if low >= line else "missed" if high < line else "inconclusive"
    if flagged or not (o and p):
        return f"{cell} inconclusive ⚠", "inconclusive"
    return f"{cell} {fmt_verdict(verdict)}", verdict


def combine(verdicts: list[str | None]) -> str:
    """The verdict over torch versions: missed if any missed, met if all that ran met."""
    ran = {v for v in verdicts if v}
    if "missed" in ran or not ran:
        return "missed" if ran else "not measured"
    return "met" if ran == {"met"} else "inconclusive"


def fmt_verdict(verdict: str) -> str:
    return "**missed**" if verdict == "missed" else verdict


def describe_goal(goal: dict) -> str:
    who = f"{goal['op']} {goal['device']}: {goal['ours']}"
    clock = "" if goal.get("clock", "wall") == "wall" else f" ({goal['clock']})"
    if goal.get("max_extra_us") is not None:
        return f"{who} at most {goal['max_extra_us']:g} us over {goal['peer']}{clock}"
    if goal.get("tie"):
        return f"{who} ties {goal['peer']} (>= {goal['min_speedup']:.3g}x){clock}"
    return f"{who} >= {goal['min_speedup']:.3g}x {goal['peer']}{clock}"


def goal_rows(runs: dict[str, dict], flagged: dict[tuple, str]) -> list[list[str]]:
    """The goal table: package, goal, case, one cell per torch version, the verdict. A goal
    no run measured (CUDA, without a GPU) is one row, its cases listed."""
    table = group(runs)
    goals = {json.dumps(g, sort_keys=True): g for data in runs.values() for g in data["goals"]}
    rows, not_run = [], {}
    for goal in goals.values():
        names = [label({**goal, "impl": n}) for n in (goal["ours"], goal["peer"])]
        matching = [(key, case, impls) for key, cases in table.items()
                    if key[:3] == (goal["package"], goal["op"], goal["device"])
                    for case, impls in cases.items() if goal.get("case") in (None, case)]  # fmt: skip
        if not matching:
            what = (goal["package"], describe_goal(goal))
            not_run.setdefault(what, []).append(goal.get("case") or "every case")
        for (package, op, device, dtype), case, impls in matching:
            cells = [judge(goal, *(impls.get(n, {}).get(v) for n in names),
                           any((v, package, op, case, n, device, dtype) in flagged for n in names))
                     for v in runs]  # fmt: skip
            rows.append([package, describe_goal(goal), f"{case} ({dtype})",
                         *(c[0] if c else "not run" for c in cells),
                         fmt_verdict(combine([c and c[1] for c in cells]))])  # fmt: skip
    return rows + [[*what, ", ".join(cases), *["not run"] * len(runs), "not measured"]
                   for what, cases in not_run.items()]  # fmt: skip


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


def op_tables(runs: dict[str, dict], flagged: dict[tuple, str], level: str) -> list[str]:
    """A table per (package, op, device, dtype): each implementation's time under each
    torch version and its speedup over ours by the same clock ("(tie)" where neither time
    is flagged and their bounds allow 1.00x), and its extra figures."""
    versions, out = list(runs), []
    for (package, op, device, dtype), cases in group(runs).items():
        rows = []
        for case, impls in cases.items():
            for name, per in impls.items():
                times, speedups, first = [], [], None
                for v in versions:
                    m = per.get(v)
                    ours = m and next((o[v] for o in impls.values() if v in o and o[v]["ours"]
                                       and _where(o[v]) == _where(m)), None)  # fmt: skip
                    if m is None:
                        times.append("-")
                        speedups.append("-")
                        continue
                    noisy = {ident(v, m), ours and ident(v, ours)} & flagged.keys()
                    times.append(format_time(m) + " ⚠" * (ident(v, m) in flagged)
                                 + " ▲" * (first is not None and m["seconds"] > first * REGRESSION))  # fmt: skip
                    first = first or m["seconds"]
                    o, p = bounds(ours), bounds(m)
                    tie = not noisy and o and p and p[0] / o[1] <= 1 <= p[1] / o[0]
                    speedups.append("-" if not ours or ours is m else
                                    f"{m['seconds'] / ours['seconds']:.2f}x" + " (tie)" * bool(tie))  # fmt: skip
                is_ours = any(m["ours"] for m in per.values())
                extras = (per.get(versions[-1]) or next(iter(per.values())))["extra"]
                rows.append([case, f"**{name}**" if is_ours else name, *times, *speedups,
                             ", ".join(f"{k} {x:.3g}" for k, x in extras.items())])  # fmt: skip
        header = ["case", "impl", *(f"time {v}" for v in versions),
                  *(f"speedup {v}" for v in versions), "extra"]  # fmt: skip
        out += ["", f"{level} {package}: {op} ({device}, {dtype})", "",
                markdown_table(header, rows)]  # fmt: skip
    return out


def body(runs: dict[str, dict], level: str = "##") -> list[str]:
    """Trust line, goals, flagged times and op tables of some runs."""
    flagged = flags(runs)
    out = [trust(runs, flagged), "", f"{level} Goals", "", markdown_table(
        ["package", "goal", "case", *(f"torch {v}" for v in runs), "verdict"],
        goal_rows(runs, flagged))]  # fmt: skip
    if flagged:
        out += ["", f"{level} Flagged times", "", markdown_table(
            ["torch", "package", "op", "case", "impl", "device", "why flagged"],
            [[*key[:-1], why] for key, why in flagged.items()])]  # fmt: skip
    return out + op_tables(runs, flagged, level)


def machine_line(version: str, data: dict) -> str:
    m = data["machine"]
    gpu = m.get("gpu") and (f"{m['gpu']['name']} x{m['gpu']['count']} "
                            f"(sm_{m['gpu']['capability'].replace('.', '')})")  # fmt: skip
    load = m.get("load_before") is not None
    return (f"- torch {version} (CUDA {data.get('cuda') or 'none'}): {m.get('cpu')}, "
            f"{m.get('cores')} cores ({m.get('torch_threads')} torch threads, "
            f"{m.get('cpu_capability')}), {m.get('memory_gib')} GiB, {gpu or 'no GPU'}; Python "
            f"{m.get('python')}; {m.get('date')}" + " (quick run)" * bool(data.get("quick"))
            + f"; load average {m.get('load_before')} before, {m.get('load_after')} after" * load
            + "".join(f"; {k} {m[k]}" for k in ("governor", "clocksource") if m.get(k))
            + (f"; GLIBC_TUNABLES={m['malloc']}" if m.get("malloc") else "")
            + reporting(m))  # fmt: skip


def reporting(m: dict) -> str:
    """What the host's taking back freed memory may have cost the run (machine.pages_held)."""
    delay = m.get("reporting_delay_ms")
    if not m.get("free_page_reporting"):
        return ""
    if delay is not None and delay >= HOLD_MS:
        return (f"; virtio-balloon free page reporting held while timing: a freed block is the "
                f"host's after {delay // 1000} s free, not about 2 s")  # fmt: skip
    return ("; **a VM that hands freed memory back to its host** (virtio-balloon free page "
            "reporting): a large fresh output pays the host's faults when its pages were freed "
            "more than about 2 s before" + " (as root the bench holds it)" * (delay is not None))  # fmt: skip


def render(runs: dict[str, dict], *, source: str | None = None) -> str:
    """The report; source: where the raw files were read from when re-rendering."""
    out = ["# Benchmark report", ""]
    if source:
        out += [f"**The numbers are those of the last published run** (its machine and date "
                f"below), re-rendered from its raw files in `{source}` by `python -m "
                "benchmarks.report --from-raw`: nothing was timed for this rendering.", ""]  # fmt: skip
    lines = body(runs)
    out += [lines[0], "", *(machine_line(v, d) for v, d in runs.items()), "", METHOD, *lines[1:]]
    builds = [[p, v, f"{b['clean_build_s']:.1f}", f"{b['noop_rebuild_s']:.1f}",
               f"{b['wheel_mb']:.2f}" if "wheel_mb" in b else "-"]
              for v, data in runs.items() for p, b in data.get("builds", {}).items()]  # fmt: skip
    if builds:
        out += ["", "## Builds", "", "`pip wheel --no-build-isolation` with a fresh build "
                "folder, then again (no-op); the wheel's size (release build).", "",
                markdown_table(["package", "torch", "clean build (s)", "no-op rebuild (s)",
                                "wheel (MB)"], builds)]  # fmt: skip
    out += gpu_section(GPU_LOGS)
    notes = [f"- torch {v}: {line}" for v, data in runs.items() for line in notes_of(data)]
    return "\n".join(out + (["", "## Skipped, failed, notes", "", *notes] if notes else [])) + "\n"


def notes_of(data: dict) -> list[str]:
    """A run's cut, skipped, failed and unmeasured packages, and its notes."""
    started, failures = data.get("started", []), data.get("failures", {})
    measured = {(m["op"], m["case"], m["device"]) for m in data["measurements"]}
    unmeasured = [_row(key) for p in started[-1:] if p not in failures
                  for key in data.get("headline_rows", {}).get(p, []) if tuple(key) not in measured]  # fmt: skip
    not_reached = [p for p in data.get("packages", []) if p not in started]
    cut = (f"**cut short** after {len(data['measurements'])} rows (no end line)"
           + (f"; rows of {started[-1]} not measured: {', '.join(unmeasured)}" if unmeasured else "")
           + (f"; not reached: {', '.join(not_reached)}" if not_reached else ""))  # fmt: skip
    return [cut] * (not data.get("complete", True)) + [
        *(f"{p} skipped: {why}" for p, why in data.get("skipped", {}).items()),
        *(f"{p} FAILED: {why}" for p, why in failures.items()),
        *(f"{p} did not measure its headline rows {', '.join(map(_row, keys))}"
          for p, keys in data.get("missing", {}).items()), *data.get("notes", [])]  # fmt: skip


def _row(key: tuple | list) -> str:
    op, case, device = key
    return f"{op} {case} ({device})"


def gpu_section(folder: Path) -> list[str]:
    """The committed results of GPU runs (the GPU check's bench step): each .log listed
    with its header lines, each rows file (.jsonl) rendered by gpu_rows_section."""
    logs, rows_files = sorted(folder.glob("*.log")), sorted(folder.glob("*.jsonl"))
    if not logs and not rows_files:
        return []
    out = ["", "## CUDA, from GPU runs", "", "Not measured by this run: the bench step of the "
           "GPU check on a GPU machine, committed as its log or its rows file.", ""]  # fmt: skip
    for log in logs:
        lines = log.read_text().splitlines()
        count = sum("cuda " in line and line.startswith("  ") for line in lines)
        header = " ".join(line.lstrip("# ") for line in lines if line.startswith("#"))
        out.append(f"- `benchmarks/results/gpu/{log.name}`: {count} CUDA rows. {header}")
    for path in rows_files:
        out += gpu_rows_section(path, f"benchmarks/results/gpu/{path.name}")
    return out


def gpu_rows_section(path: Path, name: str | None = None) -> list[str]:
    """Each run of a rows file: its machine, how far it got, then its CUDA goals and rows
    as the report's body."""
    out = []
    for data in read(path):
        done = {(m["op"], m["case"], m["device"]) for m in data["measurements"]}
        wanted = [tuple(k) for keys in data.get("headline_rows", {}).values() for k in keys]
        what = (f"headline rows, {sum(k in done for k in wanted)} of {len(wanted)} measured"
                if data.get("headline") else f"{len(done)} rows")  # fmt: skip
        state = f"; complete in {data['seconds']} s" if data.get("complete") else ""
        cuda = {**data, "goals": [g for g in data["goals"] if g["device"] == "cuda"]}
        out += ["", f"### `{name or path}`", "", f"{machine_line(data['torch'], data)}. "
                f"{what}{state}.", *(f"- {line}" for line in notes_of(data)), "",
                *body({data["torch"]: cuda}, level="####")]  # fmt: skip
    return out


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add = parser.add_argument
    add("raw", nargs="*", type=Path, help="benchmarks.run's --output or --rows files")
    add("--output-dir", type=Path, default=ROOT / "benchmarks" / "results")
    add("--from-raw", action="store_true", help="re-render OUTPUT_DIR/raw's files, timing nothing")
    add("--gpu-rows", nargs="+", type=Path, help="print these rows files' section; write nothing")
    args = parser.parse_args()
    if args.gpu_rows:
        sections = [line for path in args.gpu_rows for line in gpu_rows_section(path)]
        print("\n".join(["## CUDA, from GPU runs", *sections]))
        return 0
    source = None
    if args.from_raw:
        if args.raw:
            parser.error("--from-raw reads OUTPUT_DIR/raw: name no raw files")
        raw_dir = args.output_dir / "raw"
        from packaging.version import Version  # here: a GPU check's venv may lack it

        # torch-2.9.0.json before torch-2.13.0.json
        args.raw = sorted(raw_dir.glob("*.json"), key=lambda p: Version(p.stem.split("-")[-1]))
        source = str(raw_dir.relative_to(ROOT) if raw_dir.is_relative_to(ROOT) else raw_dir) + "/"
    if not args.raw:
        parser.error("name the raw files to report (or --from-raw with raw files, or --gpu-rows)")
    runs = load(args.raw)
    text = render(runs, source=source)
    args.output_dir.mkdir(parents=True, exist_ok=True)
    (args.output_dir / "report.md").write_text(text)
    fields = ("version", "package", "op", "case", "impl", "device", "dtype", "reason")
    found = [dict(zip(fields, (*key, why), strict=True)) for key, why in flags(runs).items()]
    results = {"versions": runs, "flags": found}
    (args.output_dir / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    print(text + f"report: {args.output_dir / 'report.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

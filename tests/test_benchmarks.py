"""The bench machinery: the report (versions side by side, every time checked, goals judged,
no verdict from a busy machine), benchmarks.run's rows file and headline plan, and the
harness's clocks (CUDA paths through fakes: no GPU needed).

report.py runs on synthetic raw files (what benchmarks.run writes per torch version), so
every figure below is known in advance; one recorded busy run is a real raw file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from benchmarks import harness, lltm_bench, machine, report, run
from benchmarks.harness import Context

ROOT = Path(__file__).resolve().parents[1]
BUSY_RUN = ROOT / "benchmarks" / "results" / "cpu" / "2026-11-28-busy-run" / "torch-2.13.0.json"
MACHINE = {"cpu": "Test CPU", "cores": 2, "torch_threads": 2, "cpu_capability": "AVX2",
           "memory_gib": 8.0, "gpu": None, "python": "3.11.7", "date": "2026-01-01 00:00:00 UTC"}  # fmt: skip
QUIET = {"others": 0.01, "steal": 0.0, "load": 0.1, "tick_us": 0.05}


def measurement(impl: str, case: str, size: float, seconds: float, *, ours: bool = False) -> dict:
    return {"package": "toy", "op": "axpy", "case": case, "size": size, "impl": impl,
            "ours": ours, "device": "cpu", "dtype": "float32", "seconds": seconds, "iqr": 0.0,
            "runs": 100, "extra": {"GB/s": 1.0}, "samples": 100, "clock": "wall",
            "rounds": [seconds] * 3, "machine": QUIET}  # fmt: skip


GOALS = [
    {"package": "toy", "op": "axpy", "ours": "toy", "peer": "eager", "min_speedup": 1.5,
     "device": "cpu", "case": None, "note": ""},
    {"package": "toy", "op": "axpy", "ours": "toy", "peer": "eager", "min_speedup": 1.0 / 1.1,
     "device": "cpu", "case": "n=10", "note": ""},
    {"package": "toy", "op": "axpy", "ours": "toy", "peer": "eager", "min_speedup": 5.0,
     "device": "cuda", "case": None, "note": ""},
]  # fmt: skip


def raw(version: str, ours_small: float, eager_small: float, eager_large: float) -> dict:
    return {
        "machine": {**MACHINE, "torch": version},
        "torch": version,
        "cuda": None,
        "quick": False,
        "measurements": [
            measurement("toy", "n=10", 10, ours_small, ours=True),
            measurement("eager", "n=10", 10, eager_small),
            measurement("toy", "n=1000", 1000, 1e-3, ours=True),
            measurement("eager", "n=1000", 1000, eager_large),
        ],
        "goals": GOALS,
        "notes": [f"a note from {version}"],
        "skipped": {"toy_cuda": "CUDA-only"},
        "builds": {"toy": {"clean_build_s": 12.34, "noop_rebuild_s": 1.5, "wheel_mb": 0.4567}},
        "failures": {},
        "checks": {"toy": QUIET},
    }


@pytest.fixture
def raw_files(tmp_path: Path) -> list[Path]:
    # n=10: ours 1 us then 1.05 us (+5%, no mark); eager 2 us then 3 us (+50%, marked).
    # n=1000: ours 1 ms both times; eager 1.2 ms then 1.6 ms.
    files = []
    for version, args in (("1.0.0", (1e-6, 2e-6, 1.2e-3)), ("1.1.0", (1.05e-6, 3e-6, 1.6e-3))):
        path = tmp_path / f"torch-{version}.json"
        data = raw(version, *args)
        if version == "1.0.0":  # a raw file from before wheel sizes were measured
            del data["builds"]["toy"]["wheel_mb"]
        path.write_text(json.dumps(data))
        files.append(path)
    return files


def rows_of(text: str, first_cell: str) -> list[list[str]]:
    return [
        [cell.strip() for cell in line.strip("|").split("|")]
        for line in text.splitlines()
        if line.startswith(f"| {first_cell} ")
    ]


def _one_run(measurements: list[dict], goals: list[dict] | None = None) -> dict[str, dict]:
    data = raw("1.0.0", 1e-6, 2e-6, 1.2e-3)
    data["measurements"] = measurements
    data["goals"] = goals or []
    return {"1.0.0": data}


def _m(impl: str, seconds: float, *, op: str = "axpy", iqr: float = 0.0, ours: bool = False,
       **fields):  # fmt: skip
    return {**measurement(impl, "n=10", 10, seconds, ours=ours), "op": op, "iqr": iqr, **fields}


def _goal_row(runs: dict, marker: str) -> list[str]:
    return next(r for r in rows_of(report.render(runs), "toy") if marker in r[1])


def test_versions_side_by_side_with_speedups_and_regression_marks(raw_files):
    text = report.render(report.load(raw_files))
    header = next(line for line in text.splitlines() if line.startswith("| case | impl |"))
    assert "time 1.0.0 | time 1.1.0 | speedup 1.0.0 | speedup 1.1.0" in header
    small = {row[1]: row for row in rows_of(text, "n=10")}
    assert small["**toy**"][2:] == ["1 us IQR 0.0%", "1.05 us IQR 0.0%", "-", "-", "GB/s 1"]
    assert small["eager"][2:6] == ["2 us IQR 0.0%", "3 us IQR 0.0% ▲", "2.00x", "2.86x"]
    large = {row[1]: row for row in rows_of(text, "n=1000")}
    assert large["eager"][4:6] == ["1.20x", "1.60x"]
    assert "▲" in large["eager"][3]


def test_goals_are_judged_on_every_version(raw_files):
    text = report.render(report.load(raw_files))
    by_goal = {(row[1], row[2]): row[3:] for row in rows_of(text, "toy") if ">=" in row[1]}
    # 1.5x everywhere: at n=1000 met under 1.1.0 only (1.20x, 1.60x), so missed there.
    assert by_goal[("axpy cpu: toy >= 1.5x eager", "n=10 (float32)")] == [
        "2.00x [2.00, 2.00] met", "2.86x [2.86, 2.86] met", "met"]  # fmt: skip
    assert by_goal[("axpy cpu: toy >= 1.5x eager", "n=1000 (float32)")] == [
        "1.20x [1.20, 1.20] **missed**", "1.60x [1.60, 1.60] met", "**missed**"]  # fmt: skip
    assert by_goal[("axpy cpu: toy >= 0.909x eager", "n=10 (float32)")][-1] == "met"
    # A goal on a device that did not run: its cases on one line.
    assert by_goal[("axpy cuda: toy >= 5x eager", "every case")] == [
        "not run", "not run", "not measured"]  # fmt: skip
    assert "**missed** if any version missed it" in text
    assert "**Trust: yes.** A quiet machine, and none of 8 times flagged." in text


def test_a_tie_goal_says_tie():
    goal = {**GOALS[0], "min_speedup": 0.97, "tie": True}
    runs = _one_run([_m("toy", 1.01e-6, ours=True), _m("eager", 1e-6)], goals=[goal])
    row = _goal_row(runs, "ties")
    assert row[1] == "axpy cpu: toy ties eager (>= 0.97x)"
    assert row[-2:] == ["0.99x [0.99, 0.99] met", "met"]


def test_machine_builds_and_notes_are_reported(raw_files):
    text = report.render(report.load(raw_files))
    assert "- torch 1.0.0 (CUDA none): Test CPU, 2 cores (2 torch threads, AVX2)" in text
    assert rows_of(text, "toy")[-2:] == [
        ["toy", "1.0.0", "12.3", "1.5", "-"],
        ["toy", "1.1.0", "12.3", "1.5", "0.46"],
    ]
    assert "- torch 1.1.0: toy_cuda skipped: CUDA-only" in text
    assert "- torch 1.0.0: a note from 1.0.0" in text


def test_the_command_writes_the_report_and_every_figure_with_its_flags(raw_files, tmp_path):
    out = tmp_path / "results"
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.report", "--output-dir", str(out), *map(str, raw_files)],
        capture_output=True, text=True, check=False, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "## toy: axpy (cpu, float32)" in proc.stdout  # the tables go to the terminal too
    assert (out / "report.md").read_text() in proc.stdout
    data = json.loads((out / "results.json").read_text())
    assert list(data["versions"]) == ["1.0.0", "1.1.0"]
    assert data["versions"]["1.1.0"]["measurements"][1]["seconds"] == 3e-6
    assert data["flags"] == []


def test_sanity_checks_flag_what_cannot_be_right():
    runs = _one_run(
        [
            # A forward slower than its forward+backward (gc_cpp's " fwd+bwd" naming).
            _m("toy", 3e-3, op="conv", ours=True),
            _m("toy", 2e-3, op="conv fwd+bwd", ours=True),
            # lltm's naming: "lltm forward" and "lltm forward+backward"; this pair is sane.
            _m("toy", 1e-3, op="lltm forward", ours=True),
            _m("toy", 2e-3, op="lltm forward+backward", ours=True),
            # A floor slower than our kernel it bounds, and a noisy peer.
            _m("toy", 1e-6, ours=True),
            _m("copy into a fresh output (floor)", 2e-6),
            _m("eager", 4e-6, iqr=1e-6),
        ]
    )
    flags = {(key[2], key[4]): why for key, why in report.flags(runs).items()}
    assert flags == {
        ("conv", "toy"): "forward 3 ms slower than its forward+backward 2 ms",
        ("axpy", "copy into a fresh output (floor)"): (
            "floor 2 us slower than toy 1 us, which it bounds"
        ),
        ("axpy", "eager"): "IQR 25% of the median",
    }
    text = report.render(runs)
    assert "**Trust: partly.** A quiet machine; 3 of 7 times flagged" in text
    assert "| 1.0.0 | toy | axpy | n=10 | eager | cpu | IQR 25% of the median |" in text
    eager = next(row for row in rows_of(text, "n=10") if row[1] == "eager")
    assert eager[2] == "4 us IQR 25% ⚠"  # the cell prints the very figure its flag judges


@pytest.mark.parametrize(
    ("eager_seconds", "eager_iqr", "cell"),
    [
        (1.6e-6, 0.0, "1.60x [1.60, 1.60] met"),  # 1.6x, no spread
        (1.4e-6, 0.0, "1.40x [1.40, 1.40] **missed**"),
        (1.6e-6, 0.12e-6, "1.60x [1.54, 1.66] met"),  # 1.54x to 1.66x
        (1.6e-6, 0.4e-6, "1.60x [1.42, 1.80] inconclusive ⚠"),  # IQR 25%: flagged
        (1.45e-6, 0.02e-6, "1.45x [1.44, 1.46] **missed**"),
        (1.52e-6, 0.1e-6, "1.52x [1.47, 1.57] inconclusive"),  # across the line
    ],
)
def test_goal_verdicts_account_for_the_spread(eager_seconds, eager_iqr, cell):
    goal = {**GOALS[0], "min_speedup": 1.5}
    runs = _one_run(
        [_m("toy", 1e-6, ours=True), _m("eager", eager_seconds, iqr=eager_iqr)], goals=[goal]
    )
    assert _goal_row(runs, ">=")[-2] == cell


@pytest.mark.parametrize(
    ("ours_seconds", "ours_iqr", "cell"),
    [
        (18e-6, 0.0, "+8.0 us [+8.0, +8.0] met"),  # 8 us over a 10 us peer
        (21e-6, 0.0, "+11.0 us [+11.0, +11.0] **missed**"),
        (18e-6, 1.5e-6, "+8.0 us [+7.3, +8.8] met"),  # ours 17.3 to 18.8 us
        (18e-6, 4e-6, "+8.0 us [+6.2, +10.0] inconclusive ⚠"),  # IQR 22%: flagged
        (30e-6, 2e-6, "+20.0 us [+19.0, +21.0] **missed**"),
    ],
)
def test_a_budget_goal_is_judged_on_the_microseconds_over_its_peer(ours_seconds, ours_iqr, cell):
    goal = {**GOALS[0], "min_speedup": 0.0, "max_extra_us": 9.0}
    runs = _one_run(
        [_m("toy", ours_seconds, ours=True, iqr=ours_iqr), _m("eager", 10e-6)], goals=[goal]
    )
    row = _goal_row(runs, "us over")
    assert row[1] == "axpy cpu: toy at most 9 us over eager"
    assert row[-2] == cell


def test_ranges_never_go_below_zero_and_a_flagged_speedup_is_no_tie():
    # Issue 61: "1.14x [-0.17, inf]" (median - IQR/2 below zero) and "0.14x (tie)".
    low, high = report.bounds(_m("eager", 1e-6, iqr=5e-6))
    assert 0 < low < 1e-6 < high
    runs = _one_run([_m("toy", 7e-6, ours=True, iqr=50e-6), _m("eager", 1e-6, iqr=3e-6)],
                    goals=[{**GOALS[0], "min_speedup": 0.0, "max_extra_us": 9.0}])  # fmt: skip
    text = report.render(runs)
    assert rows_of(text, "n=10")[1][3] == "0.14x"  # both flagged: no tie
    cell = _goal_row(runs, "us over")[-2]
    assert cell.endswith("inconclusive ⚠") and float(cell.split("[")[1].split(",")[0]) > -3.6


def test_a_clean_run_says_nothing_was_flagged():
    runs = _one_run([_m("toy", 1e-6, ours=True, iqr=1e-8), _m("eager", 2e-6, iqr=2e-8)])
    assert report.flags(runs) == {}
    assert report.render(runs).count("**Trust: yes.**") == 1


def test_a_quiet_machine_with_noisy_times_says_to_rerun():
    """The Quickstart's bench on a quiet 2-core EPYC VM (2026-11-28): load and steal were quiet,
    yet 98 of 125 times had an IQR over the limit. The header says so and what to do."""
    noisy = _one_run([_m("toy", 1e-6, ours=True, iqr=3e-7, machine=QUIET),
                      _m("eager", 2e-6, iqr=6e-7, machine=QUIET)])  # fmt: skip
    header = report.render(noisy).splitlines()[2]
    assert header.startswith("**Trust: partly.**") and "rerun before reading a verdict" in header
    quiet = _one_run([_m("toy", 1e-6, ours=True, iqr=3e-7, machine=QUIET),
                      _m("eager", 2e-6, iqr=2e-8, machine=QUIET)])  # fmt: skip
    quiet["1.0.0"]["measurements"][1]["samples"] = 2  # one noisy, one without an IQR
    assert "partly" in report.render(quiet) and "rerun" not in report.render(quiet).splitlines()[2]


def test_the_header_records_load_governor_and_clocksource():
    runs = _one_run([_m("toy", 1e-6, ours=True)])
    runs["1.0.0"]["machine"].update(load_before=0.5, load_after=3.25, governor="performance",
                                    clocksource="tsc", malloc="glibc.malloc.x=1")  # fmt: skip
    text = report.render(runs)
    assert "; load average 0.5 before, 3.25 after; governor performance; clocksource tsc" in text
    assert "; GLIBC_TUNABLES=glibc.malloc.x=1" in text
    assert "free page reporting" not in text
    runs["1.0.0"]["machine"]["free_page_reporting"] = True
    assert "; **a VM that hands freed memory back to its host** (virtio-balloon free page" in report.render(runs)  # fmt: skip
    assert "as root the bench holds it" not in report.render(runs)  # no knob: nothing to hold
    runs["1.0.0"]["machine"]["reporting_delay_ms"] = 0
    assert "2 s before (as root the bench holds it)" in report.render(runs)
    runs["1.0.0"]["machine"]["reporting_delay_ms"] = 60_000
    text = report.render(runs)
    assert "hands freed memory back" not in text
    assert "reporting held while timing: a freed block is the host's after 60 s free" in text


def test_the_bench_holds_free_page_reports_and_gives_the_knob_back(tmp_path, monkeypatch):
    """Raised to 60 s while the block runs, its old value back after, even on an error; a
    knob already higher, a missing one, or one it may not write is left as it is."""
    knob = tmp_path / "min_free_ms"
    knob.write_text("0\n")
    with pytest.raises(KeyError), machine.pages_held(str(tmp_path)) as delay:
        assert delay == 60_000 and knob.read_text() == "60000"
        assert machine.reporting_delay(str(tmp_path)) == 60_000
        raise KeyError
    assert knob.read_text() == "0"
    knob.write_text("90000\n")
    with machine.pages_held(str(tmp_path)) as delay:
        assert delay == 90_000
    assert knob.read_text() == "90000\n"
    with machine.pages_held(str(tmp_path / "absent")) as delay:
        assert delay is None
    knob.write_text("0\n")

    def refuse(path, *_):  # not root
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(machine.Path, "write_text", refuse)
    with machine.pages_held(str(tmp_path)) as delay:
        assert delay == 0 and knob.read_text() == "0\n"


def test_free_page_reporting_is_read_from_the_balloons_feature_bits(tmp_path):
    """Bit 5 (REPORTING) of a virtio device of type 5 (balloon); another device's bit 5, or
    a balloon without it, is not; no sysfs folder: unknown."""

    def device(name: str, kind: str, features: str) -> None:
        (tmp_path / name).mkdir()
        (tmp_path / name / "device").write_text(kind + "\n")
        (tmp_path / name / "features").write_text(features + "\n")

    device("virtio1", "0x0002", "0000010000")  # a block device with bit 5
    device("virtio0", "0x0005", "0110000000")  # a balloon: stats, deflate on OOM
    assert machine.free_page_reporting(str(tmp_path)) is False
    (tmp_path / "virtio0" / "features").write_text("0110010100\n")  # this VM's: bit 5 set
    assert machine.free_page_reporting(str(tmp_path)) is True
    assert machine.free_page_reporting(str(tmp_path / "absent")) is None


def test_overlapping_times_are_called_a_tie():
    runs = _one_run(
        [
            _m("toy", 1.00e-6, ours=True, iqr=0.04e-6),
            _m("eager", 1.02e-6, iqr=0.04e-6),  # 1.02x, but 0.98x to 1.06x: a tie
            _m("torch.add", 1.5e-6, iqr=0.04e-6),  # 1.50x, clearly faster
        ]
    )
    rows = {row[1]: row for row in rows_of(report.render(runs), "n=10")}
    assert rows["eager"][3] == "1.02x (tie)"
    assert rows["torch.add"][3] == "1.50x"


# Issue 61, goal 3: a busy or broken run gets no verdict.


def test_a_recorded_busy_run_gets_no_verdict():
    """A real run (nox -s bench -- --quick --only add_ext) on a 2-core VM shared with three
    other engineers' builds: every goal inconclusive, and the header says so first."""
    runs = report.load([BUSY_RUN])
    (data,) = runs.values()
    assert data["checks"]["add_ext"]["others"] > report.OTHERS
    text = report.render(runs)
    assert text.split("\n")[2].startswith("**Trust: no.** The machine was busy")
    this_run = text.split("## CUDA, from GPU runs")[0]  # not the committed GPU runs' section
    verdicts = [row[-1] for row in rows_of(this_run, "add_ext") if ">=" in row[1]]
    assert verdicts and set(verdicts) <= {"inconclusive", "not measured"}
    assert "inconclusive" in verdicts


@pytest.mark.parametrize(
    ("window", "reason"),
    [
        ({"others": 0.45}, "machine: other processes used 45% of the CPUs"),
        ({"steal": 0.2}, "machine: 20% of the CPUs stolen"),
        ({"tick_us": 4000.0}, "machine: timer steps of 4000 us"),
        (
            {"gpu_util": 37.0, "gpu_processes": ["7 a"]},
            "machine: the GPU 37% busy while the bench slept",
        ),
    ],
)
def test_a_busy_machine_or_a_coarse_timer_leaves_a_goal_inconclusive(window, reason):
    goal = {**GOALS[0], "min_speedup": 1.5}
    busy = {**QUIET, **window}
    runs = _one_run([_m("toy", 1e-6, ours=True, machine=busy), _m("eager", 4e-6, machine=busy)],
                    goals=[goal])  # fmt: skip
    assert set(report.flags(runs).values()) == {reason}
    assert _goal_row(runs, ">=")[-2:] == ["4.00x [4.00, 4.00] inconclusive ⚠", "inconclusive"]
    assert report.render(runs).split("\n")[2].startswith("**Trust: no.**")
    # The same from the check before the package.
    runs = _one_run([_m("toy", 1e-6, ours=True), _m("eager", 4e-6)], goals=[goal])
    runs["1.0.0"]["checks"] = {"toy": busy}
    assert set(report.flags(runs).values()) == {f"{reason} in its package's check"}


def test_the_gpu_is_asked_what_else_runs_on_it_and_its_clock(monkeypatch):
    """nvidia-smi's answers become the window's GPU fields; no nvidia-smi, none."""
    answers = {"--query-compute-apps=pid,process_name": "4242, python3\n",
               "--query-gpu=utilization.gpu,clocks.sm,clocks.max.sm": "3, 1980, 1980\n"}  # fmt: skip

    def fake_run(command, **kwargs):
        return subprocess.CompletedProcess(command, 0, answers[command[1]], "")

    monkeypatch.setattr(machine.subprocess, "run", fake_run)
    assert machine.gpu_now() == {"gpu_processes": ["4242 python3"], "gpu_util": 3.0,
                                 "sm_clock_mhz": 1980.0, "sm_clock_max_mhz": 1980.0}  # fmt: skip

    def missing(command, **kwargs):
        raise FileNotFoundError(command[0])

    monkeypatch.setattr(machine.subprocess, "run", missing)
    assert machine.gpu_now() == {}


def test_a_time_out_of_line_with_its_sizes_or_its_rounds_is_flagged():
    # Issue 61's add_ext: 3.77 us at 1e4, then 7.97 ms at 1e5 with a tight IQR.
    times = {1e3: 2.1e-6, 1e4: 3.77e-6, 1e5: 7.97e-3, 1e6: 213e-6}
    runs = _one_run([{**_m("toy", s, ours=True), "case": f"n={n:.0e}", "size": n}
                     for n, s in times.items()])  # fmt: skip
    flagged = {key[3]: why for key, why in report.flags(runs).items()}
    assert flagged == {"n=1e+05": "out of line with n=1e+04 3.77 us, n=1e+06 213 us"}
    # The large shape faster than the small one (issue 58's lltm_cuda run 3).
    runs = _one_run([{**_m("toy", 517e-6, ours=True), "case": "B=16", "size": 2048},
                     {**_m("toy", 291e-6, ours=True), "case": "B=64", "size": 65536}])  # fmt: skip
    assert len(report.flags(runs)) == 2
    runs = _one_run([_m("toy", 1e-6, ours=True, rounds=[1e-6, 1.1e-6, 2e-6])])
    assert list(report.flags(runs).values()) == ["rounds 1 us to 2 us"]


def test_a_cuda_row_over_5_percent_iqr_gets_no_verdict():
    goal = {**GOALS[2], "min_speedup": 1.5}
    rows = [_m("toy", 1e-6, ours=True, device="cuda", iqr=0.04e-6),
            _m("eager", 2e-6, device="cuda", iqr=0.12e-6)]  # fmt: skip
    assert _goal_row(_one_run(rows, [goal]), ">=")[-1] == "inconclusive"  # eager at 6 %
    rows[1]["iqr"] = 0.08e-6  # 4 %
    assert _goal_row(_one_run(rows, [goal]), ">=")[-1] == "met"


def test_runs_from_before_the_machine_checks_say_so():
    runs = _one_run([_m("toy", 1e-6, ours=True, machine={}), _m("eager", 2e-6, machine={})])
    del runs["1.0.0"]["checks"]
    assert report.render(runs).split("\n")[2].startswith("**Trust: not checked.**")


def test_the_machine_window_counts_other_processes_and_steal(monkeypatch):
    before = {"busy": 1000, "steal": 10, "total": 5000, "own": 2.0, "load": 0.0}
    after = {"busy": 1150, "steal": 30, "total": 5400, "own": 2.5, "load": 1.5}
    monkeypatch.setattr(os, "sysconf", lambda name: 100)  # jiffies a second
    window = machine.window(before, after)
    # 150 busy jiffies, 50 of them this process's: 100 of 400 went to others; 20 stolen.
    assert window["others"] == 0.25 and window["steal"] == 0.05 and window["load"] == 1.5
    assert 0 < window["tick_us"] < 1000
    monkeypatch.undo()
    quiet = machine.quiet(0.05)
    assert set(quiet) == {"others", "steal", "load", "tick_us"}


# The harness: one measurement per implementation and clock.


def test_cuda_rows_are_timed_by_wall_clock_events_and_graph_replays(monkeypatch, capsys):
    """The CUDA branch of Context.compare with fake clocks: wall and cuda-events for every
    implementation, cuda-graph for those named in graph; a failed capture is a note."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    seconds = {("ours", False): 2e-6, ("ours", True): 1e-6, ("peer", False): 4e-6,
               ("peer", True): 3e-6, ("replay", True): 0.5e-6}  # fmt: skip

    def fake_wall(fn, events=False):
        return lambda number: seconds[fn(), events] * number

    class Graph:
        replay = staticmethod(lambda: "replay")

    def fake_capture(fn):
        if fn() == "peer":
            raise RuntimeError("operation not permitted when stream is capturing")
        return Graph()

    monkeypatch.setattr(harness, "_wall", fake_wall)
    monkeypatch.setattr(harness, "_capture", fake_capture)
    monkeypatch.setattr(machine, "window", lambda before, after: QUIET)  # not this machine's load
    events = []
    ctx = Context(min_run_time=1e-3, rounds=3, devices=["cuda"],
                  on_event=lambda kind, **fields: events.append((kind, fields)))  # fmt: skip
    got = ctx.compare(op="axpy", case="n=10", size=10, device="cuda", dtype=torch.float32,
                      impls={"ours": lambda: "ours", "peer": lambda: "peer"}, ours="ours",
                      graph=["ours", "peer"])  # fmt: skip
    assert {k: round(m.seconds * 1e6, 3) for k, m in got.items()} == {
        "ours": 2.0, "ours [cuda-events]": 1.0, "ours [cuda-graph]": 0.5,
        "peer": 4.0, "peer [cuda-events]": 3.0}  # fmt: skip
    assert all(m.samples >= 15 and m.iqr == 0.0 and len(m.rounds) == 3 for m in got.values())
    assert ctx.notes == ["axpy n=10: peer not captured as a CUDA graph "
                         "(operation not permitted when stream is capturing)"]  # fmt: skip
    assert [kind for kind, _ in events].count("measurement") == 5
    assert "ours [cuda-graph]" in capsys.readouterr().out
    # The report compares by clock: each speedup against ours by the same one.
    rows = [{**fields, "package": "toy"} for kind, fields in events if kind == "measurement"]
    goal = {**GOALS[2], "ours": "ours", "peer": "peer", "min_speedup": 2.5, "clock": "cuda-events"}
    text = report.render(_one_run(rows, [goal]))
    speedups = {row[1]: row[3] for row in rows_of(text, "n=10")}
    assert speedups == {"**ours**": "-", "**ours [cuda-events]**": "-", "**ours [cuda-graph]**": "-",
                        "peer": "2.00x", "peer [cuda-events]": "3.00x"}  # fmt: skip
    assert _goal_row(_one_run(rows, [goal]), ">=")[1:] == [
        "axpy cuda: ours >= 2.5x peer (cuda-events)", "n=10 (float32)", "3.00x [3.00, 3.00] met",
        "met"]  # fmt: skip


def test_the_lltm_cuda_goals_use_the_clock_issue_58_names():
    module = bench_module("lltm_cuda")
    by_peer = {(g.op, g.case, g.peer): g for g in module.GOALS}
    busy = BUSY
    for op in ("lltm forward", "lltm forward+backward"):  # where the GEMMs keep the GPU busy
        floor = by_peer[op, busy, "GEMM floor"]
        assert (floor.clock, floor.min_speedup) == ("cuda-events", 0.9)
    assert not [g for g in module.GOALS if g.peer == "GEMM floor" and g.case != busy]
    assert by_peer["lltm forward+backward", TUTORIAL, lltm_bench.REDUCE_OVERHEAD].clock == "wall"
    assert {(op, busy) for op in ("lltm forward", "lltm forward+backward")} <= set(module.HEADLINE)


def test_the_spread_of_a_slow_row_is_computed_across_its_rounds(monkeypatch):
    # A slow row, as kornia's at 1080p: one or two blocks a round, too few for quartiles in
    # any one round; pooled over the three rounds they give an IQR.
    blocks = iter([([0.50], 1), ([0.38, 0.42], 1), ([0.45], 1)])
    monkeypatch.setattr(Context, "_time", lambda self, fn, timer: next(blocks))
    ctx = Context(rounds=3)
    m = ctx.compare(op="warp", case="1080p", size=1.0, device="cpu", dtype="float32",
                    impls={"kornia": lambda: None}, ours="kornia")["kornia"]  # fmt: skip
    assert m.seconds == 0.45 and m.rounds == [0.50, 0.40, 0.45]  # the median round's
    assert m.samples == 4 and m.runs == 4
    assert m.iqr == pytest.approx(0.4625 - 0.41)  # quartiles of 0.38, 0.42, 0.45, 0.50
    assert set(m.machine) == {"others", "steal", "load", "tick_us"}
    runs = _one_run([{**_m("kornia", 0), **m.__dict__, "package": "toy", "machine": QUIET}])
    assert rows_of(report.render(runs), "1080p")[0][2] == "450 ms IQR 12% (n=4) ⚠"
    # Three per-call times in all: no IQR, and the cell and the checks say so.
    blocks = iter([([0.50], 1), ([0.40], 1), ([0.45], 1)])
    m = ctx.compare(op="warp", case="1080p", size=1.0, device="cpu", dtype="float32",
                    impls={"kornia": lambda: None}, ours="kornia")["kornia"]  # fmt: skip
    assert (m.samples, m.iqr) == (3, 0.0)
    runs = _one_run([{**m.__dict__, "package": "toy", "machine": QUIET}])
    assert rows_of(report.render(runs), "1080p")[0][2] == "450 ms IQR n/a (n=3) ⚠"
    assert list(report.flags(runs).values()) == ["no IQR: fewer than 4 per-call times"]


def test_a_time_without_an_iqr_leaves_its_goal_inconclusive():
    # A raw file from before the rounds were pooled (no "samples"): its one-block round
    # recorded an IQR of 0.0, which is no spread at all, not a perfectly quiet time.
    old = {k: v for k, v in _m("eager", 10e-6).items() if k != "samples"}
    runs = _one_run([_m("toy", 1e-6, ours=True), old], goals=[{**GOALS[0], "min_speedup": 2.0}])
    text = report.render(runs)
    eager = next(row for row in rows_of(text, "n=10") if row[1] == "eager")
    assert eager[2:4] == ["10 us IQR n/a ⚠", "10.00x"]  # not called a tie: nothing bounds it
    assert _goal_row(runs, ">=")[-2:] == ["10.00x no IQR inconclusive ⚠", "inconclusive"]


def test_gc_cpps_eager_baseline_is_named_by_the_association_it_runs():
    from torch.utils.flop_counter import FlopCounterMode

    module = bench_module("gc_cpp")
    n = 64
    for f_in, f_out in module.SHAPES:
        a, x, w, b = (
            torch.rand(n, n),
            torch.rand(n, f_in),
            torch.rand(f_in, f_out),
            torch.rand(f_out),
        )
        with FlopCounterMode(display=False) as counter:
            module._eager(a, x, w, b)
        right_first = 2 * n * f_in * f_out + 2 * n * n * f_out  # a @ (x @ w)
        left_first = 2 * n * n * f_in + 2 * n * f_in * f_out  # (a @ x) @ w
        name = module.eager_name(f_in, f_out)
        assert counter.get_total_flops() == (right_first if "a@(x@w)" in name else left_first)


def test_goals_not_run_collapse_to_one_line_per_goal():
    cuda_ties = [
        {**GOALS[2], "min_speedup": 0.97, "tie": True, "case": case}
        for case in ("N=1024 512->64", "N=4096 512->64", "N=4096 64->512")
    ]
    runs = _one_run([_m("toy", 1e-6, ours=True), _m("eager", 2e-6)], goals=cuda_ties)
    rows = [row for row in rows_of(report.render(runs), "toy") if "ties" in row[1]]
    assert rows == [
        ["toy", "axpy cuda: toy ties eager (>= 0.97x)",
         "N=1024 512->64, N=4096 512->64, N=4096 64->512", "not run", "not measured"],
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("verdicts", "combined"),
    [
        (["met", "met", "met"], "met"),
        (["met", "inconclusive", "met"], "inconclusive"),
        (["inconclusive", "missed", "met"], "missed"),
        (["met", None], "met"),  # a version that did not run it does not count
        ([None, None], "not measured"),
    ],
)
def test_torch_versions_combine_into_one_verdict(verdicts, combined):
    assert report.combine(verdicts) == combined


def test_the_goal_table_keeps_each_versions_verdict(raw_files):
    # 1.5x: n=1000 gives 1.20x under 1.0.0 (missed) and 1.60x under 1.1.0 (met); with an IQR
    # that straddles the line under 1.1.0 only, that version is inconclusive.
    runs = report.load(raw_files)
    for m in runs["1.1.0"]["measurements"]:
        if m["case"] == "n=1000":
            m["iqr"] = 0.08 * m["seconds"]
    row = next(r for r in rows_of(report.render(runs), "toy")
               if r[1:3] == ["axpy cpu: toy >= 1.5x eager", "n=1000 (float32)"])  # fmt: skip
    assert row[3:] == ["1.20x [1.20, 1.20] **missed**", "1.60x [1.48, 1.73] inconclusive",
                       "**missed**"]  # fmt: skip


def test_from_raw_rerenders_the_published_run(raw_files, tmp_path, monkeypatch):
    out = tmp_path / "results"
    (out / "raw").mkdir(parents=True)
    for path in raw_files:
        (out / "raw" / path.name).write_bytes(path.read_bytes())
    monkeypatch.setattr(sys, "argv", ["report.py", "--from-raw", "--output-dir", str(out)])
    assert report.main() == 0
    text = (out / "report.md").read_text()
    assert text.startswith(
        "# Benchmark report\n\n**The numbers are those of the last published run**"
    )
    assert "- torch 1.0.0 (CUDA none): Test CPU" in text  # its machine and date line
    assert list(json.loads((out / "results.json").read_text())["versions"]) == ["1.0.0", "1.1.0"]


def test_the_committed_report_is_the_rendering_of_the_committed_raw_files(tmp_path):
    """benchmarks/results/report.md and results.json are what --from-raw makes of raw/."""
    results = ROOT / "benchmarks" / "results"
    runs = report.load(sorted((results / "raw").glob("*.json")))
    versions = json.loads((results / "results.json").read_text())["versions"]
    assert sorted(versions) == sorted(runs)
    text = (results / "report.md").read_text()
    source = "benchmarks/results/raw/" if "re-rendered from its raw files" in text else None
    assert text == report.render({v: runs[v] for v in versions}, source=source)


# benchmarks/run.py: the headline (the CUDA rows a GPU check times) and the rows file.

TUTORIAL, LARGE = "B=16 in=32 state=128", "B=64 in=256 state=1024"
BUSY = "B=1024 in=256 state=1024"
HEADLINE = {
    "add_ext": [("add", "n=1e+07", "cuda"), ("add", "n=1e+08", "cuda")],
    "gc_cpp": [
        ("graph_conv dense", "N=1024 512->64", "cuda"),
        ("graph_conv sparse 1%", "N=1024 512->64", "cuda"),
        ("graph_conv dense", "N=4096 512->64", "cuda"),
        ("graph_conv sparse 1%", "N=4096 512->64", "cuda"),
        ("graph_conv dense fwd+bwd", "N=4096 512->64", "cuda"),
        ("graph_conv dense", "N=8192 512->64", "cuda"),
        ("graph_conv dense fwd+bwd", "N=8192 512->64", "cuda"),
    ],
    "lltm_cpu": [],
    "lltm_cuda": [
        ("lltm forward+backward", TUTORIAL, "cuda"),
        ("lltm forward+backward", LARGE, "cuda"),
        ("lltm forward", BUSY, "cuda"),
        ("lltm forward+backward", BUSY, "cuda"),
    ],
    "warp_perspective": [
        ("warp_perspective bilinear", "B=8 C=3 256x256", "cuda"),
        ("warp_perspective bilinear", "B=8 C=3 1080p", "cuda"),
        ("warp_perspective bilinear", "B=8 C=3 4K", "cuda"),
    ],
}
# (package, op, case, ours, peer, min_speedup, tie) of issue 44's goal 6 and issue 58.
ISSUE_GOALS = [
    ("lltm_cuda", "lltm forward+backward", TUTORIAL, "lltm_cuda", "eager", 2.0, False),
    ("lltm_cuda", "lltm forward+backward", TUTORIAL, "lltm_cuda", lltm_bench.REDUCE_OVERHEAD,
     1.0, False),
    ("lltm_cuda", "lltm forward+backward", LARGE, "lltm_cuda", "eager", 1.0, False),
    ("lltm_cuda", "lltm forward+backward", LARGE, "lltm_cuda", "torch.compile", 1.0, False),
    ("add_ext", "add", "n=1e+07", "add_ext", "device copy", 0.9, False),
    ("add_ext", "add", "n=1e+08", "add_ext", "device copy", 0.9, False),
    ("warp_perspective", "warp_perspective bilinear", None, "warp_perspective", "grid_sample",
     2.0, False),
    ("gc_cpp", "graph_conv dense", "N=1024 512->64", "gc_cpp", "eager addmm", 0.97, True),
    ("gc_cpp", "graph_conv dense", "N=4096 512->64", "gc_cpp", "eager addmm", 0.97, True),
    ("gc_cpp", "graph_conv sparse 1%", None, "gc_cpp CSR", "torch.sparse.mm CSR", 0.97, True),
]  # fmt: skip


def bench_module(package: str):
    """packages/<package>/bench/bench_<package>.py, loaded as benchmarks/run.py loads it. Its
    package must import, except lltm_cuda's, which imports lltm_cuda only to time a row."""
    if package != "lltm_cuda":
        pytest.importorskip(package, reason=f"{package} is not installed in this environment")
    return run.load(ROOT / "packages" / package / "bench" / f"bench_{package}.py")


@pytest.mark.parametrize("package", sorted(HEADLINE))
def test_the_headline_plans_the_issues_cuda_rows_without_a_gpu(package):
    module = bench_module(package)
    assert run.headline_rows(module) == HEADLINE[package]
    # A plan on CUDA, whether or not a GPU is here: the benchmark asks for each row before
    # it allocates anything, so nothing touches a device.
    ctx = Context(plan=True, devices=["cuda"], only=run.headline_rows(module))
    module.run(ctx)
    assert ctx.planned == HEADLINE[package]
    assert ctx.measurements == []
    # The full plan holds the headline: its rows are rows of the full benchmark.
    full = Context(plan=True, devices=["cpu", "cuda"])
    module.run(full)
    assert set(HEADLINE[package]) <= set(full.planned)
    assert {device for _, _, device in full.planned} <= {"cpu", "cuda"}


@pytest.mark.parametrize("package", sorted(HEADLINE))
def test_every_headline_row_is_judged_by_a_cuda_goal(package):
    goals = [g for g in bench_module(package).GOALS if g.device == "cuda"]
    for op, case, _ in HEADLINE[package]:
        assert any(g.op == op and g.case in (None, case) for g in goals), (op, case)
    found = [(g.op, g.case, g.ours, g.peer, round(g.min_speedup, 3), g.tie) for g in goals]
    for goal in ISSUE_GOALS:
        if goal[0] == package:
            assert goal[1:] in found


def test_the_headline_run_lists_its_rows_with_plan(monkeypatch, capsys):
    pytest.importorskip("add_ext", reason="add_ext is not installed in this environment")
    argv = ["run.py", "--headline", "--plan", "--only", "add_ext", "--only", "lltm_cuda"]
    monkeypatch.setattr(sys, "argv", argv)
    assert run.main() == 0
    out = capsys.readouterr().out
    planned = [line.split()[1:] for line in out.splitlines() if "  plan: " in line]
    assert planned == [
        ["add", "n=1e+07", "cuda"],
        ["add", "n=1e+08", "cuda"],
        ["lltm", "forward+backward", *TUTORIAL.split(), "cuda"],
        ["lltm", "forward+backward", *LARGE.split(), "cuda"],
        ["lltm", "forward", *BUSY.split(), "cuda"],
        ["lltm", "forward+backward", *BUSY.split(), "cuda"],
    ]
    assert "plan: 6 rows" in out


def test_a_plan_with_an_output_is_refused_before_anything_runs(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(sys, "argv", ["run.py", "--plan", "--output", str(tmp_path / "r.json")])
    with pytest.raises(SystemExit) as stopped:
        run.main()
    assert stopped.value.code == 2
    assert "--plan times nothing: it writes no --output" in capsys.readouterr().err
    assert not (tmp_path / "r.json").exists()


def test_a_selection_times_only_its_rows():
    calls = []
    ctx = Context(quick=True, min_run_time=1e-4, only=[("op", "wanted", "cpu")])
    assert ctx.wants("op", "wanted", "cpu")
    assert not ctx.wants("op", "other", "cpu")
    assert not ctx.wants("op", "wanted", "cuda")
    for case in ("wanted", "other"):  # a benchmark that did not ask first
        ctx.compare(op="op", case=case, size=1, device="cpu", dtype="float32",
                    impls={"ours": lambda c=case: calls.append(c)}, ours="ours")  # fmt: skip
    assert set(calls) == {"wanted"}
    assert [m.case for m in ctx.measurements] == ["wanted"]


def test_the_grid_sample_peer_computes_what_warp_perspective_does():
    """The CUDA goal's peer (bench_warp_perspective.grid_sample_warp) against the op on the
    CPU: the same pixels, so the speedup compares like with like."""
    warp_perspective = pytest.importorskip(
        "warp_perspective", reason="warp_perspective is not installed in this environment"
    )
    bench = bench_module("warp_perspective")
    g = torch.Generator().manual_seed(44)
    for trial in range(4):
        m = torch.eye(3, dtype=torch.float64).repeat(2, 1, 1)
        m[:, :2, :2] += 0.1 * torch.randn(2, 2, 2, generator=g, dtype=torch.float64)
        m[:, :2, 2] = 4 * torch.randn(2, 2, generator=g, dtype=torch.float64)
        m[:, 2, :2] = 2e-3 * torch.randn(2, 2, generator=g, dtype=torch.float64)
        image = torch.rand(2, 3, 24, 40, generator=g, dtype=torch.float64)
        dsize = (20, 36) if trial % 2 else (24, 40)
        for dtype, tolerance in ((torch.float64, 1e-10), (torch.float32, 1e-4)):
            x, mats = image.to(dtype), m.to(dtype)
            ours = warp_perspective.warp_perspective(x, mats, list(dsize))
            peer = bench.grid_sample_warp(x, mats, dsize)
            torch.testing.assert_close(peer, ours, atol=tolerance, rtol=0)
            # Some pixels map outside the source: the zeros padding is compared too.
            assert (ours == 0).any() and (ours != 0).float().mean() > 0.5


def test_a_killed_run_keeps_every_row_it_measured(tmp_path):
    pytest.importorskip("add_ext", reason="add_ext is not installed in this environment")
    path = tmp_path / "rows.jsonl"
    # add_ext on the CPU, 12 rows of at least 0.2 s each: killed after its first case.
    proc = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.run", "--quick", "--only", "add_ext",
         "--device", "cpu", "--no-build-times", "--min-run-time", "0.2", "--rows", str(path),
         "--output", str(tmp_path / "never.json"), "--as-is"],  # SIGKILL: no knob given back
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT,
        env={k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES"},
    )  # fmt: skip
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if path.exists() and path.read_text().count('"kind": "measurement"') >= 3:
                break
            time.sleep(0.02)
    finally:
        proc.kill()
        proc.wait()
    (data,) = run.read(path)
    assert not data["complete"], "the run ended before it was killed"
    assert not (tmp_path / "never.json").exists()
    cases = [(m["case"], m["impl"]) for m in data["measurements"]]
    assert 3 <= len(cases) < 12
    assert cases[:3] == [("n=1e+03", i) for i in ("add_ext", "torch.add", "eager alpha*x+y")]
    assert data["machine"]["cpu"] and data["packages"] == ["add_ext"]
    assert set(data["checks"]["add_ext"]) == {"others", "steal", "load", "tick_us"}
    # It re-executed itself with malloc's thresholds fixed (on glibc), and says so.
    if sys.platform == "linux":
        assert data["machine"]["malloc"] == run.ALLOCATOR
    # A line cut mid-write (the process killed inside write) is dropped, not an error.
    with open(path, "a", encoding="utf-8") as f:
        f.write('{"kind": "measurement", "package": "add_ext", "op": "ad')
    (data,) = run.read(path)
    assert len(data["measurements"]) == len(cases)
    # The report reads what was kept, and says the run was cut.
    text = report.render(report.load([path]))
    assert "## add_ext: add (cpu, float32)" in text
    assert "**cut short** after" in text


def _gpu_rows_file(path: Path, *, complete: bool) -> None:
    """A headline run as an H100 would write it: add_ext measured, lltm_cuda failed; when
    complete is False, cut inside warp_perspective before gc_cpp."""
    gpu = {"name": "NVIDIA H100 80GB HBM3", "count": 1, "memory_gib": 79.1,
           "capability": "9.0", "multiprocessors": 132}  # fmt: skip
    lines = [("run", {"format": 2, "torch": "2.11.0+cu130", "cuda": "13.0", "headline": True,
              "machine": {**MACHINE, "gpu": gpu, "date": "2026-12-01 10:00:00 UTC"},
              "packages": ["add_ext", "lltm_cuda", "warp_perspective", "gc_cpp"]})]  # fmt: skip
    copy_goal = {"op": "add", "ours": "add_ext", "peer": "device copy", "min_speedup": 0.9,
                 "device": "cuda", "note": "", "tie": False, "clock": "cuda-events"}  # fmt: skip
    lines.append(("package", {"package": "add_ext", "goals": [
        {**GOALS[0], "op": "add", "ours": "add_ext", "peer": "torch.add"},
        {**copy_goal, "case": "n=1e+07"}, {**copy_goal, "case": "n=1e+08"}],
        "headline": [["add", "n=1e+07", "cuda"], ["add", "n=1e+08", "cuda"]]}))  # fmt: skip
    lines.append(("check", {"package": "add_ext", **QUIET}))
    for case, times in (("n=1e+07", (40e-6, 42e-6, 38e-6)), ("n=1e+08", (400e-6, 401e-6, 300e-6))):
        for impl, seconds in zip(("add_ext", "torch.add", "device copy"), times, strict=True):
            lines.append(("measurement", {**_m(impl, seconds), "package": "add_ext", "op": "add",
                          "case": case, "size": 1e7, "ours": impl == "add_ext",
                          "device": "cuda", "clock": "cuda-events", "extra": {}}))  # fmt: skip
    lines.append(("package", {"package": "lltm_cuda", "goals": [],
                  "headline": [["lltm forward+backward", TUTORIAL, "cuda"]]}))  # fmt: skip
    lines.append(("failure", {"package": "lltm_cuda", "error": "RuntimeError: no kernel image"}))
    warp = [["warp_perspective bilinear", f"B=8 C=3 {s}", "cuda"] for s in ("256x256", "1080p")]
    lines.append(("package", {"package": "warp_perspective", "goals": [],
                  "headline": [] if complete else warp}))  # fmt: skip
    if complete:
        lines.append(("package", {"package": "gc_cpp", "goals": [], "headline": []}))
        lines.append(("end", {"seconds": 61.2, "load_after": 1.0}))
    path.write_text("".join(json.dumps({"kind": kind, **fields}) + "\n" for kind, fields in lines))


def test_the_gpu_section_shows_a_rows_file_with_machine_date_and_verdicts(tmp_path):
    folder = tmp_path / "gpu"
    folder.mkdir()
    (folder / "2026-11-26-h200.log").write_text("# one NVIDIA H200.\n  add n=1 cuda x 1 us\n")
    _gpu_rows_file(folder / "2026-12-01-h100-torch-2.11.0.jsonl", complete=True)
    text = "\n".join(report.gpu_section(folder))
    assert "- `benchmarks/results/gpu/2026-11-26-h200.log`: 1 CUDA rows. one NVIDIA H200." in text
    assert "### `benchmarks/results/gpu/2026-12-01-h100-torch-2.11.0.jsonl`" in text
    assert ("- torch 2.11.0+cu130 (CUDA 13.0): Test CPU, 2 cores (2 torch threads, AVX2), 8.0 GiB, "
            "NVIDIA H100 80GB HBM3 x1 (sm_90); Python 3.11.7; 2026-12-01 10:00:00 UTC. headline "
            "rows, 2 of 3 measured; complete in 61.2 s.") in text  # fmt: skip
    assert "- lltm_cuda FAILED: RuntimeError: no kernel image" in text
    # The CUDA goals' verdicts (the CPU goal is not this section's), by GPU time.
    goals = {row[2]: row[3:] for row in rows_of(text, "add_ext") if ">=" in row[1]}
    assert goals == {"n=1e+07 (float32)": ["0.95x [0.95, 0.95] met", "met"],
                     "n=1e+08 (float32)": ["0.75x [0.75, 0.75] **missed**", "**missed**"]}  # fmt: skip
    assert "| n=1e+07 | **add_ext [cuda-events]** | 40 us IQR 0.0% | - |  |" in text
    assert "| n=1e+07 | torch.add [cuda-events] | 42 us IQR 0.0% | 1.05x |  |" in text
    assert report.gpu_section(tmp_path / "absent") == []


def test_the_gpu_section_of_a_run_cut_short(tmp_path, monkeypatch, capsys):
    path = tmp_path / "rows.jsonl"
    _gpu_rows_file(path, complete=False)
    monkeypatch.setattr(sys, "argv", ["report.py", "--gpu-rows", str(path)])
    assert report.main() == 0
    out = capsys.readouterr().out
    assert out.startswith("## CUDA, from GPU runs\n")
    assert "headline rows, 2 of 5 measured." in out
    assert (
        "- **cut short** after 6 rows (no end line); rows of warp_perspective not measured: "
        "warp_perspective bilinear B=8 C=3 256x256 (cuda), warp_perspective bilinear B=8 C=3 "
        "1080p (cuda); not reached: gc_cpp"
    ) in out
    assert "| n=1e+08 | device copy [cuda-events] | 300 us IQR 0.0% | 0.75x |  |" in out
    assert not list(tmp_path.glob("*.md"))  # printed only

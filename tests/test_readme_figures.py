"""Measured figures quoted in the READMEs are the ones in benchmarks/results/results.json.

A README quotes a measurement with a marker right after the figure, invisible once
rendered:

    1.53 us<!-- results 2.13.0+cpu: time | add_ext | add | cpu | n=1e+03 | torch.add -->
    0.90x<!-- results 2.13.0+cpu: speedup | add_ext | add | cpu | n=1e+03 | add_ext | torch.add -->
    32.4 s<!-- results 2.13.0+cpu: builds | add_ext | clean_build_s -->

and this test recomputes each figure from results.json (to the decimals shown): after
`nox -s bench` regenerates the results, a README that quotes the old figure fails here
instead of drifting from the report. `python tests/test_readme_figures.py --write` then
rewrites every marked figure from results.json (the prose around it is yours to check).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "results.json"
READMES = sorted(
    p
    for p in ROOT.rglob("README.md")
    if not {".nox", "build", "_vendor", "node_modules"} & set(p.relative_to(ROOT).parts)
)
MARKER = re.compile(
    r"(?P<figure>\d+(?:\.\d+)?)\s*(?P<unit>us|ms|s|x|MB)?\s*"
    # The key runs to the first "-->", so it may hold a ">" (gc_cpp's "N=1024 512->64").
    r"<!--\s*results\s+(?P<version>\S+):\s*(?P<key>(?:(?!-->)[^\n])*?)\s*-->"
)
SCALE = {"us": 1e6, "ms": 1e3, "s": 1.0, None: 1.0}
# The figures issue 18 found drifting; each must stay tied to the results.
REQUIRED = {
    "packages/add_ext/README.md": 5,
    "examples/README.md": 10,
    "packages/warp_perspective/README.md": 12,
}


def seconds(runs: dict, version: str, package: str, op: str, device: str, case: str, impl: str):
    for m in runs[version]["measurements"]:
        if (m["package"], m["op"], m["device"], m["case"], m["impl"]) == (
            package, op, device, case, impl,
        ):  # fmt: skip
            return m["seconds"]
    raise KeyError(f"no measurement {package}/{op}/{device}/{case}/{impl} under torch {version}")


def expected(runs: dict, version: str, key: str, unit: str | None) -> float:
    """The value a marker's key names, in the unit written beside the figure."""
    kind, *parts = [part.strip() for part in key.split("|")]
    if kind == "builds":
        package, field = parts
        return runs[version]["builds"][package][field]
    if kind == "time":
        return seconds(runs, version, *parts) * SCALE[unit]
    if kind == "speedup":
        *where, ours, peer = parts
        return seconds(runs, version, *where, peer) / seconds(runs, version, *where, ours)
    raise KeyError(f"unknown kind {kind!r} in marker {key!r} (builds, time or speedup)")


def drifted(text: str, runs: dict) -> tuple[int, list[str]]:
    """(markers found, one line per figure that is not what results.json says)."""
    problems = []
    found = 0
    for match in MARKER.finditer(text):
        found += 1
        figure, unit = match["figure"], match["unit"]
        try:
            value = expected(runs, match["version"], match["key"], unit)
        except KeyError as error:
            problems.append(f"{match[0]!r}: {error}")
            continue
        decimals = len(figure.partition(".")[2])
        if f"{value:.{decimals}f}" != figure:
            problems.append(f"{match[0]!r}: results.json says {value:.{decimals}f}")
    return found, problems


def rewritten(text: str, runs: dict) -> str:
    """``text`` with each marked figure replaced by the value results.json gives, with as
    many significant digits as the figure had."""

    def figure(match: re.Match) -> str:
        old = match["figure"]
        value = expected(runs, match["version"], match["key"], match["unit"])
        whole, _, fraction = old.partition(".")
        shift = len(whole.lstrip("0") or "0") - len(str(int(abs(value))).lstrip("0") or "0")
        decimals = min(3, max(0, len(fraction) + shift))
        return f"{value:.{decimals}f}" + match[0][len(old) :]

    return MARKER.sub(figure, text)


@pytest.fixture(scope="module")
def runs() -> dict:
    return json.loads(RESULTS.read_text())["versions"]


@pytest.mark.parametrize("readme", READMES, ids=lambda p: str(p.relative_to(ROOT)))
def test_readme_figures_match_the_results(readme, runs):
    found, problems = drifted(readme.read_text(encoding="utf-8"), runs)
    hint = "\n(after a bench run, `python tests/test_readme_figures.py --write` rewrites them)"
    assert not problems, "\n".join(problems) + hint
    assert found >= REQUIRED.get(str(readme.relative_to(ROOT)), 0)


def test_a_drifted_figure_is_caught(runs):
    key = "results 2.13.0+cpu: builds | add_ext | clean_build_s"
    right = runs["2.13.0+cpu"]["builds"]["add_ext"]["clean_build_s"]
    assert drifted(f"{right:.1f} s<!-- {key} -->", runs) == (1, [])
    found, problems = drifted(f"{right + 1:.1f} s<!-- {key} -->", runs)
    assert found == 1
    assert problems == [f"'{right + 1:.1f} s<!-- {key} -->': results.json says {right:.1f}"]
    _, problems = drifted("1.0x<!-- results 2.13.0+cpu: speed | a | b -->", runs)
    assert "unknown kind 'speed'" in problems[0]


def test_rewritten_figures_match_and_keep_their_precision(runs):
    key = "results 2.13.0+cpu: builds | add_ext | clean_build_s"
    right = runs["2.13.0+cpu"]["builds"]["add_ext"]["clean_build_s"]
    stale = f"built in {right * 20:.1f} s<!-- {key} --> here"
    fresh = rewritten(stale, runs)
    assert drifted(fresh, runs) == (1, [])
    assert fresh.startswith("built in ") and fresh.endswith(f" s<!-- {key} --> here")
    # Same magnitude: same decimals; an order of magnitude smaller: one more decimal.
    assert rewritten(f"{right:.1f} s<!-- {key} -->", runs) == f"{right:.1f} s<!-- {key} -->"
    assert rewritten(f"{right * 10:.1f} s<!-- {key} -->", runs).startswith(f"{right:.2f} s")


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python tests/test_readme_figures.py --write")
    all_runs = json.loads(RESULTS.read_text())["versions"]
    for readme in READMES:
        text = readme.read_text(encoding="utf-8")
        new = rewritten(text, all_runs)
        if new != text:
            readme.write_text(new, encoding="utf-8")
            print(f"rewrote figures in {readme.relative_to(ROOT)}")

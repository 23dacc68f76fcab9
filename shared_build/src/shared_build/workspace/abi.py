"""nox -s abi_overhead's driver: each stable-ABI op's per-call cost against the same op's
last full-ABI build, taken from git, both built side by side under the oldest torch."""

from __future__ import annotations

import json
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from .envs import TorchEnv
from .repo import Repo

if TYPE_CHECKING:
    import nox


def call_overhead(session: nox.Session, repo: Repo, refs: Mapping[str, str]) -> str:
    """The table (markdown) of each stable-ABI package's bench/call_overhead.py, run with
    one thread in an environment with its stable-ABI build and in one with its build at
    ``refs[package]`` (its last full-ABI commit)."""
    version = repo.supported_torch[0]
    stable = [p for p in repo.discover_packages() if p.abi == "stable"]
    requirements = ["numpy", "networkx"]
    envs = {
        abi: TorchEnv(session, repo, version, name=f"abi-overhead-{abi}").ensure(requirements)
        for abi in ("stable", "full")
    }
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for package in stable:
            script = package.root / "bench" / "call_overhead.py"
            ref = refs.get(package.name)
            if ref is None or not script.is_file():
                session.log(f"{package.name}: no full-ABI ref or no bench/call_overhead.py")
                continue
            old = Path(tmp) / package.name
            old.mkdir()
            archive = subprocess.run(
                ["git", "-C", str(repo.root), "archive", ref, "shared_build",
                 f"packages/{package.name}"],
                capture_output=True, check=False,
            )  # fmt: skip
            if archive.returncode != 0:
                session.error(
                    f"git archive {ref} failed ({archive.stderr.decode().strip()}): this "
                    "session needs the repository's history (git fetch --unshallow)"
                )
            subprocess.run(["tar", "-x", "-C", str(old)], input=archive.stdout, check=True)
            sources = {"stable": (repo.shared_build, package.root),
                       "full": (old / "shared_build", old / "packages" / package.name)}  # fmt: skip
            results = {}
            for abi, env in envs.items():
                shared, root = sources[abi]
                env.pip("install", "-q", "--no-deps", "--force-reinstall", str(shared))
                # The old sources carry their commit's mtimes, older than the kept build
                # folder's outputs: they get a build folder of their own, or setuptools and
                # ninja would keep the newer build's files.
                knobs = repo.build_env() if abi == "stable" else {
                    **repo.build_env(), "SHARED_BUILD_DIR": str(Path(tmp) / "build-full")}  # fmt: skip
                env.pip(
                    "install", "-q", "--no-build-isolation", "--no-deps", "--force-reinstall",
                    str(root), env=knobs,
                )  # fmt: skip
                out = env.run(env.python, str(script), silent=True,
                              env={"OMP_NUM_THREADS": "1"})  # fmt: skip
                results[abi] = json.loads(str(out).strip().splitlines()[-1])
                if results[abi]["abi"] != abi:
                    session.error(f"{package.name} at {abi}: the build says {results[abi]['abi']}")
            for case, full_us in results["full"]["us"].items():
                stable_us = results["stable"]["us"][case]
                rows.append(
                    f"| {package.name} | {case} | {full_us:.1f} | {stable_us:.1f} | "
                    f"{stable_us / full_us:.2f}x |"
                )
    lines = [
        "# Per-call cost: stable ABI against full ABI",
        "",
        f"`nox -s abi_overhead`: torch {version}, one thread, median microseconds per call "
        "(best of three `blocked_autorange` runs) of each package's bench/call_overhead.py, "
        "in an environment with the stable-ABI build and in one with the package's last "
        f"full-ABI commit ({', '.join(f'{k} {v}' for k, v in refs.items())}).",
        "",
        "| package | case | full ABI (us) | stable ABI (us) | stable / full |",
        "| --- | --- | --- | --- | --- |",
        *rows,
        "",
    ]
    return "\n".join(lines)

"""nox -s abi_overhead: each stable-ABI op's per-call cost against its last full-ABI build.

    python tools/abi_overhead.py TORCH '{"gc_cpp": "<commit>", ...}'

For each package: its bench/call_overhead.py (one thread, median microseconds) with the
package built from this checkout, then with the package and shared_build of its last
full-ABI commit (from git), both in the running environment; the table goes to
benchmarks/results/abi_overhead.md.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def pip(*args: str, **env: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall",
                    *args], check=True, env={**os.environ, **env})  # fmt: skip


def timed(package: str) -> dict:
    script = ROOT / "packages" / package / "bench" / "call_overhead.py"
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(torch: str, refs: dict[str, str]) -> None:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for package, ref in refs.items():
            pip("--no-build-isolation", str(ROOT / "packages" / package))
            stable = timed(package)
            old = Path(tmp) / package
            old.mkdir()
            archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "shared_build",
                                      f"packages/{package}"], capture_output=True, check=False)  # fmt: skip
            if archive.returncode:
                why = archive.stderr.decode().strip()
                sys.exit(f"git archive {ref}: {why} (git fetch --unshallow?)")
            subprocess.run(["tar", "-x", "-C", str(old)], input=archive.stdout, check=True)
            pip(str(old / "shared_build"))
            # The old sources carry their commit's mtimes: a build folder of their own.
            own_build = {"SHARED_BUILD_DIR": f"{tmp}/build"}
            pip("--no-build-isolation", str(old / "packages" / package), **own_build)
            full = timed(package)
            pip(str(ROOT / "shared_build"))
            if (stable["abi"], full["abi"]) != ("stable", "full"):
                sys.exit(f"{package}: the builds say {stable['abi']} and {full['abi']}")
            rows += [f"| {package} | {case} | {us:.1f} | {stable['us'][case]:.1f} | "
                     f"{stable['us'][case] / us:.2f}x |" for case, us in full["us"].items()]  # fmt: skip
    refs_text = ", ".join(f"{k} {v}" for k, v in refs.items())
    table = "\n".join([
        "# Per-call cost: stable ABI against full ABI", "",
        f"`nox -s abi_overhead`: torch {torch}, one thread, median microseconds per call (best of "
        "three `blocked_autorange` runs) of each package's bench/call_overhead.py, built from this "
        f"checkout and from the package's last full-ABI commit ({refs_text}).", "",
        "| package | case | full ABI (us) | stable ABI (us) | stable / full |",
        "| --- | --- | --- | --- | --- |", *rows, "",
    ])  # fmt: skip
    (ROOT / "benchmarks" / "results" / "abi_overhead.md").write_text(table)
    print(table)


if __name__ == "__main__":
    if len(sys.argv) != 3:  # --help, or a wrong call: the usage, never a traceback
        asked = sys.argv[1:] in (["-h"], ["--help"])
        print(__doc__, file=sys.stdout if asked else sys.stderr)
        sys.exit(0 if asked else 2)
    main(sys.argv[1], json.loads(sys.argv[2]))

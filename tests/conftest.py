"""Fixtures of the packaging tests (test_distribution.py, test_release.py)."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import tarfile
import venv
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
# How nox installs (the noxfile's pytest_env): its installer (uv) and its cache.
NOX_INSTALLER = json.loads(os.environ.get("REPO_INSTALLER") or "[]")


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), check=True, capture_output=True, text=True)


@pytest.fixture(scope="module")
def clean_env(tmp_path_factory) -> Path:
    """A new virtual environment with this torch, the build tools and shared_build (every
    package's build requirement, from the checkout), nothing else of ours."""
    path = tmp_path_factory.mktemp("clean") / "venv"
    venv.create(path, with_pip=True)
    python = path / "bin" / "python"
    version = torch.__version__.split("+")[0]
    requirements = [
        f"torch=={version}",
        "setuptools>=77",
        "ninja",
        "packaging",
        str(ROOT / "shared_build"),
    ]
    if NOX_INSTALLER:
        # nox's installer (uv) takes torch from its cache, the very file this environment
        # was made from: a CUDA torch is GBs, not to be downloaded twice in one run.
        _run(*NOX_INSTALLER, "-q", "--python", str(python), *requirements)
    else:
        _run(str(python), "-m", "pip", "install", "-q", *requirements)
    installed = _run(str(python), "-c", "import torch; print(torch.__version__)").stdout.strip()
    assert installed == torch.__version__, "the clean environment must have the same torch build"
    return python


@pytest.fixture(scope="session")
def sdist_of(tmp_path_factory):
    """``sdist_of(name, out)``: packages/<name>'s sdist, written into the folder ``out``.

    setup.py sdist works in the package's folder (its release tree, its egg-info), so two
    at once of one package would trip over each other: a lock per package, shared by the
    pytest-xdist workers of this run, lets one through at a time."""
    locks = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        locks = locks.parent  # the run's folder, above each worker's own

    def make(name: str, out: Path) -> Path:
        with open(locks / f"sdist-{name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            subprocess.run(
                [sys.executable, "setup.py", "-q", "sdist", "-d", str(out)],
                cwd=ROOT / "packages" / name, check=True, capture_output=True, text=True,
            )  # fmt: skip
        (sdist,) = Path(out).glob(f"{name}-*.tar.gz")
        return sdist

    return make


@pytest.fixture(scope="session")
def unpack_sdist():
    """``unpack_sdist(sdist, into)``: the sdist's folder (``<name>-<version>/``), extracted
    into the folder ``into``."""

    def unpack(sdist: Path, into: Path) -> Path:
        with tarfile.open(sdist) as archive:
            archive.extractall(into, filter="data")
        (source,) = into.glob(f"{sdist.name.split('-')[0]}-*/")
        return source

    return unpack

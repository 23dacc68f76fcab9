"""`shared-build doctor` is right: where it names a blocker, a real build of a package stops
at that blocker, and where it says nothing blocks, the packages build (this environment,
where nox built them). Each case is a real environment and a real `pip wheel`."""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "packages" / "add_ext"

pytestmark = pytest.mark.once


def run(python: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([python, *args], capture_output=True, text=True, env=env, check=False)


def doctor_and_build(python: str, env: dict[str, str], tmp_path: Path) -> tuple[str, str]:
    """doctor's report (which must fail) and a real build's output (which must too)."""
    report = run(python, "-m", "shared_build", "doctor", env=env)
    assert report.returncode == 1, report.stdout + report.stderr
    build = run(python, "-m", "pip", "wheel", "-q", "--no-build-isolation", "--no-deps", "-w",
                str(tmp_path / "wheels"), str(PACKAGE), env=env)  # fmt: skip
    assert build.returncode != 0, build.stdout[-2000:]
    return report.stdout, build.stdout + build.stderr


def fail_line(report: str, topic: str) -> str:
    (line,) = [line for line in report.splitlines() if line.startswith(f"[FAIL] {topic}:")]
    return line.split(": ", 1)[1]


def test_nothing_blocks_where_the_packages_built():
    report = run(sys.executable, "-m", "shared_build", "doctor")
    assert report.returncode == 0, report.stdout
    assert report.stdout.strip().endswith("nothing blocks a build")


def test_a_compiler_that_is_missing(tmp_path):
    env = {**os.environ, "CXX": str(tmp_path / "no-such-c++")}
    report, build = doctor_and_build(sys.executable, env, tmp_path)
    assert f"CXX='{tmp_path}/no-such-c++' is not on PATH" in fail_line(report, "c++")
    assert f"CXX='{tmp_path}/no-such-c++' is not on PATH" in build


@pytest.mark.skipif(torch.version.cuda is None, reason="a CPU-only torch needs no nvcc")
def test_an_nvcc_that_does_not_fit_torchs_cuda(tmp_path):
    root = tmp_path / "cuda-12.4"
    (root / "bin").mkdir(parents=True)
    (root / "include").mkdir()
    nvcc = root / "bin" / "nvcc"
    nvcc.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 12.4, V12.4.131'\n")
    nvcc.chmod(0o755)
    env = {**os.environ, "CUDA_HOME": str(root)}
    report, build = doctor_and_build(sys.executable, env, tmp_path)
    sentence = f"CUDA_HOME={root} holds nvcc 12.4, which cannot build against torch's CUDA"
    assert sentence in fail_line(report, "nvcc") and sentence in build


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory) -> str:
    """A new venv with pip's own setuptools (65.5 under CPython 3.11), shared_build and
    ninja, no torch."""
    path = tmp_path_factory.mktemp("bare") / "venv"
    venv.create(path, with_pip=True)
    python = str(path / "bin" / "python")
    done = run(
        python,
        "-m",
        "pip",
        "install",
        "-q",
        "--no-deps",
        str(ROOT / "shared_build"),
        "packaging",
        "ninja",
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return python


def test_no_torch_and_an_old_setuptools(bare_python, tmp_path):
    """The two blockers of a new venv: its setuptools, which the build refuses first, and no
    torch; once setuptools is new enough, the build stops at torch."""
    setuptools = run(
        bare_python, "-c", "import setuptools; print(setuptools.__version__)"
    ).stdout.strip()
    env = dict(os.environ)
    if int(setuptools.split(".")[0]) < 77:
        report, build = doctor_and_build(bare_python, env, tmp_path)
        assert f"{setuptools}, older than the 77" in fail_line(report, "setuptools")
        assert (
            f"has setuptools {setuptools}, which pip install --no-build-isolation does not upgrade"
            in build
        )
        assert run(bare_python, "-m", "pip", "install", "-q", "setuptools>=77").returncode == 0
    report, build = doctor_and_build(bare_python, env, tmp_path)
    assert "not importable; install it first" in fail_line(report, "torch")
    assert "needs torch, which is not importable in this build environment" in build

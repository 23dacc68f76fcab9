"""shared_build.workspace.cpython, nox -s wheels_cpython's machinery, without building a
CPython or installing anything: which wheel an interpreter takes, the sentence for a wheel
that fits none, pip's report, the no-compiler PATH, the arguments, the build skipped when
the interpreter is there."""

from __future__ import annotations

import itertools
import json
import os
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging import tags

from shared_build.workspace import cpython
from shared_build.workspace.repo import Repo
from shared_build.workspace.reports import junit_counts

sys.path.insert(0, str(Path(__file__).parent))
from test_workspace import FakeSession  # the machinery's fake nox session

PLATFORMS = ["manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "linux_x86_64"]
ABI3 = "gc_cpp-0.1.0-cp310-abi3-manylinux_2_28_x86_64.whl"
CP311 = "add_ext-0.1.0-cp311-cp311-manylinux_2_28_x86_64.whl"


def cpython_tags(minor: int) -> list[str]:
    """CPython 3.<minor>'s sys_tags on a manylinux_2_28 x86_64 machine, best first."""
    version = (3, minor)
    abi = f"cp3{minor}"
    found = itertools.chain(
        tags.cpython_tags(version, abis=[abi], platforms=PLATFORMS),
        tags.compatible_tags(version, abi, platforms=PLATFORMS),
    )
    return [str(t) for t in found]


def test_an_abi3_wheel_fits_a_newer_cpython_and_a_per_cpython_wheel_does_not():
    assert cpython.fitting_wheel([ABI3], cpython_tags(13)) == ABI3
    assert cpython.fitting_wheel([CP311], cpython_tags(13)) is None
    assert cpython.fitting_wheel([CP311], cpython_tags(11)) == CP311
    # abi3 of 3.10 is not for 3.9.
    assert cpython.fitting_wheel([ABI3], cpython_tags(9)) is None
    # The interpreter running this test takes the wheels built for it.
    here = [str(t) for t in tags.sys_tags()]
    assert cpython.fitting_wheel([ABI3.replace("manylinux_2_28", "linux")], here)


def test_the_best_ranked_wheel_is_picked_as_pip_picks():
    own = "add_ext-0.1.0-cp313-cp313-manylinux_2_28_x86_64.whl"
    abi3 = "add_ext-0.1.0-cp310-abi3-manylinux_2_28_x86_64.whl"
    assert cpython.fitting_wheel([abi3, own, CP311], cpython_tags(13)) == own
    assert cpython.fitting_wheel([abi3, CP311], cpython_tags(13)) == abi3
    assert cpython.fitting_wheel([abi3, CP311], cpython_tags(11)) == CP311


def test_a_wheel_that_fits_no_wheel_is_named_in_one_sentence():
    said = cpython.misfit("add_ext", [CP311], "3.13", cpython_tags(13))
    assert said.startswith("add_ext: no wheel fits CPython 3.13: ")
    assert f"{CP311} is built for CPython 3.11 only (cp311-cp311)" in said
    assert "CPython 3.13 takes cp313 or abi3 wheels" in said
    assert "not installed, its tests not run" in said
    assert "\n" not in said
    older = cpython.misfit("gc_cpp", [ABI3], "3.9", cpython_tags(9))
    assert "CPython 3.10 and newer (cp310-abi3)" in older and "takes cp39 or abi3" in older
    assert "has no wheel of it" in cpython.misfit("gc_cpp", [], "3.13", cpython_tags(13))


def test_the_installed_file_is_read_from_pips_report():
    report = {
        "install": [
            {"metadata": {"name": "packaging"}, "download_info": {"url": "file:///h/x.whl"}},
            {
                "metadata": {"name": "warp-perspective"},
                "download_info": {"url": f"file:///w/torch-2.15.0/{ABI3}"},
            },
        ]
    }
    assert cpython.installed_file(report, "warp_perspective") == ABI3
    assert cpython.installed_file(report, "gc_cpp") is None
    assert cpython.installed_file({}, "gc_cpp") is None


def _wheel(folder: Path, name: str, tag: str) -> str:
    """A wheel file pip can read the metadata of (enough for --dry-run)."""
    folder.mkdir(parents=True, exist_ok=True)
    filename = f"{name}-0.1.0-{tag}.whl"
    info = f"{name}-0.1.0.dist-info"
    with zipfile.ZipFile(folder / filename, "w") as archive:
        archive.writestr(
            f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1.0\n"
        )
        archive.writestr(
            f"{info}/WHEEL",
            f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\nTag: {tag}\n",
        )
        archive.writestr(f"{info}/RECORD", "")
    return filename


def _pip_dry_run(house: Path, package: str, tmp_path: Path) -> tuple[str, dict]:
    report_file = tmp_path / f"report-{package}.json"
    args = cpython.pip_install_args(house, report_file, package)
    done = subprocess.run(
        [sys.executable, *args[:-1], "--dry-run", args[-1]], capture_output=True, text=True
    )
    report = json.loads(report_file.read_text()) if report_file.exists() else {}
    return done.stdout + done.stderr, report


def test_pip_installs_the_wheel_the_tags_pick_and_a_misfit_becomes_one_sentence(tmp_path):
    """Real pip, this interpreter: the file pip takes is the one fitting_wheel picks, read
    from pip's --report; where no wheel fits, pip's "No matching distribution" becomes the
    sentence naming the package and its wheel."""
    here = [str(t) for t in tags.sys_tags()]
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    own = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    house = tmp_path / "house"
    abi3 = _wheel(house, "fitpkg", "cp310-abi3-linux_x86_64")
    future = _wheel(house, "fitpkg", "cp399-cp399-linux_x86_64")
    misfit = _wheel(house, "misfitpkg", "cp399-cp399-linux_x86_64")
    output, report = _pip_dry_run(house, "fitpkg", tmp_path)
    outcome = cpython.judge_install("fitpkg", [abi3, future], here, version, output, report)
    assert (outcome.wheel, outcome.problem) == (abi3, None), output[-2000:]
    per_cpython = _wheel(house, "fitpkg", f"{own}-{own}-linux_x86_64")
    output, report = _pip_dry_run(house, "fitpkg", tmp_path)
    assert cpython.installed_file(report, "fitpkg") == per_cpython, output[-2000:]
    assert cpython.fitting_wheel([abi3, per_cpython], here) == per_cpython
    output, report = _pip_dry_run(house, "misfitpkg", tmp_path)
    outcome = cpython.judge_install("misfitpkg", [misfit], here, version, output, report)
    assert outcome.wheel is None and not outcome.proven
    assert outcome.line().startswith(f"misfitpkg: no wheel fits CPython {version}: {misfit} ")
    assert "CPython 3.99 only (cp399-cp399)" in outcome.line()
    # A failure that is not a misfit keeps pip's words.
    outcome = cpython.judge_install("fitpkg", [abi3], here, version, "ERROR: disk full", {})
    assert outcome.problem == "fitpkg: pip install failed: ERROR: disk full"


def test_the_session_takes_a_python_path_and_a_torch():
    assert cpython.session_args([], "2.15.0") == (None, "2.15.0")
    assert cpython.session_args(["--python-path", "/p/python3.12", "--torch", "2.14.1"], "x") == (
        Path("/p/python3.12"),
        "2.14.1",
    )
    with pytest.raises(ValueError, match="--torch needs a value"):
        cpython.session_args(["--torch"], "2.15.0")
    with pytest.raises(ValueError, match="unknown arguments"):
        cpython.session_args(["-k", "gradcheck"], "2.15.0")


def _executable(path: Path, body: str = "exit 0") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def test_no_compiler_is_reachable_and_one_in_the_environment_is_caught(tmp_path):
    bin_dir = tmp_path / "venv" / "bin"
    _executable(bin_dir / "python")
    env = cpython.no_compiler_env(bin_dir, tmp_path / "tools")
    path = env["PATH"]
    assert path.split(os.pathsep) == [str(bin_dir), str(tmp_path / "tools")]
    assert env["CC"] == env["CXX"] == "false" and env["VIRTUAL_ENV"] == str(bin_dir.parent)
    assert {p.name for p in (tmp_path / "tools").iterdir()} <= set(cpython.TOOLS_WITHOUT_COMPILERS)
    _executable(bin_dir / "g++")
    with pytest.raises(RuntimeError, match=r"compilers reachable.*'g\+\+'"):
        cpython.no_compiler_env(bin_dir, tmp_path / "tools")


def test_the_trixie_source_line_is_deb_src_only():
    fields = dict(line.split(": ", 1) for line in cpython.TRIXIE_SOURCES.splitlines())
    assert fields["Types"] == "deb-src"
    assert fields["Suites"] == "trixie"
    assert cpython.TRIXIE_SOURCES_FILE.parent == Path("/etc/apt/sources.list.d")


def test_a_built_interpreter_is_not_built_again(tmp_path):
    root = tmp_path / "repo"
    (root / "requirements").mkdir(parents=True)
    (root / "requirements" / "torch-matrix.txt").write_text("torch==2.13.0\n")
    repo = Repo(root, environ={})
    python = cpython.interpreter(repo, "3.13")
    assert python == root / ".nox" / "python" / "3.13" / "bin" / "python3.13"
    _executable(python)  # imports every module it is asked to
    (python.parent.parent / "build.json").write_text(
        json.dumps({"source": "python3.13_3.13.5-2", "seconds": 412.0, "date": "2026-11-27"})
    )
    session = FakeSession()
    assert cpython.ensure_cpython(session, repo, "3.13") == python
    assert session.calls == []
    assert "built from python3.13_3.13.5-2 in 412 s on 2026-11-27" in session.logs[-1]
    # One that cannot import what pip and venv need (ssl, ...) is no interpreter to keep.
    _executable(python, "exit 1")
    assert not cpython._works(python)


def test_a_package_is_proven_only_with_passing_tests():
    passed = cpython.Outcome("gc_cpp", ABI3, {"passed": 40, "failed": 0, "skipped": 3})
    assert passed.proven
    assert passed.line() == f"gc_cpp: {ABI3}: 40 passed, 0 failed, 3 skipped"
    assert not cpython.Outcome("gc_cpp", ABI3, {"passed": 0, "failed": 0, "skipped": 3}).proven
    assert not cpython.Outcome("gc_cpp", ABI3, {"passed": 9, "failed": 1, "skipped": 0}).proven
    misfit = cpython.Outcome("add_ext", problem="add_ext: no wheel fits CPython 3.13: ...")
    assert not misfit.proven and misfit.line() == "add_ext: no wheel fits CPython 3.13: ..."


def test_junit_counts(tmp_path):
    xml = tmp_path / "a.xml"
    xml.write_text(
        '<testsuites><testsuite tests="10" failures="1" errors="1" skipped="2"/></testsuites>'
    )
    assert junit_counts([xml, tmp_path / "missing.xml"]) == {
        "passed": 6,
        "failed": 2,
        "skipped": 2,
    }

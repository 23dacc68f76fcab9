"""What `nox -s release` ships, proven on this run's builds: the wheels repaired as the
release repairs them are manylinux_2_28, pin their torch, install by name from a package
index served over HTTP (pypiserver, as users install from one) with no compiler reachable
and pass their packages' tests, and another torch's wheel is refused.

Its own file, so that pytest-xdist runs it beside test_distribution.py (each a few
minutes), not after it on one worker.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import runpy
import shutil
import socket
import subprocess
import sys
import time
import tomllib
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
import torch

from shared_build.runtime import glibc_newer_than

ROOT = Path(__file__).resolve().parents[1]
# nox -s release's tool: repair (auditwheel, the platform, torch's libraries left out) and
# the proof that the wheels install with no compiler and pass their tests.
WHEELHOUSE = ROOT / "tools" / "wheelhouse.py"
MANYLINUX = runpy.run_path(str(WHEELHOUSE))["MANYLINUX"]

# Group "packaging", as test_distribution.py: under the second-newest torch of the matrix.
pytestmark = [pytest.mark.slow, pytest.mark.once("packaging")]


def run(
    *args: str, cwd: Path | None = None, check: bool = True, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), cwd=cwd, check=check, capture_output=True, text=True, env=env)


# The unrepaired wheels nox -s release would ship from this run (the noxfile's pytest_env).
RELEASE_WHEELS = json.loads(os.environ.get("REPO_RELEASE_WHEELS") or "{}")


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory) -> Path:
    """The wheels nox -s release would ship from this run (the full-ABI packages' built and
    tested here, each stable-ABI package's release build), repaired by nox -s release's
    tool, and shared_build's (the sdists' build requirement)."""
    if not RELEASE_WHEELS:
        pytest.skip("needs nox's release wheels (REPO_RELEASE_WHEELS)")
    house = tmp_path_factory.mktemp("wheelhouse")
    repaired = run(sys.executable, str(WHEELHOUSE), "repair", "--out", str(house),
                   *sorted(RELEASE_WHEELS.values()), check=False)  # fmt: skip
    assert repaired.returncode == 0, (repaired.stdout + repaired.stderr)[-3000:]
    run(
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "-q",
        "--no-deps",
        "-w",
        str(house),
        str(ROOT / "shared_build"),
    )
    return house


def _abi(name: str) -> str:
    config = tomllib.loads((ROOT / "packages" / name / "pyproject.toml").read_text())
    return config.get("tool", {}).get("shared_build", {}).get("abi", "full")


def _metadata(wheel: Path) -> str:
    import zipfile

    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        return archive.read(name).decode()


def test_release_wheels_are_manylinux_2_28_without_build_machine_paths(wheelhouse):
    wheels = sorted(w for w in wheelhouse.glob("*.whl") if not w.name.startswith("shared_build-"))
    assert {w.name.split("-")[0] for w in wheels} == set(RELEASE_WHEELS)
    limit = tuple(int(v) for v in MANYLINUX.split("_")[1:3])
    for wheel in wheels:
        assert f".{MANYLINUX}." in wheel.name.replace("-", ".") + ".", wheel.name
        with _unzipped(wheel) as folder:
            for library in Path(folder).rglob("*.so*"):
                # What the tag promises, checked on the files rather than on auditwheel's
                # word (nox -s release asks auditwheel show).
                too_new = glibc_newer_than(str(library), limit)
                assert not too_new, f"{wheel.name}: {library.name} needs a newer glibc: {too_new}"
                dynamic = run("readelf", "-d", str(library)).stdout
                for line in dynamic.splitlines():
                    if "RPATH" in line or "RUNPATH" in line:
                        paths = line.split("[", 1)[1].rstrip("]").split(":")
                        assert all(p.startswith("$ORIGIN") for p in paths), (library, line)


def _index(folder: Path):
    """The wheels in ``folder`` served as a package index over HTTP by pypiserver, on a free
    port of 127.0.0.1, with no fallback to PyPI: yields its simple URL, for --index-url."""
    return _server(["-m", "pypiserver", "run", "--interface", "127.0.0.1", "--port", "{port}",
                    "--disable-fallback", str(folder)], "simple/")  # fmt: skip


def _served(folder: Path):
    """The files in ``folder`` served over HTTP (as GitHub Pages serves them) on a free port
    of 127.0.0.1: yields the folder's URL."""
    return _server(["-m", "http.server", "--bind", "127.0.0.1", "--directory", str(folder),
                    "{port}"], "")  # fmt: skip


@contextlib.contextmanager
def _server(args: list[str], path: str):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, *(str(port) if a == "{port}" else a for a in args)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}/{path}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(url, timeout=5):
                    break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    server.kill()
                    raise AssertionError(
                        f"{args[1]} did not serve {url}: {server.stderr.read()}"
                    ) from None
                time.sleep(0.2)
        yield url
    finally:
        server.terminate()
        server.wait(10)


@contextlib.contextmanager
def _unzipped(wheel: Path):
    import tempfile
    import zipfile

    with tempfile.TemporaryDirectory() as folder:
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(folder)
        yield folder


def test_release_wheels_say_which_torch_they_need(wheelhouse):
    """A full-ABI wheel pins the torch release it was built against (pip refuses or replaces
    a mismatched torch before any import); a stable-ABI wheel takes its target and newer."""
    this = torch.__version__.split("+")[0]
    for wheel in sorted(wheelhouse.glob("*.whl")):
        if wheel.name.startswith("shared_build-"):
            continue
        requires = [
            line.split(":", 1)[1].strip()
            for line in _metadata(wheel).splitlines()
            if line.startswith("Requires-Dist:")
        ]
        torch_requirement = next(r for r in requires if r.startswith("torch"))
        if _abi(wheel.name.split("-")[0]) == "stable":
            assert torch_requirement.startswith("torch>="), (wheel.name, requires)
        else:
            assert torch_requirement == f"torch=={this}", (wheel.name, requires)
        assert "packaging" in requires, requires


def test_release_wheels_pass_the_abi_audits(wheelhouse, tmp_path):
    """Two well-kept auditors, on the files we ship: abi3audit finds no CPython call outside
    the limited API of 3.10 in any abi3 wheel; torch-abi-audit finds the stable-ABI wheels'
    libraries on LibTorch's stable ABI alone, loadable from their target torch on, and, to
    show it can fail, a full-ABI wheel on torch's unstable C++ API. (Each package's own
    test_libraries_import_no_unstable_symbols stays: it reads the installed libraries under
    every torch of the matrix, from the sdist's tests, where no auditor is installed.)"""
    bin_folder = Path(sys.executable).parent
    wheels = sorted(w for w in wheelhouse.glob("*.whl") if not w.name.startswith("shared_build-"))
    abi3 = [w for w in wheels if "-abi3-" in w.name]
    assert abi3, [w.name for w in wheels]
    audited = run(
        str(bin_folder / "abi3audit"), "--strict", "--summary", *map(str, abi3), check=False
    )
    said = " ".join((audited.stdout + audited.stderr).split())  # rich wraps its lines
    assert audited.returncode == 0, said[-3000:]
    assert said.count("0 ABI version mismatches and 0 ABI violations found") == len(abi3), said
    # Every wheel is abi3 (add_ext's too: its module keeps to the limited API, and its link
    # drops the pybind11 code that torch's Python headers bring, csrc/tensor_bridge.cpp).
    assert abi3 == wheels, [w.name for w in wheels]
    # And it can fail: a per-CPython extension (numpy's core, the full C API) named abi3.
    import numpy

    (core,) = Path(numpy.__file__).parent.glob("_core/_multiarray_umath.cpython-*.so")
    renamed = tmp_path / "_multiarray_umath.abi3.so"
    shutil.copyfile(core, renamed)
    caught = run(str(bin_folder / "abi3audit"), "--strict", str(renamed), check=False)
    said = " ".join((caught.stdout + caught.stderr).split())
    assert caught.returncode == 1 and re.search(r"[1-9]\d* ABI violations found", said), said
    for wheel in wheels:
        name = wheel.name.split("-")[0]
        with _unzipped(wheel) as folder:
            report = run(
                str(bin_folder / "torch-abi-audit"), "--check", "torch", f"{folder}/{name}",
                check=False,
            )  # fmt: skip
        output = report.stdout + report.stderr
        if _abi(name) == "stable":
            target = next(
                r.split(">=")[1].split(",")[0]
                for r in _metadata(wheel).splitlines()
                if r.startswith("Requires-Dist: torch>=")
            )
            assert report.returncode == 0, output[-3000:]
            assert "Torch ABI:   STABLE" in output and f"Min torch:   {target}" in output, output
        else:
            assert report.returncode == 1, output[-3000:]
            assert f"{name}: uses libtorch without the stable ABI" in output, output[-3000:]


def _proven(clean_env: Path, house: Path, sdists: Path, *source: str) -> None:
    """tools/wheelhouse.py prove in the clean environment (torch, the packages' test
    requirements, none of our packages, not even shared_build): every package installs by
    name from source with no compiler reachable, and passes its tests from its sdist."""
    names = sorted(RELEASE_WHEELS)
    test_requires = sorted(
        {
            r
            for name in names
            for r in tomllib.loads((ROOT / "packages" / name / "pyproject.toml").read_text())[
                "project"
            ]["optional-dependencies"]["test"]
        }
        - {"shared_build"}
    )
    run(str(clean_env), "-m", "pip", "install", "-q", *test_requires)
    with _ours_from_the_wheels(clean_env, names):
        proof = run(str(clean_env), str(WHEELHOUSE), "prove", str(house), str(sdists), *source,
                    check=False)  # fmt: skip
        said = proof.stdout + proof.stderr
        assert proof.returncode == 0, said[-4000:]
        for name in names:
            assert re.search(rf"^  {name}: \d+ passed", proof.stdout, re.M), said[-4000:]


@contextlib.contextmanager
def _ours_from_the_wheels(clean_env: Path, names: list[str]):
    """The clean environment without shared_build for the body (it comes from the wheels
    too); after it, without our packages and with shared_build from the checkout again."""
    run(str(clean_env), "-m", "pip", "uninstall", "-q", "-y", "shared_build")
    try:
        yield
    finally:
        run(str(clean_env), "-m", "pip", "uninstall", "-q", "-y", *names, check=False)
        run(str(clean_env), "-m", "pip", "install", "-q", str(ROOT / "shared_build"))


def test_release_wheels_install_without_a_compiler_and_pass_their_tests(
    wheelhouse, clean_env, tmp_path, sdist_of
):
    """The packages named from the wheelhouse served as an index, with no compiler reachable
    (PATH holds the environment's bin folder and binutils, CC=false, CXX=false): every
    package installs, imports and passes its own tests, run from its sdist (the non-slow
    ones: the slow ones build programs). nox -s cpython runs the same proof."""
    sdists = tmp_path / "sdist"
    for name in RELEASE_WHEELS:
        sdist_of(name, sdists)
    with _index(wheelhouse) as index:
        _proven(clean_env, wheelhouse, sdists, "--index-url", index)


def test_the_find_links_pages_install_each_package_by_name_over_http(
    wheelhouse, clean_env, tmp_path
):
    """What a tag deploys to GitHub Pages (tools/wheelhouse.py pages), served over HTTP on
    127.0.0.1: with no index and no compiler, the page of this torch build
    (torch-2.15.0+cu132.html) lists exactly the wheelhouse's wheels and installs every
    package by name, from the page, each a file of the wheelhouse the index test above proves
    passes its tests, and each imports; stable.html lists the wheels every torch takes (stable
    ABI, shared_build) and no other. Those files' tests are not run a second time."""
    house = tmp_path / "house" / f"torch-{torch.__version__.split('+')[0]}"
    shutil.copytree(wheelhouse, house)
    site = tmp_path / "site"
    run(sys.executable, str(WHEELHOUSE), "pages", str(house.parent), str(site))
    stable = re.findall(r'href="stable/(\w+)-', (site / "stable.html").read_text())
    assert sorted(stable) == sorted(
        ["shared_build", *(n for n in RELEASE_WHEELS if _abi(n) == "stable")]
    )
    page_file = site / f"torch-{torch.__version__}.html"
    listed = re.findall(r'href="[^"]*/([^"/]+\.whl)"', page_file.read_text())
    assert sorted(listed) == sorted(w.name for w in house.glob("*.whl")), listed
    names = sorted(RELEASE_WHEELS)
    # Only the environment's own programs on PATH, and no source distribution taken.
    env = {"PATH": str(clean_env.parent), "HOME": str(tmp_path), "CC": "false", "CXX": "false",
           "CUDA_HOME": "/nonexistent"}  # fmt: skip
    report = tmp_path / "report.json"
    with _ours_from_the_wheels(clean_env, names):
        with _served(site) as url:
            page = f"{url}torch-{torch.__version__}.html"
            pip = run(str(clean_env), "-m", "pip", "install", "--isolated", "--only-binary", ":all:",
                      "--no-index", "--find-links", page, "--report", str(report), "shared_build",
                      *names, env=env, check=False)  # fmt: skip
        assert pip.returncode == 0, (pip.stdout + pip.stderr)[-4000:]
        taken = {
            item["metadata"]["name"].replace("-", "_"): item["download_info"]["url"]
            for item in json.loads(report.read_text())["install"]
        }
        assert sorted(taken) == sorted(["shared_build", *names]), taken
        for name, link in taken.items():
            assert link.startswith(url), (name, link)
            assert (house / urllib.parse.unquote(link).rsplit("/", 1)[1]).is_file(), (name, link)
        imported = run(str(clean_env), "-c", f"import {', '.join(names)}", env=env, check=False)
        assert imported.returncode == 0, imported.stderr[-3000:]


def test_another_torchs_wheel_is_refused_naming_both_versions(wheelhouse, clean_env, tmp_path):
    """A user whose torch is this one installs from another torch's index, with their torch
    named in the command (as the README says to): pip refuses, naming both versions, before
    anything is installed. (Without naming it, pip replaces torch with the
    wheel's, visibly: that is the README's other case.)"""
    import zipfile

    this = torch.__version__.split("+")[0]
    (wheel,) = [w for w in wheelhouse.glob("*.whl") if w.name.startswith("add_ext-")]
    other = tmp_path / "torch-2.99.0"
    other.mkdir()
    # The same wheel as another torch's folder would hold it: its metadata pins 2.99.0.
    with zipfile.ZipFile(wheel) as source, zipfile.ZipFile(other / wheel.name, "w") as copy:
        for item in source.infolist():
            data = source.read(item.filename)
            if item.filename.endswith(".dist-info/METADATA"):
                data = data.replace(f"torch=={this}".encode(), b"torch==2.99.0")
            copy.writestr(item, data)
    with _index(other) as index:
        refused = run(
            str(clean_env), "-m", "pip", "install", "--dry-run", "--index-url", index, "add_ext",
            f"torch=={this}", check=False,
        )  # fmt: skip
    output = refused.stdout + refused.stderr
    assert refused.returncode != 0, output
    assert "2.99.0" in output and this in output, output[-3000:]

"""A package ships: its wheel and its sdist install and import in a clean virtual
environment that has only the same torch, and an isolated build fails with the sentence
that says what to do.

add_ext stands for every package: they share setup.py, shared_build and the sdist logic
(tests/test_packages.py checks that every setup.py goes through shared_build).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import textwrap
import tomllib
import venv
from pathlib import Path

import pytest
import torch

from shared_build.runtime import glibc_newer_than

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "packages" / "add_ext"
CHECK = textwrap.dedent(
    """
    import torch, add_ext
    x, y = torch.randn(100), torch.randn(100)
    assert torch.allclose(add_ext.add(x, y, 2.0), 2 * x + y)
    print("ok", add_ext.BUILD_INFO["torch"], add_ext.__file__)
    """
)

REBUILD_COMMAND = "from add_ext import _build_info as b; print(b.rebuild_command(b.BUILD_INFO))"

# Group "packaging": nox runs it under the second-newest torch of the matrix (a CUDA build,
# so the sdist compiles CUDA kernels too), in the other CI lane than the scaffold builds.
pytestmark = [pytest.mark.slow, pytest.mark.once("packaging")]
# nox names the wheels it built here and how it installs (noxfile.pytest_env); without
# nox, the wheel is built here and the clean environment uses pip.
NOX_WHEELS = json.loads(os.environ.get("REPO_WHEELS") or "{}")
NOX_INSTALLER = json.loads(os.environ.get("REPO_INSTALLER") or "[]")


def run(
    *args: str, cwd: Path | None = None, check: bool = True, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), cwd=cwd, check=check, capture_output=True, text=True, env=env)


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory) -> dict[str, Path]:
    """The wheel (built in this environment) and the sdist of add_ext."""
    out = tmp_path_factory.mktemp("dist")
    if "add_ext" in NOX_WHEELS:
        # The wheel nox built and installed in this environment: the same package is not
        # compiled twice in one run.
        shutil.copy(NOX_WHEELS["add_ext"], out)
    else:
        built = run(
            sys.executable, "-m", "pip", "wheel", "-q", "--no-build-isolation", "--no-deps",
            "-w", str(out), str(PACKAGE), check=False,
        )  # fmt: skip
        assert built.returncode == 0, (built.stdout + built.stderr)[-4000:]
    run(sys.executable, "setup.py", "-q", "sdist", "-d", str(out), cwd=PACKAGE)
    (wheel,) = out.glob("add_ext-*.whl")
    (sdist,) = out.glob("add_ext-*.tar.gz")
    return {"wheel": wheel, "sdist": sdist}


@pytest.fixture(scope="module")
def clean_env(tmp_path_factory) -> Path:
    """A new virtual environment with this torch and the build tools, nothing of ours."""
    path = tmp_path_factory.mktemp("clean") / "venv"
    venv.create(path, with_pip=True)
    python = path / "bin" / "python"
    version = torch.__version__.split("+")[0]
    requirements = [f"torch=={version}", "setuptools>=77", "ninja", "packaging"]
    if NOX_INSTALLER:
        # nox's installer (uv) takes torch from its cache, the very file this environment
        # was made from: a CUDA torch is GBs, not to be downloaded twice in one run.
        run(*NOX_INSTALLER, "-q", "--python", str(python), *requirements)
    else:
        run(str(python), "-m", "pip", "install", "-q", *requirements)
    installed = run(str(python), "-c", "import torch; print(torch.__version__)").stdout.strip()
    assert installed == torch.__version__, "the clean environment must have the same torch build"
    return python


def test_wheel_tag_follows_limited_api(artifacts):
    """abi3 (one wheel for CPython >= 3.10) unless the package binds with pybind11."""
    config = tomllib.loads((PACKAGE / "pyproject.toml").read_text())["tool"]["shared_build"]
    tag = (
        "cp310-abi3"
        if config.get("limited_api", True)
        else f"cp3{sys.version_info.minor}-cp3{sys.version_info.minor}"
    )
    assert f"-{tag}-" in artifacts["wheel"].name, artifacts["wheel"].name


def test_wheel_installs_and_imports_in_a_clean_env(artifacts, clean_env):
    run(
        str(clean_env),
        "-m",
        "pip",
        "install",
        "-q",
        "--no-deps",
        "--force-reinstall",
        str(artifacts["wheel"]),
    )
    out = run(str(clean_env), "-c", CHECK, cwd=clean_env.parent).stdout
    assert out.startswith(f"ok {torch.__version__}"), out
    run(str(clean_env), "-m", "pip", "uninstall", "-q", "-y", "add_ext")


def test_sdist_builds_without_the_repository(artifacts, clean_env, tmp_path):
    """The sdist carries shared_build: it builds from a folder with no repository around it,
    and its own tests pass from the extracted sdist against that install: add_ext stands for
    the packages whose tests/conftest.py takes the cuda/slow markers and the CUDA skip from
    the vendored shared_build.testing (without them its cuda-marked tests fail on a machine
    with no GPU). One build of the sdist serves both checks.

    One GPU architecture is enough to prove it (the package installs of the test session
    build the default list): 1 minute instead of 3 on the 2-core CI machine."""
    env = {**os.environ, "TORCH_CUDA_ARCH_LIST": "9.0"}
    result = run(
        str(clean_env), "-m", "pip", "install", "-q", "--no-build-isolation", "--no-deps", "--force-reinstall",
        str(artifacts["sdist"]), check=False, env=env,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    out = run(str(clean_env), "-c", CHECK, cwd=clean_env.parent).stdout
    assert out.startswith("ok"), out
    # pip built it in a temporary folder, deleted since: the mismatch sentence's rebuild
    # command must name the sdist, not the bare name that no index serves.
    command = run(str(clean_env), "-c", REBUILD_COMMAND, cwd=clean_env.parent).stdout.strip()
    assert command.endswith(f"--force-reinstall --no-deps {artifacts['sdist']}"), command
    _extracted_tests_pass(clean_env, _extract(artifacts["sdist"], tmp_path, "add_ext"), "add_ext")
    run(str(clean_env), "-m", "pip", "uninstall", "-q", "-y", "add_ext")


def _extract(sdist: Path, into: Path, name: str) -> Path:
    """The sdist's folder, extracted into `into`."""
    with tarfile.open(sdist) as archive:
        archive.extractall(into, filter="data")
    (source,) = into.glob(f"{name}-*/")
    return source


def _extracted_tests_pass(clean_env: Path, source: Path, name: str) -> None:
    """The package's test dependencies installed, its tests pass from the extracted sdist
    folder against the installed package."""
    test_requires = tomllib.loads((ROOT / "packages" / name / "pyproject.toml").read_text())[
        "project"
    ]["optional-dependencies"]["test"]
    run(str(clean_env), "-m", "pip", "install", "-q", *test_requires)
    # From the extracted folder, as its user would: no repository conftest.py above it.
    result = run(
        str(clean_env), "-m", "pytest", "-q", "-x", "-m", "not slow", "-p", "no:cacheprovider",
        "--strict-markers", "tests", cwd=source, check=False,
    )  # fmt: skip
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    assert " passed" in result.stdout
    if not torch.cuda.is_available():
        assert " skipped" in result.stdout, result.stdout[-3000:]


def test_isolated_build_says_to_use_no_build_isolation(clean_env):
    """pip's default isolated build hides torch; the failure must say what to do."""
    result = run(str(clean_env), "-m", "pip", "install", "--no-deps", str(PACKAGE), check=False)
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert "needs torch, which is not importable in this build environment" in output, output[
        -3000:
    ]
    assert "pip install --no-build-isolation" in output


def test_sdist_tests_run_alone(tmp_path, clean_env):
    """An extracted sdist installs from its folder and its tests run with only the package
    and its test dependencies installed: lltm_cpu's suite is one source with lltm_cuda's
    (lltm_common/), which the sdist vendors, as it vendors shared_build. (add_ext's
    extracted tests run in test_sdist_builds_without_the_repository.)"""
    name = "lltm_cpu"
    run(
        sys.executable, "setup.py", "-q", "sdist", "-d", str(tmp_path), cwd=ROOT / "packages" / name
    )
    (sdist,) = tmp_path.glob(f"{name}-*.tar.gz")
    source = _extract(sdist, tmp_path, name)
    result = run(
        str(clean_env), "-m", "pip", "install", "-q", "--no-build-isolation", "--no-deps", str(source),
        check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    _extracted_tests_pass(clean_env, source, name)
    run(str(clean_env), "-m", "pip", "uninstall", "-q", "-y", name)


# ---- the release wheels: what `nox -s release` ships, proven on this run's builds ----------

# nox -s release's auditwheel arguments (noxfile.auditwheel_args): the platform and the
# libraries the torch wheel provides.
AUDITWHEEL_ARGS = json.loads(os.environ.get("REPO_AUDITWHEEL") or "[]")
# The unrepaired wheels nox -s release would ship from this run (noxfile.release_wheels).
RELEASE_WHEELS = json.loads(os.environ.get("REPO_RELEASE_WHEELS") or "{}")
# No compiler reachable: PATH holds the clean environment's bin folder and links to these
# programs only (the tests read libraries with binutils), never gcc, g++, c++ or nvcc.
NO_COMPILER = {"CC": "false", "CXX": "false", "CUDA_HOME": "/nonexistent", "CUDA_PATH": ""}
TOOLS_WITHOUT_COMPILERS = ("nm", "c++filt", "readelf", "objdump", "ldd", "bash", "sh", "false")
COMPILERS = ("gcc", "g++", "c++", "cc", "clang", "clang++", "nvcc")


def _no_compiler_path(clean_env: Path, folder: Path) -> str:
    folder.mkdir()
    for tool in TOOLS_WITHOUT_COMPILERS:
        found = shutil.which(tool)
        if found:
            (folder / tool).symlink_to(found)
    path = f"{clean_env.parent}{os.pathsep}{folder}"
    reachable = [c for c in COMPILERS if shutil.which(c, path=path)]
    assert not reachable, f"compilers reachable on the test's PATH: {reachable}"
    return path


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory) -> Path:
    """The wheels nox -s release would ship from this run (the full-ABI packages' built and
    tested here, each stable-ABI package's release build), repaired by auditwheel exactly
    as nox -s release repairs them."""
    if not RELEASE_WHEELS or not AUDITWHEEL_ARGS:
        pytest.skip("needs nox's release wheels (REPO_RELEASE_WHEELS, REPO_AUDITWHEEL)")
    house = tmp_path_factory.mktemp("wheelhouse")
    for name, wheel in sorted(RELEASE_WHEELS.items()):
        repaired = run(
            sys.executable, "-m", "auditwheel", "repair", *AUDITWHEEL_ARGS, "-w", str(house),
            wheel, check=False,
        )  # fmt: skip
        assert repaired.returncode == 0, f"{name}: {(repaired.stdout + repaired.stderr)[-3000:]}"
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
    plat = AUDITWHEEL_ARGS[AUDITWHEEL_ARGS.index("--plat") + 1]
    wheels = sorted(wheelhouse.glob("*.whl"))
    assert {w.name.split("-")[0] for w in wheels} == set(RELEASE_WHEELS)
    limit = tuple(int(v) for v in plat.split("_")[1:3])
    for wheel in wheels:
        assert f".{plat}." in wheel.name.replace("-", ".") + ".", wheel.name
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


def test_release_wheels_install_without_a_compiler_and_pass_their_tests(
    wheelhouse, clean_env, tmp_path
):
    """One pip command from the wheelhouse, with no compiler reachable (PATH holds the
    environment's bin folder and binutils, CC=false, CXX=false): every package installs,
    imports and passes its own tests, run from its sdist (the non-slow ones: the slow ones
    build programs)."""
    names = sorted(RELEASE_WHEELS)
    path = _no_compiler_path(clean_env, tmp_path / "bin")
    env = {"PATH": path, "HOME": os.environ.get("HOME", "/tmp"), **NO_COMPILER}
    test_requires = sorted(
        {
            r
            for name in names
            for r in tomllib.loads((ROOT / "packages" / name / "pyproject.toml").read_text())[
                "project"
            ]["optional-dependencies"]["test"]
        }
    )
    run(str(clean_env), "-m", "pip", "install", "-q", *test_requires)
    installed = run(
        str(clean_env), "-m", "pip", "install", "--no-index", "--only-binary", ":all:",
        "--find-links", str(wheelhouse), *names, check=False, env=env,
    )  # fmt: skip
    assert installed.returncode == 0, (installed.stdout + installed.stderr)[-3000:]
    try:
        for name in names:
            run(sys.executable, "setup.py", "-q", "sdist", "-d", str(tmp_path),
                cwd=ROOT / "packages" / name)  # fmt: skip
            (sdist,) = tmp_path.glob(f"{name}-*.tar.gz")
            source = _extract(sdist, tmp_path / name, name)
            result = run(
                str(clean_env), "-m", "pytest", "-q", "-x", "-m", "not slow", "-p",
                "no:cacheprovider", "tests", cwd=source, check=False, env=env,
            )  # fmt: skip
            assert result.returncode == 0, f"{name}: {(result.stdout + result.stderr)[-3000:]}"
            assert " passed" in result.stdout, f"{name}: {result.stdout[-2000:]}"
    finally:
        run(str(clean_env), "-m", "pip", "uninstall", "-q", "-y", *names)


def test_another_torchs_wheel_is_refused_naming_both_versions(wheelhouse, clean_env, tmp_path):
    """A user whose torch is this one runs the install line of another torch's folder, with
    their torch named in the command (as the README says to): pip refuses, naming both
    versions, before anything is installed. (Without naming it, pip replaces torch with the
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
    refused = run(
        str(clean_env), "-m", "pip", "install", "--dry-run", "--no-index", "--find-links",
        str(other), "add_ext", f"torch=={this}", check=False,
    )  # fmt: skip
    output = refused.stdout + refused.stderr
    assert refused.returncode != 0, output
    assert "2.99.0" in output and this in output, output[-3000:]

"""A package ships: its wheel and its sdist install and import in a clean virtual
environment that has only the same torch, and an isolated build fails with the sentence
that says what to do.

add_ext stands for every package: they share setup.py, shared_build and the sdist logic
(tests/test_packages.py checks that every setup.py goes through shared_build).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest
import torch

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
# nox names the wheels it built here (the noxfile's pytest_env); without nox, the wheel is built
# here. The clean environment is tests/conftest.py's.
NOX_WHEELS = json.loads(os.environ.get("REPO_WHEELS") or "{}")


def run(
    *args: str, cwd: Path | None = None, check: bool = True, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), cwd=cwd, check=check, capture_output=True, text=True, env=env)


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory, sdist_of) -> dict[str, Path]:
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
    (wheel,) = out.glob("add_ext-*.whl")
    return {"wheel": wheel, "sdist": sdist_of("add_ext", out)}


def test_wheel_tag_follows_limited_api(artifacts):
    """abi3 (one wheel for CPython >= 3.10) unless the package sets limited_api = false."""
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


def test_sdist_builds_without_the_repository(artifacts, clean_env, tmp_path, unpack_sdist):
    """The sdist builds from a folder with no repository around it (shared_build, its build
    requirement, installed), and its own tests pass from the extracted sdist against that
    install: the cuda/slow markers and the CUDA skip come from shared_build's pytest plugin
    (without them its cuda-marked tests fail on a machine with no GPU). One build of the
    sdist serves both checks.

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
    _extracted_tests_pass(clean_env, unpack_sdist(artifacts["sdist"], tmp_path), "add_ext")
    run(str(clean_env), "-m", "pip", "uninstall", "-q", "-y", "add_ext")


def _extracted_tests_pass(clean_env: Path, source: Path, name: str) -> None:
    """The package's test dependencies installed, its tests pass from the extracted sdist
    folder against the installed package."""
    test_requires = tomllib.loads((ROOT / "packages" / name / "pyproject.toml").read_text())[
        "project"
    ]["optional-dependencies"]["test"]
    # shared_build is in the clean environment already (from the checkout; no index has it).
    run(
        str(clean_env),
        "-m",
        "pip",
        "install",
        "-q",
        *(r for r in test_requires if r != "shared_build"),
    )
    # From the extracted folder, as its user would: no repository conftest.py above it.
    result = run(
        str(clean_env), "-m", "pytest", "-q", "-x", "-m", "not slow", "-p", "no:cacheprovider",
        "--strict-markers", "tests", cwd=source, check=False,
    )  # fmt: skip
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    assert " passed" in result.stdout
    if not torch.cuda.is_available():
        assert " skipped" in result.stdout, result.stdout[-3000:]


def test_isolated_build_says_to_use_no_build_isolation(clean_env, tmp_path):
    """pip's default isolated build hides torch; the failure must say what to do (with
    shared_build, the build requirement, where pip finds it: a wheelhouse or an index)."""
    run(
        str(clean_env),
        "-m",
        "pip",
        "wheel",
        "-q",
        "--no-deps",
        "-w",
        str(tmp_path),
        str(ROOT / "shared_build"),
    )
    result = run(str(clean_env), "-m", "pip", "install", "--no-deps", "--find-links", str(tmp_path),
                 str(PACKAGE), check=False)  # fmt: skip
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert "needs torch, which is not importable in this build environment" in output, output[
        -3000:
    ]
    assert "pip install --no-build-isolation" in output


def test_sdist_tests_run_alone(tmp_path, clean_env, sdist_of, unpack_sdist):
    """An extracted sdist installs from its folder and its tests run with only the package
    and its test dependencies installed: lltm_cpu's suite is one source with lltm_cuda's
    (lltm_common/), which the sdist carries in its tests/ folder. (add_ext's
    extracted tests run in test_sdist_builds_without_the_repository.)"""
    name = "lltm_cpu"
    source = unpack_sdist(sdist_of(name, tmp_path), tmp_path)
    result = run(
        str(clean_env), "-m", "pip", "install", "-q", "--no-build-isolation", "--no-deps", str(source),
        check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    _extracted_tests_pass(clean_env, source, name)
    run(str(clean_env), "-m", "pip", "uninstall", "-q", "-y", name)

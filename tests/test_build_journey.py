"""A new user's build of one package: what pip does with it and what it leaves behind.

- A plain ``pip install ./packages/<name>`` (or ``pip wheel``) builds out of tree and leaves
  the source folder as it was, also when the compile fails; SHARED_BUILD_DIR keeps the
  objects for an incremental rebuild (what nox uses).
- Forgetting ``--no-build-isolation`` fails in the build backend's first hook, before pip
  resolves (and downloads) the runtime dependency torch; an sdist still builds in
  isolation without torch.

A tiny package built through shared_build stands for every package (they share setup.py
and shared_build; tests/test_packages.py checks that every setup.py goes through it).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import textwrap
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NO_TORCH = "needs torch, which is not importable in this build environment"

pytestmark = [pytest.mark.slow, pytest.mark.once]


def run(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None):
    return subprocess.run(list(args), capture_output=True, text=True, check=False, env=env, cwd=cwd)


def make_package(tmp_path: Path, source: str = "") -> Path:
    """tmp_path/repo/packages/tiny_op, its setup.py add_ext's."""
    repo = tmp_path / "repo"
    root = repo / "packages" / "tiny_op"
    (root / "src" / "tiny_op").mkdir(parents=True)
    (root / "csrc").mkdir()
    shutil.copy(ROOT / "packages" / "add_ext" / "setup.py", root / "setup.py")
    (root / "src" / "tiny_op" / "__init__.py").write_text("")
    (root / "pyproject.toml").write_text(
        textwrap.dedent(
            """
            [build-system]
            requires = ["setuptools>=77", "ninja", "shared_build"]
            build-backend = "setuptools.build_meta"

            [project]
            name = "tiny_op"
            version = "0.1.0"
            dependencies = ["torch>=2.6"]

            [tool.shared_build]
            python_module = false
            """
        )
    )
    (root / "csrc" / "tiny_op.cpp").write_text(
        source
        or textwrap.dedent(
            """
            #include <torch/library.h>

            TORCH_LIBRARY(tiny_op, m) { m.def("twice(Tensor x) -> Tensor"); }
            """
        )
    )
    return root


def files_under(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def build_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    tmp = tmp_path / "tmp"
    tmp.mkdir(exist_ok=True)
    env = {**os.environ, "TMPDIR": str(tmp), "MAX_JOBS": "1", **extra}
    env.pop("SHARED_BUILD_DIR", None)
    env.update(extra)
    return env


def pip_wheel(root: Path, out: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return run(
        sys.executable, "-m", "pip", "wheel", "-v", "--no-build-isolation", "--no-deps",
        "-w", str(out), str(root), env=env,
    )  # fmt: skip


def test_build_leaves_the_source_tree_as_it_was(tmp_path):
    root = make_package(tmp_path)
    before = files_under(root)
    env = build_env(tmp_path)
    result = pip_wheel(root, tmp_path / "wheels", env)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (wheel,) = (tmp_path / "wheels").glob("tiny_op-*.whl")
    assert files_under(root) == before  # no build/, no src/tiny_op.egg-info
    assert not list(Path(env["TMPDIR"]).glob("shared_build-*")), "the build folder stays"
    # A release build carries no debug info (Python's CFLAGS bring -g; DEBUG=1 keeps it).
    with zipfile.ZipFile(wheel) as archive:
        (library,) = [n for n in archive.namelist() if n.endswith(".so")]
        assert b".debug_info" not in archive.read(library)


def test_failed_build_leaves_the_source_tree_as_it_was(tmp_path):
    root = make_package(tmp_path, source="#include <torch/library.h>\nthis is not C++;\n")
    before = files_under(root)
    env = build_env(tmp_path)
    result = pip_wheel(root, tmp_path / "wheels", env)
    assert result.returncode != 0
    assert "this is not C++" in result.stdout + result.stderr  # it failed compiling
    assert files_under(root) == before
    assert not list(Path(env["TMPDIR"]).glob("shared_build-*"))


def test_shared_build_dir_keeps_the_objects_for_the_next_build(tmp_path):
    root = make_package(tmp_path)
    before = files_under(root)
    keep = tmp_path / "kept"
    env = build_env(tmp_path, SHARED_BUILD_DIR=str(keep))
    first = pip_wheel(root, tmp_path / "wheels", env)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    (obj,) = (keep / "tiny_op").glob("torch*/temp.*/csrc/tiny_op.o")
    stamp = obj.stat().st_mtime_ns
    second = pip_wheel(root, tmp_path / "wheels2", env)
    assert second.returncode == 0, second.stderr[-3000:]
    assert obj.stat().st_mtime_ns == stamp, "the rebuild compiled again"
    assert files_under(root) == before


@pytest.fixture(scope="module")
def no_torch_python(tmp_path_factory) -> tuple[Path, Path]:
    """A virtual environment without torch, and a wheelhouse with only the build tools
    (shared_build's wheel among them)."""
    base = tmp_path_factory.mktemp("no_torch")
    wheelhouse = base / "wheelhouse"
    download = run(
        sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(wheelhouse),
        "setuptools>=77", "ninja", "packaging",
    )  # fmt: skip
    assert download.returncode == 0, download.stderr[-3000:]
    shared = run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheelhouse),
                 str(ROOT / "shared_build"))  # fmt: skip
    assert shared.returncode == 0, shared.stderr[-3000:]
    venv.create(base / "venv", with_pip=True)
    return base / "venv" / "bin" / "python", wheelhouse


def offline_env() -> dict[str, str]:
    """pip with no index and no configuration: only the wheelhouse can serve anything."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull
    return env


def test_isolated_build_fails_before_pip_resolves_torch(tmp_path, no_torch_python):
    """pip install without --no-build-isolation, torch not installed: the sentence comes
    from the first hook (get_requires_for_build_wheel), not after pip fetched torch>=2.6
    (about 3 GB with the CUDA wheels). The index here cannot serve torch at all: had pip
    got that far, it would say 'No matching distribution found for torch>=2.6'."""
    python, wheelhouse = no_torch_python
    root = make_package(tmp_path)
    result = run(
        str(python), "-m", "pip", "install", "--no-index", "--find-links", str(wheelhouse),
        str(root), env=offline_env(),
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert NO_TORCH in output, output[-3000:]
    assert "pip install --no-build-isolation" in output
    assert "Getting requirements to build wheel" in output
    assert "torch>=2.6" not in output, output[-3000:]


SDIST_HOOKS = textwrap.dedent(
    """
    import sys
    from pip._vendor.pyproject_hooks import BuildBackendHookCaller

    hooks = BuildBackendHookCaller(sys.argv[1], "setuptools.build_meta")
    print(hooks.get_requires_for_build_sdist())
    print(hooks.build_sdist(sys.argv[2]))
    """
)


def test_sdist_builds_through_the_hooks_without_torch(tmp_path, no_torch_python):
    """An sdist needs no torch: the build backend's sdist hooks, run as a front end runs
    them (pyproject_hooks' in-process runner), in an environment without torch."""
    python, wheelhouse = no_torch_python
    tools = run(
        str(python), "-m", "pip", "install", "-q", "--no-index", "--find-links", str(wheelhouse),
        "setuptools>=77", "ninja", "shared_build", env=offline_env(),
    )  # fmt: skip
    assert tools.returncode == 0, tools.stderr[-3000:]
    assert run(str(python), "-c", "import torch").returncode != 0
    root = make_package(tmp_path)
    before = files_under(root)
    out = tmp_path / "sdist"
    out.mkdir()
    result = run(str(python), "-c", SDIST_HOOKS, str(root), str(out))
    assert result.returncode == 0, result.stderr[-3000:]
    with tarfile.open(out / "tiny_op-0.1.0.tar.gz") as sdist:
        names = sdist.getnames()
    assert {"tiny_op-0.1.0/PKG-INFO", "tiny_op-0.1.0/csrc/tiny_op.cpp"} <= set(names)
    assert not any("_vendor" in name for name in names), "shared_build is a build requirement"
    assert files_under(root) == before  # no src/tiny_op.egg-info either

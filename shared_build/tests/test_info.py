"""shared_build info PACKAGE: what an installed package was built with, provenance included."""

from __future__ import annotations

import pytest

from shared_build import info


def fake_package(tmp_path, monkeypatch, **build_info):
    folder = tmp_path / "fake_op"
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text("")
    record = {"package": "fake_op", "version": "1.0", "torch": "2.14.1", "abi": "full"}
    (folder / "_build_info.py").write_text(f"BUILD_INFO = {dict(record, **build_info)!r}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    return dict(info.describe("fake_op"))


@pytest.mark.parametrize(
    ("recorded", "shown"),
    [
        ({"git_commit": "abc123", "git_dirty": False}, "abc123 (clean tree)"),
        ({"git_commit": "abc123", "git_dirty": True}, "abc123 (with uncommitted changes)"),
        ({"git_commit": None, "git_dirty": None}, "not recorded (built outside a git checkout"),
        ({}, "not recorded"),  # a build from before provenance was recorded
    ],
)
def test_info_names_the_commit(tmp_path, monkeypatch, recorded, shown):
    rows = fake_package(tmp_path, monkeypatch, **recorded)
    assert rows["git commit"].startswith(shown)
    assert rows["built against"].startswith("torch 2.14.1")


def test_info_says_cpu_only_not_cuda_none(tmp_path, monkeypatch):
    """It printed "(CUDA None)" for a CPU-only torch (issue 45)."""
    rows = fake_package(tmp_path, monkeypatch, torch="2.13.0+cpu", torch_cuda=None, python="3.11.7")
    assert rows["built against"] == "torch 2.13.0+cpu (CPU-only build), Python 3.11.7"


def test_info_takes_the_name_as_pip_writes_it(tmp_path, monkeypatch):
    """shared-build info fake-op is fake_op; a package not installed gets a folder that can
    exist (packages/my_op, not packages/my-op)."""
    fake_package(tmp_path, monkeypatch)
    assert dict(info.describe("fake-op"))["package"].startswith("fake_op ")
    with pytest.raises(
        info.BuildError, match=r"pip install --no-build-isolation ./packages/my_op$"
    ):
        info.describe("my-op")


def test_info_says_whether_the_package_loads_under_this_torch(tmp_path, monkeypatch):
    """It described a package built against another torch as if it would load."""
    import torch

    rows = fake_package(tmp_path, monkeypatch, torch="2.0.0")
    assert rows["loads under this torch"] == (
        f"NO: fake_op was built against torch 2.0.0 but torch {torch.__version__} is installed"
    )
    here = fake_package(tmp_path / "again", monkeypatch, torch=torch.__version__,
                        cuda=torch.version.cuda, torch_cuda=torch.version.cuda)  # fmt: skip
    assert here["loads under this torch"] == f"yes (torch {torch.__version__})"

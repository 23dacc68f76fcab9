"""shared_build info PACKAGE: what an installed package was built with, provenance included."""

from __future__ import annotations

import pytest

from shared_build import info


def fake_package(tmp_path, monkeypatch, **build_info):
    folder = tmp_path / "fake_op"
    folder.mkdir()
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

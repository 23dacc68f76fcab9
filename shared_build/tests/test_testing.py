"""shared_build.testing's collection hook: which tests it skips, and why."""

from __future__ import annotations

import pytest
import torch

from shared_build import testing


class FakeItem:
    """What the hook reads and writes of a pytest item: its keywords and markers."""

    def __init__(self, *markers: str) -> None:
        self.keywords = dict.fromkeys(markers, True)
        self.added: list[pytest.Mark] = []

    def get_closest_marker(self, name: str):
        return next((m for m in self.added if m.name == name), None)

    def add_marker(self, marker) -> None:
        self.added.append(marker.mark)
        self.keywords[marker.mark.name] = True

    @property
    def skip_reason(self) -> str | None:
        mark = self.get_closest_marker("skip")
        return None if mark is None else mark.kwargs["reason"]


def collect(monkeypatch, once_torch: str | None, *items: FakeItem) -> None:
    if once_torch is None:
        monkeypatch.delenv("REPO_ONCE_TORCH", raising=False)
    else:
        monkeypatch.setenv("REPO_ONCE_TORCH", once_torch)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    testing.pytest_collection_modifyitems(None, list(items))


def test_once_tests_skip_under_another_torch(monkeypatch):
    once, plain = FakeItem("once", "slow"), FakeItem("slow")
    collect(monkeypatch, "1.0.0", once, plain)
    assert once.skip_reason == "runs once per nox run, under torch 1.0.0 (REPO_ONCE_TORCH)"
    assert plain.skip_reason is None


@pytest.mark.parametrize("once_torch", [None, torch.__version__.split("+")[0]])
def test_once_tests_run_under_that_torch_or_without_the_variable(monkeypatch, once_torch):
    once = FakeItem("once")
    collect(monkeypatch, once_torch, once)
    assert once.skip_reason is None


def test_cuda_tests_skip_without_a_gpu_and_keep_one_reason(monkeypatch):
    both, cuda = FakeItem("cuda", "once"), FakeItem("cuda")
    collect(monkeypatch, "1.0.0", both, cuda)
    assert cuda.skip_reason == testing.NO_CUDA_REASON
    assert both.skip_reason == testing.NO_CUDA_REASON
    assert len(both.added) == 1

"""shared_build.testing's collection hook: which tests it skips, and why."""

from __future__ import annotations

import pytest
import torch

from shared_build import testing


class FakeItem:
    """What the hook reads and writes of a pytest item: its keywords and markers."""

    def __init__(self, *markers: str | pytest.MarkDecorator) -> None:
        marks = [getattr(pytest.mark, m) if isinstance(m, str) else m for m in markers]
        self.keywords = {m.mark.name: True for m in marks}
        self.own = [m.mark for m in marks]
        self.added: list[pytest.Mark] = []

    def get_closest_marker(self, name: str):
        return next((m for m in self.own + self.added if m.name == name), None)

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


THIS = torch.__version__.split("+")[0]


@pytest.mark.parametrize(
    ("setting", "group", "runs"),
    [
        ("1.0.0", None, False),
        ("1.0.0", "packaging", False),
        (f"1.0.0,packaging={THIS}", "packaging", True),
        (f"1.0.0,packaging={THIS}", None, False),
        (f"1.0.0,packaging={THIS}", "other", False),
        (f"{THIS},packaging=1.0.0", None, True),
        (f"{THIS},packaging=1.0.0", "packaging", False),
        (f"packaging={THIS}", None, True),  # no default: the other groups run anywhere
    ],
)
def test_once_groups_run_under_their_own_torch(monkeypatch, setting, group, runs):
    once = FakeItem(pytest.mark.once(group) if group else "once")
    collect(monkeypatch, setting, once)
    assert (once.skip_reason is None) == runs, once.skip_reason


@pytest.mark.parametrize(
    ("nodeid", "scope"),
    [
        ("tests/test_a.py::test_x", "tests/test_a.py"),
        ("tests/test_a.py::test_x[case-1]", "tests/test_a.py"),
        ("tests/test_a.py::Class::test_x", "tests/test_a.py"),
        ("tests/test_b.py::test_long[ex1]", "tests/test_b.py::test_long[ex1]"),
        ("tests/test_b.py::test_long", "tests/test_b.py::test_long"),
        ("tests/test_b.py::test_longer[ex1]", "tests/test_b.py"),
        ("tests/test_b.py::test_other", "tests/test_b.py"),
    ],
)
def test_a_file_is_one_work_unit_but_spread_cases_are_their_own(nodeid, scope):
    assert testing.file_scope(nodeid, {"tests/test_b.py::test_long"}) == scope


@pytest.mark.cuda
@pytest.mark.parametrize("wrong_stream", ["legacy default", "another"])
def test_busy_side_stream_tells_the_current_stream_from_another(wrong_stream):
    x, new = torch.zeros(1 << 20, device="cuda"), torch.ones(1 << 20, device="cuda")
    right = testing.on_a_busy_side_stream(lambda: x.copy_(new), lambda: x * 2)
    assert (right == 2).all()
    x.zero_()
    torch.cuda.synchronize()  # the other stream does not wait for the current one
    other = torch.cuda.default_stream() if wrong_stream == "legacy default" else torch.cuda.Stream()

    def on_the_wrong_stream():
        with torch.cuda.stream(other):
            return x * 2

    wrong = testing.on_a_busy_side_stream(lambda: x.copy_(new), on_the_wrong_stream)
    torch.cuda.synchronize()
    assert (wrong == 0).all()  # read before the side stream's write: caught

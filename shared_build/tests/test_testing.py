"""shared_build.testing: which tests its collection hook skips, and why; what the
side-stream helper does, in which order."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path

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
        (
            "p/tests/test_p.py::test_battery[p.op-fuzz-cpu]",
            "p/tests/test_p.py::test_battery[p.op-fuzz-cpu]",
        ),
        ("p/tests/test_p.py::test_batterys", "p/tests/test_p.py"),
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


class FakeStream:
    """What the side-stream helper calls on a torch.cuda.Stream, recorded in a log."""

    def __init__(self, log: list[str], name: str = "side") -> None:
        self.log, self.name = log, name

    def wait_stream(self, other: FakeStream) -> None:
        self.log.append(f"{self.name} waits for {other.name}")

    def synchronize(self) -> None:
        self.log.append(f"{self.name} synchronized")


def fake_cuda(monkeypatch) -> list[str]:
    """torch.cuda's streams, sleep and synchronize replaced by entries in the returned log:
    the helper's order of work, without a GPU."""
    log: list[str] = []
    current = FakeStream(log, "current")

    @contextlib.contextmanager
    def stream(s: FakeStream):
        log.append(f"on {s.name}")
        yield
        log.append(f"back from {s.name}")

    monkeypatch.setattr(torch.cuda, "Stream", lambda: FakeStream(log))
    monkeypatch.setattr(torch.cuda, "current_stream", lambda: current)
    monkeypatch.setattr(torch.cuda, "stream", stream)
    monkeypatch.setattr(torch.cuda, "_sleep", lambda cycles: log.append("sleep"))
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: log.append("device synchronized"))
    return log


# After the warm-up: the timed run on the side stream.
TIMED_RUN = [
    "side waits for current", "on side", "sleep", "write", "op", "back from side",
    "side synchronized", "current waits for side",
]  # fmt: skip


def test_busy_side_stream_warms_op_up_first_on_the_current_stream(monkeypatch):
    log = fake_cuda(monkeypatch)
    result = testing.on_a_busy_side_stream(
        lambda: log.append("write"), lambda: log.append("op") or len(log)
    )
    assert log == ["op", "device synchronized", *TIMED_RUN]
    assert result == 7  # the timed run's op: the warm-up's result is dropped


def test_busy_side_stream_takes_a_warm_up_for_ops_with_effects(monkeypatch):
    log = fake_cuda(monkeypatch)
    testing.on_a_busy_side_stream(
        lambda: log.append("write"), lambda: log.append("op"), lambda: log.append("warm up")
    )
    assert log == ["warm up", "device synchronized", *TIMED_RUN]


LAZY_FIRST_LAUNCH = """
import torch
from shared_build import testing

x, new = torch.zeros(1 << 20, device="cuda"), torch.ones(1 << 20, device="cuda")
other = torch.cuda.Stream()
torch.cuda.synchronize()  # x is made: the other stream waits for nothing


def on_the_wrong_stream():
    with torch.cuda.stream(other):
        return torch.cumsum(x, 0)  # this process's first scan: its module loads lazily


wrong = testing.on_a_busy_side_stream(lambda: x.copy_(new), on_the_wrong_stream)
torch.cuda.synchronize()
print(int(wrong[-1].item()))
"""


@pytest.mark.cuda
def test_busy_side_stream_catches_a_first_launch_under_lazy_loading():
    """A fresh process under CUDA_MODULE_LOADING=LAZY whose op launches a kernel for the
    first time, on the wrong stream: the warm-up has loaded it, so it runs during the sleep
    and reads x before the write (its sum is 0, not 2^20)."""
    src = str(Path(testing.__file__).resolve().parents[1])
    path = os.pathsep.join(filter(None, [src, os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "CUDA_MODULE_LOADING": "LAZY", "PYTHONPATH": path}
    done = subprocess.run(
        [sys.executable, "-c", LAZY_FIRST_LAUNCH],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "0", "the wrong-stream launch read the written input"


def test_a_skip_for_want_of_a_compiler_fails_where_nox_runs_with_none(tmp_path):
    """REPO_NO_COMPILER set (nox -s tests' run with no compiler), a test that skips naming a
    compiler, g++, gcc, nvcc or CUDA_HOME fails and asks for the compiler marker; another
    skip stays a skip; unset, all are skips."""
    (tmp_path / "test_skips.py").write_text(
        "import pytest\n"
        "def test_needs_gxx():\n    pytest.skip('needs g++ and nm')\n"
        "@pytest.mark.skipif(True, reason='no C++ compiler here links the shared libstdc++')\n"
        "def test_marked():\n    pass\n"
        "def test_needs_a_gpu():\n    pytest.skip('no CUDA GPU visible')\n"
    )

    def run(**env: str) -> str:
        clean = {k: v for k, v in os.environ.items() if k != "REPO_NO_COMPILER"}
        return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist",
                               str(tmp_path)], cwd=tmp_path, env={**clean, **env},
                              capture_output=True, text=True).stdout  # fmt: skip

    out = run(REPO_NO_COMPILER="1")
    assert "1 failed, 1 skipped, 1 error" in out, out  # the skipif fails at its setup
    assert "mark it @pytest.mark.compiler" in out and "(needs g++ and nm)" in out
    assert "3 skipped" in run(), run()

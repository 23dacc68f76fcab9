"""The pytest plugin (pytest11 entry point) every package's suite runs under, from a checkout
as from its sdist: the ``cuda``, ``slow``, ``once`` and ``compiler`` markers, their skips, helpers the
packages' CUDA tests share, and ``file_scope`` for the repository's pytest-xdist scheduler."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from typing import TypeVar

import pytest

T = TypeVar("T")

MARKERS = {
    "cuda": "needs a CUDA GPU (skipped with the reason shown when none is visible)",
    "slow": "takes more than a few seconds (torch.compile with Inductor, builds, examples)",
    "compiler": (
        "needs a C++ compiler at run time (a build, doctor, a compiler's facts): nox -s tests runs "
        "every test neither slow, once nor compiler with no compiler reachable"
    ),
    "once": (
        "checks builds and packaging (pip, sdists, build variants, shared_build), not torch: where REPO_ONCE_TORCH "
        "is set (nox -s tests sets it to the newest torch of the run), it runs under that "
        'torch only; once("GROUP") runs where REPO_ONCE_TORCH names GROUP=VERSION'
    ),
}
# About 25-50 ms of one GPU thread spinning (at 1-2 GHz): far longer than any launch takes.
SIDE_STREAM_SLEEP_CYCLES = 50_000_000
NO_CUDA_REASON = (
    "no CUDA GPU visible (torch.cuda.is_available() is False); run on a GPU machine, "
    "e.g. `nox -s gpu`"
)


def pytest_configure(config: pytest.Config) -> None:
    registered = "\n".join(config.getini("markers"))
    for name, help_text in MARKERS.items():
        if f"{name}:" not in registered:
            config.addinivalue_line("markers", f"{name}: {help_text}")


def once_torch(setting: str, group: str | None) -> str | None:
    """The torch version under which once-marked tests of ``group`` run, from REPO_ONCE_TORCH:
    ``2.15.0`` (every group) or ``2.15.0,packaging=2.14.1`` (group packaging under 2.14.1,
    the others under 2.15.0). None: run under any torch (the variable is unset)."""
    default, groups = None, {}
    for entry in filter(None, (e.strip() for e in setting.split(","))):
        name, sep, version = entry.partition("=")
        if sep:
            groups[name.strip()] = version.strip()
        else:
            default = entry
    return groups.get(group, default) if group else default


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    import torch

    version = torch.__version__.split("+")[0]
    setting = os.environ.get("REPO_ONCE_TORCH", "")
    no_cuda = None if torch.cuda.is_available() else pytest.mark.skip(reason=NO_CUDA_REASON)
    for item in items:
        if not item.get_closest_marker("skip"):
            once = item.get_closest_marker("once")
            wanted = once_torch(setting, once.args[0] if once and once.args else None)
            if no_cuda and "cuda" in item.keywords:
                item.add_marker(no_cuda)
            elif once and wanted and wanted != version:
                reason = f"runs once per nox run, under torch {wanted} (REPO_ONCE_TORCH)"
                item.add_marker(pytest.mark.skip(reason=reason))


# Where nox -s tests runs with no compiler reachable (REPO_NO_COMPILER), a test that skips
# for want of one would never run at all: it fails instead, asking for the compiler marker.
WANTS_A_COMPILER = re.compile(r"compiler|\bg\+\+|\bgcc\b|\bnvcc\b|CUDA_HOME", re.IGNORECASE)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = (yield).get_result()
    reason = str(getattr(call.excinfo, "value", ""))
    if os.environ.get("REPO_NO_COMPILER") and report.skipped and WANTS_A_COMPILER.search(reason):
        report.outcome = "failed"
        report.longrepr = (f"skipped for want of a compiler ({reason}) in the run with none: mark "
                           "it @pytest.mark.compiler, and nox -s tests runs it with one")  # fmt: skip


def file_scope(nodeid: str, spread: Iterable[str] = ()) -> str:
    """The pytest-xdist work unit of a test: its file, as ``--dist loadfile`` has it (module
    fixtures made once), except each case of ``test_battery`` and of the functions ``spread``
    names (``path::function``): long, independent cases, so that no file is a long tail."""
    path, _, name = nodeid.partition("::")
    function = name.split("[", 1)[0]
    return nodeid if function == "test_battery" or f"{path}::{function}" in spread else path


def on_a_busy_side_stream(
    write_inputs: Callable[[], None],
    op: Callable[[], T],
    warm_up: Callable[[], object] | None = None,
) -> T:
    """``op()`` on a side stream, queued behind a GPU sleep and ``write_inputs()`` (in-place
    writes of op's inputs); op's result once the side stream is done. The proof that op
    launches on the current stream: a kernel on any other (the legacy default stream, which
    PyTorch's side streams do not wait for, or its own) runs during the sleep on the old inputs.

    ``warm_up()`` (default: ``op()``) runs first, waited for: under lazy loading (CUDA's
    default) a kernel's first launch loads its module, which may outlast the sleep and hide a
    wrong stream. Where op has effects the caller checks (a backward accumulating into
    ``.grad``), pass a warm_up that undoes them. ``write_inputs`` should launch no kernel for
    the first time (a ``copy_`` between tensors of one dtype is a memcpy)."""
    import torch

    (op if warm_up is None else warm_up)()
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())  # the inputs were made on the current one
    with torch.cuda.stream(side):
        torch.cuda._sleep(SIDE_STREAM_SLEEP_CYCLES)
        write_inputs()
        result = op()
    side.synchronize()
    torch.cuda.current_stream().wait_stream(side)
    return result


def need_free_gpu_memory(gigabytes: float) -> None:
    """Skip the calling test unless the GPU has ``gigabytes`` free, after handing back what
    earlier tests left in the caching allocator. The GPU check (.ci/gpu_check.py) runs such
    tests alone and fails this skip ("needs N GB of free GPU memory") on a GPU that has N GB
    in all: it would hide the test."""
    import torch

    torch.cuda.empty_cache()
    if torch.cuda.mem_get_info()[0] < gigabytes * 1e9:
        pytest.skip(f"needs {gigabytes:g} GB of free GPU memory")

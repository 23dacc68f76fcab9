"""The build record written into each package and the import-time torch check."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
from importlib import metadata

import pytest

from shared_build import runtime
from shared_build.build_info import render_build_info

INFO = {
    "package": "add_ext",
    "version": "0.1.0",
    "torch": "2.13.0+cpu",
    "torch_cuda": None,
    "cuda": None,
    "arch_list": None,
    "source_dir": "/nonexistent/packages/add_ext",
}
CUDA_INFO = {
    **INFO,
    "torch": "2.14.1+cu130",
    "torch_cuda": "13.0",
    "cuda": "13.0",
    "arch_list": "9.0",
}


@pytest.mark.parametrize(
    ("info", "torch_version", "torch_cuda"),
    [
        (INFO, "2.13.0+cpu", None),
        (INFO, "2.13.0", None),  # same release, other local label: same ABI
        (
            INFO,
            "2.13.0+cu130",
            "13.0",
        ),  # CPU-only build runs under a CUDA torch of the same release
        (CUDA_INFO, "2.14.1+cu130", "13.0"),
        (CUDA_INFO, "2.14.1+cu132", "13.2"),  # minor CUDA versions are compatible
    ],
)
def test_compatible(info, torch_version, torch_cuda):
    assert runtime.incompatibility(info, torch_version, torch_cuda) is None


@pytest.mark.parametrize(
    ("info", "torch_version", "torch_cuda", "message"),
    [
        (
            INFO,
            "2.14.1+cu130",
            "13.0",
            "add_ext was built against torch 2.13.0+cpu but torch 2.14.1+cu130 is installed",
        ),
        (INFO, "2.13.1", None, "built against torch 2.13.0+cpu but torch 2.13.1 is installed"),
        (INFO, "2.13.0rc1", None, "but torch 2.13.0rc1 is installed"),
        (
            CUDA_INFO,
            "2.14.1+cpu",
            None,
            "built with CUDA 13.0 kernels but the installed torch 2.14.1+cpu is a CPU-only build",
        ),
        (
            CUDA_INFO,
            "2.14.1+cu126",
            "12.6",
            "built for CUDA 13.0 but the installed torch 2.14.1+cu126 uses CUDA 12.6",
        ),
        ({"package": "x"}, "2.13.0", None, "x has no record of the torch"),
    ],
)
def test_incompatible(info, torch_version, torch_cuda, message):
    problem = runtime.incompatibility(info, torch_version, torch_cuda)
    assert problem is not None
    assert message in problem


def test_rebuild_command_points_at_the_source_when_it_exists(tmp_path):
    assert runtime.rebuild_command({**INFO, "source_dir": str(tmp_path)}) == (
        f"pip install --no-build-isolation --force-reinstall --no-deps {tmp_path}"
    )


class FakeDistribution:
    def __init__(self, direct_url):
        self.direct_url = direct_url

    def read_text(self, name):
        assert name == "direct_url.json"
        return None if self.direct_url is None else json.dumps(self.direct_url)


def installed_from(monkeypatch, direct_url):
    monkeypatch.setattr(metadata, "distribution", lambda name: FakeDistribution(direct_url))
    return runtime.rebuild_command(INFO)


def test_rebuild_command_after_an_sdist_install_names_the_sdist(tmp_path, monkeypatch):
    """pip built an sdist in a temporary folder, gone since: the command names the sdist."""
    sdist = tmp_path / "add_ext-0.1.0.tar.gz"
    sdist.write_bytes(b"")
    command = installed_from(monkeypatch, {"url": sdist.as_uri(), "archive_info": {}})
    assert command == f"pip install --no-build-isolation --force-reinstall --no-deps {sdist}"


@pytest.mark.parametrize(
    ("direct_url", "expected"),
    [
        (
            {"url": "https://example.org/add_ext-0.1.0.tar.gz", "archive_info": {}},
            "--no-deps https://example.org/add_ext-0.1.0.tar.gz",
        ),
        (
            {"url": "https://example.org/r.git", "vcs_info": {"vcs": "git", "commit_id": "abc"}},
            "--no-deps git+https://example.org/r.git@abc",
        ),
    ],
)
def test_rebuild_command_names_the_url_installed_from(monkeypatch, direct_url, expected):
    assert installed_from(monkeypatch, direct_url).endswith(expected)


@pytest.mark.parametrize(
    "direct_url",
    [
        None,  # installed from an index: the bare name is on no index
        {"url": "file:///nonexistent/add_ext-0.1.0.tar.gz", "archive_info": {}},  # sdist deleted
        {"url": "file:///dist/add_ext-0.1.0-cp311-cp311-linux_x86_64.whl", "archive_info": {}},
    ],
)
def test_rebuild_command_says_what_to_reinstall_from_when_nothing_is_left(monkeypatch, direct_url):
    """Never the bare package name (pip: No matching distribution found for add_ext), nor
    the folder of the machine that built the wheel."""
    command = installed_from(monkeypatch, direct_url)
    assert not command.endswith("--no-deps add_ext")
    assert command == (
        "pip install add_ext -f <the wheelhouse folder of your torch> (its wheels are built per "
        "torch release), or pip install --no-build-isolation --force-reinstall --no-deps "
        "<add_ext's sdist or source folder>"
    )
    assert "/nonexistent" not in command


def load_generated(tmp_path, info):
    path = tmp_path / "_build_info.py"
    path.write_text(render_build_info(info))
    spec = importlib.util.spec_from_file_location("generated_build_info", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_module_records_the_build(tmp_path):
    module = load_generated(tmp_path, CUDA_INFO)
    assert module.BUILD_INFO == CUDA_INFO
    assert "Generated by shared_build" in (tmp_path / "_build_info.py").read_text()


def test_generated_module_raises_one_sentence_on_mismatch(tmp_path):
    import torch

    stale = {**INFO, "torch": "1.13.0", "source_dir": str(tmp_path)}
    module = load_generated(tmp_path, stale)
    with pytest.raises(ImportError) as excinfo:
        module.check_compatible()
    message = str(excinfo.value)
    assert message == (
        f"add_ext was built against torch 1.13.0 but torch {torch.__version__} is installed; "
        f"rebuild it with: pip install --no-build-isolation --force-reinstall --no-deps {tmp_path}"
    )
    assert "\n" not in message


def test_generated_module_passes_for_this_torch(tmp_path):
    import torch

    module = load_generated(
        tmp_path, {**INFO, "torch": torch.__version__, "torch_cuda": torch.version.cuda}
    )
    module.check_compatible()


def test_sanitized_build_needs_the_asan_runtime_first():
    info = {"package": "demo", "sanitize": ["address", "undefined"]}
    message = runtime.sanitizer_problem(info, asan_loaded=False)
    assert message is not None
    assert "SANITIZE=address,undefined" in message and "LD_PRELOAD" in message
    assert runtime.sanitizer_problem(info, asan_loaded=True) is None
    assert runtime.sanitizer_problem({"package": "demo", "sanitize": []}, False) is None
    assert runtime.sanitizer_problem({"package": "demo", "sanitize": ["undefined"]}, False) is None


def test_c10_names_of_dtypes_and_layouts():
    torch = pytest.importorskip("torch")
    assert runtime.c10_name(torch.float64) == "Double"
    assert runtime.c10_name(torch.uint8) == "Byte"
    assert runtime.c10_name(torch.sparse_csr) == "SparseCsr"
    assert runtime.c10_name(torch.sparse_coo) == "Sparse"
    # Not in the table: the Python name without "torch.", or what the caller asks for.
    assert runtime.c10_name(torch.uint16) == "uint16"
    assert runtime.c10_name(torch.jagged, "unknown") == "unknown"
    assert runtime.c10_name(torch.strided, "unknown") == "Strided"
    # Every key is a real torch name, spelled as str() prints it.
    for key in runtime.C10_NAMES:
        assert str(getattr(torch, key.removeprefix("torch."))) == key


def _glibc() -> tuple[int, int]:
    import os

    major, minor = os.confstr("CS_GNU_LIBC_VERSION").split()[1].split(".")[:2]
    return int(major), int(minor)


@pytest.mark.skipif(
    not (shutil.which("gcc") and shutil.which("nm")) or _glibc() < (2, 34),
    reason="needs gcc, nm and glibc >= 2.34 (dlopen moved into libc at 2.34)",
)
@pytest.mark.compiler
def test_glibc_newer_than_names_each_symbol_past_the_limit(tmp_path):
    source = tmp_path / "lib.c"
    source.write_text(
        "#include <dlfcn.h>\n#include <string.h>\n"
        "void *open_it(const char *p) { return dlopen(p, RTLD_NOW); }\n"
        "size_t length(const char *s) { return strlen(s); }\n"
    )
    library = tmp_path / "lib.so"
    subprocess.run(["gcc", "-shared", "-fPIC", str(source), "-o", str(library)], check=True)
    assert runtime.glibc_newer_than(str(library), (2, 28)) == ["dlopen@GLIBC_2.34"]
    assert runtime.glibc_newer_than(str(library), (2, 34)) == []

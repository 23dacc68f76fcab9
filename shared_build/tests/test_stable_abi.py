"""abi = "stable": config, the target version, the CUDA split, the import check, the audit."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from test_setup import make_package

from shared_build import runtime
from shared_build.config import _load_toml, read_config
from shared_build.errors import BuildError
from shared_build.extensions import split_cuda_sources
from shared_build.flags import target_version_macro
from shared_build.setup_args import runtime_requirements
from shared_build.torch_facts import OLDEST_STABLE_TARGET

REPO = Path(__file__).resolve().parents[2]

STABLE_INFO = {
    "package": "gc_cpp",
    "version": "0.1.0",
    "torch": "2.13.0+cpu",
    "torch_cuda": None,
    "cuda": None,
    "abi": "stable",
    "torch_target": "2.13",
    "cuda_library": None,
    "source_dir": "/nonexistent/packages/gc_cpp",
}


def test_abi_defaults_to_full(tmp_path):
    assert read_config(make_package(tmp_path)).abi == "full"


def test_abi_stable(tmp_path):
    assert read_config(make_package(tmp_path, 'abi = "stable"\n')).abi == "stable"


def test_abi_rejects_other_values(tmp_path):
    with pytest.raises(BuildError, match=r"abi = 'limited'.*use \"full\" or \"stable\""):
        read_config(make_package(tmp_path, 'abi = "limited"\n'))


def test_abi_stable_needs_the_limited_api(tmp_path):
    with pytest.raises(BuildError, match="drop limited_api = false"):
        read_config(make_package(tmp_path, 'abi = "stable"\nlimited_api = false\n'))


def test_target_version_macro_encodes_like_version_h():
    # (2 << 56) | (13 << 48), as TORCH_ABI_VERSION encodes 2.13.0
    assert target_version_macro("2.13") == "0x020d000000000000ULL"
    assert target_version_macro("2.10.1") == "0x020a010000000000ULL"


def test_stable_packages_take_their_target_and_newer_to_run():
    """A stable-ABI wheel needs its target torch or newer: the torch it was built against by
    default, SHARED_BUILD_STABLE_TARGET when a release names one; an sdist (no torch yet)
    the oldest torch its sources build for."""
    stable = []
    for pyproject in sorted(REPO.glob("packages/*/pyproject.toml")):
        data = _load_toml(pyproject)
        if data.get("tool", {}).get("shared_build", {}).get("abi") != "stable":
            continue
        stable.append(pyproject.parent.name)
        config = read_config(pyproject.parent)
        for env, torch_version, wanted in (
            ({}, "2.99.1+cu130", ">=2.99"),
            ({"SHARED_BUILD_STABLE_TARGET": "2.13"}, "2.99.1", ">=2.13"),
            ({}, None, f">={OLDEST_STABLE_TARGET}"),
        ):
            requirements = runtime_requirements(config, env, torch_version)
            run = {Requirement(r).name: Requirement(r) for r in requirements}
            assert str(run["torch"].specifier) == wanted, (pyproject, env, torch_version)
    assert stable, "no package sets abi = 'stable'"


def test_split_cuda_sources():
    cpp, cuda = split_cuda_sources(
        ["csrc/op.cpp", "csrc/cpu/k.cpp", "csrc/cuda/k.cu", "csrc/cuda/launch.cpp", "csrc/x.cu"]
    )
    assert cpp == ["csrc/op.cpp", "csrc/cpu/k.cpp"]
    assert cuda == ["csrc/cuda/k.cu", "csrc/cuda/launch.cpp", "csrc/x.cu"]


@pytest.mark.parametrize(
    ("torch_version", "torch_cuda"),
    [
        ("2.13.0+cpu", None),
        ("2.13.0", "12.8"),
        ("2.14.1+cu130", "13.0"),
        ("2.15.0+cu132", "13.2"),
        ("2.16.0.dev20270101", None),
    ],
)
def test_stable_build_accepts_the_target_and_newer(torch_version, torch_cuda):
    assert runtime.incompatibility(STABLE_INFO, torch_version, torch_cuda) is None


@pytest.mark.parametrize("torch_version", ["2.12.1", "2.12.0+cu130", "2.9.0+cu128"])
def test_stable_build_refuses_an_older_torch(torch_version):
    problem = runtime.incompatibility(STABLE_INFO, torch_version, None)
    assert problem == (
        f"gc_cpp is built on the stable ABI for torch 2.13 and newer but torch "
        f"{torch_version} is installed"
    )


def test_stable_check_says_upgrade_in_one_sentence(monkeypatch):
    import torch

    monkeypatch.setattr(torch, "__version__", "2.12.0")
    with pytest.raises(ImportError) as error:
        runtime.check_compatible(STABLE_INFO)
    message = str(error.value)
    assert message.endswith("upgrade torch with: pip install 'torch>=2.13'")
    assert "\n" not in message and message.count(". ") == 0


def test_cuda_library_path(tmp_path):
    (tmp_path / "_C.abi3.so").write_text("")
    (tmp_path / "_C_cuda.abi3.so").write_text("")
    info = {**STABLE_INFO, "cuda_library": "_C_cuda", "cuda": "13.0"}
    assert runtime.cuda_library_path(info, str(tmp_path), "13.0") == str(
        tmp_path / "_C_cuda.abi3.so"
    )
    assert runtime.cuda_library_path(info, str(tmp_path), "13.2") is not None
    assert runtime.cuda_library_path(info, str(tmp_path), None) is None  # CPU-only torch
    assert runtime.cuda_library_path(info, str(tmp_path), "12.8") is None  # other libcudart
    assert runtime.cuda_library_path(STABLE_INFO, str(tmp_path), "13.0") is None


@pytest.mark.skipif(not (shutil.which("g++") and shutil.which("nm")), reason="needs g++ and nm")
@pytest.mark.compiler
def test_unstable_symbols_finds_cxx_torch_symbols(tmp_path):
    source = tmp_path / "lib.cpp"
    source.write_text(
        "namespace c10 { void fail(int); }\n"
        "namespace at { struct Tensor { int dim() const; }; }\n"
        'extern "C" int aoti_torch_get_dim(void*, long*);\n'
        "namespace format { void stat(); }\n"
        "int use(const at::Tensor& t) { c10::fail(1); format::stat();\n"
        "  long d; aoti_torch_get_dim(nullptr, &d); return t.dim(); }\n"
    )
    library = tmp_path / "lib.so"
    subprocess.run(["g++", "-shared", "-fPIC", str(source), "-o", str(library)], check=True)
    found = runtime.unstable_symbols(str(library))
    assert found == ["at::Tensor::dim() const", "c10::fail(int)"]
    assert not any(re.search("aoti|format", s) for s in found)


@pytest.mark.skipif(not shutil.which("g++"), reason="needs g++")
@pytest.mark.compiler
def test_stable_checks_header_throws_the_sentence_and_writes_parts_as_python(tmp_path):
    """stable_checks.h: the message is exactly the parts (no file or line), sizes and
    layouts as Python prints them; compiled against this torch's stable headers."""
    from torch.utils.cpp_extension import include_paths, library_paths

    source = tmp_path / "main.cpp"
    source.write_text(
        "#include <shared_build/stable_checks.h>\n"
        "#include <iostream>\n"
        "int main() {\n"
        "  try {\n"
        '    SHARED_BUILD_CHECK(1 + 1 == 2, "never");\n'
        '    SHARED_BUILD_CHECK(false, "op: x must be 2-D, got shape ", shared_build::Sizes{{2, 3, 4}},\n'
        '                       " and layout ", shared_build::layout_name(\n'
        "                           torch::headeronly::Layout::SparseCsr));\n"
        "  } catch (const std::runtime_error& e) {\n"
        "    std::cout << e.what() << std::endl;\n"
        "  }\n"
        "  std::cout << shared_build::Sizes{{}} << std::endl;\n"
        "}\n"
    )
    program = tmp_path / "main"
    shared = REPO / "shared_build/src/shared_build/include"
    (lib,) = library_paths()[:1]
    subprocess.run(
        ["g++", "-std=c++20", *[f"-I{p}" for p in (*include_paths(), shared)], str(source),
         "-o", str(program), f"-L{lib}", f"-Wl,-rpath,{lib}", "-ltorch_cpu", "-lc10"],
        check=True, capture_output=True,
    )  # fmt: skip
    out = subprocess.run([str(program)], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["op: x must be 2-D, got shape [2, 3, 4] and layout SparseCsr", "[]"]

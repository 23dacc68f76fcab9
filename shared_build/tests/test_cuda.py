"""CUDA decisions: toolkit discovery, version checks, headers, architectures."""

from __future__ import annotations

import os

import pytest
from packaging.version import Version

from shared_build import cuda
from shared_build.errors import BuildError

NVCC_13 = "nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, release 13.0, V13.0.88\n"
NVCC_12 = "Cuda compilation tools, release 12.4, V12.4.131\n"


def fake_fs(*nvccs: str):
    files = set(nvccs)
    return lambda path: path in files


def test_parse_nvcc_version():
    assert cuda.parse_nvcc_version(NVCC_13) == Version("13.0")
    assert cuda.parse_nvcc_version(NVCC_12) == Version("12.4")
    with pytest.raises(BuildError, match="cannot read the CUDA version"):
        cuda.parse_nvcc_version("garbage")


def test_toolkit_order_cuda_home_first():
    env = {"CUDA_HOME": "/opt/cuda-13"}
    found = cuda.find_cuda_toolkit(
        env,
        which=lambda _: "/somewhere/bin/nvcc",
        is_file=fake_fs("/opt/cuda-13/bin/nvcc", "/usr/local/cuda/bin/nvcc"),
        run_nvcc=lambda *a: NVCC_13,
    )
    assert found is not None and found.root == "/opt/cuda-13" and found.version == Version("13.0")


def test_toolkit_default_location_before_path():
    found = cuda.find_cuda_toolkit(
        {},
        which=lambda _: "/elsewhere/bin/nvcc",
        is_file=fake_fs("/usr/local/cuda/bin/nvcc", "/elsewhere/bin/nvcc"),
        run_nvcc=lambda *a: NVCC_13,
    )
    assert found is not None and found.root == "/usr/local/cuda"


def test_toolkit_from_nvcc_on_path(tmp_path):
    nvcc = tmp_path / "cuda-12" / "bin" / "nvcc"
    found = cuda.find_cuda_toolkit(
        {},
        which=lambda _: str(nvcc),
        is_file=fake_fs(str(nvcc)),
        run_nvcc=lambda *a: NVCC_12,
    )
    assert found is not None and found.root == os.path.realpath(tmp_path / "cuda-12")
    assert found.version == Version("12.4")


def test_no_toolkit():
    assert (
        cuda.find_cuda_toolkit({}, which=lambda _: None, is_file=fake_fs(), run_nvcc=None) is None
    )


def test_cuda_home_without_nvcc_is_an_error():
    with pytest.raises(BuildError, match="CUDA_HOME=/opt/nothing has no bin/nvcc"):
        cuda.find_cuda_toolkit(
            {"CUDA_HOME": "/opt/nothing"}, which=lambda _: None, is_file=fake_fs()
        )


def toolkit(version: str) -> cuda.CudaToolkit:
    return cuda.CudaToolkit(
        root="/usr/local/cuda", nvcc="/usr/local/cuda/bin/nvcc", version=Version(version)
    )


def test_major_mismatch_fails_with_a_sentence():
    with pytest.raises(
        BuildError,
        match=r"is CUDA 12.4 but torch was built with CUDA 13.0; install a CUDA 13.x toolkit",
    ):
        cuda.check_toolkit_matches_torch(toolkit("12.4"), "13.0")


def test_minor_mismatch_warns():
    assert cuda.check_toolkit_matches_torch(toolkit("13.0"), "13.0") is None
    assert "minor versions differ" in cuda.check_toolkit_matches_torch(toolkit("13.1"), "13.0")


@pytest.mark.parametrize(
    ("mode", "requirement", "torch_cuda", "has_toolkit", "expected"),
    [
        ("auto", "optional", "13.0", True, True),  # CUDA torch + toolkit: build it, GPU or not
        ("auto", "optional", "13.0", False, False),  # no toolkit: CPU only
        ("auto", "optional", None, True, False),  # CPU torch: CPU only
        ("off", "optional", "13.0", True, False),
        ("on", "optional", "13.0", True, True),
        ("auto", "none", "13.0", True, False),
        ("auto", "required", "13.0", True, True),
    ],
)
def test_decide_cuda(mode, requirement, torch_cuda, has_toolkit, expected):
    found = toolkit("13.0") if has_toolkit else None
    assert cuda.decide_cuda(mode, requirement, torch_cuda, found, "pkg") is expected


@pytest.mark.parametrize(
    ("mode", "requirement", "torch_cuda", "has_toolkit", "message"),
    [
        ("on", "optional", "13.0", False, "USE_CUDA=1 asks for CUDA but no CUDA toolkit was found"),
        (
            "on",
            "optional",
            None,
            True,
            "USE_CUDA=1 asks for CUDA but the installed torch is a CPU-only build",
        ),
        (
            "auto",
            "required",
            None,
            False,
            "pkg is CUDA-only but the installed torch is a CPU-only build",
        ),
        (
            "auto",
            "required",
            "13.0",
            False,
            "pkg is CUDA-only but no CUDA toolkit was found .* install the CUDA 13.0 toolkit",
        ),
        ("off", "required", "13.0", True, "pkg is CUDA-only and USE_CUDA=0 turns CUDA off"),
        ("on", "none", "13.0", True, "pkg has no CUDA sources"),
    ],
)
def test_decide_cuda_errors(mode, requirement, torch_cuda, has_toolkit, message):
    found = toolkit("13.0") if has_toolkit else None
    with pytest.raises(BuildError, match=message):
        cuda.decide_cuda(mode, requirement, torch_cuda, found, "pkg")


def make_headers(folder, *names):
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / name).write_text("")
    return folder


def test_headers_from_nvidia_pip_packages(tmp_path):
    root = tmp_path / "cuda"
    make_headers(root / "include", "cuda_runtime_api.h")
    site = tmp_path / "site-packages"
    cu13 = make_headers(
        site / "nvidia" / "cu13" / "include",
        "cublas_v2.h",
        "cublasLt.h",
        "cusparse.h",
        "cusolverDn.h",
    )
    found = cuda.resolve_include_dirs(cuda.CudaToolkit(str(root), "", Version("13.0")), [str(site)])
    assert found == [str(cu13)]


def test_headers_from_per_library_pip_packages(tmp_path):
    # CUDA 12 wheels: one folder per library (nvidia/cublas/include, ...).
    root = tmp_path / "cuda"
    make_headers(root / "include", "cuda_runtime_api.h", "cusolverDn.h")
    site = tmp_path / "site-packages"
    cublas = make_headers(site / "nvidia" / "cublas" / "include", "cublas_v2.h", "cublasLt.h")
    cusparse = make_headers(site / "nvidia" / "cusparse" / "include", "cusparse.h")
    make_headers(site / "nvidia" / "nccl" / "include", "nccl.h")  # irrelevant, not added
    found = cuda.resolve_include_dirs(cuda.CudaToolkit(str(root), "", Version("12.4")), [str(site)])
    assert sorted(found) == sorted([str(cublas), str(cusparse)])


def test_complete_toolkit_needs_nothing(tmp_path):
    root = tmp_path / "cuda"
    make_headers(root / "include", *cuda.TORCH_CUDA_HEADERS)
    assert cuda.resolve_include_dirs(cuda.CudaToolkit(str(root), "", Version("13.0")), []) == []


def test_missing_headers_everywhere_is_an_error(tmp_path):
    root = tmp_path / "cuda"
    make_headers(root / "include", "cuda_runtime_api.h")
    with pytest.raises(BuildError, match="lacks cusparse.h, cublas_v2.h, cublasLt.h, cusolverDn.h"):
        cuda.resolve_include_dirs(cuda.CudaToolkit(str(root), "", Version("13.0")), [str(tmp_path)])


NVCC_13_CODES = (
    "sm_75\nsm_80\nsm_86\nsm_87\nsm_88\nsm_89\nsm_90\nsm_100\nsm_103\nsm_110\nsm_120\nsm_121\n"
)
NVCC_12_4_CODES = "sm_50\nsm_52\nsm_53\nsm_60\nsm_61\nsm_62\nsm_70\nsm_72\nsm_75\nsm_80\nsm_86\nsm_87\nsm_89\nsm_90\n"


def test_parse_gpu_codes():
    assert cuda.parse_nvcc_gpu_codes(NVCC_13_CODES)[:3] == ["7.5", "8.0", "8.6"]
    assert "10.0" in cuda.parse_nvcc_gpu_codes(NVCC_13_CODES)
    assert "12.1" in cuda.parse_nvcc_gpu_codes(NVCC_13_CODES)


def test_arch_list_explicit_wins():
    archs = cuda.parse_nvcc_gpu_codes(NVCC_13_CODES)
    assert cuda.resolve_arch_list({"TORCH_CUDA_ARCH_LIST": "8.6"}, [(9, 0)], archs) == (
        "8.6",
        "TORCH_CUDA_ARCH_LIST",
    )


def test_arch_list_from_visible_gpus():
    archs = cuda.parse_nvcc_gpu_codes(NVCC_13_CODES)
    assert cuda.resolve_arch_list({}, [(9, 0), (8, 0), (9, 0)], archs) == (
        "8.0;9.0",
        "the visible GPU",
    )
    assert cuda.resolve_arch_list({"TORCH_CUDA_ARCH_LIST": "native"}, [(9, 0)], archs)[0] == "9.0"


def test_arch_list_gpu_newer_than_toolkit_uses_ptx():
    archs = cuda.parse_nvcc_gpu_codes(NVCC_12_4_CODES)
    assert cuda.resolve_arch_list({}, [(12, 0)], archs)[0] == "9.0+PTX"


def test_arch_list_default_without_gpu():
    archs = cuda.parse_nvcc_gpu_codes(NVCC_13_CODES)
    assert cuda.resolve_arch_list({}, [], archs) == (
        cuda.DEFAULT_ARCH_LIST,
        "the default (no GPU visible)",
    )


def test_arch_list_default_trimmed_to_toolkit():
    archs = cuda.parse_nvcc_gpu_codes(NVCC_12_4_CODES)
    assert cuda.resolve_arch_list({}, [], archs)[0] == "7.5;8.0;9.0+PTX"


def test_arch_list_native_without_gpu_is_an_error():
    with pytest.raises(BuildError, match="TORCH_CUDA_ARCH_LIST=native needs a visible GPU"):
        cuda.resolve_arch_list({"TORCH_CUDA_ARCH_LIST": "native"}, [], ["9.0"])


def test_real_toolkit_here_if_any():
    """On this machine (if it has a toolkit) discovery agrees with nvcc itself."""
    found = cuda.find_cuda_toolkit(dict(os.environ))
    if found is None:
        pytest.skip("no CUDA toolkit on this machine")
    assert os.path.isfile(found.nvcc)
    assert found.version.major >= 11

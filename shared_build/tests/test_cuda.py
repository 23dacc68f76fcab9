"""CUDA decisions: toolkit discovery, version checks, headers, architectures."""

from __future__ import annotations

import os

import pytest
from packaging.version import Version

from shared_build import cuda
from shared_build.errors import BuildError

NVCC_13 = "nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, release 13.0, V13.0.88\n"
NVCC_12 = "Cuda compilation tools, release 12.4, V12.4.131\n"


def test_parse_nvcc_version():
    assert cuda.parse_nvcc_version(NVCC_13) == Version("13.0")
    assert cuda.parse_nvcc_version(NVCC_12) == Version("12.4")
    with pytest.raises(BuildError, match="cannot read the CUDA version"):
        cuda.parse_nvcc_version("garbage")


def test_parse_cudart_version():
    assert cuda.parse_cudart_version("#define CUDART_VERSION  13020\n") == Version("13.2")
    assert cuda.parse_cudart_version("#define CUDART_VERSION 12040") == Version("12.4")
    assert cuda.parse_cudart_version("nothing here") is None


def test_pip_compiler_command_pins_the_series():
    assert cuda.pip_compiler_command("13.2") == (
        'pip install "nvidia-cuda-nvcc==13.2.*" "nvidia-cuda-crt==13.2.*" "nvidia-nvvm==13.2.*"'
        ' "nvidia-cuda-cccl==13.2.*"'
    )
    assert cuda.pip_compiler_command("12.8") == 'pip install "nvidia-cuda-nvcc-cu12==12.8.*"'


ALL_HEADERS = ("cuda_runtime_api.h", *cuda.TORCH_CUDA_HEADERS[1:])


def make_toolkit(folder, version: str, headers=ALL_HEADERS, cccl: bool = True):
    """A fake toolkit: bin/nvcc answering --version and --dryrun like the real one, and
    include/ with the given headers (cuda_runtime_api.h carrying CUDART_VERSION)."""
    bin_dir = folder / "bin"
    bin_dir.mkdir(parents=True)
    nvcc = bin_dir / "nvcc"
    nvcc.write_text(
        "#!/bin/sh\n"
        'case "$1" in\n'
        f"  --version) echo 'Cuda compilation tools, release {version}, V{version}.1' ;;\n"
        f"  --dryrun) echo '#$ _HERE_={bin_dir}' ;;\n"
        "esac\n"
    )
    nvcc.chmod(0o755)
    make_includes(folder / "include", version, headers, cccl=cccl)
    return nvcc


def make_includes(folder, version: str, headers=ALL_HEADERS, cccl: bool = True):
    folder.mkdir(parents=True, exist_ok=True)
    major, minor = (int(x) for x in version.split("."))
    if cccl:
        (folder / "cccl" / "nv").mkdir(parents=True, exist_ok=True)
        (folder / "cccl" / "nv" / "target").write_text("")
    for name in headers:
        text = f"#define CUDART_VERSION {major * 1000 + minor * 10}\n" if "runtime" in name else ""
        (folder / name).write_text(text)
    return folder


def make_pip_compiler(site, version: str, runtime: str | None = None, cccl: bool = True):
    """site/nvidia/cu13 as NVIDIA's wheels lay it out: nvcc from nvidia-cuda-nvcc, headers
    and libcudart.so.13 from torch's own dependencies (at the runtime's version)."""
    cu = site / "nvidia" / f"cu{version.split('.')[0]}"
    make_toolkit(cu, version, headers=(), cccl=cccl)
    make_includes(cu / "include", runtime or version, cccl=cccl)
    (cu / "lib").mkdir()
    (cu / "lib" / "libcudart.so.13").write_text("")
    (cu / "nvvm").mkdir()
    return cu


@pytest.fixture
def no_system(monkeypatch, tmp_path):
    """No /usr/local/cuda; returns a setter for a fake one."""
    monkeypatch.setattr(cuda, "DEFAULT_CUDA_HOME", str(tmp_path / "no-such-cuda"))

    def install(version: str, headers=ALL_HEADERS):
        root = tmp_path / f"cuda-{version}"
        make_toolkit(root, version, headers)
        monkeypatch.setattr(cuda, "DEFAULT_CUDA_HOME", str(root))
        return root

    return install


def select(env, torch_cuda, site_dirs, tmp_path, which=lambda _: None):
    return cuda.select_toolkit(
        env, torch_cuda, [str(s) for s in site_dirs], str(tmp_path / "cuda_home"), which=which
    )


def test_cuda_home_first(tmp_path, no_system):
    no_system("13.0")
    home = tmp_path / "opt-cuda"
    make_toolkit(home, "13.0")
    chosen = select({"CUDA_HOME": str(home)}, "13.0", [], tmp_path)
    assert chosen.toolkit.root == str(home) and chosen.toolkit.origin == "CUDA_HOME"
    assert chosen.problem is None and chosen.extra_include_dirs == ()


def test_cuda_home_without_nvcc_is_an_error(tmp_path, no_system):
    with pytest.raises(BuildError, match="CUDA_HOME=/opt/nothing has no bin/nvcc"):
        select({"CUDA_HOME": "/opt/nothing"}, "13.0", [], tmp_path)


def test_cuda_home_that_does_not_fit_says_so(tmp_path, no_system):
    home = tmp_path / "old"
    make_toolkit(home, "12.4")
    with pytest.raises(
        BuildError,
        match=r"CUDA_HOME=.*old holds nvcc 12.4, which cannot build against torch's CUDA 13.2: .*"
        r'pip install "nvidia-cuda-nvcc==13.2.\*"',
    ):
        select({"CUDA_HOME": str(home)}, "13.2", [], tmp_path)


def test_pip_compiler_is_found_and_given_a_cuda_home(tmp_path, no_system):
    site = tmp_path / "site-packages"
    cu13 = make_pip_compiler(site, "13.2")
    chosen = select({}, "13.2", [site], tmp_path)
    found = chosen.toolkit
    assert found.pip_dir == str(cu13) and found.version == Version("13.2")
    assert found.nvcc == str(cu13 / "bin" / "nvcc")
    home = tmp_path / "cuda_home"
    assert found.root == str(home)
    # What torch.utils.cpp_extension needs of a CUDA_HOME, and what nvcc needs beside it.
    assert (home / "bin" / "nvcc").is_file()
    assert (home / "include" / "cuda_runtime_api.h").is_file()
    assert (home / "lib64" / "libcudart.so").resolve() == (cu13 / "lib" / "libcudart.so.13")
    assert (home / "nvvm").is_dir()
    assert (home / "lib" / "libcudart.so.13").is_file(), "CMake links from nvcc's lib/"
    # nvcc's TOP is bin/..: the folder made here, not the pip folder (it has no lib64).
    assert not (home / "bin").is_symlink() and (home / "bin" / "nvcc").is_symlink()
    assert os.path.realpath(home / "bin" / "..") == str(home)
    # Made again for the next build without complaint.
    assert select({}, "13.2", [site], tmp_path).toolkit.root == str(home)


def test_pip_compiler_before_the_system_one(tmp_path, no_system):
    no_system("13.2")
    site = tmp_path / "site-packages"
    make_pip_compiler(site, "13.2")
    assert select({}, "13.2", [site], tmp_path).toolkit.pip_dir is not None


def test_pip_compiler_of_another_series_is_passed_over(tmp_path, no_system):
    no_system("13.0")  # a complete system toolkit fits torch 13.0
    site = tmp_path / "site-packages"
    make_pip_compiler(site, "13.2", runtime="13.0")  # nvcc 13.2 against 13.0 headers
    chosen = select({}, "13.0", [site], tmp_path)
    assert chosen.toolkit.pip_dir is None and chosen.toolkit.version == Version("13.0")


def test_system_toolkit_that_fits(tmp_path, no_system):
    root = no_system("13.0")
    chosen = select({}, "13.0", [], tmp_path)
    assert chosen.toolkit.root == str(root) and chosen.toolkit.origin == "the default location"


def test_wrapper_on_path_resolves_to_its_toolkit(tmp_path, no_system):
    """A script named nvcc that execs the real one: the toolkit is where nvcc runs from."""
    real = make_toolkit(tmp_path / "cuda-13.0", "13.0")
    wrapper = tmp_path / "usr-local-bin" / "nvcc"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\nexec {real} "$@"\n')
    wrapper.chmod(0o755)
    chosen = select({}, "13.0", [], tmp_path, which=lambda _: str(wrapper))
    assert chosen.toolkit.root == str(tmp_path / "cuda-13.0")
    assert chosen.toolkit.nvcc == str(real) and chosen.toolkit.origin == "nvcc on PATH"


def test_system_nvcc_against_newer_pip_headers_is_refused_before_compiling(tmp_path, no_system):
    """torch 2.15 (CUDA 13.2) with a CUDA 13.0 toolkit lacking the math headers: torch's pip
    headers (13.2) would meet nvcc 13.0 and CCCL's #error; the build stops first and says
    which compiler to install."""
    root = no_system("13.0", headers=("cuda_runtime_api.h",))
    site = tmp_path / "site-packages"
    make_includes(site / "nvidia" / "cu13" / "include", "13.2")
    with pytest.raises(BuildError) as error:
        select({}, "13.2", [site], tmp_path, which=lambda _: str(root / "bin" / "nvcc"))
    message = str(error.value)
    assert message.startswith("no CUDA compiler here fits torch's CUDA 13.2 (nvcc 13.0 at ")
    assert message.count("nvcc 13.0 at") == 1, "one toolkit reached two ways is named once"
    assert "the CUDA headers it would compile against" in message and "are CUDA 13.2" in message
    assert (
        'install the matching compiler into this environment with: pip install "nvidia-cuda-nvcc==13.2.*"'
        in message
    )


def test_major_version_of_system_toolkit_must_match(tmp_path, no_system):
    no_system("12.4")
    with pytest.raises(BuildError, match="its CUDA 12.4 is not torch's major version 13"):
        select({}, "13.0", [], tmp_path)


def test_no_compiler_at_all(tmp_path, no_system):
    assert select({}, "13.0", [tmp_path / "empty-site"], tmp_path) is None


def toolkit(version: str) -> cuda.CudaToolkit:
    return cuda.CudaToolkit(
        root="/usr/local/cuda", nvcc="/usr/local/cuda/bin/nvcc", version=Version(version)
    )


def test_minor_mismatch_warns():
    assert cuda.minor_mismatch_warning(toolkit("13.0"), "13.0") is None
    assert "minor versions differ" in cuda.minor_mismatch_warning(toolkit("13.1"), "13.0")


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
        (
            "on",
            "optional",
            "13.0",
            False,
            "USE_CUDA=1 asks for CUDA but no CUDA compiler was found",
        ),
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
            'pkg is CUDA-only but no CUDA compiler was found .* pip install "nvidia-cuda-nvcc==13.0.\\*"',
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


def test_arch_list_without_gpu_follows_torchs_own_with_ptx_of_the_newest():
    archs = cuda.parse_nvcc_gpu_codes(NVCC_13_CODES)
    torch_archs = cuda.parse_nvcc_gpu_codes("sm_90 sm_75 sm_80 sm_86 sm_100 sm_120")
    assert cuda.resolve_arch_list({}, [], archs, torch_archs) == (
        "7.5;8.0;8.6;9.0;10.0;12.0+PTX",
        "torch's own (no GPU visible)",
    )
    # A toolkit older than torch's newest: what it can target, PTX of its newest.
    older = cuda.parse_nvcc_gpu_codes(NVCC_12_4_CODES)
    assert cuda.resolve_arch_list({}, [], older, torch_archs)[0] == "7.5;8.0;8.6;9.0+PTX"
    # A visible GPU and the variable still win.
    assert cuda.resolve_arch_list({}, [(9, 0)], archs, torch_archs)[0] == "9.0"
    assert (
        cuda.resolve_arch_list({"TORCH_CUDA_ARCH_LIST": "8.0"}, [], archs, torch_archs)[0] == "8.0"
    )


def test_arch_list_native_without_gpu_is_an_error():
    with pytest.raises(BuildError, match="TORCH_CUDA_ARCH_LIST=native needs a visible GPU"):
        cuda.resolve_arch_list({"TORCH_CUDA_ARCH_LIST": "native"}, [], ["9.0"])


@pytest.mark.compiler
def test_real_compiler_here_if_any(tmp_path):
    """On this machine, with its torch, the choice is a compiler that exists and fits."""
    import torch

    if torch.version.cuda is None:
        pytest.skip(f"torch {torch.__version__} is a CPU-only build")
    from shared_build.torch_facts import site_dirs as _site_dirs

    chosen = cuda.select_toolkit(
        dict(os.environ), torch.version.cuda, _site_dirs(torch), str(tmp_path / "home")
    )
    if chosen is None:
        pytest.skip("no CUDA compiler on this machine")
    assert os.path.isfile(chosen.toolkit.nvcc) and chosen.problem is None
    assert chosen.toolkit.version.major == Version(torch.version.cuda).major


def test_pip_compiler_without_cccl_is_passed_over_with_the_reason(tmp_path, no_system):
    """torch 2.14.1 brings no CCCL; nvcc 13 without include/cccl fails on every .cu file."""
    site = tmp_path / "site-packages"
    make_pip_compiler(site, "13.0", cccl=False)
    with pytest.raises(BuildError, match=r"it has no CCCL headers .*nvidia-cuda-cccl==13\.0\.\*"):
        select({}, "13.0", [site], tmp_path)

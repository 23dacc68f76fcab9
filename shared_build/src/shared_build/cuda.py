"""CUDA decisions: whether to build device code, which toolkit, which headers, which GPUs.

The functions take what they look at (environment, file tests, program output) as
arguments so that each decision is unit-tested without a toolkit or a GPU.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from packaging.version import Version

from .errors import BuildError

# Built when TORCH_CUDA_ARCH_LIST is unset and no GPU is visible: Turing (T4), Ampere
# (A100; sm_80 code also runs on sm_86/sm_89), Hopper (H100/H200), Blackwell datacenter
# (B200) and Blackwell consumer (RTX 50), plus PTX of the newest for GPUs after those.
# Architectures the toolkit cannot target are dropped (CUDA 12.4 has no sm_100, say).
DEFAULT_ARCH_LIST = "7.5;8.0;9.0;10.0;12.0+PTX"

# Headers that torch's own CUDA headers include (ATen/cuda/CUDAContextLight.h). A
# toolkit installed without the math libraries (as conda's or the CUDA runtime-only
# images are) lacks them; torch's pip wheels ship them in the nvidia-* packages.
TORCH_CUDA_HEADERS = (
    "cuda_runtime_api.h",
    "cusparse.h",
    "cublas_v2.h",
    "cublasLt.h",
    "cusolverDn.h",
)


@dataclass(frozen=True)
class CudaToolkit:
    """A CUDA toolkit found on this machine."""

    root: str
    nvcc: str
    version: Version

    @property
    def include_dir(self) -> str:
        return os.path.join(self.root, "include")


def parse_nvcc_version(text: str) -> Version:
    """The release from ``nvcc --version`` output ("... release 13.0, V13.0.88")."""
    match = re.search(r"release (\d+)\.(\d+)", text)
    if match is None:
        raise BuildError(f"cannot read the CUDA version from nvcc's output {text.strip()!r}")
    return Version(f"{match.group(1)}.{match.group(2)}")


def _run_nvcc(nvcc: str, *args: str) -> str:
    return subprocess.run(
        [nvcc, *args], check=True, capture_output=True, text=True, timeout=60
    ).stdout


def toolkit_candidates(
    env: Mapping[str, str], which: Callable[[str], str | None] = shutil.which
) -> list[tuple[str, str]]:
    """(root, where-it-came-from) pairs in the order they are tried."""
    candidates = []
    for name in ("CUDA_HOME", "CUDA_PATH"):
        value = env.get(name, "").strip()
        if value:
            candidates.append((value, name))
    candidates.append(("/usr/local/cuda", "the default location"))
    nvcc = which("nvcc")
    if nvcc:
        candidates.append(
            (os.path.dirname(os.path.dirname(os.path.realpath(nvcc))), "nvcc on PATH")
        )
    return candidates


def find_cuda_toolkit(
    env: Mapping[str, str],
    which: Callable[[str], str | None] = shutil.which,
    is_file: Callable[[str], bool] = os.path.isfile,
    run_nvcc: Callable[..., str] = _run_nvcc,
) -> CudaToolkit | None:
    """The toolkit from CUDA_HOME/CUDA_PATH, /usr/local/cuda or nvcc on PATH, or None.

    A CUDA_HOME that points at a folder without bin/nvcc is an error, not a reason to look
    elsewhere: the user asked for that toolkit.
    """
    for root, origin in toolkit_candidates(env, which):
        nvcc = os.path.join(root, "bin", "nvcc")
        if not is_file(nvcc):
            if origin in ("CUDA_HOME", "CUDA_PATH"):
                raise BuildError(
                    f"{origin}={root} has no bin/nvcc; point {origin} at a CUDA toolkit or unset it"
                )
            continue
        version = parse_nvcc_version(run_nvcc(nvcc, "--version"))
        return CudaToolkit(root=root, nvcc=nvcc, version=version)
    return None


def check_toolkit_matches_torch(toolkit: CudaToolkit, torch_cuda: str) -> str | None:
    """Fail on a major-version mismatch; return a warning for a minor one (else None)."""
    wanted = Version(torch_cuda)
    if toolkit.version.major != wanted.major:
        raise BuildError(
            f"the CUDA toolkit at {toolkit.root} is CUDA {toolkit.version} but torch was "
            f"built with CUDA {torch_cuda}; install a CUDA {wanted.major}.x toolkit and "
            "point CUDA_HOME at it, or build without CUDA with USE_CUDA=0"
        )
    if toolkit.version.minor != wanted.minor:
        return (
            f"the CUDA toolkit is {toolkit.version} and torch uses CUDA {torch_cuda}; "
            "minor versions differ, which CUDA supports"
        )
    return None


def decide_cuda(
    mode: str,
    requirement: str,
    torch_cuda: str | None,
    toolkit: CudaToolkit | None,
    package: str,
) -> bool:
    """Whether to compile the package's CUDA sources.

    mode is "auto", "on" or "off" (USE_CUDA); requirement is the package's own setting:
    "none" (no CUDA sources), "optional" or "required".
    """
    if requirement == "none":
        if mode == "on":
            raise BuildError(f"{package} has no CUDA sources; unset USE_CUDA/FORCE_CUDA")
        return False
    if mode == "off":
        if requirement == "required":
            raise BuildError(
                f"{package} is CUDA-only and USE_CUDA=0 turns CUDA off; unset USE_CUDA"
            )
        return False
    if torch_cuda is None:
        if mode == "on" or requirement == "required":
            why = "USE_CUDA=1 asks for CUDA" if mode == "on" else f"{package} is CUDA-only"
            raise BuildError(
                f"{why} but the installed torch is a CPU-only build; install a CUDA "
                "build of torch (for example pip install torch --index-url "
                "https://download.pytorch.org/whl/cu130)"
            )
        return False
    if toolkit is None:
        if mode == "on" or requirement == "required":
            why = "USE_CUDA=1 asks for CUDA" if mode == "on" else f"{package} is CUDA-only"
            raise BuildError(
                f"{why} but no CUDA toolkit was found (looked at CUDA_HOME, CUDA_PATH, "
                f"/usr/local/cuda and nvcc on PATH); install the CUDA {torch_cuda} "
                "toolkit (nvcc) and set CUDA_HOME to it"
            )
        return False
    return True


def missing_headers(
    include_dirs: Sequence[str], headers: Iterable[str], is_file=os.path.isfile
) -> list[str]:
    """The headers that none of include_dirs holds."""
    return [h for h in headers if not any(is_file(os.path.join(d, h)) for d in include_dirs)]


def nvidia_pip_include_dirs(search_paths: Iterable[str], headers: Iterable[str]) -> list[str]:
    """Include folders of NVIDIA's pip packages (nvidia/*/include, nvidia/cu13/include, ...)
    under the given site-packages folders that hold any of the headers."""
    found: list[str] = []
    wanted = list(headers)
    for site in search_paths:
        for include in sorted(
            glob.glob(os.path.join(site, "nvidia", "**", "include"), recursive=True)
        ):
            if include in found:
                continue
            if any(os.path.isfile(os.path.join(include, h)) for h in wanted):
                found.append(include)
    return found


def resolve_include_dirs(
    toolkit: CudaToolkit, site_dirs: Iterable[str], headers: Sequence[str] = TORCH_CUDA_HEADERS
) -> list[str]:
    """Extra include folders so that torch's CUDA headers compile with this toolkit."""
    missing = missing_headers([toolkit.include_dir], headers)
    if not missing:
        return []
    extra = nvidia_pip_include_dirs(site_dirs, missing)
    still = missing_headers([toolkit.include_dir, *extra], missing)
    if still:
        raise BuildError(
            f"the CUDA toolkit at {toolkit.root} lacks {', '.join(still)}, which torch's "
            "CUDA headers include, and no NVIDIA pip package provides them; install the "
            "toolkit's math libraries (cuBLAS, cuSPARSE, cuSOLVER) or pip install "
            "nvidia-cublas nvidia-cusparse nvidia-cusolver"
        )
    return extra


def parse_nvcc_gpu_codes(text: str) -> list[str]:
    """Architectures from ``nvcc --list-gpu-code`` ("sm_75", ...) as "7.5", ..."""
    archs = []
    for match in re.finditer(r"\bsm_(\d+)(\d)\b", text):
        arch = f"{match.group(1)}.{match.group(2)}"
        if arch not in archs:
            archs.append(arch)
    return archs


def _arch_key(arch: str) -> tuple[int, int]:
    major, minor = arch.split("+")[0].split(".")
    return int(major), int(re.sub(r"\D", "", minor) or 0)


def resolve_arch_list(
    env: Mapping[str, str],
    visible_capabilities: Sequence[tuple[int, int]],
    toolkit_archs: Sequence[str],
) -> tuple[str, str]:
    """(TORCH_CUDA_ARCH_LIST, where it came from).

    The variable wins when set; else the visible GPUs' capabilities; else the documented
    default, keeping only what the toolkit can target.
    """
    explicit = env.get("TORCH_CUDA_ARCH_LIST", "").strip()
    if explicit and explicit != "native":
        return explicit, "TORCH_CUDA_ARCH_LIST"
    supported = set(toolkit_archs)
    if visible_capabilities:
        archs = sorted({f"{major}.{minor}" for major, minor in visible_capabilities}, key=_arch_key)
        newest = max(supported, key=_arch_key) if supported else None
        clamped = []
        for arch in archs:
            if supported and arch not in supported:
                # A GPU newer than the toolkit: run PTX of the newest arch it knows.
                arch = f"{newest}+PTX"
            if arch not in clamped:
                clamped.append(arch)
        return ";".join(clamped), "the visible GPU"
    if explicit == "native":
        raise BuildError(
            "TORCH_CUDA_ARCH_LIST=native needs a visible GPU and none is; name the "
            'architectures instead, for example TORCH_CUDA_ARCH_LIST="9.0"'
        )
    wanted = [a.replace("+PTX", "") for a in DEFAULT_ARCH_LIST.split(";")]
    kept = [a for a in wanted if not supported or a in supported]
    if not kept:
        raise BuildError(
            f"the CUDA toolkit can target none of the default architectures "
            f"{DEFAULT_ARCH_LIST}; set TORCH_CUDA_ARCH_LIST to the GPUs you build for"
        )
    kept[-1] += "+PTX"
    return ";".join(kept), "the default (no GPU visible)"

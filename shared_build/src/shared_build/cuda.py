"""Step 3 of a build (``resolve_cuda``): whether to build device code, which toolkit,
headers and GPUs. Its parts take what they look at as arguments, so each decision is
unit-tested without a toolkit or a GPU; ``shared-build doctor`` asks them too."""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.version import Version

from .errors import BuildError, log

if TYPE_CHECKING:
    from .config import BuildConfig
    from .torch_facts import TorchFacts

# Without TORCH_CUDA_ARCH_LIST, a visible GPU or torch's own list: Turing, Ampere (sm_80
# code also runs on sm_86/89), Hopper, Blackwell datacenter and consumer, PTX for later GPUs.
DEFAULT_ARCH_LIST = "7.5;8.0;9.0;10.0;12.0+PTX"

DEFAULT_CUDA_HOME = "/usr/local/cuda"

# Headers torch's CUDA headers include (ATen/cuda/CUDAContextLight.h): a toolkit without the
# math libraries (conda's, runtime-only images) lacks them; torch's nvidia-* wheels ship them.
TORCH_CUDA_HEADERS = "cuda_runtime_api.h", "cusparse.h", "cublas_v2.h", "cublasLt.h", "cusolverDn.h"


@dataclass(frozen=True)
class CudaToolkit:
    """A CUDA compiler found on this machine, and the folder the build uses as CUDA_HOME."""

    root: str
    nvcc: str
    version: Version
    origin: str = "CUDA_HOME"
    # A pip compiler's nvidia/cuXX folder; root is then a CUDA_HOME-shaped folder of links.
    pip_dir: str | None = None

    @property
    def include_dir(self) -> str:
        return os.path.join(self.pip_dir or self.root, "include")


def parse_nvcc_version(text: str) -> Version:
    """The release from ``nvcc --version`` output ("... release 13.0, V13.0.88")."""
    match = re.search(r"release (\d+)\.(\d+)", text)
    if match is None:
        raise BuildError(f"cannot read the CUDA version from nvcc's output {text.strip()!r}")
    return Version(f"{match.group(1)}.{match.group(2)}")


def _run_nvcc(nvcc: str, *args: str) -> str:
    proc = subprocess.run([nvcc, *args], check=False, capture_output=True, text=True, timeout=60)
    return proc.stdout + proc.stderr


def parse_cudart_version(text: str) -> Version | None:
    """CUDA major.minor from a cuda_runtime_api.h (``#define CUDART_VERSION 13020``)."""
    match = re.search(r"^#define\s+CUDART_VERSION\s+(\d+)", text, re.MULTILINE)
    if match is None:
        return None
    number = int(match.group(1))
    return Version(f"{number // 1000}.{number % 1000 // 10}")


def pip_compiler_requirements(torch_cuda: str) -> list[str]:
    """NVIDIA's pip packages that put an nvcc matching torch's CUDA into an environment.
    crt and nvvm are pinned with nvcc: the newest nvvm's PTX is "Unsupported .version" to an
    older ptxas."""
    wanted = Version(torch_cuda)
    series = f"{wanted.major}.{wanted.minor}.*"
    if wanted.major >= 13:
        # CCCL (nv/target, cub, thrust) is where nvcc's own headers look for it
        # (include/cccl); torch's dependencies bring it only sometimes.
        names = ("nvidia-cuda-nvcc", "nvidia-cuda-crt", "nvidia-nvvm", "nvidia-cuda-cccl")
    else:  # CUDA 12 wheels carry the major version in their names and ship nvvm with nvcc
        names = (f"nvidia-cuda-nvcc-cu{wanted.major}",)
    return [f"{name}=={series}" for name in names]


def pip_compiler_command(torch_cuda: str) -> str:
    """The pip command that installs the compiler matching torch's CUDA (one line)."""
    return "pip install " + " ".join(f'"{r}"' for r in pip_compiler_requirements(torch_cuda))


def pip_nvcc_dirs(
    site_dirs: Iterable[str], is_file: Callable[[str], bool] = os.path.isfile
) -> list[str]:
    """The nvidia/cuXX (CUDA 13 wheels) or nvidia/cuda_nvcc (CUDA 12 wheels) folders holding
    a pip-installed bin/nvcc, under the given site-packages folders."""
    folders = [
        folder
        for site_dir in site_dirs
        for pattern in ("cu[0-9]*", "cuda_nvcc")
        for folder in sorted(glob.glob(os.path.join(site_dir, "nvidia", pattern)))
    ]
    return list(dict.fromkeys(f for f in folders if is_file(os.path.join(f, "bin", "nvcc"))))


def make_cuda_home(pip_dir: str, destination: str) -> str:
    """A folder shaped like a toolkit (bin/nvcc, include/, lib64/libcudart.so) of links into
    a pip compiler's folder, for torch.utils.cpp_extension, which wants one CUDA_HOME. bin
    is a real folder (nvcc takes its TOP from bin/..), so is lib64 (the wheels ship only
    libcudart.so.13); the other entries (lib/ for CMake) are linked as they are."""
    bin_dir = os.path.join(destination, "bin")
    if os.path.islink(bin_dir):
        os.unlink(bin_dir)
    os.makedirs(bin_dir, exist_ok=True)
    os.makedirs(os.path.join(destination, "lib64"), exist_ok=True)
    for name in os.listdir(pip_dir):
        if name not in ("lib64", "bin"):
            _link(os.path.join(pip_dir, name), os.path.join(destination, name))
    for source, target in (("bin", "bin"), ("lib", "lib64"), ("lib64", "lib64")):
        folder = os.path.join(pip_dir, source)
        for name in os.listdir(folder) if os.path.isdir(folder) else ():
            _link(os.path.join(folder, name), os.path.join(destination, target, name))
            unversioned = re.sub(r"(\.so)\.\d+$", r"\1", name)
            if target == "lib64" and unversioned != name:
                _link(os.path.join(folder, name), os.path.join(destination, target, unversioned))
    return destination


def _link(target: str, link: str) -> None:
    if os.path.islink(link) and os.readlink(link) != target:
        os.unlink(link)
    if not os.path.lexists(link):
        os.symlink(target, link)


def nvcc_home(nvcc: str, run_nvcc: Callable[..., str] = _run_nvcc) -> str:
    """The toolkit folder of an nvcc, through wrapper scripts and links: nvcc itself says
    where it runs from (``_HERE_`` in ``--dryrun`` output)."""
    out = run_nvcc(nvcc, "--dryrun", "-x", "cu", "-c", os.devnull, "-o", os.devnull)
    if match := re.search(r"^#\$ _HERE_=(.+)$", out, re.MULTILINE):
        return os.path.dirname(match.group(1).strip())
    return os.path.dirname(os.path.dirname(os.path.realpath(nvcc)))


@dataclass(frozen=True)
class Candidate:
    """A compiler considered for the build and, when it cannot serve, why not."""

    toolkit: CudaToolkit
    extra_include_dirs: tuple[str, ...] = ()
    problem: str | None = None


def evaluate(toolkit: CudaToolkit, torch_cuda: str, site_dirs: Iterable[str]) -> Candidate:
    """Whether toolkit can compile torch's CUDA headers, decided before any compile: its
    major version must be torch's, and its major.minor that of the cuda_runtime_api.h it
    finds first (its own, else NVIDIA's pip packages'), or CCCL's cuda_toolkit.h #errors."""
    major = Version(torch_cuda).major
    if toolkit.version.major != major:
        problem = f"its CUDA {toolkit.version} is not torch's major version {major}"
        return Candidate(toolkit, problem=problem)
    try:
        extra = tuple(resolve_include_dirs(toolkit, site_dirs))
    except BuildError as error:
        return Candidate(toolkit, problem=str(error))
    cccl = os.path.join(toolkit.include_dir, "cccl", "nv", "target")
    # The CUDA version of the first cuda_runtime_api.h the compile finds.
    headers = [os.path.join(d, "cuda_runtime_api.h") for d in (*extra, toolkit.include_dir)]
    header = next((h for h in headers if os.path.isfile(h)), None)
    found = parse_cudart_version(Path(header).read_text("utf-8", "replace")) if header else None
    ours = (toolkit.version.major, toolkit.version.minor)
    problem = None
    if ours[0] >= 13 and not os.path.isfile(cccl):
        # nvcc 13 looks for CCCL only in its own include/cccl (nvcc.profile); without it
        # every .cu file fails with "nv/target: No such file or directory".
        problem = f"it has no CCCL headers ({cccl} is missing)"
    elif found is not None and (found.major, found.minor) != ours:
        problem = (
            f"it is CUDA {toolkit.version} and the CUDA headers it would compile against "
            f"({extra[0] if extra else toolkit.include_dir}) are CUDA {found}, which CCCL refuses"
        )
    return Candidate(toolkit, extra, problem)


def select_toolkit(
    env: Mapping[str, str],
    torch_cuda: str,
    site_dirs: Sequence[str],
    cuda_home_dir: str,
    which: Callable[[str], str | None] = shutil.which,
    is_file: Callable[[str], bool] = os.path.isfile,
    run_nvcc: Callable[..., str] = _run_nvcc,
) -> Candidate | None:
    """The compiler for a build against a torch built with CUDA torch_cuda: CUDA_HOME (or
    CUDA_PATH) when set, which must fit; else the first that fits of the environment's pip
    compiler (given a CUDA_HOME-shaped folder at cuda_home_dir), /usr/local/cuda and nvcc on
    PATH. None when there is no nvcc; a BuildError with the pip command when none fits."""
    command = pip_compiler_command(torch_cuda)

    def version_of(nvcc: str) -> Version:
        return parse_nvcc_version(run_nvcc(nvcc, "--version"))

    for name in ("CUDA_HOME", "CUDA_PATH"):
        if not (root := env.get(name, "").strip()):
            continue
        nvcc = os.path.join(root, "bin", "nvcc")
        if not is_file(nvcc):
            raise BuildError(
                f"{name}={root} has no bin/nvcc; point {name} at a CUDA toolkit, or unset it "
                f"and install the compiler matching torch's CUDA {torch_cuda} with: {command}"
            )
        version = version_of(nvcc)
        candidate = evaluate(CudaToolkit(root, nvcc, version, name), torch_cuda, site_dirs)
        if candidate.problem:
            raise BuildError(
                f"{name}={root} holds nvcc {version}, which cannot build against torch's CUDA "
                f"{torch_cuda}: {candidate.problem}; point {name} at a CUDA {torch_cuda} "
                f"toolkit, or unset it and install the matching compiler with: {command}"
            )
        return candidate

    def found() -> Iterator[CudaToolkit]:
        for pip_dir in pip_nvcc_dirs(site_dirs, is_file):
            nvcc = os.path.join(pip_dir, "bin", "nvcc")
            origin = "the pip compiler of this environment"
            yield CudaToolkit(cuda_home_dir, nvcc, version_of(nvcc), origin, pip_dir)
        default = os.path.join(DEFAULT_CUDA_HOME, "bin", "nvcc")
        system = [(default, "the default location")] if is_file(default) else []
        on_path = which("nvcc")
        if on_path and all(os.path.realpath(on_path) != os.path.realpath(n) for n, _ in system):
            system.append((on_path, "nvcc on PATH"))
        roots: set[str] = set()
        for nvcc, origin in system:
            root = nvcc_home(nvcc, run_nvcc)
            if os.path.realpath(root) in roots:  # /usr/local/cuda and a wrapper on PATH
                continue
            roots.add(os.path.realpath(root))
            real_nvcc = os.path.join(root, "bin", "nvcc")
            nvcc_run = real_nvcc if is_file(real_nvcc) else nvcc
            yield CudaToolkit(root, nvcc_run, version_of(nvcc), origin)

    rejected: list[Candidate] = []
    for toolkit in found():
        candidate = evaluate(toolkit, torch_cuda, site_dirs)
        if candidate.problem is None:
            if toolkit.pip_dir:
                make_cuda_home(toolkit.pip_dir, cuda_home_dir)
            return candidate
        rejected.append(candidate)
    if not rejected:
        return None
    seen = "; ".join(
        f"nvcc {c.toolkit.version} at {c.toolkit.nvcc} ({c.toolkit.origin}): {c.problem}"
        for c in rejected
    )
    raise BuildError(
        f"no CUDA compiler here fits torch's CUDA {torch_cuda} ({seen}); install the matching "
        f"compiler into this environment with: {command} (or set CUDA_HOME to a CUDA "
        f"{torch_cuda} toolkit, or build without CUDA with USE_CUDA=0)"
    )


def minor_mismatch_warning(toolkit: CudaToolkit, torch_cuda: str) -> str | None:
    """A warning when the toolkit's minor version is not torch's (else None). Its major
    version is torch's: select_toolkit takes no other (evaluate)."""
    if toolkit.version.minor == Version(torch_cuda).minor:
        return None
    return (
        f"the CUDA toolkit is {toolkit.version} and torch uses CUDA {torch_cuda}; "
        "minor versions differ, which CUDA supports"
    )


def decide_cuda(
    mode: str, requirement: str, torch_cuda: str | None, toolkit: CudaToolkit | None, package: str
) -> bool:
    """Whether to compile the package's CUDA sources: mode is USE_CUDA's ("auto", "on",
    "off"), requirement the package's cuda key ("none", "optional", "required")."""
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
    needed = mode == "on" or requirement == "required"
    why = "USE_CUDA=1 asks for CUDA" if mode == "on" else f"{package} is CUDA-only"
    if needed and torch_cuda is None:
        raise BuildError(
            f"{why} but the installed torch is a CPU-only build; install a CUDA "
            "build of torch (for example pip install torch --index-url "
            "https://download.pytorch.org/whl/cu130)"
        )
    if needed and toolkit is None:
        raise BuildError(
            f"{why} but no CUDA compiler was found (looked at CUDA_HOME, CUDA_PATH, "
            f"this environment's pip packages, /usr/local/cuda and nvcc on PATH); "
            f"install the one matching torch's CUDA {torch_cuda} with: "
            f"{pip_compiler_command(torch_cuda)}"
        )
    return torch_cuda is not None and toolkit is not None


def missing_headers(include_dirs: Sequence[str], headers: Iterable[str]) -> list[str]:
    """The headers that none of include_dirs holds."""
    return [h for h in headers if not any(os.path.isfile(os.path.join(d, h)) for d in include_dirs)]


def resolve_include_dirs(toolkit: CudaToolkit, site_dirs: Iterable[str]) -> list[str]:
    """Extra include folders so that torch's CUDA headers compile with this toolkit: those of
    NVIDIA's pip packages (nvidia/cu13/include, nvidia/<lib>/include) with a header it lacks."""
    missing = missing_headers([toolkit.include_dir], TORCH_CUDA_HEADERS)
    if not missing:
        return []
    includes = [
        include
        for site in site_dirs
        for include in sorted(
            glob.glob(os.path.join(site, "nvidia", "**", "include"), recursive=True)
        )
    ]
    extra = list(dict.fromkeys(i for i in includes if missing_headers([i], missing) != missing))
    if still := missing_headers([toolkit.include_dir, *extra], missing):
        raise BuildError(
            f"the CUDA toolkit at {toolkit.root} lacks {', '.join(still)}, which torch's "
            "CUDA headers include, and no NVIDIA pip package provides them; install the "
            "toolkit's math libraries (cuBLAS, cuSPARSE, cuSOLVER) or pip install "
            "nvidia-cublas nvidia-cusparse nvidia-cusolver"
        )
    return extra


def parse_nvcc_gpu_codes(text: str) -> list[str]:
    """Architectures from ``nvcc --list-gpu-code`` ("sm_75", ...) as "7.5", ..."""
    return list(dict.fromkeys(f"{a}.{b}" for a, b in re.findall(r"\bsm_(\d+)(\d)\b", text)))


def toolkit_archs(nvcc: str) -> list[str]:
    """The architectures an nvcc can target (``--list-gpu-code``)."""
    return parse_nvcc_gpu_codes(_run_nvcc(nvcc, "--list-gpu-code"))


def _arch_key(arch: str) -> tuple[int, int]:
    major, minor = arch.split("+")[0].split(".")
    return int(major), int(re.sub(r"\D", "", minor) or 0)


def resolve_arch_list(
    env: Mapping[str, str],
    visible_capabilities: Sequence[tuple[int, int]],
    toolkit_archs: Sequence[str],
    torch_archs: Sequence[str] = (),
) -> tuple[str, str]:
    """(TORCH_CUDA_ARCH_LIST, where it came from): the variable; else the visible GPUs; else
    the architectures torch was built for (a wheel runs where its torch runs), else the
    default, with PTX of the newest; only what the toolkit can target."""
    explicit = env.get("TORCH_CUDA_ARCH_LIST", "").strip()
    if explicit and explicit != "native":
        return explicit, "TORCH_CUDA_ARCH_LIST"
    supported = set(toolkit_archs)
    if visible_capabilities:
        archs = sorted({f"{major}.{minor}" for major, minor in visible_capabilities}, key=_arch_key)
        newest = max(supported, key=_arch_key) if supported else None
        # A GPU newer than the toolkit runs PTX of the newest arch it knows.
        clamped = [a if not supported or a in supported else f"{newest}+PTX" for a in archs]
        return ";".join(dict.fromkeys(clamped)), "the visible GPU"
    if explicit == "native":
        raise BuildError(
            "TORCH_CUDA_ARCH_LIST=native needs a visible GPU and none is; name the "
            'architectures instead, for example TORCH_CUDA_ARCH_LIST="9.0"'
        )
    if torch_archs:
        wanted, origin = sorted(set(torch_archs), key=_arch_key), "torch's own (no GPU visible)"
    else:
        wanted = [a.replace("+PTX", "") for a in DEFAULT_ARCH_LIST.split(";")]
        origin = "the default (no GPU visible)"
    kept = [a for a in wanted if not supported or a in supported]
    if not kept:
        raise BuildError(
            f"the CUDA toolkit can target none of the architectures {';'.join(wanted)} "
            f"({origin}); set TORCH_CUDA_ARCH_LIST to the GPUs you build for"
        )
    kept[-1] += "+PTX"
    return ";".join(kept), origin


@dataclass
class CudaBuild:
    """Step 3's result: whether the build compiles CUDA, with which toolkit, what that adds."""

    enabled: bool = False
    toolkit: CudaToolkit | None = None
    include_dirs: list[str] = field(default_factory=list)
    arch_list: str | None = None
    arch_origin: str | None = None
    rpath_args: list[str] = field(default_factory=list)


def resolve_cuda(config: BuildConfig, facts: TorchFacts) -> CudaBuild:
    """USE_CUDA, the package's cuda key and torch's CUDA decide; with CUDA on, the toolkit
    becomes CUDA_HOME and the arch list TORCH_CUDA_ARCH_LIST (for cpp_extension)."""
    package, env, mode = config.package, config.env, config.knobs.use_cuda
    chosen = None
    if package.cuda != "none" and mode != "off" and facts.cuda is not None:
        # A pip compiler's CUDA_HOME-shaped folder: per torch, as each pins its own CUDA.
        cuda_home_dir = config.build_root / "cuda_home" / f"torch{facts.version}".replace("+", "_")
        chosen = select_toolkit(env, facts.cuda, facts.site_dirs, str(cuda_home_dir.resolve()))
    toolkit = chosen.toolkit if chosen else None
    if not decide_cuda(mode, package.cuda, facts.cuda, toolkit, package.name):
        return CudaBuild()
    assert chosen is not None and toolkit is not None and facts.cuda is not None
    if warning := minor_mismatch_warning(toolkit, facts.cuda):
        log(f"warning: {warning}")
    from torch.utils import cpp_extension

    env["CUDA_HOME"] = toolkit.root
    # cpp_extension resolved CUDA_HOME when it was imported; make it use our choice.
    cpp_extension.CUDA_HOME = toolkit.root
    arch_list, arch_origin = resolve_arch_list(
        env, facts.visible, toolkit_archs(toolkit.nvcc), parse_nvcc_gpu_codes(facts.arch_flags)
    )
    env["TORCH_CUDA_ARCH_LIST"] = arch_list
    rpath_args = []
    if toolkit.pip_dir:  # site-packages/nvidia/<x>, beside site-packages/<package>
        # NVIDIA's pip runtime: the library finds libcudart in site-packages even when a C++
        # program (no torch import first) loads it, as torch's own libraries do.
        rpath_args.append(f"-Wl,-rpath,$ORIGIN/../nvidia/{os.path.basename(toolkit.pip_dir)}/lib")
    return CudaBuild(
        enabled=True,
        toolkit=toolkit,
        include_dirs=list(chosen.extra_include_dirs),
        arch_list=arch_list,
        arch_origin=arch_origin,
        rpath_args=rpath_args,
    )

"""What this package was built against, and the check its ``__init__`` runs at import: under
another torch it fails in one sentence naming both versions and the command that rebuilds
it, not with an undefined-symbol traceback. Copied into each package as ``_build_info.py``."""

from __future__ import annotations

import os
from typing import Any

# shared_build replaces the next line at build time.
BUILD_INFO: dict[str, Any] = {}


# c10's names of dtypes and layouts ("Float", "SparseCsr"), so a package's Python checks word
# their messages as its C++ checks do. Keyed by str(value): this file needs no torch.
C10_NAMES = {
    "torch.float32": "Float", "torch.float64": "Double", "torch.float16": "Half",
    "torch.bfloat16": "BFloat16", "torch.uint8": "Byte", "torch.int8": "Char",
    "torch.int16": "Short", "torch.int32": "Int", "torch.int64": "Long", "torch.bool": "Bool",
    "torch.complex64": "ComplexFloat", "torch.complex128": "ComplexDouble",
    "torch.strided": "Strided", "torch.sparse_coo": "Sparse", "torch.sparse_csr": "SparseCsr",
    "torch.sparse_csc": "SparseCsc", "torch.sparse_bsr": "SparseBsr",
    "torch.sparse_bsc": "SparseBsc", "torch._mkldnn": "Mkldnn",
}  # fmt: skip


def c10_name(value: object, unknown: str | None = None) -> str:
    """c10's name of a torch dtype or layout; for one C10_NAMES lacks, ``unknown`` if given,
    else its Python name without "torch."."""
    key = str(value)
    return C10_NAMES.get(key, key.removeprefix("torch.") if unknown is None else unknown)


def incompatibility(info: dict[str, Any], torch_version: str, torch_cuda: str | None) -> str | None:
    """Return why a package built as ``info`` cannot load under this torch, or None."""
    from packaging.version import InvalidVersion, Version

    package = info.get("package", "this package")
    built = info.get("torch")
    if not built:
        return f"{package} has no record of the torch it was built against"
    if info.get("abi") == "stable":
        # A stable-ABI build calls only the C shim of its target release, which every later
        # torch keeps (its CUDA library is loaded only under a CUDA torch).
        target = info.get("torch_target") or built
        if Version(Version(torch_version).base_version) < Version(target):
            return (
                f"{package} is built on the stable ABI for torch {target} and newer but "
                f"torch {torch_version} is installed"
            )
        return None
    try:
        same_release = Version(built).public == Version(torch_version).public
    except InvalidVersion:
        same_release = built == torch_version
    if not same_release:
        return f"{package} was built against torch {built} but torch {torch_version} is installed"
    if built_cuda := info.get("cuda"):
        if torch_cuda is None:
            return (
                f"{package} was built with CUDA {built_cuda} kernels but the installed "
                f"torch {torch_version} is a CPU-only build"
            )
        if Version(built_cuda).major != Version(torch_cuda).major:
            return (
                f"{package} was built for CUDA {built_cuda} but the installed torch "
                f"{torch_version} uses CUDA {torch_cuda}"
            )
    return None


def sanitizer_problem(info: dict[str, Any], asan_loaded: bool) -> str | None:
    """Why a build with AddressSanitizer cannot load in this process (one that did not start
    with the ASan runtime: it would abort), or None."""
    if "address" not in info.get("sanitize", []) or asan_loaded:
        return None
    return (
        f"{info.get('package', 'this package')} was built with SANITIZE="
        f"{','.join(info['sanitize'])}, which needs the AddressSanitizer runtime loaded "
        'before Python starts; run with LD_PRELOAD="$(c++ -print-file-name=libasan.so) '
        '$(c++ -print-file-name=libstdc++.so)" (libstdc++ too, or ASan aborts at the '
        "first C++ exception), or reinstall it without SANITIZE"
    )


def _installed_from(package: str) -> str | None:
    """Where pip installed the package from, if that can be built again: a source folder, an
    sdist or a URL from the install's direct_url.json (PEP 610); None for a wheel or an index."""
    import json
    from importlib import metadata
    from urllib.parse import unquote, urlparse

    try:
        record = json.loads(metadata.distribution(package).read_text("direct_url.json") or "")
    except (metadata.PackageNotFoundError, ValueError, OSError):
        return None
    url = record.get("url", "") if isinstance(record, dict) else ""
    if not url or url.endswith(".whl"):  # reinstalling a wheel would not rebuild anything
        return None
    vcs = record.get("vcs_info")
    if isinstance(vcs, dict) and vcs.get("vcs"):
        commit = vcs.get("commit_id")
        return f"{vcs['vcs']}+{url}" + (f"@{commit}" if commit else "")
    parsed = urlparse(url)
    if parsed.scheme == "file":
        path = unquote(parsed.path)
        return path if os.path.exists(path) else None
    return url


def rebuild_command(info: dict[str, Any]) -> str:
    """The pip command that rebuilds the package against the torch in this environment: from
    its source folder, else from what pip installed it from, else it says what to name (never
    the build machine's folder: a wheel's user has none of it)."""
    command = "pip install --no-build-isolation --force-reinstall --no-deps"
    package = info.get("package", "<package>")
    source = info.get("source_dir")
    if source and os.path.isdir(source):
        return f"{command} {source}"
    if installed_from := _installed_from(package):
        return f"{command} {installed_from}"
    return (
        f"pip install {package} -f <the wheelhouse folder of your torch> (its wheels are built "
        f"per torch release), or {command} <{package}'s sdist or source folder>"
    )


def check_compatible(info: dict[str, Any] | None = None) -> None:
    """Raise ImportError, in one sentence, when the running torch is not the one built against."""
    import torch

    info = BUILD_INFO if info is None else info
    if (problem := incompatibility(info, torch.__version__, torch.version.cuda)) is not None:
        if info.get("abi") == "stable":
            target = info.get("torch_target") or info.get("torch")
            raise ImportError(f"{problem}; upgrade torch with: pip install 'torch>={target}'")
        raise ImportError(f"{problem}; rebuild it with: {rebuild_command(info)}")
    if info.get("sanitize"):
        import ctypes

        problem = sanitizer_problem(info, hasattr(ctypes.CDLL(None), "__asan_init"))
        if problem is not None:
            raise ImportError(problem)


def cuda_library_path(info: dict[str, Any], package_dir: str, torch_cuda: str | None) -> str | None:
    """The stable-ABI package's CUDA library (``_C_cuda``) to load under this torch, or None:
    only under a CUDA torch of the CUDA major the library was compiled for (its libcudart)."""
    name = info.get("cuda_library")
    if not name or torch_cuda is None:
        return None
    from packaging.version import Version

    built_cuda = info.get("cuda")
    if built_cuda and Version(built_cuda).major != Version(torch_cuda).major:
        return None
    for entry in sorted(os.listdir(package_dir)):
        if entry.startswith(name + ".") and entry.endswith((".so", ".pyd", ".dylib")):
            return os.path.join(package_dir, entry)
    return None


_RAISING_CUDA_KERNELS: list[Any] = []  # their Libraries: one unregisters when collected


def load_cuda_kernels(info: dict[str, Any], package_dir: str, namespace: str) -> str | None:
    """Load a stable-ABI package's CUDA library under a CUDA torch; None when it loaded or
    there is nothing to load. Else the package still runs on the CPU, and the namespace's
    ops get CUDA kernels that raise one sentence (why, what to install), which is returned."""
    import torch

    name = info.get("cuda_library")
    torch_cuda = torch.version.cuda
    if not name or torch_cuda is None:
        return None
    from packaging.version import Version

    package = info.get("package", namespace)
    built = info.get("cuda")
    path = cuda_library_path(info, package_dir, torch_cuda)
    if built and Version(built).major != Version(torch_cuda).major:
        reason = (
            f"{package}'s CUDA kernels are off: they are built for CUDA {built} and this "
            f"torch {torch.__version__} uses CUDA {torch_cuda}; install a torch built with "
            f"CUDA {Version(built).major} or build {package} from source against this torch"
        )
    elif path is None:
        reason = (
            f"{package}'s CUDA kernels are off: its CUDA library {name} is missing from "
            f"{package_dir}; reinstall {package}"
        )
    else:
        try:
            torch.ops.load_library(path)
            return None
        except (OSError, RuntimeError) as error:
            detail = (str(error).strip().splitlines() or [type(error).__name__])[0]
            reason = (
                f"{package}'s CUDA kernels are off: {os.path.basename(path)} did not load "
                f"({detail}); reinstall {package} for this torch {torch.__version__} (CUDA "
                f"{torch_cuda}) or build it from source against it"
            )

    def kernel(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(reason)

    library = torch.library.Library(namespace, "IMPL")
    has_kernel = torch._C._dispatch_has_kernel_for_dispatch_key
    for op in torch._C._dispatch_get_all_op_names():
        if op.startswith(f"{namespace}::") and not has_kernel(op, "CUDA"):
            library.impl(op.split("::", 1)[1], kernel, "CUDA")
    _RAISING_CUDA_KERNELS.append(library)
    return reason


def _undefined_symbols(library: str) -> str:
    """``nm -D --undefined-only library``."""
    import subprocess

    command = ["nm", "-D", "--undefined-only", library]
    return subprocess.run(command, capture_output=True, text=True, check=True).stdout


def unstable_symbols(library: str) -> list[str]:
    """The undefined C++ symbols of ``library`` in torch's C++ namespaces, which change from
    one release to the next (demangled with ``c++filt``); a stable-ABI library, which may
    use only the C shim, must give []."""
    import re
    import subprocess

    names = _undefined_symbols(library).split()
    mangled = "\n".join(n.split("@")[0] for n in names if n.startswith("_Z"))
    demangled = subprocess.run(
        ["c++filt"], input=mangled, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    return sorted({d for d in demangled if re.search(r"(?<![\w:])(c10|at|torch|caffe2)::", d)})


def glibc_newer_than(library: str, oldest: tuple[int, int]) -> list[str]:
    """The symbols ``library`` imports at a glibc version newer than ``oldest``, as
    "name@GLIBC_x.y", sorted: what would stop it loading on that glibc (and what auditwheel
    refuses for a manylinux tag of that glibc)."""
    import re

    found = re.findall(r"(\S+?)@+GLIBC_(\d+)\.(\d+)\S*", _undefined_symbols(library))
    return sorted({f"{n}@GLIBC_{a}.{b}" for n, a, b in found if (int(a), int(b)) > oldest})

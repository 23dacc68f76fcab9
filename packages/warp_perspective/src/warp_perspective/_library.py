"""Where the op libraries are, and loading them into the dispatcher.

The package ships two libraries on LibTorch's stable ABI: ``_C.so`` (the schemas and the
CPU kernels) and, in a build with CUDA, ``_C_cuda.so`` (the CUDA kernels), which is loaded
only under a CUDA build of torch so that the same wheel imports under a CPU-only torch.
"""

from __future__ import annotations

from pathlib import Path

import torch

from ._build_info import BUILD_INFO, load_cuda_kernels
from ._build_info import cuda_library_path as _cuda_library_for

# shared_build's python_module = false: plain shared libraries, no ABI suffix.
_HERE = Path(__file__).resolve().parent
_LIBRARY = _HERE / "_C.so"
# Why the CUDA kernels are off under this CUDA torch (another CUDA major than the build's,
# a library that did not load), or None; set by load_library.
cuda_kernels_off: str | None = None


def library_path() -> str:
    """The absolute path of the op library (``_C.so``: schemas and CPU kernels), for
    ``torch.ops.load_library`` and for linking a C++ program against it."""
    if not _LIBRARY.is_file():
        raise FileNotFoundError(
            f"warp_perspective's op library is missing at {_LIBRARY}; reinstall with "
            "pip install --force-reinstall warp_perspective"
        )
    return str(_LIBRARY)


def cuda_library_path() -> str | None:
    """The absolute path of the CUDA kernels' library (``_C_cuda.so``) when this build has
    one and the running torch is a CUDA build of the same CUDA major version; else None.
    Load it after :func:`library_path`'s (it registers kernels for ops that one defines)."""
    return _cuda_library_for(BUILD_INFO, str(_HERE), torch.version.cuda)


def load_library() -> None:
    """Register the ops with torch's dispatcher (idempotent, like every dlopen). Where the
    CUDA kernels cannot load under this torch, the ops' CUDA kernels raise the sentence
    saying why (``build_config()["cuda_off"]``) and the CPU kernels work as ever."""
    global cuda_kernels_off
    torch.ops.load_library(library_path())
    cuda_kernels_off = load_cuda_kernels(BUILD_INFO, str(_HERE), "warp_perspective")

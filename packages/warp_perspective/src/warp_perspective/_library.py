"""Where the op library is, and loading it into the dispatcher."""

from __future__ import annotations

from pathlib import Path

import torch

# shared_build's python_module = false: a plain shared library, no ABI suffix.
_LIBRARY = Path(__file__).resolve().with_name("_C.so")


def library_path() -> str:
    """The absolute path of the op library (``_C.so``), for ``torch.ops.load_library``
    and for linking a C++ program against it."""
    if not _LIBRARY.is_file():
        raise FileNotFoundError(
            f"warp_perspective's op library is missing at {_LIBRARY}; reinstall with "
            "pip install --no-build-isolation --force-reinstall warp_perspective"
        )
    return str(_LIBRARY)


def load_library() -> None:
    """Register the ops with torch's dispatcher (idempotent, like every dlopen)."""
    torch.ops.load_library(library_path())

"""shared_build: the build helper every package of this repository calls from its setup.py.

    from shared_build import setup_kwargs
    setup(**setup_kwargs(here))

Knobs (environment variables, all optional):

- ``USE_CUDA=auto|0|1`` (default auto: build CUDA sources when torch is a CUDA build and a
  toolkit is found; ``FORCE_CUDA=1`` is the same as ``USE_CUDA=1``)
- ``CUDA_HOME`` / ``CUDA_PATH``: the toolkit (default: the environment's pip nvcc, then
  /usr/local/cuda, then nvcc on PATH)
- ``TORCH_CUDA_ARCH_LIST``: GPU architectures (default: the visible GPUs, else those torch
  itself was built for with PTX of the newest, else ``DEFAULT_ARCH_LIST``)
- ``MAX_JOBS``: parallel compile jobs (default: what cores and free memory allow)
- ``DEBUG=1``: -O0 -g (device code -G) instead of -O3
- ``CXX``: the C++ compiler (default c++)
- ``SHARED_BUILD_DIR``: where <package>/<torch tag> build folders go, kept for incremental
  rebuilds (default: a temporary folder removed after the build; nothing in the source tree)
"""

from .cuda import DEFAULT_ARCH_LIST
from .errors import BuildError
from .setup_helpers import pkg_config, setup_kwargs

__all__ = ["DEFAULT_ARCH_LIST", "BuildError", "pkg_config", "setup_kwargs"]
__version__ = "0.1.0"

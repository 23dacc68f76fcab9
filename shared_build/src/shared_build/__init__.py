"""shared_build: the build helper every package of this repository calls from its setup.py.

    from shared_build import setup_kwargs
    setup(**setup_kwargs(here))

The knobs (USE_CUDA, TORCH_CUDA_ARCH_LIST, MAX_JOBS, DEBUG ...) are environment variables;
the README lists them with their defaults."""

from .cuda import DEFAULT_ARCH_LIST
from .errors import BuildError
from .setup_helpers import pkg_config, setup_kwargs

__all__ = ["DEFAULT_ARCH_LIST", "BuildError", "pkg_config", "setup_kwargs"]
__version__ = "0.1.0"

"""The LLTM's Python API, one source (lltm_common/python) installed into lltm_cpu and
lltm_cuda alike as ``<package>._lltm``; the package's ``__init__`` re-exports it."""

from .._build_info import BUILD_INFO, check_compatible

# Before loading the compiled library: a torch mismatch becomes one sentence, not an
# undefined-symbol traceback.
check_compatible()

from .. import _C  # noqa: E402,F401  (loads the library; its TORCH_LIBRARY blocks register the ops)
from .module import LLTM  # noqa: E402
from .ops import backward, forward  # noqa: E402

__all__ = ["BUILD_INFO", "LLTM", "backward", "forward"]

"""add_ext: ``alpha * x + y`` as a PyTorch custom op (``torch.ops.add_ext.add``).

>>> import torch, add_ext
>>> add_ext.add(torch.ones(3), torch.ones(3), alpha=2.0)
tensor([3., 3., 3.])
"""

from ._build_info import BUILD_INFO, check_compatible

# Before loading the compiled library: a torch mismatch becomes one sentence, not an
# undefined-symbol traceback.
check_compatible()

from . import _C  # noqa: E402,F401  (loads the library; its TORCH_LIBRARY blocks register the op)
from .ops import add  # noqa: E402

__all__ = ["BUILD_INFO", "add"]
__version__ = BUILD_INFO["version"]

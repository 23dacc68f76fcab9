"""lltm_cuda: the LLTM recurrent cell as PyTorch custom ops with fused CUDA kernels.

The API of the PyTorch C++ extension tutorial, so that code written for it ports by
renaming the import:

>>> import torch, lltm_cuda
>>> cell = lltm_cuda.LLTM(input_features=32, state_size=128, device="cuda")
>>> x = torch.randn(16, 32, device="cuda")
>>> h, c = torch.zeros(16, 128, device="cuda"), torch.zeros(16, 128, device="cuda")
>>> new_h, new_cell = cell(x, (h, c))
>>> new_h.shape
torch.Size([16, 128])
"""

from ._build_info import BUILD_INFO, check_compatible

# Before loading the compiled library: a torch mismatch becomes one sentence, not an
# undefined-symbol traceback.
check_compatible()

from . import _C  # noqa: E402,F401  (loads the library; its TORCH_LIBRARY blocks register the ops)
from .module import LLTM  # noqa: E402
from .ops import backward, forward  # noqa: E402

__all__ = ["BUILD_INFO", "LLTM", "backward", "forward"]
__version__ = BUILD_INFO["version"]

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

from ._lltm import BUILD_INFO, LLTM, __all__, backward, forward  # noqa: F401

__version__ = BUILD_INFO["version"]

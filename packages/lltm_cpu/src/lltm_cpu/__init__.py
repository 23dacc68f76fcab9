"""lltm_cpu: the LLTM recurrent cell as PyTorch custom ops with fused CPU kernels.

The API of the PyTorch C++ extension tutorial, so that code written for it ports by
renaming the import:

>>> import torch, lltm_cpu
>>> cell = lltm_cpu.LLTM(input_features=32, state_size=128)
>>> x, h, c = torch.randn(16, 32), torch.zeros(16, 128), torch.zeros(16, 128)
>>> new_h, new_cell = cell(x, (h, c))
>>> new_h.shape
torch.Size([16, 128])
"""

from ._lltm import BUILD_INFO, LLTM, __all__, backward, forward  # noqa: F401

__version__ = BUILD_INFO["version"]

"""The ops of lltm_cuda: ``forward`` and ``backward`` (``torch.ops.lltm_cuda.*``).

One source with lltm_cpu: the wrappers live in lltm_common/python/ops.py, installed
as lltm_cuda._lltm; the kernels, templates of lltm_common/csrc/lltm.h, are registered in
csrc/ (lltm_cuda.cpp, cuda/lltm_kernel.*, autograd/lltm_kernel.cpp).
"""

from ._lltm.ops import __all__, backward, forward  # noqa: F401

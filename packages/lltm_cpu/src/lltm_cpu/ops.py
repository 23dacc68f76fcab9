"""The ops of lltm_cpu: ``forward`` and ``backward`` (``torch.ops.lltm_cpu.*``).

One source with lltm_cuda: the wrappers live in lltm_common/python/ops.py, installed
as lltm_cpu._lltm; the kernels, templates of lltm_common/csrc/lltm.h, are registered in
csrc/ (lltm_cpu.cpp, cpu/lltm_kernel.*, autograd/lltm_kernel.cpp).
"""

from ._lltm.ops import __all__, backward, forward  # noqa: F401

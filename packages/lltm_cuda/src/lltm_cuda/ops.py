"""The ops of lltm_cuda: ``forward`` and ``backward`` (``torch.ops.lltm_cuda.*``).

One source with lltm_cpu: the wrappers live in lltm_common/python/ops.py, installed
as lltm_cuda._lltm; the checks, Meta and autograd kernels in lltm_common/csrc.
"""

from ._lltm.ops import __all__, backward, forward  # noqa: F401

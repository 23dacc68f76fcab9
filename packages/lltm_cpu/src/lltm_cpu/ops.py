"""The ops of lltm_cpu: ``forward`` and ``backward`` (``torch.ops.lltm_cpu.*``).

One source with lltm_cuda: the wrappers live in lltm_common/python/ops.py, installed
as lltm_cpu._lltm; the checks, Meta and autograd kernels in lltm_common/csrc.
"""

from ._lltm.ops import __all__, backward, forward  # noqa: F401

"""gc_cpp: graph convolution ``adj @ x @ weight + bias`` as PyTorch custom ops.

>>> import torch, gc_cpp
>>> adj = gc_cpp.normalize_adjacency(torch.ones(4, 4))
>>> layer = gc_cpp.GraphConv(16, 8)
>>> layer(adj, torch.randn(4, 16)).shape
torch.Size([4, 8])
"""

from ._build_info import BUILD_INFO, check_compatible

# Before loading the compiled library: a torch mismatch becomes one sentence, not an
# undefined-symbol traceback.
check_compatible()

from . import _C  # noqa: E402,F401  (loads the library; its TORCH_LIBRARY blocks register the ops)
from .modules import GraphConv  # noqa: E402
from .ops import backward, forward, graph_conv, normalize_adjacency, weight_grad  # noqa: E402

__all__ = [
    "BUILD_INFO",
    "GraphConv",
    "backward",
    "forward",
    "graph_conv",
    "normalize_adjacency",
    "weight_grad",
]
__version__ = BUILD_INFO["version"]

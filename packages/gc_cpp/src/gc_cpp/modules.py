"""GraphConv: the graph convolution layer of Kipf and Welling (ICLR 2017) over gc_cpp."""

from __future__ import annotations

import math

import torch
from torch import nn

from .ops import graph_conv

__all__ = ["GraphConv"]


class GraphConv(nn.Module):
    """``adj @ x @ weight + bias`` with a learned ``weight`` ``(in, out)`` and ``bias``.

    ``forward(adj, x)`` takes an ``(N, N)`` adjacency (dense, sparse COO or sparse CSR,
    usually ``gc_cpp.normalize_adjacency(A)``) and node features ``(N, in_features)``, and
    returns ``(N, out_features)``. Weights start Glorot-uniform, the bias at zero.
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        *,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        factory = {"device": device, "dtype": dtype}
        self.weight = nn.Parameter(torch.empty(in_features, out_features, **factory))
        self.bias = nn.Parameter(torch.empty(out_features, **factory)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = math.sqrt(6.0 / (self.in_features + self.out_features))
        nn.init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def forward(self, adj: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return graph_conv(adj, x, self.weight, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"

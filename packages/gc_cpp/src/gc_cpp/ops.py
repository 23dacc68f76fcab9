"""Typed wrappers for the gc_cpp ops, and normalize_adjacency.

The kernels are in C++ (csrc/): the forward is composed of ATen products (so it runs on
any device), autograd is a C++ kernel (csrc/autograd.cpp), and the fake kernels that let
torch.compile and FakeTensor trace the ops are C++ Meta kernels (csrc/gc_cpp.cpp) that
run the real kernels' checks.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

__all__ = ["backward", "forward", "graph_conv", "normalize_adjacency"]

_graph_conv = torch.ops.gc_cpp.graph_conv.default
_weight_grad = torch.ops.gc_cpp.weight_grad.default


def graph_conv(
    adj: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None
) -> torch.Tensor:
    """Return ``adj @ x @ weight + bias``, multiplying in the cheaper order.

    ``adj`` is ``(N, N)``, dense, sparse COO or sparse CSR; ``x`` is ``(N, F_in)``,
    ``weight`` ``(F_in, F_out)``, ``bias`` ``(F_out,)`` or None. With ``F_out < F_in`` it
    computes ``adj @ (x @ weight)``, else ``(adj @ x) @ weight``, in forward and backward.
    Differentiable w.r.t. x, weight, bias, and adj when adj is dense.
    """
    return _graph_conv(adj, x, weight, bias)


def forward(a: torch.Tensor, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The seed's ``gc_forward``: ``a @ x @ w + b`` (``graph_conv`` with a bias)."""
    return _graph_conv(a, x, w, b)


def backward(a: torch.Tensor, x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """The seed's ``gc_backward``: the gradient w.r.t. ``w``, ``(a @ x).T @ g``.

    Computed as ``x.T @ (a.T @ g)`` when ``g`` has fewer columns than ``x``.
    """
    return _weight_grad(a, x, g)


def normalize_adjacency(adj: torch.Tensor, add_self_loops: bool = True) -> torch.Tensor:
    """Return the GCN normalisation ``D^-1/2 (A + I) D^-1/2`` of ``adj``.

    ``D`` is the diagonal of the row sums of ``A + I`` (of ``A`` without self-loops); a
    node whose degree is not positive gets scale 0 instead of inf. ``A + I`` adds to a
    self-loop that is already there. Keeps the layout: dense, sparse COO (coalesced) or
    sparse CSR. Differentiable for a dense ``adj``; traceable by ``torch.compile``.

    A one-off preprocessing step made of torch operations (autograd and compile go
    through them), so it is not a custom op.
    """
    op = "gc_cpp.normalize_adjacency"
    # Plain raises: Dynamo traces this function, and cannot trace torch._check with a
    # message closure over tensors (torch 2.14).
    _check_floating(op, adj.dtype)
    _check_adjacency(op, adj)
    n = adj.shape[0]
    if adj.layout == torch.strided:
        a = adj + torch.eye(n, dtype=adj.dtype, device=adj.device) if add_self_loops else adj
        scale = _inv_sqrt_degree(a.sum(1))
        return scale.unsqueeze(1) * a * scale.unsqueeze(0)

    # Sparse: scale the values of the coalesced COO form, return the layout that came in.
    csr = adj.layout == torch.sparse_csr
    a = (adj.to_sparse() if csr else adj).coalesce()
    if add_self_loops:
        diagonal = torch.arange(n, device=adj.device).expand(2, n)
        eye = torch.sparse_coo_tensor(
            diagonal,
            torch.ones(n, dtype=adj.dtype, device=adj.device),
            (n, n),
            check_invariants=False,  # valid by construction
        )
        a = (a + eye).coalesce()
    row, col = a.indices()
    values = a.values()
    scale = _inv_sqrt_degree(
        torch.zeros(n, dtype=adj.dtype, device=adj.device).index_add(0, row, values)
    )
    out = torch.sparse_coo_tensor(
        a.indices(),
        scale[row] * values * scale[col],
        (n, n),
        is_coalesced=True,
        check_invariants=False,  # the indices of a coalesced tensor
    )
    return out.to_sparse_csr() if csr else out


def _inv_sqrt_degree(degree: torch.Tensor) -> torch.Tensor:
    # The inner where keeps rsqrt away from 0 so that its gradient stays finite too.
    positive = degree > 0
    return torch.where(positive, torch.where(positive, degree, 1.0).rsqrt(), 0.0)


# ---- normalize_adjacency's checks: check_adjacency and check_floating of csrc/gc_cpp.cpp,
# in the same words (a Python function, not an op: no C++ kernel runs for it) -----------

_DTYPE_NAMES = {
    torch.float16: "Half",
    torch.bfloat16: "BFloat16",
    torch.float32: "Float",
    torch.float64: "Double",
    torch.int64: "Long",
    torch.int32: "Int",
    torch.int16: "Short",
    torch.int8: "Char",
    torch.uint8: "Byte",
    torch.bool: "Bool",
    torch.complex64: "ComplexFloat",
    torch.complex128: "ComplexDouble",
}
_LAYOUT_NAMES = {
    torch.strided: "Strided",
    torch.sparse_coo: "Sparse",
    torch.sparse_csr: "SparseCsr",
    torch.sparse_csc: "SparseCsc",
    torch.sparse_bsr: "SparseBsr",
    torch.sparse_bsc: "SparseBsc",
}
_FLOATING = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def _dtype(dtype: torch.dtype) -> str:
    return _DTYPE_NAMES.get(dtype, str(dtype))


def _layout(layout: torch.layout) -> str:
    return _LAYOUT_NAMES.get(layout, str(layout))


def _shape(t: torch.Tensor) -> str:
    return "[" + ", ".join(str(s) for s in t.shape) + "]"


def _raise_unless(condition: bool, message: Callable[[], str]) -> None:
    if not condition:
        raise RuntimeError(message())


def _check_dim(op: str, name: str, t: torch.Tensor, dim: int, meaning: str) -> None:
    _raise_unless(
        t.dim() == dim,
        lambda: (
            f"{op}: {name} must be {dim}-D {meaning}, got a {t.dim()}-D tensor of shape {_shape(t)}"
        ),
    )


def _check_adjacency(op: str, adj: torch.Tensor) -> None:
    _raise_unless(
        adj.layout in (torch.strided, torch.sparse_coo, torch.sparse_csr),
        lambda: (
            f"{op}: adj must be a dense (strided), sparse COO or sparse CSR tensor, got layout {_layout(adj.layout)}"
        ),
    )
    _check_dim(op, "adj", adj, 2, "(N, N)")
    if adj.layout == torch.sparse_coo:
        _raise_unless(
            adj.sparse_dim() == 2,
            lambda: (
                f"{op}: a sparse COO adj must have 2 sparse dimensions and no dense ones, got sparse_dim {adj.sparse_dim()} and dense_dim {adj.dense_dim()}"
            ),
        )
    _raise_unless(
        adj.shape[0] == adj.shape[1],
        lambda: f"{op}: adj must be square (N, N), got shape {_shape(adj)}",
    )


def _check_floating(op: str, dtype: torch.dtype) -> None:
    _raise_unless(
        dtype in _FLOATING,
        lambda: f"{op}: dtype must be float16, bfloat16, float32 or float64, got {_dtype(dtype)}",
    )


# graph_conv's autograd is registered in C++ (csrc/autograd.cpp); the other ops are not
# differentiable and say so if a backward reaches them.

"""Typed wrappers and fake (meta) kernels for the gc_cpp ops.

The kernels are in C++ (csrc/): the forward is composed of ATen products (so it runs on
any device), autograd is a C++ kernel (csrc/autograd.cpp). The fake kernels here let
torch.compile and FakeTensor trace the ops without running them; they repeat the C++
checks word for word.
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
    _check_floating(op, adj.dtype, check=_raise_unless)
    _check_adjacency(op, adj, check=_raise_unless)
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


# ---- fake kernels: the C++ checks (csrc/gc_cpp.cpp), in the same words ----------------

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


def _check_dense(op: str, name: str, t: torch.Tensor) -> None:
    torch._check(
        t.layout == torch.strided,
        lambda: f"{op}: {name} must be a dense (strided) tensor, got layout {_layout(t.layout)}",
    )


def _check_dim(
    op: str, name: str, t: torch.Tensor, dim: int, meaning: str, check=torch._check
) -> None:
    check(
        t.dim() == dim,
        lambda: (
            f"{op}: {name} must be {dim}-D {meaning}, got a {t.dim()}-D tensor of shape {_shape(t)}"
        ),
    )


def _check_adjacency(op: str, adj: torch.Tensor, check=torch._check) -> None:
    check(
        adj.layout in (torch.strided, torch.sparse_coo, torch.sparse_csr),
        lambda: (
            f"{op}: adj must be a dense (strided), sparse COO or sparse CSR tensor, got layout {_layout(adj.layout)}"
        ),
    )
    _check_dim(op, "adj", adj, 2, "(N, N)", check)
    if adj.layout == torch.sparse_coo:
        check(
            adj.sparse_dim() == 2,
            lambda: (
                f"{op}: a sparse COO adj must have 2 sparse dimensions and no dense ones, got sparse_dim {adj.sparse_dim()} and dense_dim {adj.dense_dim()}"
            ),
        )
    check(
        adj.shape[0] == adj.shape[1],
        lambda: f"{op}: adj must be square (N, N), got shape {_shape(adj)}",
    )


def _check_floating(op: str, dtype: torch.dtype, check=torch._check) -> None:
    check(
        dtype in _FLOATING,
        lambda: f"{op}: dtype must be float16, bfloat16, float32 or float64, got {_dtype(dtype)}",
    )


def _check_graph_conv_inputs(
    op: str,
    adj: torch.Tensor,
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
) -> None:
    has_bias = bias is not None
    torch._check(
        adj.device == x.device
        and weight.device == x.device
        and (not has_bias or bias.device == x.device),
        lambda: (
            f"{op}: adj, x, weight and bias must be on the same device, got adj on {adj.device}, x on {x.device}, weight on {weight.device}"
            + (f", bias on {bias.device}" if has_bias else "")
        ),
    )
    torch._check(
        adj.dtype == x.dtype
        and weight.dtype == x.dtype
        and (not has_bias or bias.dtype == x.dtype),
        lambda: (
            f"{op}: adj, x, weight and bias must have the same dtype, got adj {_dtype(adj.dtype)}, x {_dtype(x.dtype)}, weight {_dtype(weight.dtype)}"
            + (f", bias {_dtype(bias.dtype)}" if has_bias else "")
        ),
    )
    _check_floating(op, x.dtype)
    _check_dense(op, "x", x)
    _check_dense(op, "weight", weight)
    if has_bias:
        _check_dense(op, "bias", bias)
    _check_adjacency(op, adj)
    _check_dim(op, "x", x, 2, "(N, F_in)")
    _check_dim(op, "weight", weight, 2, "(F_in, F_out)")
    if has_bias:
        _check_dim(op, "bias", bias, 1, "(F_out,)")
    torch._check(
        adj.shape[1] == x.shape[0],
        lambda: (
            f"{op}: adj has {adj.shape[1]} columns but x has {x.shape[0]} rows (adj {_shape(adj)}, x {_shape(x)}); x must be (N, F_in) with N = adj.size(1)"
        ),
    )
    torch._check(
        weight.shape[0] == x.shape[1],
        lambda: (
            f"{op}: weight has {weight.shape[0]} rows but x has {x.shape[1]} columns (x {_shape(x)}, weight {_shape(weight)}); weight must be (F_in, F_out) with F_in = x.size(1)"
        ),
    )
    if has_bias:
        torch._check(
            bias.shape[0] == weight.shape[1],
            lambda: (
                f"{op}: bias has {bias.shape[0]} elements but weight has {weight.shape[1]} columns (weight {_shape(weight)}, bias {_shape(bias)}); bias must be (F_out,) with F_out = weight.size(1)"
            ),
        )


@torch.library.register_fake("gc_cpp::graph_conv")
def _(
    adj: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None
) -> torch.Tensor:
    _check_graph_conv_inputs("gc_cpp.graph_conv", adj, x, weight, bias)
    return x.new_empty((adj.shape[0], weight.shape[1]))


@torch.library.register_fake("gc_cpp::_graph_conv_forward")
def _(
    adj: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    _check_graph_conv_inputs("gc_cpp.graph_conv", adj, x, weight, bias)
    out = x.new_empty((adj.shape[0], weight.shape[1]))
    # The intermediate of the order the C++ kernel picks (gc_cpp::x_weight_first).
    if weight.shape[1] < weight.shape[0]:
        return out, x.new_empty((x.shape[0], weight.shape[1]))
    return out, x.new_empty((adj.shape[0], x.shape[1]))


@torch.library.register_fake("gc_cpp::weight_grad")
def _(adj: torch.Tensor, x: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
    op = "gc_cpp.backward"
    torch._check(
        adj.device == x.device and grad.device == x.device,
        lambda: (
            f"{op}: adj, x and grad must be on the same device, got adj on {adj.device}, x on {x.device}, grad on {grad.device}"
        ),
    )
    torch._check(
        adj.dtype == x.dtype and grad.dtype == x.dtype,
        lambda: (
            f"{op}: adj, x and grad must have the same dtype, got adj {_dtype(adj.dtype)}, x {_dtype(x.dtype)}, grad {_dtype(grad.dtype)}"
        ),
    )
    _check_floating(op, x.dtype)
    _check_dense(op, "x", x)
    _check_dense(op, "grad", grad)
    _check_adjacency(op, adj)
    _check_dim(op, "x", x, 2, "(N, F_in)")
    _check_dim(op, "grad", grad, 2, "(N, F_out)")
    torch._check(
        adj.shape[1] == x.shape[0],
        lambda: (
            f"{op}: adj has {adj.shape[1]} columns but x has {x.shape[0]} rows (adj {_shape(adj)}, x {_shape(x)}); x must be (N, F_in) with N = adj.size(1)"
        ),
    )
    torch._check(
        grad.shape[0] == adj.shape[0],
        lambda: (
            f"{op}: grad has {grad.shape[0]} rows but adj has {adj.shape[0]} (adj {_shape(adj)}, grad {_shape(grad)}); grad must be (N, F_out) with N = adj.size(0)"
        ),
    )
    return x.new_empty((x.shape[1], grad.shape[1]))


@torch.library.register_fake("gc_cpp::_csr_transpose")
def _(
    crow_indices: torch.Tensor, col_indices: torch.Tensor, values: torch.Tensor, num_cols: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    # The checks of gc_cpp::check_csr_transpose_inputs, in the same words (a meta tensor
    # among CPU ones dispatches here, not to the C++ kernel).
    op = "gc_cpp._csr_transpose"
    for name, t in (
        ("crow_indices", crow_indices),
        ("col_indices", col_indices),
        ("values", values),
    ):
        _check_dense(op, name, t)
    torch._check(
        crow_indices.device == col_indices.device and values.device == col_indices.device,
        lambda: (
            f"{op}: crow_indices, col_indices and values must be on the same device, got {crow_indices.device}, {col_indices.device} and {values.device}"
        ),
    )
    torch._check(
        col_indices.dtype in (torch.int32, torch.int64) and crow_indices.dtype == col_indices.dtype,
        lambda: (
            f"{op}: crow_indices and col_indices must both be int32 or both int64, got {_dtype(crow_indices.dtype)} and {_dtype(col_indices.dtype)}"
        ),
    )
    torch._check(
        values.dtype in _FLOATING,
        lambda: (
            f"{op}: values must be float16, bfloat16, float32 or float64, got {_dtype(values.dtype)}"
        ),
    )
    torch._check(
        crow_indices.dim() == 1 and col_indices.dim() == 1 and values.dim() == 1,
        lambda: (
            f"{op}: crow_indices, col_indices and values must be 1-D, got shapes {_shape(crow_indices)}, {_shape(col_indices)} and {_shape(values)}"
        ),
    )
    torch._check(
        crow_indices.numel() >= 1,
        lambda: f"{op}: crow_indices must have num_rows + 1 >= 1 elements, got 0",
    )
    torch._check(
        col_indices.numel() == values.numel(),
        lambda: (
            f"{op}: col_indices has {col_indices.numel()} elements but values has {values.numel()}"
        ),
    )
    torch._check(num_cols >= 0, lambda: f"{op}: num_cols must be >= 0, got {num_cols}")
    return (
        crow_indices.new_empty((num_cols + 1,)),
        col_indices.new_empty(col_indices.shape),
        values.new_empty(values.shape),
    )


# graph_conv's autograd is registered in C++ (csrc/autograd.cpp); the other ops are not
# differentiable and say so if a backward reaches them.

"""Typed wrappers for the gc_cpp ops, their argument checks, fake kernels and autograd,
and normalize_adjacency.

The kernels are C++ (csrc/) on LibTorch's stable ABI, which has neither C++ autograd nor
symbolic sizes: graph_conv's autograd kernel and the fake kernels are here, and so are the
argument checks, written once. The fake kernels call them, and every eager call runs them
once before any C++ (in the op's Autograd kernel, or its BackendSelect kernel where
autograd is off). The C++ checks only what no fake kernel can, the index values and
structure _csr_transpose's loops read; the other kernels get ATen's checks from the ops
they call, so a C++ caller that bypasses this module gets an error, never a crash.
"""

from __future__ import annotations

import torch

from ._build_info import c10_name
from ._stable_op import below_autograd, no_autocast, register

__all__ = ["backward", "forward", "graph_conv", "normalize_adjacency", "weight_grad"]

_graph_conv = torch.ops.gc_cpp.graph_conv.default
_graph_conv_forward = torch.ops.gc_cpp._graph_conv_forward.default
_weight_grad = torch.ops.gc_cpp.weight_grad.default
_csr_transpose = torch.ops.gc_cpp._csr_transpose.default


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


def weight_grad(adj: torch.Tensor, x: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
    """The gradient of ``graph_conv`` w.r.t. ``weight``: ``(adj @ x).T @ grad``.

    Computed as ``x.T @ (adj.T @ grad)`` when ``grad`` has fewer columns than ``x``.
    """
    return _weight_grad(adj, x, grad)


def backward(a: torch.Tensor, x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """:func:`weight_grad` under the seed's name (its ``gc_backward``): only the gradient
    w.r.t. ``w``."""
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


# ---- the argument checks: the one copy, for the real kernels and the fake ones ----------
# Messages name dtypes and layouts as c10 prints them (Double, SparseCsr), as the C++
# checks did before they moved here. Every eager call runs an op's check, so each step is
# a plain `if` that formats its message only when it fails.

_HALF = (torch.float16, torch.bfloat16)
_FLOATING = (*_HALF, torch.float32, torch.float64)
_dtype = _layout = c10_name


def _shape(t: torch.Tensor) -> str:
    return "[" + ", ".join(str(s) for s in t.shape) + "]"


def _fail(message: str) -> None:
    raise RuntimeError(message)


def _check_dim(op: str, name: str, t: torch.Tensor, dim: int, meaning: str) -> None:
    if t.dim() != dim:
        _fail(
            f"{op}: {name} must be {dim}-D {meaning}, got a {t.dim()}-D tensor of shape {_shape(t)}"
        )


def _check_adjacency(op: str, adj: torch.Tensor) -> None:
    layout = adj.layout
    if layout not in (torch.strided, torch.sparse_csr, torch.sparse_coo):
        _fail(
            f"{op}: adj must be a dense (strided), sparse COO or sparse CSR tensor, got layout {_layout(layout)}"
        )
    if layout != torch.strided and adj.device.type == "cpu" and adj.dtype in _HALF:
        # torch's CPU sparse product (MKL's CSR; a COO adj is multiplied as CSR) has none.
        _fail(f"{op}: a sparse adj on the CPU must be float32 or float64, got {_dtype(adj.dtype)}")
    _check_dim(op, "adj", adj, 2, "(N, N)")
    if layout == torch.sparse_coo and adj.sparse_dim() != 2:
        _fail(
            f"{op}: a sparse COO adj must have 2 sparse dimensions and no dense ones, got sparse_dim {adj.sparse_dim()} and dense_dim {adj.dense_dim()}"
        )
    if adj.shape[0] != adj.shape[1]:
        _fail(f"{op}: adj must be square (N, N), got shape {_shape(adj)}")


def _check_floating(op: str, dtype: torch.dtype) -> None:
    if dtype not in _FLOATING:
        _fail(f"{op}: dtype must be float16, bfloat16, float32 or float64, got {_dtype(dtype)}")


def _check_defined(op: str, name: str, t: torch.Tensor | None) -> None:
    # None passed for a Tensor argument: the C++ kernel would see an undefined tensor.
    if t is None:
        _fail(f"{op}: {name} must be a tensor, got None")


def _check_dense(op: str, name: str, t: torch.Tensor) -> None:
    if t.layout != torch.strided:
        _fail(f"{op}: {name} must be a dense (strided) tensor, got layout {_layout(t.layout)}")


def _device(t: torch.Tensor) -> str:
    return str(t.device)


def _check_adj_columns_x_rows(op: str, adj: torch.Tensor, x: torch.Tensor) -> None:
    if adj.shape[1] != x.shape[0]:
        _fail(
            f"{op}: adj has {adj.shape[1]} columns but x has {x.shape[0]} rows (adj "
            f"{_shape(adj)}, x {_shape(x)}); x must be (N, F_in) with N = adj.size(1)"
        )


def _check_graph_conv_inputs(op, adj, x, weight, bias) -> None:
    """graph_conv's and _graph_conv_forward's checks; `op` prefixes the messages."""
    _check_defined(op, "adj", adj)
    _check_defined(op, "x", x)
    _check_defined(op, "weight", weight)
    has_bias = bias is not None
    device, dtype = x.device, x.dtype
    if not (
        adj.device == device and weight.device == device and (not has_bias or bias.device == device)
    ):
        _fail(
            f"{op}: adj, x, weight and bias must be on the same device, got adj on "
            f"{_device(adj)}, x on {_device(x)}, weight on {_device(weight)}"
            + (f", bias on {_device(bias)}" if has_bias else "")
        )
    if not (adj.dtype == dtype and weight.dtype == dtype and (not has_bias or bias.dtype == dtype)):
        _fail(
            f"{op}: adj, x, weight and bias must have the same dtype, got adj "
            f"{_dtype(adj.dtype)}, x {_dtype(dtype)}, weight {_dtype(weight.dtype)}"
            + (f", bias {_dtype(bias.dtype)}" if has_bias else "")
        )
    _check_floating(op, dtype)
    _check_dense(op, "x", x)
    _check_dense(op, "weight", weight)
    if has_bias:
        _check_dense(op, "bias", bias)
    _check_adjacency(op, adj)
    _check_dim(op, "x", x, 2, "(N, F_in)")
    _check_dim(op, "weight", weight, 2, "(F_in, F_out)")
    if has_bias:
        _check_dim(op, "bias", bias, 1, "(F_out,)")
    _check_adj_columns_x_rows(op, adj, x)
    if weight.shape[0] != x.shape[1]:
        _fail(
            f"{op}: weight has {weight.shape[0]} rows but x has {x.shape[1]} columns (x "
            f"{_shape(x)}, weight {_shape(weight)}); weight must be (F_in, F_out) with "
            "F_in = x.size(1)"
        )
    if has_bias and bias.shape[0] != weight.shape[1]:
        _fail(
            f"{op}: bias has {bias.shape[0]} elements but weight has {weight.shape[1]} "
            f"columns (weight {_shape(weight)}, bias {_shape(bias)}); bias must be "
            "(F_out,) with F_out = weight.size(1)"
        )


def _check_weight_grad_inputs(adj, x, grad) -> None:
    """weight_grad's checks (also gc_cpp.backward's, the seed's name for it)."""
    op = "gc_cpp.weight_grad"
    _check_defined(op, "adj", adj)
    _check_defined(op, "x", x)
    _check_defined(op, "grad", grad)
    if not (adj.device == x.device and grad.device == x.device):
        _fail(
            f"{op}: adj, x and grad must be on the same device, got adj on {_device(adj)}, "
            f"x on {_device(x)}, grad on {_device(grad)}"
        )
    if not (adj.dtype == x.dtype and grad.dtype == x.dtype):
        _fail(
            f"{op}: adj, x and grad must have the same dtype, got adj {_dtype(adj.dtype)}, "
            f"x {_dtype(x.dtype)}, grad {_dtype(grad.dtype)}"
        )
    _check_floating(op, x.dtype)
    _check_dense(op, "x", x)
    _check_dense(op, "grad", grad)
    _check_adjacency(op, adj)
    _check_dim(op, "x", x, 2, "(N, F_in)")
    _check_dim(op, "grad", grad, 2, "(N, F_out)")
    _check_adj_columns_x_rows(op, adj, x)
    if grad.shape[0] != adj.shape[0]:
        _fail(
            f"{op}: grad has {grad.shape[0]} rows but adj has {adj.shape[0]} (adj "
            f"{_shape(adj)}, grad {_shape(grad)}); grad must be (N, F_out) with "
            "N = adj.size(0)"
        )


def _check_csr_transpose_inputs(crow, col, values, num_cols) -> None:
    """_csr_transpose's checks; the C++ kernel checks the index values."""
    op = "gc_cpp._csr_transpose"
    _check_defined(op, "crow_indices", crow)
    _check_defined(op, "col_indices", col)
    _check_defined(op, "values", values)
    _check_dense(op, "crow_indices", crow)
    _check_dense(op, "col_indices", col)
    _check_dense(op, "values", values)
    if not (crow.device == col.device and values.device == col.device):
        _fail(
            f"{op}: crow_indices, col_indices and values must be on the same device, got "
            f"{_device(crow)}, {_device(col)} and {_device(values)}"
        )
    if not (col.dtype in (torch.int32, torch.int64) and crow.dtype == col.dtype):
        _fail(
            f"{op}: crow_indices and col_indices must both be int32 or both int64, got "
            f"{_dtype(crow.dtype)} and {_dtype(col.dtype)}"
        )
    if values.dtype not in _FLOATING:
        _fail(
            f"{op}: values must be float16, bfloat16, float32 or float64, got "
            f"{_dtype(values.dtype)}"
        )
    if not (crow.dim() == 1 and col.dim() == 1 and values.dim() == 1):
        _fail(
            f"{op}: crow_indices, col_indices and values must be 1-D, got shapes "
            f"{_shape(crow)}, {_shape(col)} and {_shape(values)}"
        )
    if crow.numel() < 1:
        _fail(f"{op}: crow_indices must have num_rows + 1 >= 1 elements, got 0")
    if col.numel() != values.numel():
        _fail(f"{op}: col_indices has {col.numel()} elements but values has {values.numel()}")
    if num_cols < 0:
        _fail(f"{op}: num_cols must be >= 0, got {num_cols}")


def _x_weight_first(f_in, f_out) -> bool:
    """x_weight_first of csrc/gc_cpp.h: the package's one cost rule."""
    return f_out < f_in


def _check_graph_conv(adj, x, weight, bias=None) -> None:
    _check_graph_conv_inputs("gc_cpp.graph_conv", adj, x, weight, bias)


# ---- fake kernels: the checks above, then empty results of the right shapes -------------


def _graph_conv_fake(adj, x, weight, bias=None):
    _check_graph_conv(adj, x, weight, bias)
    return x.new_empty((adj.shape[0], weight.shape[1]))


def _graph_conv_forward_fake(adj, x, weight, bias=None):
    out = _graph_conv_fake(adj, x, weight, bias)
    # The intermediate of the order the real kernel picks.
    if _x_weight_first(weight.shape[0], weight.shape[1]):
        return out, x.new_empty((x.shape[0], weight.shape[1]))
    return out, x.new_empty((adj.shape[0], x.shape[1]))


def _weight_grad_fake(adj, x, grad):
    _check_weight_grad_inputs(adj, x, grad)
    return x.new_empty((x.shape[1], grad.shape[1]))


def _csr_transpose_fake(crow, col, values, num_cols):
    _check_csr_transpose_inputs(crow, col, values, num_cols)
    return (
        crow.new_empty((num_cols + 1,)),
        col.new_empty(col.shape),
        values.new_empty(values.shape),
    )


# A meta adj may be sparse (SparseMeta, SparseCsrMeta): the same fakes serve those keys.
_SPARSE_META = ("SparseMeta", "SparseCsrMeta")


# ---- autograd ---------------------------------------------------------------------------
# out = adj @ x @ weight + bias. Backward keeps the forward's order, so no N x N product
# ever runs over the wider feature width:
#   x @ weight first (F_out < F_in), S = x @ weight saved:
#     T = adj.T @ grad          (N, F_out), shared by the next two
#     grad_x = T @ weight.T,  grad_weight = x.T @ T,  grad_adj = grad @ S.T
#   adj @ x first, H = adj @ x saved:
#     U = grad @ weight.T       (N, F_in), shared by the next two
#     grad_x = adj.T @ U,  grad_adj = U @ x.T,  grad_weight = H.T @ grad
#   grad_bias = grad.sum(0)
# torch.library.register_autograd sees only the op's inputs and output; this kernel runs
# _graph_conv_forward instead, so backward reuses the intermediate the forward made.

_SPARSE = (torch.sparse_coo, torch.sparse_csr)


def _adj_for_products(adj: torch.Tensor) -> torch.Tensor:
    return adj.to_sparse_csr() if adj.layout == torch.sparse_coo else adj


def _sparse_adj_transposed(adj: torch.Tensor) -> torch.Tensor:
    # adj.T as CSR by the counting sort of _csr_transpose: multiplying by adj.t() (a CSC
    # view) makes ATen convert it with a general sort on every call.
    csr = _adj_for_products(adj)
    crow, row, values = _csr_transpose(
        csr.crow_indices(), csr.col_indices(), csr.values(), csr.shape[1]
    )
    return torch.sparse_csr_tensor(
        crow, row, values, (csr.shape[1], csr.shape[0]), check_invariants=False
    )


def _adj_transposed_mm(adj: torch.Tensor, rhs: torch.Tensor) -> torch.Tensor:
    if adj.layout in _SPARSE:
        return torch.mm(_sparse_adj_transposed(adj), rhs)
    return torch.mm(adj.t(), rhs)


class _GraphConvFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, keyset, adj, x, weight, bias):
        # Grad mode is off in here, so the ATen ops the kernel calls record nothing.
        out, intermediate = below_autograd(_graph_conv_forward, keyset, adj, x, weight, bias)
        x_first = _x_weight_first(weight.shape[0], weight.shape[1])
        needs = ctx.needs_input_grad
        keep = needs[1] if x_first else needs[3]  # grad_adj uses S, grad_weight uses H
        ctx.save_for_backward(adj, x, weight, intermediate if keep else None)
        ctx.x_first = x_first
        ctx.has_bias = bias is not None
        return out

    @staticmethod
    def backward(ctx, grad):
        # The products in the forward's dtype, also inside an autocast region.
        with no_autocast():
            return _GraphConvFunction._backward(ctx, grad)

    @staticmethod
    def _backward(ctx, grad):
        adj, x, weight, intermediate = ctx.saved_tensors
        x_first = ctx.x_first
        _, need_adj, need_x, need_weight, need_bias = ctx.needs_input_grad
        need_bias = need_bias and ctx.has_bias
        # Under create_graph the saved intermediate carries no history (the forward ran
        # below autograd); recompute it differentiably so that a double backward sees its
        # dependence on x, weight and adj.
        if torch.is_grad_enabled() and (need_adj if x_first else need_weight):
            intermediate = torch.mm(x, weight) if x_first else torch.mm(_adj_for_products(adj), x)
        grad_adj = grad_x = grad_weight = grad_bias = None
        if x_first:
            if need_x or need_weight:
                t = _adj_transposed_mm(adj, grad)
                if need_x:
                    grad_x = torch.mm(t, weight.t())
                if need_weight:
                    grad_weight = torch.mm(x.t(), t)
            if need_adj:
                grad_adj = torch.mm(grad, intermediate.t())
        else:
            if need_x or need_adj:
                u = torch.mm(grad, weight.t())
                if need_x:
                    grad_x = _adj_transposed_mm(adj, u)
                if need_adj:
                    grad_adj = torch.mm(u, x.t())
            if need_weight:
                grad_weight = torch.mm(intermediate.t(), grad)
        if need_bias:
            grad_bias = grad.sum(0)
        return None, grad_adj, grad_x, grad_weight, grad_bias


def _graph_conv_recording(keyset, adj, x, weight, bias):
    # graph_conv with a graph to record; its check has run.
    if adj.layout in _SPARSE and adj.requires_grad:
        _fail(
            "gc_cpp.graph_conv: the gradient w.r.t. a sparse adj is not supported (got a "
            f"{_layout(adj.layout)} adj that requires grad); pass adj.detach(), or a dense "
            "adj if you need its gradient"
        )
    return _GraphConvFunction.apply(keyset, adj, x, weight, bias)


# Each op's one check runs in its fake kernel, and once per eager call before any C++
# (the Autograd kernel, or BackendSelect's where autograd is off). The ops other than
# graph_conv are not differentiable: a backward through their outputs raises.
register(
    "gc_cpp::graph_conv",
    fake=_graph_conv_fake,
    autograd=_graph_conv_recording,
    check=_check_graph_conv,
    fake_keys=_SPARSE_META,
)
register(
    "gc_cpp::_graph_conv_forward",
    fake=_graph_conv_forward_fake,
    autograd=None,
    check=_check_graph_conv,
    fake_keys=_SPARSE_META,
)
register(
    "gc_cpp::weight_grad",
    fake=_weight_grad_fake,
    autograd=None,
    check=_check_weight_grad_inputs,
    fake_keys=_SPARSE_META,
)
register(
    "gc_cpp::_csr_transpose",
    fake=_csr_transpose_fake,
    autograd=None,
    check=_check_csr_transpose_inputs,
)

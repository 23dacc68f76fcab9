// Declarations shared by the registration, the composite kernels, the autograd
// kernel and the CPU kernel of gc_cpp.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/SymInt.h>

#include <optional>
#include <tuple>

namespace gc_cpp {

// The checks every entry point of graph_conv runs first: layouts (adj dense,
// sparse COO or sparse CSR; the rest dense), dims, sizes against each other,
// one floating dtype, one device. Throws c10::Error (RuntimeError in Python)
// with a sentence naming the argument and its sizes. `op` prefixes the
// message ("gc_cpp.graph_conv"). Uses symbolic sizes, so it also runs on the
// fake tensors of torch.compile without specialising them.
void check_graph_conv_inputs(const char* op,
                             const at::Tensor& adj,
                             const at::Tensor& x,
                             const at::Tensor& weight,
                             const std::optional<at::Tensor>& bias);

// The adjacency alone: dense (strided), sparse COO with 2 sparse dims, or
// sparse CSR; 2-D and square.
void check_adjacency(const char* op, const at::Tensor& adj);

// float16, bfloat16, float32 or float64.
void check_floating(const char* op, at::ScalarType dtype);

// The arguments of _csr_transpose: 1-D crow/col indices of one integer dtype
// (int32 or int64), as many values as column indices, one device.
void check_csr_transpose_inputs(const at::Tensor& crow_indices,
                                const at::Tensor& col_indices,
                                const at::Tensor& values,
                                int64_t num_cols);

// The same for the seed's weight gradient (adj @ x).T @ grad.
void check_weight_grad_inputs(const at::Tensor& adj,
                              const at::Tensor& x,
                              const at::Tensor& grad);

// The one cost rule of the package, for forward and backward alike: with
// F_out < F_in, adj @ (x @ weight) (the N x N product runs over F_out
// columns), else (adj @ x) @ weight (it runs over F_in). Both orders share the
// N * F_in * F_out product; the adjacency product costs N^2 (or nnz) times the
// narrower feature width.
inline bool x_weight_first(const c10::SymInt& f_in, const c10::SymInt& f_out) {
  return f_out < f_in;
}

inline bool is_sparse_adj(const at::Tensor& adj) {
  return adj.layout() == at::kSparse || adj.layout() == at::kSparseCsr;
}

// adj as the matrix the products use: dense as it is; sparse COO as CSR
// (MKL/cuSPARSE CSR kernels are several times faster than the COO path);
// sparse CSR as it is.
at::Tensor adj_for_products(const at::Tensor& adj);

// adj.T as a sparse CSR matrix, built by gc_cpp::_csr_transpose (a counting
// sort on CPU). Multiplying by CSR(adj.T) is much faster than multiplying by
// adj.t() (a CSC view that ATen converts on every call).
at::Tensor sparse_adj_transposed(const at::Tensor& adj);

// adj.T @ rhs for a dense adj (a transposed view: BLAS reads it as it is) or
// a sparse one (through sparse_adj_transposed).
at::Tensor adj_transposed_mm(const at::Tensor& adj, const at::Tensor& rhs);

// The forward of graph_conv, returning the output and the intermediate the
// chosen order computed: x @ weight (N, F_out) or adj @ x (N, F_in).
std::tuple<at::Tensor, at::Tensor> graph_conv_forward_impl(
    const at::Tensor& adj,
    const at::Tensor& x,
    const at::Tensor& weight,
    const std::optional<at::Tensor>& bias);

}  // namespace gc_cpp

// gc_cpp's kernels for every device and layout (CompositeExplicitAutograd,
// below the autograd kernel of ops.py): compositions of ATen products called
// through the stable dispatcher, which sends them to MKL/oneDNN, cuBLAS or
// cuSPARSE (stable_aten.h). ops.py has checked the arguments; a caller that
// bypasses it gets the errors of the ATen ops they are made of.
#include <array>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "gc_cpp.h"
#include "stable_aten.h"

namespace gc_cpp {
namespace {

// a.T of a dense 2-D tensor, a view.
Tensor transposed(const Tensor& a) {
  // The transposed view made by the C shim itself: a dispatcher round trip
  // (torch::stable::transpose) costs about as much as a 16 x 16 product. The
  // shim's offset is added to a's own (0: the same first element).
  // The one view not made by an ATen op, which would check its arguments.
  SHARED_BUILD_CHECK(a.dim() == 2, "gc_cpp: transposed() needs a 2-D tensor");
  const std::array<int64_t, 2> sizes{a.size(1), a.size(0)};
  const std::array<int64_t, 2> strides{a.stride(1), a.stride(0)};
  AtenTensorHandle view = nullptr;
  SHARED_BUILD_SHIM_CHECK(aoti_torch__reinterpret_tensor(
      a.get(), 2, sizes.data(), strides.data(), /*storage_offset=*/0, &view));
  return Tensor(view);
}

Tensor product_plus_bias(const Tensor& bias, const Tensor& a, const Tensor& b) {
  // bias + a @ b with the bias added inside the GEMM (beta = 1 on a
  // bias-filled output on CPU; cuBLASLt's bias epilogue on CUDA), no separate
  // pass over the output. aten::addmm takes Scalar beta and alpha, which
  // torch 2.13's stable dispatcher entry point cannot pass; aten::linear with
  // a 2-D input and a bias is that same addmm call, without them.
  return aten::linear(a, transposed(b), bias);
}

// adj as the matrix the products use: dense as it is; sparse COO as CSR
// (MKL/cuSPARSE CSR kernels are several times faster than the COO path);
// sparse CSR as it is.
Tensor adj_for_products(const Tensor& adj) {
  // A coalesced COO matrix converts in O(nnz) (its rows are already sorted);
  // an uncoalesced one is coalesced first, which a COO product would do too.
  if (adj.layout() != Layout::Sparse) {
    return adj;
  }
  return aten::to_sparse_csr(adj, std::nullopt);
}

// adj.T as a sparse CSR matrix, from gc_cpp::_csr_transpose (called through
// the dispatcher, so the CPU kernel or the composite one runs).
Tensor sparse_adj_transposed(const Tensor& adj) {
  const Tensor csr = adj_for_products(adj);
  // gc_cpp::_csr_transpose(Tensor crow_indices, Tensor col_indices,
  //     Tensor values, int num_cols) -> (Tensor, Tensor, Tensor)
  const auto transpose = call_op<3>("gc_cpp::_csr_transpose",
                                    "",
                                    aten::crow_indices(csr),
                                    aten::col_indices(csr),
                                    aten::values(csr),
                                    csr.size(1));
  const Tensor t_values = to_tensor(transpose[2]);
  // dtype and device spelled out: left unset they are torch's defaults, not
  // the values'.
  return aten::sparse_csr_tensor(to_tensor(transpose[0]),
                                 to_tensor(transpose[1]),
                                 t_values,
                                 {csr.size(1), csr.size(0)},
                                 t_values.scalar_type(),
                                 Layout::SparseCsr,
                                 t_values.device(),
                                 std::nullopt);
}

// adj.T @ rhs for a dense adj (a transposed view: BLAS reads it as it is) or
// a sparse one (as a CSR matrix built by gc_cpp::_csr_transpose, a counting
// sort on CPU: multiplying by it is much faster than by adj.t(), a CSC view
// that ATen converts on every call).
Tensor adj_transposed_mm(const Tensor& adj, const Tensor& rhs) {
  return is_sparse_adj(adj) ? aten::mm(sparse_adj_transposed(adj), rhs)
                            : aten::mm(transposed(adj), rhs);
}

// The forward of graph_conv, returning the output and the intermediate the
// chosen order computed: x @ weight (N, F_out) or adj @ x (N, F_in).
std::tuple<Tensor, Tensor> graph_conv_with_intermediate(
    const Tensor& adj,
    const Tensor& x,
    const Tensor& weight,
    const std::optional<Tensor>& bias) {
  const Tensor a = adj_for_products(adj);
  const bool has_bias = bias.has_value() && bias->defined();
  if (x_weight_first(weight.size(0), weight.size(1))) {
    Tensor support = aten::mm(x, weight);
    Tensor out =
        has_bias ? product_plus_bias(*bias, a, support) : aten::mm(a, support);
    return {std::move(out), std::move(support)};
  }
  Tensor aggregated = aten::mm(a, x);
  Tensor out = has_bias ? product_plus_bias(*bias, aggregated, weight)
                        : aten::mm(aggregated, weight);
  return {std::move(out), std::move(aggregated)};
}

std::tuple<Tensor, Tensor> graph_conv_forward_kernel(
    Tensor adj,
    Tensor x,
    Tensor weight,
    std::optional<Tensor> bias) {
  return graph_conv_with_intermediate(adj, x, weight, bias);
}

Tensor graph_conv_kernel(Tensor adj,
                         Tensor x,
                         Tensor weight,
                         std::optional<Tensor> bias) {
  return std::get<0>(graph_conv_with_intermediate(adj, x, weight, bias));
}

// The gradient w.r.t. weight, (adj @ x).T @ grad, in the cheaper order.
Tensor weight_grad_kernel(Tensor adj, Tensor x, Tensor grad) {
  if (x_weight_first(x.size(1), grad.size(1))) {
    return aten::mm(transposed(x), adj_transposed_mm(adj, grad));
  }
  return aten::mm(transposed(aten::mm(adj_for_products(adj), x)), grad);
}

// Any device: stable sort of the column indices. The CPU kernel
// (cpu/csr_transpose_kernel.cpp) does the same in one counting pass.
std::tuple<Tensor, Tensor, Tensor> csr_transpose_kernel(Tensor crow_indices,
                                                        Tensor col_indices,
                                                        Tensor values,
                                                        int64_t num_cols) {
  const bool int32 = col_indices.scalar_type() == ScalarType::Int;
  const Tensor row = torch::stable::select(
      aten::_convert_indices_from_csr_to_coo(
          crow_indices, col_indices, int32, /*transpose=*/false),
      0,
      0);
  const auto [sorted_col, order] =
      aten::sort(col_indices, /*stable=*/true, 0, /*descending=*/false);
  return {aten::_convert_indices_from_coo_to_csr(sorted_col, num_cols, int32),
          aten::index_select(row, 0, order),
          aten::index_select(values, 0, order)};
}

}  // namespace
}  // namespace gc_cpp

STABLE_TORCH_LIBRARY_IMPL(gc_cpp, CompositeExplicitAutograd, m) {
  m.impl("graph_conv", TORCH_BOX(&gc_cpp::graph_conv_kernel));
  m.impl("_graph_conv_forward", TORCH_BOX(&gc_cpp::graph_conv_forward_kernel));
  m.impl("weight_grad", TORCH_BOX(&gc_cpp::weight_grad_kernel));
  m.impl("_csr_transpose", TORCH_BOX(&gc_cpp::csr_transpose_kernel));
}

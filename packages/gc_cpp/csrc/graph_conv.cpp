// The device-independent kernels of gc_cpp, composed of ATen calls: one
// implementation serves CPU and CUDA tensors, dense and sparse, because every
// product goes through the dispatcher to MKL/oneDNN, cuBLAS or cuSPARSE.
//
// Registered as CompositeExplicitAutograd: they run below autograd (whose
// kernels are in autograd.cpp), and torch.compile sees them as opaque ops with
// the Meta kernels of gc_cpp.cpp.
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/_convert_indices_from_coo_to_csr.h>
#include <ATen/ops/_convert_indices_from_csr_to_coo.h>
#include <ATen/ops/addmm.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/sort.h>
#include <ATen/ops/sparse_csr_tensor.h>
#include <torch/library.h>

#include "gc_cpp.h"

namespace gc_cpp {

at::Tensor adj_for_products(const at::Tensor& adj) {
  // A coalesced COO matrix converts in O(nnz) (its rows are already sorted);
  // an uncoalesced one is coalesced first, which a COO product would do too.
  return adj.layout() == at::kSparse ? adj.to_sparse_csr() : adj;
}

at::Tensor sparse_adj_transposed(const at::Tensor& adj) {
  static const auto transpose =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("gc_cpp::_csr_transpose", "")
          .typed<std::tuple<at::Tensor, at::Tensor, at::Tensor>(
              const at::Tensor&,
              const at::Tensor&,
              const at::Tensor&,
              int64_t)>();
  const at::Tensor csr = adj_for_products(adj);
  auto [crow, row, values] = transpose.call(
      csr.crow_indices(), csr.col_indices(), csr.values(), csr.size(1));
  return at::sparse_csr_tensor(crow,
                               row,
                               values,
                               {csr.size(1), csr.size(0)},
                               values.options().layout(at::kSparseCsr));
}

std::tuple<at::Tensor, at::Tensor> graph_conv_forward_impl(
    const at::Tensor& adj,
    const at::Tensor& x,
    const at::Tensor& weight,
    const std::optional<at::Tensor>& bias) {
  check_graph_conv_inputs("gc_cpp.graph_conv", adj, x, weight, bias);
  const at::Tensor a = adj_for_products(adj);
  const bool has_bias = bias.has_value() && bias->defined();
  // addmm adds the bias inside the GEMM (beta = 1 on a bias-filled output on
  // CPU; on CUDA ATen can use cuBLASLt's bias epilogue): no separate pass over
  // the output.
  if (x_weight_first(weight.sym_size(0), weight.sym_size(1))) {
    at::Tensor support = at::mm(x, weight);
    at::Tensor out =
        has_bias ? at::addmm(*bias, a, support) : at::mm(a, support);
    return {std::move(out), std::move(support)};
  }
  at::Tensor aggregated = at::mm(a, x);
  at::Tensor out = has_bias ? at::addmm(*bias, aggregated, weight)
                            : at::mm(aggregated, weight);
  return {std::move(out), std::move(aggregated)};
}

at::Tensor adj_transposed_mm(const at::Tensor& adj, const at::Tensor& rhs) {
  return is_sparse_adj(adj) ? at::mm(sparse_adj_transposed(adj), rhs)
                            : at::mm(adj.t(), rhs);
}

namespace {

at::Tensor graph_conv(const at::Tensor& adj,
                      const at::Tensor& x,
                      const at::Tensor& weight,
                      const std::optional<at::Tensor>& bias) {
  return std::get<0>(graph_conv_forward_impl(adj, x, weight, bias));
}

// The seed's gc_backward, (adj @ x).T @ grad, in the cheaper order.
at::Tensor weight_grad(const at::Tensor& adj,
                       const at::Tensor& x,
                       const at::Tensor& grad) {
  check_weight_grad_inputs(adj, x, grad);
  if (x_weight_first(x.sym_size(1), grad.sym_size(1))) {
    return at::mm(x.t(), adj_transposed_mm(adj, grad));
  }
  return at::mm(at::mm(adj_for_products(adj), x).t(), grad);
}

// Any device: stable sort of the column indices (on the meta device, the
// shapes alone). The CPU kernel (cpu/csr_transpose_kernel.cpp) does the same
// in one counting pass.
std::tuple<at::Tensor, at::Tensor, at::Tensor> csr_transpose_composite(
    const at::Tensor& crow_indices,
    const at::Tensor& col_indices,
    const at::Tensor& values,
    int64_t num_cols) {
  check_csr_transpose_inputs(crow_indices, col_indices, values, num_cols);
  if (values.is_meta()) {
    // The fake kernel (the Meta registration below): the shapes, over symbolic
    // sizes, which the index conversions below do not take.
    return {crow_indices.new_empty({num_cols + 1}),
            col_indices.new_empty_symint(col_indices.sym_sizes()),
            values.new_empty_symint(values.sym_sizes())};
  }
  const bool int32 = col_indices.scalar_type() == at::kInt;
  const at::Tensor row =
      at::_convert_indices_from_csr_to_coo(crow_indices, col_indices, int32)
          .select(0, 0);
  auto [sorted_col, order] =
      at::sort(col_indices, /*stable=*/true, /*dim=*/0, /*descending=*/false);
  return {at::_convert_indices_from_coo_to_csr(sorted_col, num_cols, int32),
          row.index_select(0, order),
          values.index_select(0, order)};
}

}  // namespace
}  // namespace gc_cpp

TORCH_LIBRARY_IMPL(gc_cpp, CompositeExplicitAutograd, m) {
  m.impl("graph_conv", &gc_cpp::graph_conv);
  m.impl("_graph_conv_forward", &gc_cpp::graph_conv_forward_impl);
  m.impl("weight_grad", &gc_cpp::weight_grad);
  m.impl("_csr_transpose", &gc_cpp::csr_transpose_composite);
}

TORCH_LIBRARY_IMPL(gc_cpp, Meta, m) {
  m.impl("_csr_transpose", &gc_cpp::csr_transpose_composite);
}

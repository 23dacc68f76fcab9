// gc_cpp's kernels for every device and layout (CompositeExplicitAutograd,
// below the autograd kernel of ops.py): compositions of ATen products called
// through the stable dispatcher, which sends them to MKL/oneDNN, cuBLAS or
// cuSPARSE. ops.py has checked the arguments; a caller that bypasses it gets
// the errors of the ATen ops they are made of.
#include <utility>
#include <vector>

#include "gc_cpp.h"

namespace gc_cpp {

Tensor product(const Tensor& a, const Tensor& b) {
  auto stack = make_stack(a, b);
  call_aten("aten::mm", "", stack);
  return to_tensor(stack[0]);
}

Tensor product_plus_bias(const Tensor& bias, const Tensor& a, const Tensor& b) {
  // bias + a @ b with the bias added inside the GEMM (beta = 1 on a
  // bias-filled output on CPU; cuBLASLt's bias epilogue on CUDA), no separate
  // pass over the output. aten::addmm takes Scalar beta and alpha, which
  // torch 2.13's stable dispatcher entry point cannot pass; aten::linear with
  // a 2-D input and a bias is that same addmm call, without them.
  auto stack = make_stack(a, transposed(b), std::optional<Tensor>(bias));
  call_aten("aten::linear", "", stack);
  return to_tensor(stack[0]);
}

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

namespace {

Tensor unary(const char* name, const Tensor& a) {
  auto stack = make_stack(a);
  call_aten(name, "", stack);
  return to_tensor(stack[0]);
}

Tensor gather(const Tensor& self, int64_t dim, const Tensor& index) {
  auto stack = make_stack(self, dim, index);
  call_aten("aten::index_select", "", stack);
  return to_tensor(stack[0]);
}

// adj.T as a sparse CSR matrix, from gc_cpp::_csr_transpose (called through
// the dispatcher, so the CPU kernel or the composite one runs).
Tensor sparse_adj_transposed(const Tensor& adj) {
  const Tensor csr = adj_for_products(adj);
  auto transpose = make_stack(unary("aten::crow_indices", csr),
                              unary("aten::col_indices", csr),
                              unary("aten::values", csr),
                              csr.size(1));
  call_aten("gc_cpp::_csr_transpose", "", transpose);
  const std::vector<int64_t> size{csr.size(1), csr.size(0)};
  const Tensor values = to_tensor(transpose[2]);
  // dtype and device spelled out: left unset they are torch's defaults, not
  // the values'.
  auto stack = make_stack(to_tensor(transpose[0]),
                          to_tensor(transpose[1]),
                          values,
                          size,
                          std::optional<ScalarType>(values.scalar_type()),
                          std::optional<Layout>(Layout::SparseCsr),
                          std::optional<torch::stable::Device>(values.device()),
                          std::optional<bool>());
  call_aten("aten::sparse_csr_tensor", "crow_col_value_size", stack);
  return to_tensor(stack[0]);
}

}  // namespace

Tensor adj_for_products(const Tensor& adj) {
  // A coalesced COO matrix converts in O(nnz) (its rows are already sorted);
  // an uncoalesced one is coalesced first, which a COO product would do too.
  if (adj.layout() != Layout::Sparse) {
    return adj;
  }
  auto stack = make_stack(adj, std::optional<int64_t>());
  call_aten("aten::to_sparse_csr", "", stack);
  return to_tensor(stack[0]);
}

Tensor adj_transposed_mm(const Tensor& adj, const Tensor& rhs) {
  return is_sparse_adj(adj) ? product(sparse_adj_transposed(adj), rhs)
                            : product(transposed(adj), rhs);
}

namespace {

// The forward of graph_conv, returning the output and the intermediate the
// chosen order computed: x @ weight (N, F_out) or adj @ x (N, F_in).
std::tuple<Tensor, Tensor> graph_conv_forward(
    const Tensor& adj,
    const Tensor& x,
    const Tensor& weight,
    const std::optional<Tensor>& bias) {
  const Tensor a = adj_for_products(adj);
  const bool has_bias = bias.has_value() && bias->defined();
  if (x_weight_first(weight.size(0), weight.size(1))) {
    Tensor support = product(x, weight);
    Tensor out =
        has_bias ? product_plus_bias(*bias, a, support) : product(a, support);
    return {std::move(out), std::move(support)};
  }
  Tensor aggregated = product(a, x);
  Tensor out = has_bias ? product_plus_bias(*bias, aggregated, weight)
                        : product(aggregated, weight);
  return {std::move(out), std::move(aggregated)};
}

std::tuple<Tensor, Tensor> graph_conv_forward_kernel(
    Tensor adj,
    Tensor x,
    Tensor weight,
    std::optional<Tensor> bias) {
  return graph_conv_forward(adj, x, weight, bias);
}

Tensor graph_conv(Tensor adj,
                  Tensor x,
                  Tensor weight,
                  std::optional<Tensor> bias) {
  return std::get<0>(graph_conv_forward(adj, x, weight, bias));
}

// The gradient w.r.t. weight, (adj @ x).T @ grad, in the cheaper order.
Tensor weight_grad(Tensor adj, Tensor x, Tensor grad) {
  if (x_weight_first(x.size(1), grad.size(1))) {
    return product(transposed(x), adj_transposed_mm(adj, grad));
  }
  return product(transposed(product(adj_for_products(adj), x)), grad);
}

// Any device: stable sort of the column indices. The CPU kernel
// (cpu/csr_transpose_kernel.cpp) does the same in one counting pass.
std::tuple<Tensor, Tensor, Tensor> csr_transpose_composite(Tensor crow_indices,
                                                           Tensor col_indices,
                                                           Tensor values,
                                                           int64_t num_cols) {
  const bool int32 = col_indices.scalar_type() == ScalarType::Int;
  auto to_coo = make_stack(crow_indices, col_indices, int32, false);
  call_aten("aten::_convert_indices_from_csr_to_coo", "", to_coo);
  const Tensor row = torch::stable::select(to_tensor(to_coo[0]), 0, 0);
  auto sort = make_stack(col_indices,
                         std::optional<bool>(true),
                         int64_t{0},
                         /*descending=*/false);
  call_aten("aten::sort", "stable", sort);
  const Tensor sorted_col = to_tensor(sort[0]);
  const Tensor order = to_tensor(sort[1]);
  auto to_csr = make_stack(sorted_col, num_cols, int32);
  call_aten("aten::_convert_indices_from_coo_to_csr", "", to_csr);
  return {
      to_tensor(to_csr[0]), gather(row, 0, order), gather(values, 0, order)};
}

}  // namespace
}  // namespace gc_cpp

STABLE_TORCH_LIBRARY_IMPL(gc_cpp, CompositeExplicitAutograd, m) {
  m.impl("graph_conv", TORCH_BOX(&gc_cpp::graph_conv));
  m.impl("_graph_conv_forward", TORCH_BOX(&gc_cpp::graph_conv_forward_kernel));
  m.impl("weight_grad", TORCH_BOX(&gc_cpp::weight_grad));
  m.impl("_csr_transpose", TORCH_BOX(&gc_cpp::csr_transpose_composite));
}

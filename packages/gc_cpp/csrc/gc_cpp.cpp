// The gc_cpp operator library: the ops' schemas, their input checks, their
// Meta kernels (the fake kernels, which run the same checks), and the Python
// module.
#include "gc_cpp.h"

#include <c10/util/StringUtil.h>
#include <shared_build/checks.h>
#include <shared_build/python_module.h>
#include <torch/library.h>

#include <string>

SHARED_BUILD_PYTHON_MODULE(
    "gc_cpp: graph convolution adj @ x @ weight + bias as PyTorch custom ops")

namespace gc_cpp {
namespace {

bool is_floating(at::ScalarType dtype) {
  return dtype == at::kFloat || dtype == at::kDouble || dtype == at::kHalf ||
         dtype == at::kBFloat16;
}

// None passed for a Tensor argument arrives as an undefined tensor, which has
// no device, dtype or layout to report.
void check_defined(const char* op, const char* name, const at::Tensor& t) {
  TORCH_CHECK(t.defined(), op, ": ", name, " must be a tensor, got None");
}

using shared_build::check_dense;
using shared_build::check_dim;

}  // namespace

void check_adjacency(const char* op, const at::Tensor& adj) {
  const auto layout = adj.layout();
  TORCH_CHECK(layout == at::kStrided || layout == at::kSparse ||
                  layout == at::kSparseCsr,
              op,
              ": adj must be a dense (strided), sparse COO or sparse CSR "
              "tensor, got layout ",
              layout);
  check_dim(op, "adj", adj, 2, "(N, N)");
  if (layout == at::kSparse) {
    TORCH_CHECK(adj.sparse_dim() == 2,
                op,
                ": a sparse COO adj must have 2 sparse dimensions and no "
                "dense ones, got sparse_dim ",
                adj.sparse_dim(),
                " and dense_dim ",
                adj.dense_dim());
  }
  TORCH_CHECK(adj.sym_size(0) == adj.sym_size(1),
              op,
              ": adj must be square (N, N), got shape ",
              adj.sym_sizes());
}

void check_floating(const char* op, at::ScalarType dtype) {
  TORCH_CHECK(is_floating(dtype),
              op,
              ": dtype must be float16, bfloat16, float32 or float64, got ",
              dtype);
}

void check_graph_conv_inputs(const char* op,
                             const at::Tensor& adj,
                             const at::Tensor& x,
                             const at::Tensor& weight,
                             const std::optional<at::Tensor>& bias) {
  check_defined(op, "adj", adj);
  check_defined(op, "x", x);
  check_defined(op, "weight", weight);
  const bool has_bias = bias.has_value() && bias->defined();
  const auto device = x.device();
  TORCH_CHECK(adj.device() == device && weight.device() == device &&
                  (!has_bias || bias->device() == device),
              op,
              ": adj, x, weight and bias must be on the same device, got adj "
              "on ",
              adj.device(),
              ", x on ",
              x.device(),
              ", weight on ",
              weight.device(),
              has_bias ? c10::str(", bias on ", bias->device()) : "");
  const auto dtype = x.scalar_type();
  TORCH_CHECK(adj.scalar_type() == dtype && weight.scalar_type() == dtype &&
                  (!has_bias || bias->scalar_type() == dtype),
              op,
              ": adj, x, weight and bias must have the same dtype, got adj ",
              adj.scalar_type(),
              ", x ",
              x.scalar_type(),
              ", weight ",
              weight.scalar_type(),
              has_bias ? c10::str(", bias ", bias->scalar_type()) : "");
  check_floating(op, dtype);
  check_dense(op, "x", x);
  check_dense(op, "weight", weight);
  if (has_bias) {
    check_dense(op, "bias", *bias);
  }
  check_adjacency(op, adj);
  check_dim(op, "x", x, 2, "(N, F_in)");
  check_dim(op, "weight", weight, 2, "(F_in, F_out)");
  if (has_bias) {
    check_dim(op, "bias", *bias, 1, "(F_out,)");
  }
  TORCH_CHECK(adj.sym_size(1) == x.sym_size(0),
              op,
              ": adj has ",
              adj.sym_size(1),
              " columns but x has ",
              x.sym_size(0),
              " rows (adj ",
              adj.sym_sizes(),
              ", x ",
              x.sym_sizes(),
              "); x must be (N, F_in) with N = adj.size(1)");
  TORCH_CHECK(weight.sym_size(0) == x.sym_size(1),
              op,
              ": weight has ",
              weight.sym_size(0),
              " rows but x has ",
              x.sym_size(1),
              " columns (x ",
              x.sym_sizes(),
              ", weight ",
              weight.sym_sizes(),
              "); weight must be (F_in, F_out) with F_in = x.size(1)");
  if (has_bias) {
    TORCH_CHECK(bias->sym_size(0) == weight.sym_size(1),
                op,
                ": bias has ",
                bias->sym_size(0),
                " elements but weight has ",
                weight.sym_size(1),
                " columns (weight ",
                weight.sym_sizes(),
                ", bias ",
                bias->sym_sizes(),
                "); bias must be (F_out,) with F_out = weight.size(1)");
  }
}

void check_weight_grad_inputs(const at::Tensor& adj,
                              const at::Tensor& x,
                              const at::Tensor& grad) {
  const char* op = "gc_cpp.backward";
  check_defined(op, "adj", adj);
  check_defined(op, "x", x);
  check_defined(op, "grad", grad);
  const auto device = x.device();
  TORCH_CHECK(adj.device() == device && grad.device() == device,
              op,
              ": adj, x and grad must be on the same device, got adj on ",
              adj.device(),
              ", x on ",
              x.device(),
              ", grad on ",
              grad.device());
  const auto dtype = x.scalar_type();
  TORCH_CHECK(adj.scalar_type() == dtype && grad.scalar_type() == dtype,
              op,
              ": adj, x and grad must have the same dtype, got adj ",
              adj.scalar_type(),
              ", x ",
              x.scalar_type(),
              ", grad ",
              grad.scalar_type());
  check_floating(op, dtype);
  check_dense(op, "x", x);
  check_dense(op, "grad", grad);
  check_adjacency(op, adj);
  check_dim(op, "x", x, 2, "(N, F_in)");
  check_dim(op, "grad", grad, 2, "(N, F_out)");
  TORCH_CHECK(adj.sym_size(1) == x.sym_size(0),
              op,
              ": adj has ",
              adj.sym_size(1),
              " columns but x has ",
              x.sym_size(0),
              " rows (adj ",
              adj.sym_sizes(),
              ", x ",
              x.sym_sizes(),
              "); x must be (N, F_in) with N = adj.size(1)");
  TORCH_CHECK(grad.sym_size(0) == adj.sym_size(0),
              op,
              ": grad has ",
              grad.sym_size(0),
              " rows but adj has ",
              adj.sym_size(0),
              " (adj ",
              adj.sym_sizes(),
              ", grad ",
              grad.sym_sizes(),
              "); grad must be (N, F_out) with N = adj.size(0)");
}

void check_csr_transpose_inputs(const at::Tensor& crow_indices,
                                const at::Tensor& col_indices,
                                const at::Tensor& values,
                                int64_t num_cols) {
  const char* op = "gc_cpp._csr_transpose";
  check_defined(op, "crow_indices", crow_indices);
  check_defined(op, "col_indices", col_indices);
  check_defined(op, "values", values);
  check_dense(op, "crow_indices", crow_indices);
  check_dense(op, "col_indices", col_indices);
  check_dense(op, "values", values);
  TORCH_CHECK(crow_indices.device() == col_indices.device() &&
                  values.device() == col_indices.device(),
              op,
              ": crow_indices, col_indices and values must be on the same "
              "device, got ",
              crow_indices.device(),
              ", ",
              col_indices.device(),
              " and ",
              values.device());
  const auto index_dtype = col_indices.scalar_type();
  TORCH_CHECK((index_dtype == at::kInt || index_dtype == at::kLong) &&
                  crow_indices.scalar_type() == index_dtype,
              op,
              ": crow_indices and col_indices must both be int32 or both "
              "int64, got ",
              crow_indices.scalar_type(),
              " and ",
              index_dtype);
  TORCH_CHECK(is_floating(values.scalar_type()),
              op,
              ": values must be float16, bfloat16, float32 or float64, got ",
              values.scalar_type());
  TORCH_CHECK(
      crow_indices.dim() == 1 && col_indices.dim() == 1 && values.dim() == 1,
      op,
      ": crow_indices, col_indices and values must be 1-D, got "
      "shapes ",
      crow_indices.sym_sizes(),
      ", ",
      col_indices.sym_sizes(),
      " and ",
      values.sym_sizes());
  TORCH_CHECK(crow_indices.sym_numel() >= 1,
              op,
              ": crow_indices must have num_rows + 1 >= 1 elements, got 0");
  TORCH_CHECK(col_indices.sym_numel() == values.sym_numel(),
              op,
              ": col_indices has ",
              col_indices.sym_numel(),
              " elements but values has ",
              values.sym_numel());
  TORCH_CHECK(num_cols >= 0, op, ": num_cols must be >= 0, got ", num_cols);
}

namespace {

// ---- Meta kernels -----------------------------------------------------------
// The fake kernels of torch.compile, torch.export and the meta device: the
// check functions above, the ones the real kernels run (so the same
// sentences), over symbolic sizes, then empty results of the right shapes.
// _csr_transpose's is its composite kernel (graph_conv.cpp), which returns the
// shapes alone for meta tensors.

at::Tensor graph_conv_meta(const at::Tensor& adj,
                           const at::Tensor& x,
                           const at::Tensor& weight,
                           const std::optional<at::Tensor>& bias) {
  check_graph_conv_inputs("gc_cpp.graph_conv", adj, x, weight, bias);
  return x.new_empty_symint({adj.sym_size(0), weight.sym_size(1)});
}

std::tuple<at::Tensor, at::Tensor> graph_conv_forward_meta(
    const at::Tensor& adj,
    const at::Tensor& x,
    const at::Tensor& weight,
    const std::optional<at::Tensor>& bias) {
  at::Tensor out = graph_conv_meta(adj, x, weight, bias);
  // The intermediate of the order the real kernel picks.
  if (x_weight_first(weight.sym_size(0), weight.sym_size(1))) {
    return {out, x.new_empty_symint({x.sym_size(0), weight.sym_size(1)})};
  }
  return {out, x.new_empty_symint({adj.sym_size(0), x.sym_size(1)})};
}

at::Tensor weight_grad_meta(const at::Tensor& adj,
                            const at::Tensor& x,
                            const at::Tensor& grad) {
  check_weight_grad_inputs(adj, x, grad);
  return x.new_empty_symint({x.sym_size(1), grad.sym_size(1)});
}

// The ops that take adj, for each layout of a meta adj: dense (Meta), sparse
// COO (SparseMeta) and sparse CSR (SparseCsrMeta).
void impl_adj_meta_kernels(torch::Library& m) {
  m.impl("graph_conv", &graph_conv_meta);
  m.impl("_graph_conv_forward", &graph_conv_forward_meta);
  m.impl("weight_grad", &weight_grad_meta);
}

}  // namespace
}  // namespace gc_cpp

TORCH_LIBRARY(gc_cpp, m) {
  m.def(
      "graph_conv(Tensor adj, Tensor x, Tensor weight, Tensor? bias=None) -> "
      "Tensor",
      {at::Tag::pt2_compliant_tag});
  // graph_conv's forward as its autograd kernel needs it: the output and the
  // intermediate product the chosen order made (x @ weight or adj @ x), which
  // backward reuses instead of recomputing.
  m.def(
      "_graph_conv_forward(Tensor adj, Tensor x, Tensor weight, Tensor? "
      "bias=None) -> (Tensor, Tensor)",
      {at::Tag::pt2_compliant_tag});
  // The seed's gc_backward: the gradient w.r.t. weight, (adj @ x).T @ grad.
  m.def("weight_grad(Tensor adj, Tensor x, Tensor grad) -> Tensor",
        {at::Tag::pt2_compliant_tag});
  // The transpose of a CSR matrix as CSR (crow, col, values); the row indices
  // of the result are sorted within each row.
  m.def(
      "_csr_transpose(Tensor crow_indices, Tensor col_indices, Tensor values, "
      "int num_cols) -> (Tensor, Tensor, Tensor)",
      {at::Tag::pt2_compliant_tag});
}

TORCH_LIBRARY_IMPL(gc_cpp, Meta, m) {
  gc_cpp::impl_adj_meta_kernels(m);
}
TORCH_LIBRARY_IMPL(gc_cpp, SparseMeta, m) {
  gc_cpp::impl_adj_meta_kernels(m);
}
TORCH_LIBRARY_IMPL(gc_cpp, SparseCsrMeta, m) {
  gc_cpp::impl_adj_meta_kernels(m);
}

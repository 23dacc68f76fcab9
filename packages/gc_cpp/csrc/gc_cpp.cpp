// The gc_cpp operator library: the ops' schemas, their input checks and the
// Python module. The fake kernels (torch.compile, torch.export, the meta
// device) are in ops.py: the stable ABI has no symbolic sizes, so a C++ Meta
// kernel would fail under dynamic shapes; they run the same checks, in the
// same words, and tests/test_gc_cpp.py compares the two sentence by sentence.
#include <shared_build/python_module.h>

#include "gc_cpp.h"

SHARED_BUILD_PYTHON_MODULE(
    "gc_cpp: graph convolution adj @ x @ weight + bias as PyTorch custom ops")

namespace gc_cpp {

const char* layout_name(Layout layout) {
  switch (layout) {
    case Layout::Strided:
      return "Strided";
    case Layout::Sparse:
      return "Sparse";
    case Layout::SparseCsr:
      return "SparseCsr";
    case Layout::SparseCsc:
      return "SparseCsc";
    case Layout::SparseBsr:
      return "SparseBsr";
    case Layout::SparseBsc:
      return "SparseBsc";
    case Layout::Mkldnn:
      return "Mkldnn";
    case Layout::Jagged:
      return "Jagged";
    default:
      return "UNKNOWN_LAYOUT";
  }
}

std::string device_name(const Tensor& t) {
  const torch::stable::Device device = t.device();
  std::string name;
  switch (device.type()) {
    case torch::headeronly::DeviceType::CPU:
      name = "cpu";
      break;
    case torch::headeronly::DeviceType::CUDA:
      name = "cuda";
      break;
    case torch::headeronly::DeviceType::Meta:
      name = "meta";
      break;
    default:
      name = "device type " + std::to_string(static_cast<int>(device.type()));
  }
  if (device.has_index()) {
    name += ":" + std::to_string(device.index());
  }
  return name;
}

std::string shape_string(const Tensor& t) {
  std::ostringstream out;
  out << "[";
  const int64_t dims = t.dim();
  for (int64_t d = 0; d < dims; ++d) {
    out << (d ? ", " : "") << t.size(d);
  }
  out << "]";
  return out.str();
}

namespace {

bool is_floating(ScalarType dtype) {
  return dtype == ScalarType::Float || dtype == ScalarType::Double ||
         dtype == ScalarType::Half || dtype == ScalarType::BFloat16;
}

// None passed for a Tensor argument arrives as an undefined tensor, which has
// no device, dtype or layout to report.
void check_defined(const char* op, const char* name, const Tensor& t) {
  GC_CPP_CHECK(t.defined(), op, ": ", name, " must be a tensor, got None");
}

void check_dense(const char* op, const char* name, const Tensor& t) {
  GC_CPP_CHECK(t.layout() == Layout::Strided,
               op,
               ": ",
               name,
               " must be a dense (strided) tensor, got layout ",
               layout_name(t.layout()));
}

// meaning names the dimensions, e.g. "(N, F_in)".
void check_dim(const char* op,
               const char* name,
               const Tensor& t,
               int64_t dim,
               const char* meaning) {
  GC_CPP_CHECK(t.dim() == dim,
               op,
               ": ",
               name,
               " must be ",
               dim,
               "-D ",
               meaning,
               ", got a ",
               t.dim(),
               "-D tensor of shape ",
               shape_string(t));
}

int64_t coo_sparse_dim(const Tensor& t) {
  auto stack = make_stack(t);
  call_aten("aten::sparse_dim", "", stack);
  return torch::stable::detail::to<int64_t>(stack[0]);
}

int64_t coo_dense_dim(const Tensor& t) {
  auto stack = make_stack(t);
  call_aten("aten::dense_dim", "", stack);
  return torch::stable::detail::to<int64_t>(stack[0]);
}

void check_floating(const char* op, ScalarType dtype) {
  GC_CPP_CHECK(is_floating(dtype),
               op,
               ": dtype must be float16, bfloat16, float32 or float64, got ",
               dtype);
}

void check_adjacency(const char* op, const Tensor& adj) {
  const Layout layout = adj.layout();
  GC_CPP_CHECK(layout == Layout::Strided || layout == Layout::Sparse ||
                   layout == Layout::SparseCsr,
               op,
               ": adj must be a dense (strided), sparse COO or sparse CSR "
               "tensor, got layout ",
               layout_name(layout));
  check_dim(op, "adj", adj, 2, "(N, N)");
  if (layout == Layout::Sparse) {
    const int64_t sparse = coo_sparse_dim(adj);
    GC_CPP_CHECK(sparse == 2,
                 op,
                 ": a sparse COO adj must have 2 sparse dimensions and no "
                 "dense ones, got sparse_dim ",
                 sparse,
                 " and dense_dim ",
                 coo_dense_dim(adj));
  }
  GC_CPP_CHECK(adj.size(0) == adj.size(1),
               op,
               ": adj must be square (N, N), got shape ",
               shape_string(adj));
}

bool same_device(const Tensor& a, const Tensor& b) {
  return a.device() == b.device();
}

}  // namespace

void check_graph_conv_inputs(const char* op,
                             const Tensor& adj,
                             const Tensor& x,
                             const Tensor& weight,
                             const std::optional<Tensor>& bias) {
  check_defined(op, "adj", adj);
  check_defined(op, "x", x);
  check_defined(op, "weight", weight);
  const bool has_bias = bias.has_value() && bias->defined();
  GC_CPP_CHECK(
      same_device(adj, x) && same_device(weight, x) &&
          (!has_bias || same_device(*bias, x)),
      op,
      ": adj, x, weight and bias must be on the same device, got adj on ",
      device_name(adj),
      ", x on ",
      device_name(x),
      ", weight on ",
      device_name(weight),
      has_bias ? ", bias on " + device_name(*bias) : std::string());
  const ScalarType dtype = x.scalar_type();
  GC_CPP_CHECK(adj.scalar_type() == dtype && weight.scalar_type() == dtype &&
                   (!has_bias || bias->scalar_type() == dtype),
               op,
               ": adj, x, weight and bias must have the same dtype, got adj ",
               adj.scalar_type(),
               ", x ",
               x.scalar_type(),
               ", weight ",
               weight.scalar_type(),
               has_bias ? std::string(", bias ") + toString(bias->scalar_type())
                        : std::string());
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
  GC_CPP_CHECK(adj.size(1) == x.size(0),
               op,
               ": adj has ",
               adj.size(1),
               " columns but x has ",
               x.size(0),
               " rows (adj ",
               shape_string(adj),
               ", x ",
               shape_string(x),
               "); x must be (N, F_in) with N = adj.size(1)");
  GC_CPP_CHECK(weight.size(0) == x.size(1),
               op,
               ": weight has ",
               weight.size(0),
               " rows but x has ",
               x.size(1),
               " columns (x ",
               shape_string(x),
               ", weight ",
               shape_string(weight),
               "); weight must be (F_in, F_out) with F_in = x.size(1)");
  if (has_bias) {
    GC_CPP_CHECK(bias->size(0) == weight.size(1),
                 op,
                 ": bias has ",
                 bias->size(0),
                 " elements but weight has ",
                 weight.size(1),
                 " columns (weight ",
                 shape_string(weight),
                 ", bias ",
                 shape_string(*bias),
                 "); bias must be (F_out,) with F_out = weight.size(1)");
  }
}

void check_weight_grad_inputs(const Tensor& adj,
                              const Tensor& x,
                              const Tensor& grad) {
  const char* op = "gc_cpp.backward";
  check_defined(op, "adj", adj);
  check_defined(op, "x", x);
  check_defined(op, "grad", grad);
  GC_CPP_CHECK(same_device(adj, x) && same_device(grad, x),
               op,
               ": adj, x and grad must be on the same device, got adj on ",
               device_name(adj),
               ", x on ",
               device_name(x),
               ", grad on ",
               device_name(grad));
  const ScalarType dtype = x.scalar_type();
  GC_CPP_CHECK(adj.scalar_type() == dtype && grad.scalar_type() == dtype,
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
  GC_CPP_CHECK(adj.size(1) == x.size(0),
               op,
               ": adj has ",
               adj.size(1),
               " columns but x has ",
               x.size(0),
               " rows (adj ",
               shape_string(adj),
               ", x ",
               shape_string(x),
               "); x must be (N, F_in) with N = adj.size(1)");
  GC_CPP_CHECK(grad.size(0) == adj.size(0),
               op,
               ": grad has ",
               grad.size(0),
               " rows but adj has ",
               adj.size(0),
               " (adj ",
               shape_string(adj),
               ", grad ",
               shape_string(grad),
               "); grad must be (N, F_out) with N = adj.size(0)");
}

void check_csr_transpose_inputs(const Tensor& crow_indices,
                                const Tensor& col_indices,
                                const Tensor& values,
                                int64_t num_cols) {
  const char* op = "gc_cpp._csr_transpose";
  check_defined(op, "crow_indices", crow_indices);
  check_defined(op, "col_indices", col_indices);
  check_defined(op, "values", values);
  check_dense(op, "crow_indices", crow_indices);
  check_dense(op, "col_indices", col_indices);
  check_dense(op, "values", values);
  GC_CPP_CHECK(same_device(crow_indices, col_indices) &&
                   same_device(values, col_indices),
               op,
               ": crow_indices, col_indices and values must be on the same "
               "device, got ",
               device_name(crow_indices),
               ", ",
               device_name(col_indices),
               " and ",
               device_name(values));
  const ScalarType index_dtype = col_indices.scalar_type();
  GC_CPP_CHECK(
      (index_dtype == ScalarType::Int || index_dtype == ScalarType::Long) &&
          crow_indices.scalar_type() == index_dtype,
      op,
      ": crow_indices and col_indices must both be int32 or both int64, got ",
      crow_indices.scalar_type(),
      " and ",
      index_dtype);
  GC_CPP_CHECK(is_floating(values.scalar_type()),
               op,
               ": values must be float16, bfloat16, float32 or float64, got ",
               values.scalar_type());
  GC_CPP_CHECK(
      crow_indices.dim() == 1 && col_indices.dim() == 1 && values.dim() == 1,
      op,
      ": crow_indices, col_indices and values must be 1-D, got shapes ",
      shape_string(crow_indices),
      ", ",
      shape_string(col_indices),
      " and ",
      shape_string(values));
  GC_CPP_CHECK(crow_indices.numel() >= 1,
               op,
               ": crow_indices must have num_rows + 1 >= 1 elements, got 0");
  GC_CPP_CHECK(col_indices.numel() == values.numel(),
               op,
               ": col_indices has ",
               col_indices.numel(),
               " elements but values has ",
               values.numel());
  GC_CPP_CHECK(num_cols >= 0, op, ": num_cols must be >= 0, got ", num_cols);
}

}  // namespace gc_cpp

STABLE_TORCH_LIBRARY(gc_cpp, m) {
  using torch::headeronly::Tag;
  m.def(
      "graph_conv(Tensor adj, Tensor x, Tensor weight, Tensor? bias=None) -> "
      "Tensor",
      {Tag::pt2_compliant_tag});
  // graph_conv's forward as its autograd kernel (ops.py) needs it: the output
  // and the intermediate product the chosen order made (x @ weight or
  // adj @ x), which backward reuses instead of recomputing.
  m.def(
      "_graph_conv_forward(Tensor adj, Tensor x, Tensor weight, Tensor? "
      "bias=None) -> (Tensor, Tensor)",
      {Tag::pt2_compliant_tag});
  // The seed's gc_backward: the gradient w.r.t. weight, (adj @ x).T @ grad.
  m.def("weight_grad(Tensor adj, Tensor x, Tensor grad) -> Tensor",
        {Tag::pt2_compliant_tag});
  // The transpose of a CSR matrix as CSR (crow, col, values); the row indices
  // of the result are sorted within each row.
  m.def(
      "_csr_transpose(Tensor crow_indices, Tensor col_indices, Tensor values, "
      "int num_cols) -> (Tensor, Tensor, Tensor)",
      {Tag::pt2_compliant_tag});
}

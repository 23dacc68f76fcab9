// The gc_cpp operator library: the ops' schemas and the Python module. The
// argument checks are in src/gc_cpp/ops.py: the stable ABI has no symbolic
// sizes, so they are written once there, for the fake kernels and for every
// eager call before any C++ runs. The C++ checks only what no fake kernel can,
// the index values and structure cpu/csr_transpose_kernel.cpp reads; the other
// kernels get ATen's checks from the ops they call, so a C++ caller that
// bypasses ops.py gets an error for bad input, never a crash.
#include <shared_build/python_module.h>
#include <shared_build/stable_compat.h>

#include "gc_cpp.h"

SHARED_BUILD_PYTHON_MODULE(
    "gc_cpp: graph convolution adj @ x @ weight + bias as PyTorch custom ops")

STABLE_TORCH_LIBRARY(gc_cpp, m) {
  shared_build::def_pt2_compliant(
      m,
      "graph_conv(Tensor adj, Tensor x, Tensor weight, Tensor? bias=None) -> "
      "Tensor");
  // graph_conv's forward as its autograd kernel (ops.py) needs it: the output
  // and the intermediate product the chosen order made (x @ weight or
  // adj @ x), which backward reuses instead of recomputing.
  shared_build::def_pt2_compliant(
      m,
      "_graph_conv_forward(Tensor adj, Tensor x, Tensor weight, Tensor? "
      "bias=None) -> (Tensor, Tensor)");
  // The gradient w.r.t. weight, (adj @ x).T @ grad (gc_cpp.weight_grad).
  shared_build::def_pt2_compliant(
      m, "weight_grad(Tensor adj, Tensor x, Tensor grad) -> Tensor");
  // The transpose of a CSR matrix as CSR (crow, col, values); the row indices
  // of the result are sorted within each row.
  shared_build::def_pt2_compliant(
      m,
      "_csr_transpose(Tensor crow_indices, Tensor col_indices, Tensor values, "
      "int num_cols) -> (Tensor, Tensor, Tensor)");
}

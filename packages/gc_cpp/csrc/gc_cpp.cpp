// The gc_cpp operator library: the ops' schemas and the Python module.
//
// The ops' user-facing argument checks (None, layout, dim, dtype, device, a
// square adj, sizes against each other) are not here: they are in
// src/gc_cpp/ops.py, one Python function per op that serves the fake kernels
// (the stable ABI has no symbolic sizes, so a C++ Meta kernel would fail under
// dynamic shapes) and every eager call, through the ops' Autograd and
// BackendSelect kernels, before any kernel of this library runs. The C++ keeps
// only what no fake kernel can check, the index values that
// cpu/csr_transpose_kernel.cpp reads, and the invariants its raw loops and
// views rely on. The other kernels only compose ATen ops (mm, linear, sparse
// conversions) through the stable dispatcher, so a C++ caller that bypasses
// ops.py gets ATen's error for bad input, never a crash.
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
  // The seed's gc_backward: the gradient w.r.t. weight, (adj @ x).T @ grad.
  shared_build::def_pt2_compliant(
      m, "weight_grad(Tensor adj, Tensor x, Tensor grad) -> Tensor");
  // The transpose of a CSR matrix as CSR (crow, col, values); the row indices
  // of the result are sorted within each row.
  shared_build::def_pt2_compliant(
      m,
      "_csr_transpose(Tensor crow_indices, Tensor col_indices, Tensor values, "
      "int num_cols) -> (Tensor, Tensor, Tensor)");
}

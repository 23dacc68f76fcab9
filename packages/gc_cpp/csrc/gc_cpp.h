// Declarations shared by the registration, the composite kernels and the CPU
// kernel of gc_cpp. Stable ABI: only torch/csrc/stable, torch/headeronly and
// the C shim, so one build loads under every torch from 2.13 on.
#pragma once

#include <shared_build/stable_checks.h>
#include <shared_build/stable_compat.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/Layout.h>
#include <torch/headeronly/core/ScalarType.h>

#include <cstdint>

namespace gc_cpp {

using torch::headeronly::Layout;
using torch::headeronly::ScalarType;
using torch::stable::Tensor;

// The one cost rule of the package, for forward and backward alike: with
// F_out < F_in, adj @ (x @ weight) (the N x N product runs over F_out
// columns), else (adj @ x) @ weight (it runs over F_in). Both orders share the
// N * F_in * F_out product; the adjacency product costs N^2 (or nnz) times the
// narrower feature width. ops.py's autograd applies the same rule.
inline bool x_weight_first(int64_t f_in, int64_t f_out) {
  return f_out < f_in;
}

inline bool is_sparse_adj(const Tensor& adj) {
  const Layout layout = adj.layout();
  return layout == Layout::Sparse || layout == Layout::SparseCsr;
}

// The sentences of the data-dependent checks, which no fake kernel can make.
using shared_build::fail;

}  // namespace gc_cpp

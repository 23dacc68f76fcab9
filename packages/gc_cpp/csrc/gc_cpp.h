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

#include <array>
#include <cstdint>
#include <optional>
#include <tuple>

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

// Calls an ATen op through the stable dispatcher entry point: `stack` holds
// every argument of the schema (defaults included) and receives the outputs.
template <size_t N>
void call_aten(const char* name,
               const char* overload,
               std::array<StableIValue, N>& stack) {
  SHARED_BUILD_SHIM_CHECK(
      torch_call_dispatcher(name, overload, stack.data(), TORCH_ABI_VERSION));
}

template <typename... Args>
std::array<StableIValue, sizeof...(Args)> make_stack(const Args&... args) {
  return {torch::stable::detail::from(args)...};
}

inline Tensor to_tensor(StableIValue value) {
  return torch::stable::detail::to<Tensor>(value);
}

// The ATen ops gc_cpp needs and the stable ops.h lacks. Named apart from
// ATen's: torch::stable gains ops with ATen's names (index_select came in
// 2.14), which argument-dependent lookup would make ambiguous with ours.
Tensor product(const Tensor& a, const Tensor& b);
Tensor product_plus_bias(const Tensor& bias, const Tensor& a, const Tensor& b);
// a.T of a dense 2-D tensor, a view.
Tensor transposed(const Tensor& a);

// adj as the matrix the products use: dense as it is; sparse COO as CSR
// (MKL/cuSPARSE CSR kernels are several times faster than the COO path);
// sparse CSR as it is.
Tensor adj_for_products(const Tensor& adj);

// adj.T @ rhs for a dense adj (a transposed view: BLAS reads it as it is) or
// a sparse one (as a CSR matrix built by gc_cpp::_csr_transpose, a counting
// sort on CPU: multiplying by it is much faster than by adj.t(), a CSC view
// that ATen converts on every call).
Tensor adj_transposed_mm(const Tensor& adj, const Tensor& rhs);

}  // namespace gc_cpp

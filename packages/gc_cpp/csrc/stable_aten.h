// The ATen ops gc_cpp calls that torch/csrc/stable/ops.h lacks: one typed
// wrapper per op, its schema in a comment, each a call through the stable
// dispatcher entry point (torch_call_dispatcher, which looks the op up by name
// on every call). Delete a wrapper once torch::stable has the op under every
// torch the package supports. Call them qualified (aten::mm): torch::stable
// gains ops with ATen's names (index_select came in 2.14), which an
// unqualified call would also find by argument-dependent lookup.
#pragma once

#include <shared_build/stable_compat.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/Layout.h>
#include <torch/headeronly/core/ScalarType.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <tuple>
#include <vector>

namespace gc_cpp {

// Calls the operator `name`.`overload` with every argument of its schema
// (defaults included); returns the stack, which holds the kOutputs outputs
// first.
template <size_t kOutputs, typename... Args>
std::array<StableIValue, std::max(kOutputs, sizeof...(Args))>
call_op(const char* name, const char* overload, const Args&... args) {
  std::array<StableIValue, std::max(kOutputs, sizeof...(Args))> stack{
      torch::stable::detail::from(args)...};
  SHARED_BUILD_SHIM_CHECK(
      torch_call_dispatcher(name, overload, stack.data(), TORCH_ABI_VERSION));
  return stack;
}

inline torch::stable::Tensor to_tensor(StableIValue value) {
  return torch::stable::detail::to<torch::stable::Tensor>(value);
}

namespace aten {

using torch::stable::Tensor;

// aten::mm(Tensor self, Tensor mat2) -> Tensor
inline Tensor mm(const Tensor& self, const Tensor& mat2) {
  return to_tensor(call_op<1>("aten::mm", "", self, mat2)[0]);
}

// aten::linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor
inline Tensor linear(const Tensor& input,
                     const Tensor& weight,
                     const std::optional<Tensor>& bias) {
  return to_tensor(call_op<1>("aten::linear", "", input, weight, bias)[0]);
}

// aten::index_select(Tensor self, int dim, Tensor index) -> Tensor
inline Tensor index_select(const Tensor& self,
                           int64_t dim,
                           const Tensor& index) {
  return to_tensor(call_op<1>("aten::index_select", "", self, dim, index)[0]);
}

// aten::crow_indices(Tensor(a) self) -> Tensor(a)
inline Tensor crow_indices(const Tensor& self) {
  return to_tensor(call_op<1>("aten::crow_indices", "", self)[0]);
}

// aten::col_indices(Tensor(a) self) -> Tensor(a)
inline Tensor col_indices(const Tensor& self) {
  return to_tensor(call_op<1>("aten::col_indices", "", self)[0]);
}

// aten::values(Tensor(a) self) -> Tensor(a)
inline Tensor values(const Tensor& self) {
  return to_tensor(call_op<1>("aten::values", "", self)[0]);
}

// aten::sparse_csr_tensor.crow_col_value_size(Tensor crow_indices,
//     Tensor col_indices, Tensor values, int[] size, *, ScalarType? dtype=None,
//     Layout? layout=None, Device? device=None, bool? pin_memory=False)
//     -> Tensor
inline Tensor sparse_csr_tensor(
    const Tensor& crow_indices,
    const Tensor& col_indices,
    const Tensor& values,
    const std::vector<int64_t>& size,
    std::optional<torch::headeronly::ScalarType> dtype,
    std::optional<torch::headeronly::Layout> layout,
    std::optional<torch::stable::Device> device,
    std::optional<bool> pin_memory) {
  return to_tensor(call_op<1>("aten::sparse_csr_tensor",
                              "crow_col_value_size",
                              crow_indices,
                              col_indices,
                              values,
                              size,
                              dtype,
                              layout,
                              device,
                              pin_memory)[0]);
}

// aten::to_sparse_csr(Tensor self, int? dense_dim=None) -> Tensor
inline Tensor to_sparse_csr(const Tensor& self,
                            std::optional<int64_t> dense_dim) {
  return to_tensor(call_op<1>("aten::to_sparse_csr", "", self, dense_dim)[0]);
}

// aten::_convert_indices_from_csr_to_coo(Tensor crow_indices,
//     Tensor col_indices, *, bool out_int32=False, bool transpose=False)
//     -> Tensor
inline Tensor _convert_indices_from_csr_to_coo(const Tensor& crow_indices,
                                               const Tensor& col_indices,
                                               bool out_int32,
                                               bool transpose) {
  return to_tensor(call_op<1>("aten::_convert_indices_from_csr_to_coo",
                              "",
                              crow_indices,
                              col_indices,
                              out_int32,
                              transpose)[0]);
}

// aten::_convert_indices_from_coo_to_csr(Tensor self, int size, *,
//     bool out_int32=False) -> Tensor
inline Tensor _convert_indices_from_coo_to_csr(const Tensor& self,
                                               int64_t size,
                                               bool out_int32) {
  return to_tensor(call_op<1>(
      "aten::_convert_indices_from_coo_to_csr", "", self, size, out_int32)[0]);
}

// aten::sort.stable(Tensor self, *, bool? stable, int dim=-1,
//     bool descending=False) -> (Tensor values, Tensor indices)
inline std::tuple<Tensor, Tensor> sort(const Tensor& self,
                                       std::optional<bool> stable,
                                       int64_t dim,
                                       bool descending) {
  const auto stack =
      call_op<2>("aten::sort", "stable", self, stable, dim, descending);
  return {to_tensor(stack[0]), to_tensor(stack[1])};
}

}  // namespace aten
}  // namespace gc_cpp

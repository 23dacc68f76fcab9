// CPU kernel of gc_cpp::_csr_transpose: the transpose of a CSR matrix as CSR,
// by one counting sort over the column indices, O(nnz + num_cols).
//
// graph_conv's backward needs adj.T @ grad. ATen multiplies by adj.t()
// (a CSC view) by converting it with a general sort on every call, which costs
// more than the sparse product itself; see the package README for the figures.
#include <torch/headeronly/util/BFloat16.h>
#include <torch/headeronly/util/Half.h>

#include <algorithm>
#include <tuple>
#include <vector>

#include "gc_cpp.h"

namespace gc_cpp {
namespace {

template <typename index_t, typename value_t>
void csr_transpose_counting_sort(const index_t* crow,
                                 const index_t* col,
                                 const value_t* values,
                                 int64_t num_rows,
                                 int64_t num_cols,
                                 int64_t nnz,
                                 index_t* t_crow,
                                 index_t* t_col,
                                 value_t* t_values) {
  // Validate the structure before any indexed write: a malformed CSR must
  // raise, not write out of bounds.
  SHARED_BUILD_CHECK(
      crow[0] == 0 && static_cast<int64_t>(crow[num_rows]) == nnz,
      "gc_cpp._csr_transpose: crow_indices must start at 0 and end at "
      "nnz = ",
      nnz,
      ", got ",
      static_cast<int64_t>(crow[0]),
      " and ",
      static_cast<int64_t>(crow[num_rows]));
  for (int64_t r = 0; r < num_rows; ++r) {
    SHARED_BUILD_CHECK(
        crow[r] <= crow[r + 1],
        "gc_cpp._csr_transpose: crow_indices must be non-decreasing, "
        "got ",
        static_cast<int64_t>(crow[r]),
        " then ",
        static_cast<int64_t>(crow[r + 1]),
        " at row ",
        r);
  }
  // Count the entries of each column, shifted by one: the prefix sum then
  // gives each transposed row's start.
  std::fill(t_crow, t_crow + num_cols + 1, index_t{0});
  for (int64_t k = 0; k < nnz; ++k) {
    const int64_t c = col[k];
    SHARED_BUILD_CHECK(c >= 0 && c < num_cols,
                       "gc_cpp._csr_transpose: col_indices[",
                       k,
                       "] = ",
                       c,
                       " is out of range for num_cols = ",
                       num_cols);
    ++t_crow[c + 1];
  }
  for (int64_t c = 0; c < num_cols; ++c) {
    t_crow[c + 1] += t_crow[c];
  }
  // Rows are visited in order, so each transposed row receives its column
  // indices (the original rows) already sorted.
  std::vector<index_t> next(t_crow, t_crow + num_cols);
  for (int64_t r = 0; r < num_rows; ++r) {
    for (index_t k = crow[r]; k < crow[r + 1]; ++k) {
      const index_t position = next[col[k]]++;
      t_col[position] = static_cast<index_t>(r);
      t_values[position] = values[k];
    }
  }
}

// The values' dtype, then the kernel: the four floating dtypes the checks of
// ops.py let through.
template <typename index_t>
void dispatch_values(const Tensor& crow,
                     const Tensor& col,
                     const Tensor& values,
                     int64_t num_rows,
                     int64_t num_cols,
                     int64_t nnz,
                     Tensor& t_crow,
                     Tensor& t_col,
                     Tensor& t_values) {
  auto run = [&](auto tag) {
    using value_t = decltype(tag);
    csr_transpose_counting_sort<index_t, value_t>(
        static_cast<const index_t*>(crow.const_data_ptr()),
        static_cast<const index_t*>(col.const_data_ptr()),
        static_cast<const value_t*>(values.const_data_ptr()),
        num_rows,
        num_cols,
        nnz,
        static_cast<index_t*>(t_crow.mutable_data_ptr()),
        static_cast<index_t*>(t_col.mutable_data_ptr()),
        static_cast<value_t*>(t_values.mutable_data_ptr()));
  };
  switch (values.scalar_type()) {
    case ScalarType::Float:
      return run(float{});
    case ScalarType::Double:
      return run(double{});
    case ScalarType::Half:
      return run(torch::headeronly::Half{});
    case ScalarType::BFloat16:
      return run(torch::headeronly::BFloat16{});
    default:
      fail("gc_cpp._csr_transpose: no CPU kernel for values of dtype ",
           values.scalar_type());
  }
}

std::tuple<Tensor, Tensor, Tensor> csr_transpose_kernel(Tensor crow_indices,
                                                        Tensor col_indices,
                                                        Tensor values,
                                                        int64_t num_cols) {
  // ops.py has checked the arguments (gc_cpp.cpp says why not here); these
  // are the invariants the loops below rely on for memory safety, for a
  // caller that bypasses it.
  const ScalarType index_dtype = col_indices.scalar_type();
  SHARED_BUILD_CHECK(
      crow_indices.is_cpu() && col_indices.is_cpu() && values.is_cpu(),
      "gc_cpp._csr_transpose: the CPU kernel needs CPU tensors");
  SHARED_BUILD_CHECK(
      (index_dtype == ScalarType::Int || index_dtype == ScalarType::Long) &&
          crow_indices.scalar_type() == index_dtype,
      "gc_cpp._csr_transpose: indices must be both int32 or both int64");
  SHARED_BUILD_CHECK(crow_indices.numel() >= 1 &&
                         col_indices.numel() == values.numel() && num_cols >= 0,
                     "gc_cpp._csr_transpose: needs num_rows + 1 >= 1 row "
                     "pointers, one value per column index and num_cols >= 0");
  const int64_t num_rows = crow_indices.numel() - 1;
  const int64_t nnz = col_indices.numel();
  const std::vector<int64_t> crow_size{num_cols + 1};
  const std::vector<int64_t> nnz_size{nnz};
  Tensor t_crow = torch::stable::new_empty(crow_indices, crow_size);
  Tensor t_col = torch::stable::new_empty(col_indices, nnz_size);
  Tensor t_values = torch::stable::new_empty(values, nnz_size);
  const Tensor crow = torch::stable::contiguous(crow_indices);
  const Tensor col = torch::stable::contiguous(col_indices);
  const Tensor vals = torch::stable::contiguous(values);
  if (col_indices.scalar_type() == ScalarType::Int) {
    dispatch_values<int32_t>(
        crow, col, vals, num_rows, num_cols, nnz, t_crow, t_col, t_values);
  } else {
    dispatch_values<int64_t>(
        crow, col, vals, num_rows, num_cols, nnz, t_crow, t_col, t_values);
  }
  return {std::move(t_crow), std::move(t_col), std::move(t_values)};
}

}  // namespace
}  // namespace gc_cpp

STABLE_TORCH_LIBRARY_IMPL(gc_cpp, CPU, m) {
  m.impl("_csr_transpose", TORCH_BOX(&gc_cpp::csr_transpose_kernel));
}

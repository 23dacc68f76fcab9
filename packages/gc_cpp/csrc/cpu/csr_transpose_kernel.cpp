// CPU kernel of gc_cpp::_csr_transpose: the transpose of a CSR matrix as CSR,
// by one counting sort over the column indices, O(nnz + num_cols).
//
// graph_conv's backward needs adj.T @ grad. ATen multiplies by adj.t() (a CSC
// view) by converting it with a general sort on every call, which costs more
// than the sparse product itself; see the package README for the figures.
#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <torch/library.h>

#include <algorithm>
#include <tuple>
#include <vector>

#include "gc_cpp.h"

namespace gc_cpp {
namespace {

template <typename index_t, typename value_t>
void transpose_csr(const index_t* crow,
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
  TORCH_CHECK(crow[0] == 0 && static_cast<int64_t>(crow[num_rows]) == nnz,
              "gc_cpp._csr_transpose: crow_indices must start at 0 and end at "
              "nnz = ",
              nnz,
              ", got ",
              static_cast<int64_t>(crow[0]),
              " and ",
              static_cast<int64_t>(crow[num_rows]));
  for (int64_t r = 0; r < num_rows; ++r) {
    TORCH_CHECK(crow[r] <= crow[r + 1],
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
    TORCH_CHECK(c >= 0 && c < num_cols,
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

std::tuple<at::Tensor, at::Tensor, at::Tensor> csr_transpose_cpu(
    const at::Tensor& crow_indices,
    const at::Tensor& col_indices,
    const at::Tensor& values,
    int64_t num_cols) {
  check_csr_transpose_inputs(crow_indices, col_indices, values, num_cols);
  TORCH_CHECK(col_indices.device().is_cpu(),
              "gc_cpp._csr_transpose: the CPU kernel got tensors on ",
              col_indices.device());
  const int64_t num_rows = crow_indices.numel() - 1;
  const int64_t nnz = col_indices.numel();
  at::Tensor t_crow = at::empty({num_cols + 1}, crow_indices.options());
  at::Tensor t_col = at::empty({nnz}, col_indices.options());
  at::Tensor t_values = at::empty({nnz}, values.options());
  const c10::MaybeOwned<at::Tensor> crow = crow_indices.expect_contiguous();
  const c10::MaybeOwned<at::Tensor> col = col_indices.expect_contiguous();
  const c10::MaybeOwned<at::Tensor> vals = values.expect_contiguous();
  AT_DISPATCH_INDEX_TYPES(
      col_indices.scalar_type(), "gc_cpp_csr_transpose_cpu", [&] {
        AT_DISPATCH_FLOATING_TYPES_AND2(
            at::kHalf,
            at::kBFloat16,
            values.scalar_type(),
            "gc_cpp_csr_transpose_cpu",
            [&] {
              transpose_csr<index_t, scalar_t>(
                  crow->const_data_ptr<index_t>(),
                  col->const_data_ptr<index_t>(),
                  vals->const_data_ptr<scalar_t>(),
                  num_rows,
                  num_cols,
                  nnz,
                  t_crow.mutable_data_ptr<index_t>(),
                  t_col.mutable_data_ptr<index_t>(),
                  t_values.mutable_data_ptr<scalar_t>());
            });
      });
  return {std::move(t_crow), std::move(t_col), std::move(t_values)};
}

}  // namespace
}  // namespace gc_cpp

TORCH_LIBRARY_IMPL(gc_cpp, CPU, m) {
  m.impl("_csr_transpose", &gc_cpp::csr_transpose_cpu);
}

// The add_ext operator library: the op's schema, its input checks (one copy,
// run by every kernel) and its Meta kernel, the fake kernel of the meta device
// and of torch.compile.
#include "add_ext.h"

#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <string>

namespace add_ext {

void check_add_inputs(const at::Tensor& x, const at::Tensor& y) {
  // None passed for a Tensor argument arrives as an undefined tensor.
  TORCH_CHECK(x.defined() && y.defined(),
              "add_ext.add: x and y must be tensors, got ",
              x.defined() ? "a tensor" : "None",
              " for x and ",
              y.defined() ? "a tensor" : "None",
              " for y");
  TORCH_CHECK(x.device() == y.device(),
              "add_ext.add: x and y must be on the same device, got x on ",
              x.device(),
              " and y on ",
              y.device());
  TORCH_CHECK(x.scalar_type() == y.scalar_type(),
              "add_ext.add: x and y must have the same dtype, got x ",
              x.scalar_type(),
              " and y ",
              y.scalar_type());
  const auto dtype = x.scalar_type();
  TORCH_CHECK(
      dtype == at::kFloat || dtype == at::kDouble || dtype == at::kHalf ||
          dtype == at::kBFloat16,
      "add_ext.add: dtype must be float16, bfloat16, float32 or float64, "
      "got ",
      dtype);
  // Before the shapes: a nested tensor has none (and its layout may be
  // strided).
  const auto layout = [](const at::Tensor& t) {
    return t.is_nested() ? std::string("nested") : c10::str(t.layout());
  };
  TORCH_CHECK(x.layout() == at::kStrided && y.layout() == at::kStrided &&
                  !x.is_nested() && !y.is_nested(),
              "add_ext.add: x and y must be dense (strided) tensors, got x ",
              layout(x),
              " and y ",
              layout(y));
  TORCH_CHECK(
      x.sym_sizes() == y.sym_sizes(),
      "add_ext.add: x and y must have the same shape (no broadcasting), "
      "got x ",
      x.sym_sizes(),
      " and y ",
      y.sym_sizes());
}

namespace {

// Shapes only, over sym_sizes() so that dynamic shapes stay symbolic.
at::Tensor add_meta(const at::Tensor& x,
                    const at::Tensor& y,
                    double /*alpha*/) {
  check_add_inputs(x, y);
  return at::empty_symint(x.sym_sizes(), x.options());
}

}  // namespace
}  // namespace add_ext

TORCH_LIBRARY(add_ext, m) {
  m.def("add(Tensor x, Tensor y, float alpha=1.0) -> Tensor",
        {at::Tag::pt2_compliant_tag});
}

TORCH_LIBRARY_IMPL(add_ext, Meta, m) {
  m.impl("add", &add_ext::add_meta);
}

// y = x @ weight.T + bias, forward and backward, as a pybind11 module.
//
// setup.py names the extension "aot_linear._C", so torch's BuildExtension
// defines TORCH_EXTENSION_NAME as _C, and PYBIND11_MODULE below creates the
// PyInit__C that `from aot_linear import _C` looks for. Writing the name by
// hand (PYBIND11_MODULE(_C, m)) works until the day someone renames the
// extension; then the import fails with "dynamic module does not define module
// export function".
#include <ATen/core/Tensor.h>
#include <ATen/ops/addmm.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/sum.h>
#include <torch/csrc/utils/pybind.h>

#include <vector>

namespace {

void check_inputs(const at::Tensor& x,
                  const at::Tensor& weight,
                  const at::Tensor& bias) {
  TORCH_CHECK(x.dim() == 2,
              "linear_forward: x must be 2-D (batch, in_features), got ",
              x.dim(),
              "-D");
  TORCH_CHECK(
      weight.dim() == 2,
      "linear_forward: weight must be 2-D (out_features, in_features), got ",
      weight.dim(),
      "-D");
  TORCH_CHECK(bias.dim() == 1,
              "linear_forward: bias must be 1-D (out_features), got ",
              bias.dim(),
              "-D");
  TORCH_CHECK(x.size(1) == weight.size(1),
              "linear_forward: x has ",
              x.size(1),
              " features but weight expects ",
              weight.size(1));
  TORCH_CHECK(bias.size(0) == weight.size(0),
              "linear_forward: bias has ",
              bias.size(0),
              " elements but weight has ",
              weight.size(0),
              " output features");
  TORCH_CHECK(x.scalar_type() == weight.scalar_type() &&
                  x.scalar_type() == bias.scalar_type(),
              "linear_forward: x, weight and bias must have the same dtype, "
              "got ",
              x.scalar_type(),
              ", ",
              weight.scalar_type(),
              " and ",
              bias.scalar_type());
  TORCH_CHECK(
      x.device() == weight.device() && x.device() == bias.device(),
      "linear_forward: x, weight and bias must be on the same device, got ",
      x.device(),
      ", ",
      weight.device(),
      " and ",
      bias.device());
}

at::Tensor linear_forward(const at::Tensor& x,
                          const at::Tensor& weight,
                          const at::Tensor& bias) {
  check_inputs(x, weight, bias);
  return at::addmm(bias, x, weight.t());
}

// Returns [grad_x, grad_weight, grad_bias].
std::vector<at::Tensor> linear_backward(const at::Tensor& grad_y,
                                        const at::Tensor& x,
                                        const at::Tensor& weight) {
  return {at::mm(grad_y, weight), at::mm(grad_y.t(), x), at::sum(grad_y, 0)};
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "y = x @ weight.T + bias, forward and backward";
  m.def("linear_forward",
        &linear_forward,
        "y = x @ weight.T + bias",
        pybind11::arg("x"),
        pybind11::arg("weight"),
        pybind11::arg("bias"));
  m.def("linear_backward",
        &linear_backward,
        "[grad_x, grad_weight, grad_bias] of linear_forward",
        pybind11::arg("grad_y"),
        pybind11::arg("x"),
        pybind11::arg("weight"));
}

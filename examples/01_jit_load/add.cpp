// z = 2x + y and its gradient, bound to Python with pybind11.
//
// Compiled just in time by torch.utils.cpp_extension.load() (see jit_load.py).
// The headers are the ones this file uses, not <torch/extension.h>: that one
// pulls in the whole C++ frontend (torch::nn, torch::optim): a one-line op
// takes 20.9 s to build with it on our 2-core machine, 7.0 s without (see
// examples/README.md).
#include <ATen/core/Tensor.h>
#include <ATen/ops/add.h>
#include <ATen/ops/mul.h>
#include <torch/csrc/utils/pybind.h>

#include <vector>

namespace {

void check_inputs(const at::Tensor& x, const at::Tensor& y) {
  TORCH_CHECK(x.sizes() == y.sizes(),
              "add_forward: x and y must have the same shape, got x ",
              x.sizes(),
              " and y ",
              y.sizes());
  TORCH_CHECK(x.scalar_type() == y.scalar_type(),
              "add_forward: x and y must have the same dtype, got x ",
              x.scalar_type(),
              " and y ",
              y.scalar_type());
  TORCH_CHECK(x.device() == y.device(),
              "add_forward: x and y must be on the same device, got x on ",
              x.device(),
              " and y on ",
              y.device());
}

// z = 2x + y
at::Tensor add_forward(const at::Tensor& x, const at::Tensor& y) {
  check_inputs(x, y);
  return at::add(y, x, /*alpha=*/2);
}

// dz/dx = 2, dz/dy = 1: returns [grad_x, grad_y].
std::vector<at::Tensor> add_backward(const at::Tensor& grad_z) {
  return {at::mul(grad_z, 2), grad_z};
}

}  // namespace

// load() defines TORCH_EXTENSION_NAME as the name it was given, so the module's
// init function always matches the module Python imports.
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("add_forward",
        &add_forward,
        "z = 2x + y",
        pybind11::arg("x"),
        pybind11::arg("y"));
  m.def("add_backward",
        &add_backward,
        "[grad_x, grad_y] of z = 2x + y",
        pybind11::arg("grad_z"));
}

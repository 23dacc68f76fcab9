// The Python module: checks the tensors, hands their memory to the softclip
// library, and binds forward and backward with pybind11.
//
// CMakeLists.txt defines TORCH_EXTENSION_NAME as the module's file name, the
// same thing torch's own build helpers do: PYBIND11_MODULE creates
// PyInit_<name>, and Python refuses a module whose init function does not
// match its file name.
#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <torch/csrc/utils/pybind.h>

#include "softclip.h"

namespace {

void check_input(const char* op,
                 const char* name,
                 const at::Tensor& t,
                 double limit) {
  TORCH_CHECK(t.device().is_cpu(),
              op,
              ": ",
              name,
              " must be a CPU tensor, got one on ",
              t.device());
  TORCH_CHECK(t.scalar_type() == at::kFloat || t.scalar_type() == at::kDouble,
              op,
              ": ",
              name,
              " must be float32 or float64, got ",
              t.scalar_type());
  TORCH_CHECK(limit > 0, op, ": limit must be positive, got ", limit);
}

at::Tensor softclip_forward(const at::Tensor& x, double limit) {
  check_input("softclip_forward", "x", x, limit);
  const at::Tensor xc = x.contiguous();
  at::Tensor y = at::empty_like(xc);
  AT_DISPATCH_FLOATING_TYPES(xc.scalar_type(), "softclip_forward", [&] {
    softclip::forward<scalar_t>(xc.const_data_ptr<scalar_t>(),
                                y.mutable_data_ptr<scalar_t>(),
                                xc.numel(),
                                static_cast<scalar_t>(limit));
  });
  return y;
}

at::Tensor softclip_backward(const at::Tensor& grad_y,
                             const at::Tensor& x,
                             double limit) {
  check_input("softclip_backward", "x", x, limit);
  check_input("softclip_backward", "grad_y", grad_y, limit);
  TORCH_CHECK(
      grad_y.sizes() == x.sizes() && grad_y.scalar_type() == x.scalar_type(),
      "softclip_backward: grad_y must match x, got grad_y ",
      grad_y.sizes(),
      " ",
      grad_y.scalar_type(),
      " and x ",
      x.sizes(),
      " ",
      x.scalar_type());
  const at::Tensor xc = x.contiguous();
  const at::Tensor gc = grad_y.contiguous();
  at::Tensor grad_x = at::empty_like(xc);
  AT_DISPATCH_FLOATING_TYPES(xc.scalar_type(), "softclip_backward", [&] {
    softclip::backward<scalar_t>(gc.const_data_ptr<scalar_t>(),
                                 xc.const_data_ptr<scalar_t>(),
                                 grad_x.mutable_data_ptr<scalar_t>(),
                                 xc.numel(),
                                 static_cast<scalar_t>(limit));
  });
  return grad_x;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "y = limit * tanh(x / limit), built with CMake";
  m.def("softclip_forward",
        &softclip_forward,
        "y = limit * tanh(x / limit)",
        pybind11::arg("x"),
        pybind11::arg("limit"));
  m.def("softclip_backward",
        &softclip_backward,
        "grad_x = grad_y * (1 - tanh(x / limit)^2)",
        pybind11::arg("grad_y"),
        pybind11::arg("x"),
        pybind11::arg("limit"));
}

// Autograd of add_ext::add, in C++ so that a call never enters Python:
// torch.library.register_autograd would route every call, with or without
// grad, through a Python function and back into the dispatcher (the package
// README has the cost per call).
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/mul.h>
#include <shared_build/autograd.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include "add_ext.h"

namespace add_ext {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

at::Tensor add_below_autograd(const at::Tensor& x,
                              const at::Tensor& y,
                              double alpha) {
  static const auto op =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("add_ext::add", "")
          .typed<at::Tensor(const at::Tensor&, const at::Tensor&, double)>();
  return shared_build::call_below_autograd(op, x, y, alpha);
}

class AddFunction : public torch::autograd::Function<AddFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx,
                            const at::Tensor& x,
                            const at::Tensor& y,
                            double alpha) {
    ctx->saved_data["alpha"] = alpha;
    return add_below_autograd(x, y, alpha);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const double alpha = ctx->saved_data["alpha"].toDouble();
    const at::Tensor& grad = grads[0];
    at::Tensor grad_x;
    if (ctx->needs_input_grad(0)) {
      grad_x = at::mul(grad, alpha);
    }
    at::Tensor grad_y;
    if (ctx->needs_input_grad(1)) {
      grad_y = grad;
    }
    return {grad_x, grad_y, at::Tensor()};
  }
};

at::Tensor add_autograd(const at::Tensor& x,
                        const at::Tensor& y,
                        double alpha) {
  // First kernel on the way for CPU and CUDA tensors: check before autograd
  // records the inputs (an undefined tensor would fail there with a message
  // about devices).
  check_add_inputs(x, y);
  // Function::apply builds a node, its context and edge lists on every call,
  // even when nothing requires grad.
  // Without a graph to record (or a tangent to refuse), go straight to the
  // kernel, as ATen's own autograd kernels do.
  if (!shared_build::autograd_needed(x, y)) {
    return add_below_autograd(x, y, alpha);
  }
  return AddFunction::apply(x, y, alpha);
}

}  // namespace
}  // namespace add_ext

TORCH_LIBRARY_IMPL(add_ext, Autograd, m) {
  m.impl("add", &add_ext::add_autograd);
}

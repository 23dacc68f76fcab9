// Autograd of the lltm_cuda ops, in C++ so that a call never enters Python
// (torch.library.register_autograd would route every call through a Python
// function; the package README has the measured cost).
//
// forward is differentiable in all five inputs through new_h and new_cell; its
// other five results (the saved activations the tutorial API returns) are
// marked non-differentiable. Its backward runs the fused pointwise op and then
// only the GEMMs whose gradients are needed: in training, input rarely needs a
// gradient, and old_h does not at the first step.
//
// backward and _backward_pointwise are differentiable once: differentiating
// their results again raises an error instead of returning a wrong zero.
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/zeros_like.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include <tuple>

namespace lltm_cuda {
namespace {

using at::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

using ForwardResult =
    std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor>;
using BackwardResult = std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor>;
using PointwiseResult = std::tuple<Tensor, Tensor, Tensor>;

const auto& forward_op() {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("lltm_cuda::forward", "")
                             .typed<ForwardResult(const Tensor&,
                                                  const Tensor&,
                                                  const Tensor&,
                                                  const Tensor&,
                                                  const Tensor&)>();
  return op;
}

const auto& backward_op() {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("lltm_cuda::backward", "")
                             .typed<BackwardResult(const Tensor&,
                                                   const Tensor&,
                                                   const Tensor&,
                                                   const Tensor&,
                                                   const Tensor&,
                                                   const Tensor&,
                                                   const Tensor&,
                                                   const Tensor&,
                                                   const Tensor&)>();
  return op;
}

const auto& pointwise_op() {
  static const auto op =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("lltm_cuda::_backward_pointwise", "")
          .typed<PointwiseResult(const Tensor&,
                                 const Tensor&,
                                 const Tensor&,
                                 const Tensor&,
                                 const Tensor&,
                                 const Tensor&,
                                 const Tensor&)>();
  return op;
}

class LltmFunction : public torch::autograd::Function<LltmFunction> {
 public:
  static variable_list forward(AutogradContext* ctx,
                               const Tensor& input,
                               const Tensor& weights,
                               const Tensor& bias,
                               const Tensor& old_h,
                               const Tensor& old_cell) {
    at::AutoDispatchBelowADInplaceOrView guard;
    auto [new_h, new_cell, input_gate, output_gate, candidate, X, gates] =
        forward_op().call(input, weights, bias, old_h, old_cell);
    ctx->save_for_backward(
        {new_cell, input_gate, output_gate, candidate, X, gates, weights});
    ctx->mark_non_differentiable(
        {input_gate, output_gate, candidate, X, gates});
    // Only new_h and new_cell carry gradients; the other five would arrive as
    // zero tensors that nobody reads.
    ctx->set_materialize_grads(false);
    return {new_h, new_cell, input_gate, output_gate, candidate, X, gates};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    Tensor grad_h = grads[0];
    Tensor grad_cell = grads[1];
    if (!grad_h.defined() && !grad_cell.defined()) {
      return {Tensor(), Tensor(), Tensor(), Tensor(), Tensor()};
    }
    const variable_list saved = ctx->get_saved_variables();
    const Tensor& new_cell = saved[0];
    const Tensor& input_gate = saved[1];
    const Tensor& output_gate = saved[2];
    const Tensor& candidate = saved[3];
    const Tensor& X = saved[4];
    const Tensor& gates = saved[5];
    const Tensor& weights = saved[6];
    if (!grad_h.defined()) {
      grad_h = at::zeros_like(new_cell);
    }
    if (!grad_cell.defined()) {
      grad_cell = at::zeros_like(new_cell);
    }

    if (at::GradMode::is_enabled()) {
      // create_graph=True: the backward is itself recorded. The backward op's
      // autograd kernel marks every result so that a second backward through
      // it raises (the GEMMs below would be differentiated as if the saved
      // activations were constants: a silent wrong answer).
      auto [d_old_h, d_input, d_weights, d_bias, d_old_cell] =
          backward_op().call(grad_h,
                             grad_cell,
                             new_cell,
                             input_gate,
                             output_gate,
                             candidate,
                             X,
                             gates,
                             weights);
      return {d_input, d_weights, d_bias, d_old_h, d_old_cell};
    }

    auto [d_gates, d_bias, d_old_cell] = [&] {
      at::AutoDispatchBelowADInplaceOrView guard;
      return pointwise_op().call(grad_h,
                                 grad_cell,
                                 new_cell,
                                 input_gate,
                                 output_gate,
                                 candidate,
                                 gates);
    }();
    const bool need_input = ctx->needs_input_grad(0);
    const bool need_old_h = ctx->needs_input_grad(3);
    const int64_t state = new_cell.size(1);
    const int64_t features = X.size(1) - state;
    Tensor d_input;
    Tensor d_old_h;
    if (need_input && need_old_h) {
      // One GEMM for both; the gradients may be views of it.
      const Tensor d_X = at::mm(d_gates, weights);
      d_old_h = d_X.narrow(1, 0, state);
      d_input = d_X.narrow(1, state, features);
    } else if (need_old_h) {
      d_old_h = at::mm(d_gates, weights.narrow(1, 0, state));
    } else if (need_input) {
      d_input = at::mm(d_gates, weights.narrow(1, state, features));
    }
    Tensor d_weights;
    if (ctx->needs_input_grad(1)) {
      d_weights = at::mm(d_gates.t(), X);
    }
    return {d_input,
            d_weights,
            ctx->needs_input_grad(2) ? d_bias : Tensor(),
            d_old_h,
            ctx->needs_input_grad(4) ? d_old_cell : Tensor()};
  }
};

ForwardResult lltm_forward_autograd(const Tensor& input,
                                    const Tensor& weights,
                                    const Tensor& bias,
                                    const Tensor& old_h,
                                    const Tensor& old_cell) {
  variable_list out =
      LltmFunction::apply(input, weights, bias, old_h, old_cell);
  return {out[0], out[1], out[2], out[3], out[4], out[5], out[6]};
}

// The second derivative of the cell is not written: forward's saved
// activations are non-differentiable, so it could not be assembled from them.
// The error is raised only if a second backward actually reaches the node.
[[noreturn]] void refuse_double_backward(const char* op) {
  TORCH_CHECK(false,
              op,
              " is differentiable once: double backward (gradients of the "
              "LLTM gradients, e.g. create_graph=True followed by a second "
              "backward) is not supported");
}

class BackwardFunction : public torch::autograd::Function<BackwardFunction> {
 public:
  static variable_list forward(AutogradContext* /*ctx*/,
                               const Tensor& grad_h,
                               const Tensor& grad_cell,
                               const Tensor& new_cell,
                               const Tensor& input_gate,
                               const Tensor& output_gate,
                               const Tensor& candidate_cell,
                               const Tensor& X,
                               const Tensor& gate_weights,
                               const Tensor& weights) {
    at::AutoDispatchBelowADInplaceOrView guard;
    auto [d_old_h, d_input, d_weights, d_bias, d_old_cell] =
        backward_op().call(grad_h,
                           grad_cell,
                           new_cell,
                           input_gate,
                           output_gate,
                           candidate_cell,
                           X,
                           gate_weights,
                           weights);
    return {d_old_h, d_input, d_weights, d_bias, d_old_cell};
  }

  static variable_list backward(AutogradContext* /*ctx*/,
                                variable_list /*grads*/) {
    refuse_double_backward("lltm_cuda.backward");
  }
};

BackwardResult lltm_backward_autograd(const Tensor& grad_h,
                                      const Tensor& grad_cell,
                                      const Tensor& new_cell,
                                      const Tensor& input_gate,
                                      const Tensor& output_gate,
                                      const Tensor& candidate_cell,
                                      const Tensor& X,
                                      const Tensor& gate_weights,
                                      const Tensor& weights) {
  variable_list out = BackwardFunction::apply(grad_h,
                                              grad_cell,
                                              new_cell,
                                              input_gate,
                                              output_gate,
                                              candidate_cell,
                                              X,
                                              gate_weights,
                                              weights);
  return {out[0], out[1], out[2], out[3], out[4]};
}

class PointwiseFunction : public torch::autograd::Function<PointwiseFunction> {
 public:
  static variable_list forward(AutogradContext* /*ctx*/,
                               const Tensor& grad_h,
                               const Tensor& grad_cell,
                               const Tensor& new_cell,
                               const Tensor& input_gate,
                               const Tensor& output_gate,
                               const Tensor& candidate_cell,
                               const Tensor& gate_weights) {
    at::AutoDispatchBelowADInplaceOrView guard;
    auto [d_gates, d_bias, d_old_cell] = pointwise_op().call(grad_h,
                                                             grad_cell,
                                                             new_cell,
                                                             input_gate,
                                                             output_gate,
                                                             candidate_cell,
                                                             gate_weights);
    return {d_gates, d_bias, d_old_cell};
  }

  static variable_list backward(AutogradContext* /*ctx*/,
                                variable_list /*grads*/) {
    refuse_double_backward("lltm_cuda._backward_pointwise");
  }
};

PointwiseResult lltm_backward_pointwise_autograd(const Tensor& grad_h,
                                                 const Tensor& grad_cell,
                                                 const Tensor& new_cell,
                                                 const Tensor& input_gate,
                                                 const Tensor& output_gate,
                                                 const Tensor& candidate_cell,
                                                 const Tensor& gate_weights) {
  variable_list out = PointwiseFunction::apply(grad_h,
                                               grad_cell,
                                               new_cell,
                                               input_gate,
                                               output_gate,
                                               candidate_cell,
                                               gate_weights);
  return {out[0], out[1], out[2]};
}

}  // namespace
}  // namespace lltm_cuda

TORCH_LIBRARY_IMPL(lltm_cuda, Autograd, m) {
  m.impl("forward", &lltm_cuda::lltm_forward_autograd);
  m.impl("backward", &lltm_cuda::lltm_backward_autograd);
  m.impl("_backward_pointwise", &lltm_cuda::lltm_backward_pointwise_autograd);
}

// Autograd of the LLTM ops, in C++ so that a call never enters Python
// (torch.library.register_autograd would route every call through a Python
// function; the package README has the measured cost): the kernels each package
// registers under Autograd, templates over its Device as in lltm.h.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/elu.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/ops/zeros_like.h>
#include <shared_build/autograd.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "lltm.h"

namespace lltm {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The op's typed handle: Result(const Tensor&, ...), one Tensor per argument.
template <typename Result, size_t... I>
auto typed_op(const char* name, std::index_sequence<I...> /*arguments*/) {
  return c10::Dispatcher::singleton()
      .findSchemaOrThrow(name, "")
      .typed<Result(std::enable_if_t<I >= 0, const Tensor&>...)>();
}

template <typename Device>
const auto& forward_op() {
  static const auto op = typed_op<ForwardResult>(
      schema_name<Device, Op::kForward>(), std::make_index_sequence<5>());
  return op;
}

template <typename Device>
const auto& backward_op() {
  static const auto op = typed_op<BackwardResult>(
      schema_name<Device, Op::kBackward>(), std::make_index_sequence<9>());
  return op;
}

template <typename Device>
const auto& pointwise_op() {
  static const auto op =
      typed_op<PointwiseResult>(schema_name<Device, Op::kBackwardPointwise>(),
                                std::make_index_sequence<4>());
  return op;
}

// A call on a device type this package has no kernels for (a CUDA tensor given
// to lltm_cpu) goes to that device type's kernel, which checks the arguments
// and names the package to use (lltm.h). It goes there from here too,
// because the autograd kernels are the last to see a FakeTensor's device: the
// Meta kernels below them see meta tensors.
template <typename Device, typename TypedOp, typename... Args>
void refuse_other_device(const TypedOp& op,
                         const Tensor& first,
                         const Args&... rest) {
  const c10::Device device = first.device();
  if (device.type() != Device::kDeviceType && !device.is_meta()) {
    op.redispatch(c10::DispatchKeySet(c10::computeDispatchKey(
                      std::nullopt, std::nullopt, device)),
                  first,
                  rest...);
  }
}

template <typename Tuple, size_t... I>
variable_list to_list(Tuple&& results, std::index_sequence<I...> /*unused*/) {
  return {std::get<I>(results)...};
}

template <typename Result, size_t... I>
Result to_tuple(const variable_list& out,
                std::index_sequence<I...> /*unused*/) {
  return {out[I]...};
}

// forward is differentiable in all five inputs through new_h and new_cell; its
// other five results (the saved activations the tutorial API returns) are
// marked non-differentiable. It saves four tensors (new_cell, X, the gates and
// weights): the fused pointwise op of its backward recomputes the activations
// from the gates. Then only the GEMMs whose gradients are needed run: in
// training, input rarely needs a gradient, and old_h does not at the first
// step.
template <typename Device>
class LltmFunction : public torch::autograd::Function<LltmFunction<Device>> {
 public:
  static variable_list forward(AutogradContext* ctx,
                               const Tensor& input,
                               const Tensor& weights,
                               const Tensor& bias,
                               const Tensor& old_h,
                               const Tensor& old_cell) {
    auto [new_h, new_cell, input_gate, output_gate, candidate, X, gates] =
        shared_build::call_below_autograd(
            forward_op<Device>(), input, weights, bias, old_h, old_cell);
    ctx->save_for_backward({new_cell, X, gates, weights});
    ctx->mark_non_differentiable(
        {input_gate, output_gate, candidate, X, gates});
    // Only new_h and new_cell carry gradients; the other five would arrive as
    // zero tensors that nobody reads.
    ctx->set_materialize_grads(false);
    return {new_h, new_cell, input_gate, output_gate, candidate, X, gates};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    // Its GEMMs in the saved tensors' dtype, as forward's, even when backward
    // runs inside torch.autocast.
    const NoAutocast no_autocast(c10::autocast_dispatch_keyset);
    Tensor grad_h = grads[0];
    Tensor grad_cell = grads[1];
    if (!grad_h.defined() && !grad_cell.defined()) {
      return {Tensor(), Tensor(), Tensor(), Tensor(), Tensor()};
    }
    const variable_list saved = ctx->get_saved_variables();
    const Tensor& new_cell = saved[0];
    const Tensor& X = saved[1];
    const Tensor& gates = saved[2];
    const Tensor& weights = saved[3];
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
      // activations were constants: a silent wrong answer). Its signature
      // takes the activations, which it checks and recomputes.
      const std::vector<Tensor> z = gates.chunk(3, 1);
      auto [d_old_h, d_input, d_weights, d_bias, d_old_cell] =
          backward_op<Device>().call(grad_h,
                                     grad_cell,
                                     new_cell,
                                     at::sigmoid(z[0]),
                                     at::sigmoid(z[1]),
                                     at::elu(z[2]),
                                     X,
                                     gates,
                                     weights);
      return {d_input, d_weights, d_bias, d_old_h, d_old_cell};
    }

    auto [d_gates, d_bias, d_old_cell] = shared_build::call_below_autograd(
        pointwise_op<Device>(), grad_h, grad_cell, new_cell, gates);
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

// The second derivative of the cell is not written: forward's saved
// activations are non-differentiable, so it could not be assembled from them.
// The error is raised only if a second backward actually reaches the node.
[[noreturn]] inline void refuse_double_backward(const char* op) {
  TORCH_CHECK(false,
              op,
              " is differentiable once: double backward (gradients of the "
              "LLTM gradients, e.g. create_graph=True followed by a second "
              "backward) is not supported");
}

// backward and _backward_pointwise are differentiable once: their results are
// gradients, which a second backward would differentiate as if the saved
// activations were constants, so it raises instead of returning a wrong zero.
template <typename Device, Op op, auto typed>
class OnceDifferentiable
    : public torch::autograd::Function<OnceDifferentiable<Device, op, typed>> {
 public:
  template <typename... Args>
  static variable_list forward(AutogradContext* /*ctx*/, const Args&... args) {
    auto results = shared_build::call_below_autograd(typed(), args...);
    return to_list(
        results,
        std::make_index_sequence<std::tuple_size_v<decltype(results)>>());
  }

  static variable_list backward(AutogradContext* /*ctx*/,
                                variable_list /*grads*/) {
    refuse_double_backward(op_name<Device, op>());
  }
};

// The Autograd kernel of op: arguments checked for their device, then the op's
// kernel called directly when there is nothing for autograd to record
// (shared_build::autograd_needed; Function::apply would build a graph node,
// variable lists and output wrappers only to drop them, about 20,000
// instructions per call, a twentieth of a forward call at the tutorial's
// shape), through Function otherwise.
template <typename Device,
          auto op,
          typename Function,
          typename Result,
          typename... Args>
Result autograd_kernel(const Args&... args) {
  // An argument passed as None: the op's kernel names it (lltm.h's checks),
  // where the device and gradient tests below would fail on it with no name.
  if (!(args.defined() && ...)) {
    return shared_build::call_below_autograd(op(), args...);
  }
  refuse_other_device<Device>(op(), args...);
  if (!shared_build::autograd_needed(args...)) {
    return shared_build::call_below_autograd(op(), args...);
  }
  return to_tuple<Result>(
      Function::apply(args...),
      std::make_index_sequence<std::tuple_size_v<Result>>());
}

// autograd_kernel's instance for an op of `arguments` tensors.
template <typename Device,
          auto op,
          typename Function,
          typename Result,
          size_t... I>
constexpr auto autograd_kernel_of(std::index_sequence<I...> /*arguments*/) {
  return &autograd_kernel<Device,
                          op,
                          Function,
                          Result,
                          std::enable_if_t<I >= 0, Tensor>...>;
}

// The kernels each package registers under Autograd.
template <typename Device>
constexpr auto forward_autograd =
    autograd_kernel_of<Device,
                       &forward_op<Device>,
                       LltmFunction<Device>,
                       ForwardResult>(std::make_index_sequence<5>());
template <typename Device>
constexpr auto backward_autograd = autograd_kernel_of<
    Device,
    &backward_op<Device>,
    OnceDifferentiable<Device, Op::kBackward, &backward_op<Device>>,
    BackwardResult>(std::make_index_sequence<9>());
template <typename Device>
constexpr auto backward_pointwise_autograd = autograd_kernel_of<
    Device,
    &pointwise_op<Device>,
    OnceDifferentiable<Device, Op::kBackwardPointwise, &pointwise_op<Device>>,
    PointwiseResult>(std::make_index_sequence<4>());

}  // namespace lltm

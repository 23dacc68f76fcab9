// Autograd of gc_cpp::graph_conv, in C++ so that a call never enters Python.
//
// out = adj @ x @ weight + bias. Backward keeps the forward's order, so no
// N x N product ever runs over the wider feature width:
//   x @ weight first (F_out < F_in), S = x @ weight saved:
//     T = adj.T @ grad          (N, F_out), shared by the next two
//     grad_x = T @ weight.T,  grad_weight = x.T @ T,  grad_adj = grad @ S.T
//   adj @ x first, H = adj @ x saved:
//     U = grad @ weight.T       (N, F_in), shared by the next two
//     grad_x = adj.T @ U,  grad_adj = U @ x.T,  grad_weight = H.T @ grad
//   grad_bias = grad.sum(0)
// Transposes are views: BLAS reads them with its transpose flags, no copy.
// Only the gradients asked for are computed, and the intermediate is kept
// only when its gradient is asked for.
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/sum.h>
#include <torch/csrc/autograd/autograd_not_implemented_fallback.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include "gc_cpp.h"

namespace gc_cpp {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

using GraphConvSignature = at::Tensor(const at::Tensor&,
                                      const at::Tensor&,
                                      const at::Tensor&,
                                      const std::optional<at::Tensor>&);
using ForwardSignature =
    std::tuple<at::Tensor, at::Tensor>(const at::Tensor&,
                                       const at::Tensor&,
                                       const at::Tensor&,
                                       const std::optional<at::Tensor>&);

at::Tensor graph_conv_below_autograd(const at::Tensor& adj,
                                     const at::Tensor& x,
                                     const at::Tensor& weight,
                                     const std::optional<at::Tensor>& bias) {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("gc_cpp::graph_conv", "")
                             .typed<GraphConvSignature>();
  at::AutoDispatchBelowADInplaceOrView guard;
  return op.call(adj, x, weight, bias);
}

std::tuple<at::Tensor, at::Tensor> forward_below_autograd(
    const at::Tensor& adj,
    const at::Tensor& x,
    const at::Tensor& weight,
    const std::optional<at::Tensor>& bias) {
  static const auto op =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("gc_cpp::_graph_conv_forward", "")
          .typed<ForwardSignature>();
  at::AutoDispatchBelowADInplaceOrView guard;
  return op.call(adj, x, weight, bias);
}

class GraphConvFunction : public torch::autograd::Function<GraphConvFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx,
                            const at::Tensor& adj,
                            const at::Tensor& x,
                            const at::Tensor& weight,
                            const std::optional<at::Tensor>& bias) {
    TORCH_CHECK(!(is_sparse_adj(adj) && adj.requires_grad()),
                "gc_cpp.graph_conv: the gradient w.r.t. a sparse adj is not "
                "supported (got a ",
                adj.layout(),
                " adj that requires grad); pass adj.detach(), or a dense adj "
                "if you need its gradient");
    auto [out, intermediate] = forward_below_autograd(adj, x, weight, bias);
    // After the call: the checks have run, so the shapes are valid.
    const bool x_first = x_weight_first(weight.sym_size(0), weight.sym_size(1));
    const bool keep = x_first ? ctx->needs_input_grad(0)   // grad_adj uses S
                              : ctx->needs_input_grad(2);  // grad_weight uses H
    // The inputs are saved by reference (no copy); they are also what a
    // double backward recomputes the intermediate from.
    ctx->save_for_backward(
        {adj, x, weight, keep ? intermediate : at::Tensor()});
    ctx->saved_data["x_weight_first"] = x_first;
    // Without a bias there is no fourth input edge to ask about.
    ctx->saved_data["has_bias"] = bias.has_value() && bias->defined();
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor& adj = saved[0];
    const at::Tensor& x = saved[1];
    const at::Tensor& weight = saved[2];
    at::Tensor intermediate = saved[3];
    const bool x_first = ctx->saved_data["x_weight_first"].toBool();
    const bool need_adj = ctx->needs_input_grad(0);
    const bool need_x = ctx->needs_input_grad(1);
    const bool need_weight = ctx->needs_input_grad(2);
    const bool need_bias =
        ctx->saved_data["has_bias"].toBool() && ctx->needs_input_grad(3);
    const at::Tensor& grad = grads[0];

    // Under create_graph the saved intermediate carries no history (the
    // forward ran below autograd); recompute it differentiably so that a
    // double backward sees its dependence on x, weight and adj.
    if (at::GradMode::is_enabled() && (x_first ? need_adj : need_weight)) {
      intermediate =
          x_first ? at::mm(x, weight) : at::mm(adj_for_products(adj), x);
    }

    at::Tensor grad_adj, grad_x, grad_weight, grad_bias;
    if (x_first) {
      if (need_x || need_weight) {
        const at::Tensor t = adj_transposed_mm(adj, grad);
        if (need_x) {
          grad_x = at::mm(t, weight.t());
        }
        if (need_weight) {
          grad_weight = at::mm(x.t(), t);
        }
      }
      if (need_adj) {
        grad_adj = at::mm(grad, intermediate.t());
      }
    } else {
      if (need_x || need_adj) {
        const at::Tensor u = at::mm(grad, weight.t());
        if (need_x) {
          grad_x = adj_transposed_mm(adj, u);
        }
        if (need_adj) {
          grad_adj = at::mm(u, x.t());
        }
      }
      if (need_weight) {
        grad_weight = at::mm(intermediate.t(), grad);
      }
    }
    if (need_bias) {
      grad_bias = grad.sum(0);
    }
    return {grad_adj, grad_x, grad_weight, grad_bias};
  }
};

at::Tensor graph_conv_autograd(const at::Tensor& adj,
                               const at::Tensor& x,
                               const at::Tensor& weight,
                               const std::optional<at::Tensor>& bias) {
  const bool bias_grad =
      bias.has_value() && bias->defined() && bias->requires_grad();
  if (!at::GradMode::is_enabled() ||
      !(adj.requires_grad() || x.requires_grad() || weight.requires_grad() ||
        bias_grad)) {
    // Nothing to record: skip the autograd node and its saved tensors.
    return graph_conv_below_autograd(adj, x, weight, bias);
  }
  return GraphConvFunction::apply(adj, x, weight, bias);
}

}  // namespace
}  // namespace gc_cpp

TORCH_LIBRARY_IMPL(gc_cpp, Autograd, m) {
  m.impl("graph_conv", &gc_cpp::graph_conv_autograd);
  // Not differentiable: the seed's weight gradient and the internals. This
  // kernel runs them below autograd and makes a backward through them raise
  // "derivative for gc_cpp::... is not implemented", instead of the default
  // fallback's warning and silently missing gradients.
  m.impl("_graph_conv_forward",
         torch::autograd::autogradNotImplementedFallback());
  m.impl("weight_grad", torch::autograd::autogradNotImplementedFallback());
  m.impl("_csr_transpose", torch::autograd::autogradNotImplementedFallback());
}

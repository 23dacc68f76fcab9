// Autograd of warp_perspective, in C++: the library has no Python in it, and
// a TorchScript model run from C++ gets the same gradients.
//
// The forward is a linear map of the image (fixed weights per output pixel),
// so the gradient with respect to the image is its adjoint,
// warp_perspective_backward; that in turn is linear in grad_output with the
// forward as its adjoint, which gives double backward for free. Sizes are
// SymInts so that torch.compile and torch.export trace with dynamic shapes.
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include <array>
#include <string>

namespace warp_perspective {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr const char* kNoWarpGrad =
    "warp_perspective: the gradient with respect to warp is not supported; "
    "pass warp.detach() (or a warp that does not require grad)";

// The op a forward runs: the public one (the build's default CPU backend, or
// CUDA), or one CPU backend picked per call.
enum class Forward { kDefault = 0, kBuiltin = 1, kOpenCV = 2 };

using ForwardSignature = at::Tensor(const at::Tensor&,
                                    const at::Tensor&,
                                    at::OptionalSymIntArrayRef,
                                    c10::string_view,
                                    c10::string_view);

c10::TypedOperatorHandle<ForwardSignature> find_forward(const char* name) {
  return c10::Dispatcher::singleton()
      .findSchemaOrThrow(name, "")
      .typed<ForwardSignature>();
}

at::Tensor forward_op(const at::Tensor& image,
                      const at::Tensor& warp,
                      at::OptionalSymIntArrayRef dsize,
                      c10::string_view interpolation,
                      c10::string_view padding_mode,
                      Forward which = Forward::kDefault) {
  static const std::array<c10::TypedOperatorHandle<ForwardSignature>, 3> ops{
      find_forward("warp_perspective::warp_perspective"),
      find_forward("warp_perspective::_warp_perspective_builtin"),
      find_forward("warp_perspective::_warp_perspective_opencv")};
  return ops[static_cast<size_t>(which)].call(
      image, warp, dsize, interpolation, padding_mode);
}

at::Tensor backward_op(const at::Tensor& grad_output,
                       const at::Tensor& warp,
                       c10::SymIntArrayRef image_size,
                       c10::string_view interpolation,
                       c10::string_view padding_mode) {
  static const auto op =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("warp_perspective::warp_perspective_backward", "")
          .typed<at::Tensor(const at::Tensor&,
                            const at::Tensor&,
                            c10::SymIntArrayRef,
                            c10::string_view,
                            c10::string_view)>();
  return op.call(grad_output, warp, image_size, interpolation, padding_mode);
}

void save_modes(AutogradContext* ctx,
                c10::string_view interpolation,
                c10::string_view padding_mode) {
  ctx->saved_data["interpolation"] = std::string(interpolation);
  ctx->saved_data["padding_mode"] = std::string(padding_mode);
}

class WarpFunction : public torch::autograd::Function<WarpFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx,
                            const at::Tensor& image,
                            const at::Tensor& warp,
                            at::OptionalSymIntArrayRef dsize,
                            c10::string_view interpolation,
                            c10::string_view padding_mode,
                            Forward which) {
    ctx->save_for_backward({warp});
    ctx->saved_data["image_size"] = image.sym_sizes();
    save_modes(ctx, interpolation, padding_mode);
    at::AutoDispatchBelowADInplaceOrView guard;
    return forward_op(image, warp, dsize, interpolation, padding_mode, which);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    TORCH_CHECK(!ctx->needs_input_grad(1), kNoWarpGrad);
    at::Tensor grad_image;
    if (ctx->needs_input_grad(0)) {
      const auto image_size = ctx->saved_data["image_size"].toSymIntVector();
      grad_image = backward_op(grads[0],
                               ctx->get_saved_variables()[0],
                               image_size,
                               ctx->saved_data["interpolation"].toStringRef(),
                               ctx->saved_data["padding_mode"].toStringRef());
    }
    return {grad_image,
            at::Tensor(),
            at::Tensor(),
            at::Tensor(),
            at::Tensor(),
            at::Tensor()};
  }
};

class WarpBackwardFunction
    : public torch::autograd::Function<WarpBackwardFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx,
                            const at::Tensor& grad_output,
                            const at::Tensor& warp,
                            c10::SymIntArrayRef image_size,
                            c10::string_view interpolation,
                            c10::string_view padding_mode) {
    ctx->save_for_backward({warp});
    const auto sizes = grad_output.sym_sizes();
    ctx->saved_data["dsize"] =
        std::vector<c10::SymInt>(sizes.end() - 2, sizes.end());
    save_modes(ctx, interpolation, padding_mode);
    at::AutoDispatchBelowADInplaceOrView guard;
    return backward_op(
        grad_output, warp, image_size, interpolation, padding_mode);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    TORCH_CHECK(!ctx->needs_input_grad(1), kNoWarpGrad);
    at::Tensor grad_grad_output;
    if (ctx->needs_input_grad(0)) {
      const auto dsize = ctx->saved_data["dsize"].toSymIntVector();
      grad_grad_output =
          forward_op(grads[0],
                     ctx->get_saved_variables()[0],
                     at::OptionalSymIntArrayRef(dsize),
                     ctx->saved_data["interpolation"].toStringRef(),
                     ctx->saved_data["padding_mode"].toStringRef());
    }
    return {grad_grad_output,
            at::Tensor(),
            at::Tensor(),
            at::Tensor(),
            at::Tensor()};
  }
};

// None for a Tensor argument arrives undefined; autograd's bookkeeping would
// fail on it with "tensor does not have a device", naming no argument.
void check_defined(const at::Tensor& t, const char* name) {
  TORCH_CHECK(t.defined(), "warp_perspective: ", name, " is undefined");
}

// Every CPU backend samples the same positions (OpenCV rounds them to 1/32
// pixel), so all share one gradient: the adjoint of exact sampling.
template <Forward which>
at::Tensor warp_autograd(const at::Tensor& image,
                         const at::Tensor& warp,
                         at::OptionalSymIntArrayRef dsize,
                         c10::string_view interpolation,
                         c10::string_view padding_mode) {
  check_defined(image, "image");
  check_defined(warp, "warp");
  return WarpFunction::apply(
      image, warp, dsize, interpolation, padding_mode, which);
}

at::Tensor warp_backward_autograd(const at::Tensor& grad_output,
                                  const at::Tensor& warp,
                                  c10::SymIntArrayRef image_size,
                                  c10::string_view interpolation,
                                  c10::string_view padding_mode) {
  check_defined(grad_output, "grad_output");
  check_defined(warp, "warp");
  return WarpBackwardFunction::apply(
      grad_output, warp, image_size, interpolation, padding_mode);
}

}  // namespace
}  // namespace warp_perspective

TORCH_LIBRARY_IMPL(warp_perspective, Autograd, m) {
  using warp_perspective::Forward;
  m.impl("warp_perspective",
         &warp_perspective::warp_autograd<Forward::kDefault>);
  m.impl("_warp_perspective_builtin",
         &warp_perspective::warp_autograd<Forward::kBuiltin>);
  m.impl("_warp_perspective_opencv",
         &warp_perspective::warp_autograd<Forward::kOpenCV>);
  m.impl("warp_perspective_backward",
         &warp_perspective::warp_backward_autograd);
}

// The LLTM ops: their schemas, their input checks (one copy, run by the
// device kernels and the Meta kernels alike), the host side of the device
// kernels (GEMMs through ATen around the package's fused pointwise passes) and
// the kernels that point callers on the other device type to the other package.
#include <ATen/ops/addmm.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/zeros.h>
#include <c10/core/SymInt.h>
#include <c10/util/ArrayRef.h>
#include <shared_build/checks.h>
#include <torch/library.h>

#include <initializer_list>
#include <utility>

#include "lltm.h"

namespace LLTM_NS {
namespace {

// The sizes every LLTM tensor is checked against; symbolic under
// torch.compile(dynamic=True), where the Meta kernels run the same checks.
struct LltmSizes {
  c10::SymInt batch;
  c10::SymInt input_features;
  c10::SymInt state_size;
};

using NamedTensor = std::pair<const char*, const at::Tensor*>;

void check_dims(const char* op,
                const char* name,
                const at::Tensor& t,
                int64_t dims,
                const char* meaning) {
  TORCH_CHECK(t.defined(), op, ": ", name, " is an undefined tensor");
  shared_build::check_dense(op, name, t);
  shared_build::check_dim(op, name, t, dims, meaning);
}

// One floating dtype and one device for every argument; the first argument is
// the one the others are compared with.
void check_dtype_and_device(const char* op,
                            std::initializer_list<NamedTensor> tensors) {
  const NamedTensor& first = *tensors.begin();
  const auto dtype = first.second->scalar_type();
  const auto device = first.second->device();
  for (const NamedTensor& t : tensors) {
    TORCH_CHECK(t.second->device() == device,
                op,
                ": all tensors must be on the same device, got ",
                first.first,
                " on ",
                device,
                " and ",
                t.first,
                " on ",
                t.second->device());
    TORCH_CHECK(t.second->scalar_type() == dtype,
                op,
                ": all tensors must have the same dtype, got ",
                first.first,
                " ",
                dtype,
                " and ",
                t.first,
                " ",
                t.second->scalar_type());
  }
  TORCH_CHECK(dtype == at::kFloat || dtype == at::kDouble ||
                  dtype == at::kBFloat16 || dtype == at::kHalf,
              op,
              ": dtype must be float32, float64, bfloat16 or float16, got ",
              dtype);
}

using shared_build::check_shape;

LltmSizes checked_forward_sizes(const at::Tensor& input,
                                const at::Tensor& weights,
                                const at::Tensor& bias,
                                const at::Tensor& old_h,
                                const at::Tensor& old_cell) {
  constexpr const char* op = LLTM_NAME ".forward";
  check_dims(op, "input", input, 2, "(batch, input_features)");
  check_dims(op,
             "weights",
             weights,
             2,
             "(3 * state_size, input_features + state_size)");
  check_dims(op, "bias", bias, 1, "(3 * state_size,)");
  check_dims(op, "old_h", old_h, 2, "(batch, state_size)");
  check_dims(op, "old_cell", old_cell, 2, "(batch, state_size)");
  check_dtype_and_device(op,
                         {{"input", &input},
                          {"weights", &weights},
                          {"bias", &bias},
                          {"old_h", &old_h},
                          {"old_cell", &old_cell}});
  const c10::SymInt batch = input.sym_size(0);
  const c10::SymInt features = input.sym_size(1);
  const c10::SymInt state = old_h.sym_size(1);
  TORCH_CHECK(old_h.sym_size(0) == batch,
              op,
              ": old_h must have the batch size of input, ",
              batch,
              ", got old_h of shape ",
              old_h.sym_sizes(),
              " and input of shape ",
              input.sym_sizes());
  check_shape(
      op, "old_cell", old_cell, old_h.sym_sizes(), "the shape of old_h");
  check_shape(op,
              "weights",
              weights,
              {state * 3, features + state},
              "3 * state_size, input_features + state_size; state_size is "
              "old_h.size(1) and input_features is input.size(1)");
  check_shape(op,
              "bias",
              bias,
              {state * 3},
              "3 * state_size; state_size is old_h.size(1)");
  return {batch, features, state};
}

LltmSizes checked_backward_pointwise_sizes(const char* op,
                                           const at::Tensor& grad_h,
                                           const at::Tensor& grad_cell,
                                           const at::Tensor& new_cell,
                                           const at::Tensor& input_gate,
                                           const at::Tensor& output_gate,
                                           const at::Tensor& candidate_cell,
                                           const at::Tensor& gate_weights) {
  constexpr const char* state_dims = "(batch, state_size)";
  check_dims(op, "grad_h", grad_h, 2, state_dims);
  check_dims(op, "grad_cell", grad_cell, 2, state_dims);
  check_dims(op, "new_cell", new_cell, 2, state_dims);
  check_dims(op, "input_gate", input_gate, 2, state_dims);
  check_dims(op, "output_gate", output_gate, 2, state_dims);
  check_dims(op, "candidate_cell", candidate_cell, 2, state_dims);
  check_dims(op, "gate_weights", gate_weights, 2, "(batch, 3 * state_size)");
  check_dtype_and_device(op,
                         {{"grad_h", &grad_h},
                          {"grad_cell", &grad_cell},
                          {"new_cell", &new_cell},
                          {"input_gate", &input_gate},
                          {"output_gate", &output_gate},
                          {"candidate_cell", &candidate_cell},
                          {"gate_weights", &gate_weights}});
  const c10::SymInt batch = grad_h.sym_size(0);
  const c10::SymInt state = grad_h.sym_size(1);
  constexpr const char* like_grad_h = "the shape of grad_h";
  check_shape(op, "grad_cell", grad_cell, grad_h.sym_sizes(), like_grad_h);
  check_shape(op, "new_cell", new_cell, grad_h.sym_sizes(), like_grad_h);
  check_shape(op, "input_gate", input_gate, grad_h.sym_sizes(), like_grad_h);
  check_shape(op, "output_gate", output_gate, grad_h.sym_sizes(), like_grad_h);
  check_shape(
      op, "candidate_cell", candidate_cell, grad_h.sym_sizes(), like_grad_h);
  check_shape(op,
              "gate_weights",
              gate_weights,
              {batch, state * 3},
              "batch, 3 * state_size; from grad_h");
  return {batch, 0, state};
}

LltmSizes checked_backward_sizes(const at::Tensor& grad_h,
                                 const at::Tensor& grad_cell,
                                 const at::Tensor& new_cell,
                                 const at::Tensor& input_gate,
                                 const at::Tensor& output_gate,
                                 const at::Tensor& candidate_cell,
                                 const at::Tensor& X,
                                 const at::Tensor& gate_weights,
                                 const at::Tensor& weights) {
  constexpr const char* op = LLTM_NAME ".backward";
  check_dims(op, "X", X, 2, "(batch, state_size + input_features)");
  check_dims(op,
             "weights",
             weights,
             2,
             "(3 * state_size, state_size + input_features)");
  LltmSizes sizes = checked_backward_pointwise_sizes(op,
                                                     grad_h,
                                                     grad_cell,
                                                     new_cell,
                                                     input_gate,
                                                     output_gate,
                                                     candidate_cell,
                                                     gate_weights);
  check_dtype_and_device(
      op, {{"grad_h", &grad_h}, {"X", &X}, {"weights", &weights}});
  const c10::SymInt& batch = sizes.batch;
  const c10::SymInt& state = sizes.state_size;
  TORCH_CHECK(X.sym_size(0) == batch && X.sym_size(1) >= state,
              op,
              ": X must have shape (batch, state_size + input_features) with "
              "batch ",
              batch,
              " and at least state_size = ",
              state,
              " columns (grad_h has shape ",
              grad_h.sym_sizes(),
              "), got ",
              X.sym_sizes());
  sizes.input_features = X.sym_size(1) - state;
  check_shape(op,
              "weights",
              weights,
              {state * 3, X.sym_size(1)},
              "3 * state_size, X.size(1); state_size is grad_h.size(1)");
  return sizes;
}

using at::Tensor;
using ForwardResult =
    std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor>;
using BackwardResult = std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor>;
using PointwiseResult = std::tuple<Tensor, Tensor, Tensor>;

// Who runs the host code below: the package's device kernels, the Meta kernels
// (shapes only, every size possibly symbolic) or the kernels of the other
// device type, which check the arguments and then say what to do instead
// (without them, the dispatcher's "Could not run 'lltm_cpu::forward' with
// arguments from the 'CUDA' backend").
enum class Run { kDevice, kMeta, kOtherDevice };

// After the argument checks: whether the kernel may go on.
void check_device_type(Run run, const char* op, const Tensor& t) {
  TORCH_CHECK(run != Run::kOtherDevice,
              op,
              ": got tensors on ",
              t.device(),
              "; ",
              kOtherDeviceHint);
  TORCH_CHECK(run != Run::kDevice || t.device().type() == kDeviceType,
              op,
              ": the ",
              c10::DeviceTypeName(kDeviceType),
              " kernel got tensors on ",
              t.device());
}

template <Run run>
ForwardResult forward_kernel(const Tensor& input,
                             const Tensor& weights,
                             const Tensor& bias,
                             const Tensor& old_h,
                             const Tensor& old_cell) {
  const LltmSizes sizes =
      checked_forward_sizes(input, weights, bias, old_h, old_cell);
  check_device_type(run, LLTM_NAME ".forward", input);
  // X is one of the results (backward needs it for d_weights), so the
  // concatenation is not a temporary: one GEMM over it beats two GEMMs over
  // old_h and input into one gates buffer.
  Tensor X = at::cat({old_h, input}, 1);
  Tensor gate_weights = at::addmm(bias, X, weights.t());
  const auto state_like = [&] {
    return at::empty_symint({sizes.batch, sizes.state_size}, input.options());
  };
  Tensor new_h = state_like();
  Tensor new_cell = state_like();
  Tensor input_gate = state_like();
  Tensor output_gate = state_like();
  Tensor candidate = state_like();
  if (run == Run::kDevice && sizes.batch != 0 && sizes.state_size != 0) {
    forward_pointwise({.gate_weights = *gate_weights.expect_contiguous(),
                       .old_cell = *old_cell.expect_contiguous(),
                       .new_h = new_h,
                       .new_cell = new_cell,
                       .input_gate = input_gate,
                       .output_gate = output_gate,
                       .candidate_cell = candidate});
  }
  return {new_h, new_cell, input_gate, output_gate, candidate, X, gate_weights};
}

// d_gates, d_bias and d_old_cell; inputs already checked.
PointwiseResult pointwise_impl(Run run,
                               const LltmSizes& sizes,
                               const Tensor& grad_h,
                               const Tensor& grad_cell,
                               const Tensor& new_cell,
                               const Tensor& input_gate,
                               const Tensor& output_gate,
                               const Tensor& candidate_cell,
                               const Tensor& gate_weights) {
  const c10::SymInt& batch = sizes.batch;
  const c10::SymInt& state = sizes.state_size;
  const auto options = grad_h.options();
  if (run != Run::kDevice || batch == 0 || state == 0) {
    return {at::empty_symint({batch, state * 3}, options),
            run == Run::kMeta ? at::empty_symint({state * 3}, options)
                              : at::zeros_symint({state * 3}, options),
            at::empty_symint({batch, state}, options)};
  }
  // Gradients arriving from a sum or a broadcast are often expanded views;
  // they are copied once here, the rest is used as it is.
  return backward_pointwise(
      {.gate_weights = *gate_weights.expect_contiguous(),
       .new_cell = *new_cell.expect_contiguous(),
       .input_gate = *input_gate.expect_contiguous(),
       .output_gate = *output_gate.expect_contiguous(),
       .candidate_cell = *candidate_cell.expect_contiguous(),
       .grad_h = *grad_h.expect_contiguous(),
       .grad_cell = *grad_cell.expect_contiguous()});
}

template <Run run>
PointwiseResult backward_pointwise_kernel(const Tensor& grad_h,
                                          const Tensor& grad_cell,
                                          const Tensor& new_cell,
                                          const Tensor& input_gate,
                                          const Tensor& output_gate,
                                          const Tensor& candidate_cell,
                                          const Tensor& gate_weights) {
  constexpr const char* op = LLTM_NAME "._backward_pointwise";
  const LltmSizes sizes = checked_backward_pointwise_sizes(op,
                                                           grad_h,
                                                           grad_cell,
                                                           new_cell,
                                                           input_gate,
                                                           output_gate,
                                                           candidate_cell,
                                                           gate_weights);
  check_device_type(run, op, grad_h);
  return pointwise_impl(run,
                        sizes,
                        grad_h,
                        grad_cell,
                        new_cell,
                        input_gate,
                        output_gate,
                        candidate_cell,
                        gate_weights);
}

template <Run run>
BackwardResult backward_kernel(const Tensor& grad_h,
                               const Tensor& grad_cell,
                               const Tensor& new_cell,
                               const Tensor& input_gate,
                               const Tensor& output_gate,
                               const Tensor& candidate_cell,
                               const Tensor& X,
                               const Tensor& gate_weights,
                               const Tensor& weights) {
  const LltmSizes sizes = checked_backward_sizes(grad_h,
                                                 grad_cell,
                                                 new_cell,
                                                 input_gate,
                                                 output_gate,
                                                 candidate_cell,
                                                 X,
                                                 gate_weights,
                                                 weights);
  check_device_type(run, LLTM_NAME ".backward", grad_h);
  auto [d_gates, d_bias, d_old_cell] = pointwise_impl(run,
                                                      sizes,
                                                      grad_h,
                                                      grad_cell,
                                                      new_cell,
                                                      input_gate,
                                                      output_gate,
                                                      candidate_cell,
                                                      gate_weights);
  Tensor d_weights = at::mm(d_gates.t(), X);
  // d_X = d_gates @ weights in one GEMM (two GEMMs on column blocks of
  // weights measured slower at the tutorial's shape), then split into two
  // tensors: returning two slices of d_X would make results that alias each
  // other, which the schema does not declare and torch.compile's buffer reuse
  // would break.
  const Tensor d_X = at::mm(d_gates, weights);
  Tensor d_old_h = d_X.narrow_symint(1, 0, sizes.state_size).clone();
  Tensor d_input =
      d_X.narrow_symint(1, sizes.state_size, sizes.input_features).clone();
  return {d_old_h, d_input, d_weights, d_bias, d_old_cell};
}

// The schemas of forward, backward and _backward_pointwise.
void define_ops(torch::Library& m) {
  m.def(
      "forward(Tensor input, Tensor weights, Tensor bias, Tensor old_h, "
      "Tensor old_cell) -> (Tensor new_h, Tensor new_cell, Tensor input_gate, "
      "Tensor output_gate, Tensor candidate_cell, Tensor X, "
      "Tensor gate_weights)",
      {at::Tag::pt2_compliant_tag});
  m.def(
      "backward(Tensor grad_h, Tensor grad_cell, Tensor new_cell, "
      "Tensor input_gate, Tensor output_gate, Tensor candidate_cell, "
      "Tensor X, Tensor gate_weights, Tensor weights) -> (Tensor d_old_h, "
      "Tensor d_input, Tensor d_weights, Tensor d_bias, Tensor d_old_cell)",
      {at::Tag::pt2_compliant_tag});
  // Internal: the fused pointwise half of backward (no GEMM). The autograd
  // kernel of forward calls it and then only the GEMMs whose gradients are
  // needed (see autograd/lltm_kernel.cpp).
  m.def(
      "_backward_pointwise(Tensor grad_h, Tensor grad_cell, Tensor new_cell, "
      "Tensor input_gate, Tensor output_gate, Tensor candidate_cell, "
      "Tensor gate_weights) -> (Tensor d_gates, Tensor d_bias, "
      "Tensor d_old_cell)",
      {at::Tag::pt2_compliant_tag});
}

// The kernels of kDeviceType: checks, GEMMs through ATen, the pointwise passes.
void impl_device_kernels(torch::Library& m) {
  m.impl("forward", &forward_kernel<Run::kDevice>);
  m.impl("backward", &backward_kernel<Run::kDevice>);
  m.impl("_backward_pointwise", &backward_pointwise_kernel<Run::kDevice>);
}

// For the other device type: the checks, then kOtherDeviceHint.
void impl_other_device_kernels(torch::Library& m) {
  m.impl("forward", &forward_kernel<Run::kOtherDevice>);
  m.impl("backward", &backward_kernel<Run::kOtherDevice>);
  m.impl("_backward_pointwise", &backward_pointwise_kernel<Run::kOtherDevice>);
}

}  // namespace
}  // namespace LLTM_NS

// TORCH_LIBRARY pastes its namespace argument into names unexpanded; one more
// macro level turns LLTM_NS into the package's name first.
#define LLTM_LIBRARY(ns, m) TORCH_LIBRARY(ns, m)
LLTM_LIBRARY(LLTM_NS, m) {
  LLTM_NS::define_ops(m);
}
#undef LLTM_LIBRARY
TORCH_LIBRARY_IMPL(LLTM_NS, LLTM_DEVICE, m) {
  LLTM_NS::impl_device_kernels(m);
}
TORCH_LIBRARY_IMPL(LLTM_NS, LLTM_OTHER_DEVICE, m) {
  LLTM_NS::impl_other_device_kernels(m);
}
TORCH_LIBRARY_IMPL(LLTM_NS, Meta, m) {
  using LLTM_NS::Run;
  m.impl("forward", &LLTM_NS::forward_kernel<Run::kMeta>);
  m.impl("backward", &LLTM_NS::backward_kernel<Run::kMeta>);
  m.impl("_backward_pointwise",
         &LLTM_NS::backward_pointwise_kernel<Run::kMeta>);
}

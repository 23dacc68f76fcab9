// The LLTM ops, one source for lltm_cpu and lltm_cuda: their schemas, their
// input checks (one copy, run by the device kernels and the Meta kernels
// alike), the host side of the device kernels (GEMMs through ATen around the
// package's fused pointwise passes) and the kernels that send callers on
// another device type to the other package.
//
// Everything here is a template over the package's Device: a struct (in the
// package's csrc/<package>.h) with
//   kName             "lltm_cpu": the op namespace, which starts every message;
//   kDeviceType       the device type of the package's kernels;
//   kOtherDeviceHint  what a caller with tensors elsewhere should do instead;
//   forward_pointwise(const Step&)   writes new_h, new_cell and the three
//       activations from gate_weights and old_cell;
//   backward_pointwise(const Step&)  returns (d_gates, d_bias, d_old_cell) from
//       the gradients, new_cell and gate_weights (the activations recomputed).
// The package registers the kernels below in its own TORCH_LIBRARY blocks.
// (Each package's module is loaded RTLD_LOCAL by Python, so lltm:: in one
// never binds to lltm:: in the other.)
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/ops/addmm.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/zeros.h>
#include <c10/core/DeviceType.h>
#include <c10/core/DispatchKeySet.h>
#include <c10/core/SymInt.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <shared_build/checks.h>
#include <torch/library.h>

#include <array>
#include <initializer_list>
#include <string>
#include <tuple>
#include <utility>

namespace lltm {

// One step's tensors as the package's fused passes take them: each
// contiguous, on the package's device, with batch and state_size > 0.
// Every member has a default initializer: each pass names only the tensors it
// uses (designated initializers), which -Wmissing-field-initializers accepts.
struct Step {
  at::Tensor gate_weights{};  // (batch, 3 * state_size), before the activations
  at::Tensor old_cell{};      // the rest (batch, state_size)
  at::Tensor new_h{};
  at::Tensor new_cell{};
  at::Tensor input_gate{};
  at::Tensor output_gate{};
  at::Tensor candidate_cell{};
  at::Tensor grad_h{};
  at::Tensor grad_cell{};
};

// The data of a step's tensors, for the passes.
template <typename scalar_t>
const scalar_t* in(const at::Tensor& t) {
  return t.const_data_ptr<scalar_t>();
}

template <typename scalar_t>
scalar_t* out(const at::Tensor& t) {
  return t.mutable_data_ptr<scalar_t>();
}

enum class Op { kForward, kBackward, kBackwardPointwise };
inline constexpr std::array<const char*, 3> kOpNames = {"forward",
                                                        "backward",
                                                        "_backward_pointwise"};

// "lltm_cpu.forward", which starts each message of the op.
template <typename Device, Op op>
const char* op_name() {
  static const std::string name =
      std::string(Device::kName) + "." + kOpNames[static_cast<size_t>(op)];
  return name.c_str();
}

// "lltm_cpu::forward", the op's name in the dispatcher.
template <typename Device, Op op>
const char* schema_name() {
  static const std::string name =
      std::string(Device::kName) + "::" + kOpNames[static_cast<size_t>(op)];
  return name.c_str();
}

// The sizes every LLTM tensor is checked against; symbolic under
// torch.compile(dynamic=True), where the Meta kernels run the same checks.
struct LltmSizes {
  c10::SymInt batch;
  c10::SymInt input_features;
  c10::SymInt state_size;
};

using NamedTensor = std::pair<const char*, const at::Tensor*>;

inline void check_dims(const char* op,
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
inline void check_dtype_and_device(const char* op,
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

inline LltmSizes checked_forward_sizes(const char* op,
                                       const at::Tensor& input,
                                       const at::Tensor& weights,
                                       const at::Tensor& bias,
                                       const at::Tensor& old_h,
                                       const at::Tensor& old_cell) {
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

inline LltmSizes checked_backward_pointwise_sizes(
    const char* op,
    const at::Tensor& grad_h,
    const at::Tensor& grad_cell,
    const at::Tensor& new_cell,
    const at::Tensor& gate_weights) {
  constexpr const char* state_dims = "(batch, state_size)";
  check_dims(op, "grad_h", grad_h, 2, state_dims);
  check_dims(op, "grad_cell", grad_cell, 2, state_dims);
  check_dims(op, "new_cell", new_cell, 2, state_dims);
  check_dims(op, "gate_weights", gate_weights, 2, "(batch, 3 * state_size)");
  check_dtype_and_device(op,
                         {{"grad_h", &grad_h},
                          {"grad_cell", &grad_cell},
                          {"new_cell", &new_cell},
                          {"gate_weights", &gate_weights}});
  const c10::SymInt batch = grad_h.sym_size(0);
  const c10::SymInt state = grad_h.sym_size(1);
  constexpr const char* like_grad_h = "the shape of grad_h";
  check_shape(op, "grad_cell", grad_cell, grad_h.sym_sizes(), like_grad_h);
  check_shape(op, "new_cell", new_cell, grad_h.sym_sizes(), like_grad_h);
  check_shape(op,
              "gate_weights",
              gate_weights,
              {batch, state * 3},
              "batch, 3 * state_size; from grad_h");
  return {batch, 0, state};
}

inline LltmSizes checked_backward_sizes(const char* op,
                                        const at::Tensor& grad_h,
                                        const at::Tensor& grad_cell,
                                        const at::Tensor& new_cell,
                                        const at::Tensor& input_gate,
                                        const at::Tensor& output_gate,
                                        const at::Tensor& candidate_cell,
                                        const at::Tensor& X,
                                        const at::Tensor& gate_weights,
                                        const at::Tensor& weights) {
  check_dims(op, "X", X, 2, "(batch, state_size + input_features)");
  check_dims(op,
             "weights",
             weights,
             2,
             "(3 * state_size, state_size + input_features)");
  LltmSizes sizes = checked_backward_pointwise_sizes(
      op, grad_h, grad_cell, new_cell, gate_weights);
  // The activations of the tutorial's signature: checked like the rest, then
  // recomputed from gate_weights by the pass.
  for (const auto& [name, t] : {std::pair{"input_gate", &input_gate},
                                std::pair{"output_gate", &output_gate},
                                std::pair{"candidate_cell", &candidate_cell}}) {
    check_dims(op, name, *t, 2, "(batch, state_size)");
    check_dtype_and_device(op, {{"grad_h", &grad_h}, {name, t}});
    check_shape(op, name, *t, grad_h.sym_sizes(), "the shape of grad_h");
  }
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
// (shapes only, every size possibly symbolic) or the kernels of every other
// device type, which check the arguments and then say what to do instead
// (without them, the dispatcher's "Could not run 'lltm_cpu::forward' with
// arguments from the 'CUDA' backend").
enum class Run { kDevice, kMeta, kOtherDevice };

// After the argument checks: whether the kernel may go on.
template <typename Device>
void check_device_type(Run run, const char* op, const Tensor& t) {
  TORCH_CHECK(run != Run::kOtherDevice,
              op,
              ": got tensors on ",
              t.device(),
              "; ",
              Device::kOtherDeviceHint);
  TORCH_CHECK(run != Run::kDevice || t.device().type() == Device::kDeviceType,
              op,
              ": the ",
              c10::DeviceTypeName(Device::kDeviceType),
              " kernel got tensors on ",
              t.device());
}

// Autocast off for the ATen ops a kernel calls: an LLTM op computes in its
// inputs' dtype, as its Meta kernel says (torch.compile and torch.export trace
// that), so under torch.autocast its addmm must not hand the fused pass gates
// of another dtype. Each kernel below holds one for its whole body.
using NoAutocast = c10::impl::ExcludeDispatchKeyGuard;

// The forward kernel: the device's (registered under its key), the Meta
// kernel's shapes (forward_meta) or, for every other device type, the checks
// and the hint (registered under CompositeExplicitAutograd).
template <typename Device, Run run = Run::kDevice>
ForwardResult forward_kernel(const Tensor& input,
                             const Tensor& weights,
                             const Tensor& bias,
                             const Tensor& old_h,
                             const Tensor& old_cell) {
  const char* op = op_name<Device, Op::kForward>();
  const NoAutocast no_autocast(c10::autocast_dispatch_keyset);
  const LltmSizes sizes =
      checked_forward_sizes(op, input, weights, bias, old_h, old_cell);
  check_device_type<Device>(run, op, input);
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
    Device::forward_pointwise(
        {.gate_weights = *gate_weights.expect_contiguous(),
         .old_cell = *old_cell.expect_contiguous(),
         .new_h = new_h,
         .new_cell = new_cell,
         .input_gate = input_gate,
         .output_gate = output_gate,
         .candidate_cell = candidate});
  }
  return {new_h, new_cell, input_gate, output_gate, candidate, X, gate_weights};
}

// d_gates, d_bias and d_old_cell; inputs already checked. The pass recomputes
// the three activations from gate_weights: the autograd kernel saves four
// tensors, not seven.
template <typename Device>
PointwiseResult pointwise_impl(Run run,
                               const LltmSizes& sizes,
                               const Tensor& grad_h,
                               const Tensor& grad_cell,
                               const Tensor& new_cell,
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
  return Device::backward_pointwise(
      {.gate_weights = *gate_weights.expect_contiguous(),
       .new_cell = *new_cell.expect_contiguous(),
       .grad_h = *grad_h.expect_contiguous(),
       .grad_cell = *grad_cell.expect_contiguous()});
}

template <typename Device, Run run = Run::kDevice>
PointwiseResult backward_pointwise_kernel(const Tensor& grad_h,
                                          const Tensor& grad_cell,
                                          const Tensor& new_cell,
                                          const Tensor& gate_weights) {
  const char* op = op_name<Device, Op::kBackwardPointwise>();
  const NoAutocast no_autocast(c10::autocast_dispatch_keyset);
  const LltmSizes sizes = checked_backward_pointwise_sizes(
      op, grad_h, grad_cell, new_cell, gate_weights);
  check_device_type<Device>(run, op, grad_h);
  return pointwise_impl<Device>(
      run, sizes, grad_h, grad_cell, new_cell, gate_weights);
}

template <typename Device, Run run = Run::kDevice>
BackwardResult backward_kernel(const Tensor& grad_h,
                               const Tensor& grad_cell,
                               const Tensor& new_cell,
                               const Tensor& input_gate,
                               const Tensor& output_gate,
                               const Tensor& candidate_cell,
                               const Tensor& X,
                               const Tensor& gate_weights,
                               const Tensor& weights) {
  const char* op = op_name<Device, Op::kBackward>();
  const NoAutocast no_autocast(c10::autocast_dispatch_keyset);
  const LltmSizes sizes = checked_backward_sizes(op,
                                                 grad_h,
                                                 grad_cell,
                                                 new_cell,
                                                 input_gate,
                                                 output_gate,
                                                 candidate_cell,
                                                 X,
                                                 gate_weights,
                                                 weights);
  check_device_type<Device>(run, op, grad_h);
  auto [d_gates, d_bias, d_old_cell] = pointwise_impl<Device>(
      run, sizes, grad_h, grad_cell, new_cell, gate_weights);
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

// The Meta kernels: the same checks, then empty results of the right shapes.
template <typename Device>
constexpr auto forward_meta = &forward_kernel<Device, Run::kMeta>;
template <typename Device>
constexpr auto backward_meta = &backward_kernel<Device, Run::kMeta>;
template <typename Device>
constexpr auto backward_pointwise_meta =
    &backward_pointwise_kernel<Device, Run::kMeta>;

// The schemas of forward, backward and _backward_pointwise.
inline void define_ops(torch::Library& m) {
  m.def(
      "forward(Tensor input, Tensor weights, Tensor bias, Tensor old_h, "
      "Tensor old_cell) -> (Tensor new_h, Tensor new_cell, Tensor "
      "input_gate, "
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
      "Tensor gate_weights) -> (Tensor d_gates, Tensor d_bias, "
      "Tensor d_old_cell)",
      {at::Tag::pt2_compliant_tag});
}

}  // namespace lltm

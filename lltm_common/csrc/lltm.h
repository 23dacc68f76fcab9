// The one source of the LLTM ops, compiled into both lltm_cpu and lltm_cuda.
//
// Each package builds these files with LLTM_NS set to its own name (its C++
// namespace and its op namespace, see its pyproject.toml) and supplies, in its
// own csrc/, the fused pointwise passes of its device and the TORCH_LIBRARY
// blocks that call the registration functions below.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/DeviceType.h>
#include <c10/core/SymInt.h>
#include <torch/library.h>

#include <tuple>

#ifndef LLTM_NS
#error "LLTM_NS (lltm_cpu or lltm_cuda) is set by the package's build"
#endif
#define LLTM_STRINGIFY_(x) #x
#define LLTM_STRINGIFY(x) LLTM_STRINGIFY_(x)
// "lltm_cpu" or "lltm_cuda": the op namespace, which starts every message.
#define LLTM_NAME LLTM_STRINGIFY(LLTM_NS)

namespace LLTM_NS {

// The sizes every LLTM tensor is checked against; symbolic under
// torch.compile(dynamic=True), where the Meta kernels run the same checks.
struct LltmSizes {
  c10::SymInt batch;
  c10::SymInt input_features;
  c10::SymInt state_size;
};

// ---- supplied by the package: its device and its fused pointwise passes ----

// The device type of the package's kernels.
extern const c10::DeviceType kDeviceType;
// What a caller whose tensors are on another device type should do instead.
extern const char* const kOtherDeviceHint;

// new_h, new_cell and the three activations from gate_weights
// (batch, 3 * state_size) and old_cell (batch, state_size). Every tensor is
// contiguous, on kDeviceType, with batch and state_size > 0.
void forward_pointwise(const at::Tensor& gate_weights,
                       const at::Tensor& old_cell,
                       const at::Tensor& new_h,
                       const at::Tensor& new_cell,
                       const at::Tensor& input_gate,
                       const at::Tensor& output_gate,
                       const at::Tensor& candidate_cell);

// (d_gates, d_bias, d_old_cell) of one step, under the same conditions.
std::tuple<at::Tensor, at::Tensor, at::Tensor> backward_pointwise(
    const at::Tensor& grad_h,
    const at::Tensor& grad_cell,
    const at::Tensor& new_cell,
    const at::Tensor& input_gate,
    const at::Tensor& output_gate,
    const at::Tensor& candidate_cell,
    const at::Tensor& gate_weights);

// ---- the checks, written once for the real and the Meta kernels ----

// forward's inputs: 2-D tensors (bias 1-D), one floating dtype, one device,
// batch sizes that agree, weights of shape
// (3 * state_size, input_features + state_size), bias of length
// 3 * state_size. Throws c10::Error (RuntimeError in Python) with a sentence
// naming the argument and its sizes.
LltmSizes check_forward_inputs(const at::Tensor& input,
                               const at::Tensor& weights,
                               const at::Tensor& bias,
                               const at::Tensor& old_h,
                               const at::Tensor& old_cell);

// _backward_pointwise's: the gradients and the saved activations are
// (batch, state_size) and gate_weights is (batch, 3 * state_size).
// input_features is left 0.
LltmSizes check_backward_pointwise_inputs(const char* op,
                                          const at::Tensor& grad_h,
                                          const at::Tensor& grad_cell,
                                          const at::Tensor& new_cell,
                                          const at::Tensor& input_gate,
                                          const at::Tensor& output_gate,
                                          const at::Tensor& candidate_cell,
                                          const at::Tensor& gate_weights);

// backward's, which also takes X (batch, state_size + input_features) and
// weights.
LltmSizes check_backward_inputs(const at::Tensor& grad_h,
                                const at::Tensor& grad_cell,
                                const at::Tensor& new_cell,
                                const at::Tensor& input_gate,
                                const at::Tensor& output_gate,
                                const at::Tensor& candidate_cell,
                                const at::Tensor& X,
                                const at::Tensor& gate_weights,
                                const at::Tensor& weights);

// ---- registration, called from the package's TORCH_LIBRARY blocks ----

// The schemas of forward, backward and _backward_pointwise.
void define_ops(torch::Library& m);
// The kernels of kDeviceType: checks, GEMMs through ATen, the pointwise passes.
void impl_device_kernels(torch::Library& m);
// Shapes only, for the meta device, FakeTensor and torch.compile.
void impl_meta_kernels(torch::Library& m);
// For the other device type: the checks, then kOtherDeviceHint.
void impl_other_device_kernels(torch::Library& m);
// The C++ autograd (lltm_autograd.cpp).
void impl_autograd_kernels(torch::Library& m);

}  // namespace LLTM_NS

// The one source of the LLTM ops, compiled into both lltm_cpu and lltm_cuda.
//
// Each package builds these files with LLTM_NS set to its own name (its C++
// namespace and its op namespace, see its pyproject.toml) and supplies, in its
// own csrc/, the fused pointwise passes of its device and the TORCH_LIBRARY
// blocks that call the registration functions below.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/DeviceType.h>
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

// ---- supplied by the package: its device and its fused pointwise passes ----

// The device type of the package's kernels.
extern const c10::DeviceType kDeviceType;
// What a caller whose tensors are on another device type should do instead.
extern const char* const kOtherDeviceHint;

// One step's tensors as the package's fused passes take them: each
// contiguous, on kDeviceType, with batch and state_size > 0.
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

// Writes new_h, new_cell and the three activations from gate_weights and
// old_cell.
void forward_pointwise(const Step& step);

// (d_gates, d_bias, d_old_cell) from the gradients and the saved activations
// (new_cell, the three activations, gate_weights).
std::tuple<at::Tensor, at::Tensor, at::Tensor> backward_pointwise(
    const Step& step);

// ---- registration, called from the package's TORCH_LIBRARY blocks ----
// (the Meta and Autograd kernels register themselves, in lltm_ops.cpp and
// lltm_autograd.cpp)

// The schemas of forward, backward and _backward_pointwise.
void define_ops(torch::Library& m);
// The kernels of kDeviceType: checks, GEMMs through ATen, the pointwise passes.
void impl_device_kernels(torch::Library& m);
// For the other device type: the checks, then kOtherDeviceHint.
void impl_other_device_kernels(torch::Library& m);

}  // namespace LLTM_NS

// The one source of the LLTM ops, compiled into both lltm_cpu and lltm_cuda.
//
// Each package builds these files with LLTM_NS set to its own name (its C++
// namespace and its op namespace), LLTM_DEVICE to its device (CPU or CUDA) and
// LLTM_OTHER_DEVICE to the other one (see its pyproject.toml), and supplies, in
// its own csrc/, the fused pointwise passes of its device, its module init and
// kOtherDeviceHint. The TORCH_LIBRARY blocks are in lltm.cpp.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/DeviceType.h>
#include <torch/library.h>

#include <tuple>

#if !defined(LLTM_NS) || !defined(LLTM_DEVICE) || !defined(LLTM_OTHER_DEVICE)
#error "LLTM_NS, LLTM_DEVICE and LLTM_OTHER_DEVICE come from the build"
#endif
#define LLTM_STRINGIFY_(x) #x
#define LLTM_STRINGIFY(x) LLTM_STRINGIFY_(x)
// "lltm_cpu" or "lltm_cuda": the op namespace, which starts every message.
#define LLTM_NAME LLTM_STRINGIFY(LLTM_NS)

namespace LLTM_NS {

// The device type of the package's kernels.
constexpr c10::DeviceType kDeviceType = c10::DeviceType::LLTM_DEVICE;

// ---- supplied by the package: its fused pointwise passes and a hint ----

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

}  // namespace LLTM_NS

// Declarations shared by the op registration, the autograd kernels and the CPU
// kernels of lltm_cpu.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace lltm_cpu {

// The sizes every LLTM tensor is checked against.
struct LltmSizes {
  int64_t batch;
  int64_t input_features;
  int64_t state_size;
};

// Checks that every kernel of lltm_cpu::forward runs first: 2-D tensors (bias
// 1-D), one floating dtype, one device, batch sizes that agree, weights of
// shape (3 * state_size, input_features + state_size) and bias of length
// 3 * state_size. Throws c10::Error (RuntimeError in Python) with a sentence
// naming the argument and its sizes.
LltmSizes check_forward_inputs(const at::Tensor& input,
                               const at::Tensor& weights,
                               const at::Tensor& bias,
                               const at::Tensor& old_h,
                               const at::Tensor& old_cell);

// The same for lltm_cpu::_backward_pointwise: the gradients and the saved
// activations are (batch, state_size) and gate_weights is
// (batch, 3 * state_size). input_features is left 0.
LltmSizes check_backward_pointwise_inputs(const char* op,
                                          const at::Tensor& grad_h,
                                          const at::Tensor& grad_cell,
                                          const at::Tensor& new_cell,
                                          const at::Tensor& input_gate,
                                          const at::Tensor& output_gate,
                                          const at::Tensor& candidate_cell,
                                          const at::Tensor& gate_weights);

// The same for lltm_cpu::backward, which also takes X
// (batch, state_size + input_features) and weights.
LltmSizes check_backward_inputs(const at::Tensor& grad_h,
                                const at::Tensor& grad_cell,
                                const at::Tensor& new_cell,
                                const at::Tensor& input_gate,
                                const at::Tensor& output_gate,
                                const at::Tensor& candidate_cell,
                                const at::Tensor& X,
                                const at::Tensor& gate_weights,
                                const at::Tensor& weights);

}  // namespace lltm_cpu

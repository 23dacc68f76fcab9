// Declarations shared by the op's registration and its CPU and CUDA kernels.
#pragma once

#include <ATen/core/Tensor.h>

namespace add_ext {

// Checks that every kernel of add runs first: floating dtype, same dtype, same
// device, same shape. Throws c10::Error (RuntimeError in Python) with a
// sentence naming the offending values.
void check_add_inputs(const at::Tensor& x, const at::Tensor& y);

}  // namespace add_ext

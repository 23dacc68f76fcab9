// softclip: a plain C++ library with no PyTorch in it, standing for the
// existing C++ code a CMake project links into a PyTorch extension.
//
//   forward:  y = limit * tanh(x / limit)      (smooth clipping to +-limit)
//   backward: grad_x = grad_y * (1 - tanh(x / limit)^2)
#pragma once

#include <cstdint>

namespace softclip {

template <typename T>
void forward(const T* x, T* y, std::int64_t n, T limit);

template <typename T>
void backward(const T* grad_y, const T* x, T* grad_x, std::int64_t n, T limit);

}  // namespace softclip

#include "softclip.h"

#include <cmath>

namespace softclip {

template <typename T>
void forward(const T* x, T* y, std::int64_t n, T limit) {
  for (std::int64_t i = 0; i < n; ++i) {
    y[i] = limit * std::tanh(x[i] / limit);
  }
}

template <typename T>
void backward(const T* grad_y, const T* x, T* grad_x, std::int64_t n, T limit) {
  for (std::int64_t i = 0; i < n; ++i) {
    const T t = std::tanh(x[i] / limit);
    grad_x[i] = grad_y[i] * (T(1) - t * t);
  }
}

template void forward<float>(const float*, float*, std::int64_t, float);
template void forward<double>(const double*, double*, std::int64_t, double);
template void backward<float>(const float*,
                              const float*,
                              float*,
                              std::int64_t,
                              float);
template void backward<double>(const double*,
                               const double*,
                               double*,
                               std::int64_t,
                               double);

}  // namespace softclip

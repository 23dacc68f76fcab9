// softclip(x, limit) = limit * tanh(x / limit) and its backward, on the
// LibTorch stable ABI: only torch/csrc/stable, torch/headeronly and the C shim
// are included, so the library imports no C++ symbol of c10, ATen or torch and
// the one wheel loads under every torch from TORCH_TARGET_VERSION (set by
// setup.py) on. Autograd is registered from Python (softclip/__init__.py): C++
// autograd is not part of the stable API.
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/Exception.h>

#include <cmath>
#include <cstdint>

namespace softclip {

using torch::headeronly::ScalarType;
using torch::stable::Tensor;

namespace {

// Elements per task of the parallel loops: below it a call stays on one
// thread, where a handoff would cost more than the arithmetic.
constexpr int64_t kGrain = 1 << 15;

// The checks, once, for the CPU and the Meta kernels: a Python caller gets a
// RuntimeError with the sentence.
void check_input(const Tensor& t, const char* name, double limit) {
  STD_TORCH_CHECK(t.scalar_type() == ScalarType::Float ||
                      t.scalar_type() == ScalarType::Double,
                  "softclip: ",
                  name,
                  " must be float32 or float64");
  STD_TORCH_CHECK(std::isfinite(limit) && limit > 0.0,
                  "softclip: limit must be a positive finite number, got ",
                  limit);
}

void check_grad(const Tensor& grad, const Tensor& x) {
  STD_TORCH_CHECK(grad.scalar_type() == x.scalar_type(),
                  "softclip_backward: grad must have the dtype of x");
  bool same = grad.dim() == x.dim();
  for (int64_t d = 0; same && d < x.dim(); ++d) {
    same = grad.size(d) == x.size(d);
  }
  STD_TORCH_CHECK(same, "softclip_backward: grad must have the shape of x");
}

template <typename T, typename F>
Tensor map(const Tensor& x, F f) {
  const Tensor in = torch::stable::contiguous(x);
  Tensor out = torch::stable::empty_like(in);
  const T* src = in.const_data_ptr<T>();
  T* dst = out.mutable_data_ptr<T>();
  torch::stable::parallel_for(
      0, in.numel(), kGrain, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          dst[i] = f(src[i], i);
        }
      });
  return out;
}

Tensor softclip_cpu(Tensor x, double limit) {
  check_input(x, "x", limit);
  if (x.scalar_type() == ScalarType::Double) {
    return map<double>(
        x, [=](double v, int64_t) { return limit * std::tanh(v / limit); });
  }
  const float l = static_cast<float>(limit);
  return map<float>(x, [=](float v, int64_t) { return l * std::tanh(v / l); });
}

// d/dx limit * tanh(x / limit) = 1 - tanh(x / limit)^2.
template <typename T>
Tensor backward_typed(const Tensor& grad, const Tensor& x, T limit) {
  const Tensor g = torch::stable::contiguous(grad);
  const T* dy = g.const_data_ptr<T>();
  return map<T>(x, [=](T v, int64_t i) {
    const T t = std::tanh(v / limit);
    return dy[i] * (T(1) - t * t);
  });
}

Tensor softclip_backward_cpu(Tensor grad, Tensor x, double limit) {
  check_input(x, "x", limit);
  check_grad(grad, x);
  if (x.scalar_type() == ScalarType::Double) {
    return backward_typed<double>(grad, x, limit);
  }
  return backward_typed<float>(grad, x, static_cast<float>(limit));
}

// Meta: the same checks, an output of the input's shape and dtype, no data.
Tensor softclip_meta(Tensor x, double limit) {
  check_input(x, "x", limit);
  return torch::stable::empty_like(x);
}

Tensor softclip_backward_meta(Tensor grad, Tensor x, double limit) {
  check_input(x, "x", limit);
  check_grad(grad, x);
  return torch::stable::empty_like(x);
}

}  // namespace

STABLE_TORCH_LIBRARY(softclip, m) {
  m.def("softclip(Tensor x, float limit) -> Tensor");
  m.def("softclip_backward(Tensor grad, Tensor x, float limit) -> Tensor");
}

STABLE_TORCH_LIBRARY_IMPL(softclip, CPU, m) {
  m.impl("softclip", TORCH_BOX(&softclip_cpu));
  m.impl("softclip_backward", TORCH_BOX(&softclip_backward_cpu));
}

STABLE_TORCH_LIBRARY_IMPL(softclip, Meta, m) {
  m.impl("softclip", TORCH_BOX(&softclip_meta));
  m.impl("softclip_backward", TORCH_BOX(&softclip_backward_meta));
}

}  // namespace softclip

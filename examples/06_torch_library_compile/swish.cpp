// The ex_swish operator library: schemas (TORCH_LIBRARY) and CPU kernels
// (TORCH_LIBRARY_IMPL). No pybind11 and no Python module: loading the library
// runs the static registrations below, and Python reaches the ops through the
// dispatcher as torch.ops.ex_swish.*. Their fake kernels and autograd formula
// are registered in Python (swish.py).
//
//   swish(x, beta)                 = x * sigmoid(beta * x)
//   swish_backward(grad, x, beta)  = grad * (s + beta * x * s * (1 - s)),
//                                    s = sigmoid(beta * x)
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <torch/library.h>

#include <cmath>

namespace ex_swish {
namespace {

// Grain: below this many elements one thread beats waking the pool.
constexpr int64_t kGrain = 32768;

void check_floating_cpu(const char* op, const char* name, const at::Tensor& t) {
  TORCH_CHECK(t.device().is_cpu(),
              op,
              ": ",
              name,
              " must be a CPU tensor, got one on ",
              t.device());
  TORCH_CHECK(t.scalar_type() == at::kFloat || t.scalar_type() == at::kDouble,
              op,
              ": ",
              name,
              " must be float32 or float64, got ",
              t.scalar_type());
}

at::Tensor swish_cpu(const at::Tensor& x, double beta) {
  check_floating_cpu("ex_swish.swish", "x", x);
  const at::Tensor xc = x.contiguous();
  at::Tensor y = at::empty_like(xc);
  AT_DISPATCH_FLOATING_TYPES(xc.scalar_type(), "ex_swish_swish", [&] {
    const scalar_t* xp = xc.const_data_ptr<scalar_t>();
    scalar_t* yp = y.mutable_data_ptr<scalar_t>();
    const auto b = static_cast<scalar_t>(beta);
    at::parallel_for(0, xc.numel(), kGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        yp[i] = xp[i] / (scalar_t(1) + std::exp(-b * xp[i]));
      }
    });
  });
  return y;
}

at::Tensor swish_backward_cpu(const at::Tensor& grad,
                              const at::Tensor& x,
                              double beta) {
  check_floating_cpu("ex_swish.swish_backward", "x", x);
  check_floating_cpu("ex_swish.swish_backward", "grad", grad);
  TORCH_CHECK(
      grad.sizes() == x.sizes() && grad.scalar_type() == x.scalar_type(),
      "ex_swish.swish_backward: grad must have the shape and dtype of x, got "
      "grad ",
      grad.sizes(),
      " ",
      grad.scalar_type(),
      " and x ",
      x.sizes(),
      " ",
      x.scalar_type());
  const at::Tensor xc = x.contiguous();
  const at::Tensor gc = grad.contiguous();
  at::Tensor grad_x = at::empty_like(xc);
  AT_DISPATCH_FLOATING_TYPES(xc.scalar_type(), "ex_swish_backward", [&] {
    const scalar_t* xp = xc.const_data_ptr<scalar_t>();
    const scalar_t* gp = gc.const_data_ptr<scalar_t>();
    scalar_t* op = grad_x.mutable_data_ptr<scalar_t>();
    const auto b = static_cast<scalar_t>(beta);
    at::parallel_for(0, xc.numel(), kGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const scalar_t s = scalar_t(1) / (scalar_t(1) + std::exp(-b * xp[i]));
        op[i] = gp[i] * (s + b * xp[i] * s * (scalar_t(1) - s));
      }
    });
  });
  return grad_x;
}

}  // namespace
}  // namespace ex_swish

// The schemas: what torch.compile, torch.export and opcheck reason about.
// pt2_compliant_tag promises the op behaves under them (opcheck checks it).
TORCH_LIBRARY(ex_swish, m) {
  m.def("swish(Tensor x, float beta=1.0) -> Tensor",
        {at::Tag::pt2_compliant_tag});
  m.def("swish_backward(Tensor grad, Tensor x, float beta) -> Tensor",
        {at::Tag::pt2_compliant_tag});
}

TORCH_LIBRARY_IMPL(ex_swish, CPU, m) {
  m.impl("swish", &ex_swish::swish_cpu);
  m.impl("swish_backward", &ex_swish::swish_backward_cpu);
}

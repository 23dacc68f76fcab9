// The CUDA part of the LLTM ops (lltm_common/csrc/lltm.h): the pointwise work
// of forward and backward in one fused kernel per direction, on the current
// stream. The GEMMs around it run through ATen (cuBLAS), in
// lltm_common/csrc/lltm.h, whose kernels this file registers.
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/core/Tensor.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/sum.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>
#include "lltm_common/lltm.h"
#include "lltm_common/lltm_pointwise.h"

#include <algorithm>
#include <cstdint>
#include <tuple>

#include "lltm_cuda.h"

namespace lltm_cuda {

namespace {

constexpr int kThreads = 256;

// Exact math in the dtype the kernel computes in, for the element math of
// lltm_pointwise.h: float for float, float16 and bfloat16 (at::opmath_type),
// double for double. Every double goes through the double overload; nothing is
// rounded to float on the way (the tutorial's kernel clamped doubles with
// fmax/fmin on floats).
struct CudaMath {
  static C10_HOST_DEVICE float exp(float x) {
    return ::expf(x);
  }
  static C10_HOST_DEVICE double exp(double x) {
    return ::exp(x);
  }
  static C10_HOST_DEVICE float expm1(float x) {
    return ::expm1f(x);
  }
  static C10_HOST_DEVICE double expm1(double x) {
    return ::expm1(x);
  }
  static C10_HOST_DEVICE float tanh(float x) {
    return ::tanhf(x);
  }
  static C10_HOST_DEVICE double tanh(double x) {
    return ::tanh(x);
  }
};

// One thread per (row, column) of the (batch, state) outputs, grid-stride:
// any batch and state size, no assumption about block multiples.
template <typename scalar_t>
__global__ void __launch_bounds__(kThreads)
    lltm_forward_kernel(const lltm::ForwardData<scalar_t> d,
                        int64_t n,
                        int64_t state) {
  using opmath_t = at::opmath_type<scalar_t>;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t idx =
           static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       idx < n;
       idx += stride) {
    const int64_t row = idx / state;
    const int64_t col = idx - row * state;
    const scalar_t* g = d.gate_weights + row * 3 * state;
    const lltm::Gates<opmath_t> z{static_cast<opmath_t>(g[col]),
                                  static_cast<opmath_t>(g[state + col]),
                                  static_cast<opmath_t>(g[2 * state + col])};
    const auto e = lltm::forward_element<CudaMath>(
        z, static_cast<opmath_t>(d.old_cell[idx]));
    d.new_cell[idx] = static_cast<scalar_t>(e.new_cell);
    d.new_h[idx] = static_cast<scalar_t>(e.new_h);
    d.input_gate[idx] = static_cast<scalar_t>(e.gates.input);
    d.output_gate[idx] = static_cast<scalar_t>(e.gates.output);
    d.candidate_cell[idx] = static_cast<scalar_t>(e.gates.candidate);
  }
}

// d_gates (batch, 3 * state) and d_old_cell (batch, state), one
// backward_element (lltm_pointwise.h) per thread and element.
template <typename scalar_t>
__global__ void __launch_bounds__(kThreads)
    lltm_backward_kernel(const lltm::BackwardData<scalar_t> d,
                         int64_t n,
                         int64_t state) {
  using opmath_t = at::opmath_type<scalar_t>;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t idx =
           static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       idx < n;
       idx += stride) {
    const int64_t row = idx / state;
    const int64_t col = idx - row * state;
    const scalar_t* g = d.gate_weights + row * 3 * state;
    const lltm::Gates<opmath_t> z{static_cast<opmath_t>(g[col]),
                                  static_cast<opmath_t>(g[state + col]),
                                  static_cast<opmath_t>(g[2 * state + col])};
    const auto e = lltm::backward_element<CudaMath>(
        static_cast<opmath_t>(d.grad_h[idx]),
        static_cast<opmath_t>(d.grad_cell[idx]),
        z,
        static_cast<opmath_t>(d.new_cell[idx]));
    d.d_old_cell[idx] = static_cast<scalar_t>(e.d_old_cell);
    scalar_t* dg = d.d_gates + row * 3 * state;
    dg[col] = static_cast<scalar_t>(e.d_gates.input);
    dg[state + col] = static_cast<scalar_t>(e.d_gates.output);
    dg[2 * state + col] = static_cast<scalar_t>(e.d_gates.candidate);
  }
}

// Enough blocks to cover n once, capped at what the GPU holds resident; the
// grid-stride loops cover the rest.
unsigned blocks_for(int64_t n) {
  const auto* props = at::cuda::getCurrentDeviceProperties();
  const int64_t resident = static_cast<int64_t>(props->multiProcessorCount) *
                           (props->maxThreadsPerMultiProcessor / kThreads);
  return static_cast<unsigned>(
      std::max<int64_t>(1, std::min((n + kThreads - 1) / kThreads, resident)));
}

}  // namespace

void Cuda::forward_pointwise(const lltm::Step& step) {
  const c10::cuda::CUDAGuard guard(step.old_cell.device());
  const int64_t state = step.old_cell.size(1);
  const int64_t n = step.old_cell.numel();
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const c10::ScalarType dtype = step.old_cell.scalar_type();
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, dtype, "lltm_cuda_forward", [&] {
        // clang-format off: the launch on one line, its check on the next.
        const auto blocks = blocks_for(n);
        const auto d = lltm::forward_data<scalar_t>(step);
        lltm_forward_kernel<scalar_t><<<blocks, kThreads, 0, stream>>>(d, n, state);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
        // clang-format on
      });
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> Cuda::backward_pointwise(
    const lltm::Step& step) {
  const c10::cuda::CUDAGuard guard(step.grad_h.device());
  const int64_t batch = step.grad_h.size(0);
  const int64_t state = step.grad_h.size(1);
  const int64_t n = batch * state;
  const auto options = step.grad_h.options();
  at::Tensor d_gates = at::empty({batch, 3 * state}, options);
  at::Tensor d_old_cell = at::empty({batch, state}, options);
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf,
      at::kBFloat16,
      step.grad_h.scalar_type(),
      "lltm_cuda_backward",
      [&] {
        // clang-format off: as above.
        const auto blocks = blocks_for(n);
        const auto d = lltm::backward_data<scalar_t>(step, d_old_cell, d_gates);
        lltm_backward_kernel<scalar_t><<<blocks, kThreads, 0, stream>>>(d, n, state);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
        // clang-format on
      });
  // Column sums in a deterministic reduction (float accumulation for float16
  // and bfloat16), not atomics.
  at::Tensor d_bias = at::sum(d_gates, 0);
  return {d_gates, d_bias, d_old_cell};
}

}  // namespace lltm_cuda

TORCH_LIBRARY_IMPL(lltm_cuda, CUDA, m) {
  using lltm_cuda::Cuda;
  m.impl("forward", &lltm::forward_kernel<Cuda>);
  m.impl("backward", &lltm::backward_kernel<Cuda>);
  m.impl("_backward_pointwise", &lltm::backward_pointwise_kernel<Cuda>);
}

// CUDA kernels of warp_perspective: the batched forward sampling and its
// adjoint (the backward), on the current stream. Built into the package's
// second library (_C_cuda), on the stable ABI like the first, which the
// package loads only under a CUDA build of torch.
#include <cuda_runtime.h>
#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/macros.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "checks.h"
#include "homography.h"
#include "warp_perspective.h"

namespace warp_perspective {
namespace {

constexpr int kBlockX = 32;
constexpr int kBlockY = 8;
constexpr int64_t kMaxGridY = 65535;
constexpr int64_t kMaxGridZ = 65535;

// Strides of a (B, C, H, W) tensor, in elements.
struct Strides {
  int64_t b, c, h, w;
};

struct KernelSizes {
  int64_t channels;
  int64_t src_h, src_w;
  int64_t dst_h, dst_w;
  // Strides of the tensor the kernel reads or accumulates into (B, C, H, W).
  int64_t s_b, s_c, s_h, s_w;
  int64_t warp_batch_stride;  // 0: one matrix for the whole batch, else 9
  bool warp_is_double;
};

template <typename scalar_t>
using opmath_t =
    std::conditional_t<std::is_same_v<scalar_t, double>, double, float>;

// Thread 0 inverts the block's matrix into shared memory. A singular or
// non-finite matrix leaves ok false and the block writes zeros: raising would
// need the matrices on the host, a synchronisation on every call (and none is
// allowed under CUDA graph capture). The CPU kernels read the matrices in
// place and raise instead.
__device__ __forceinline__ void load_inverse(const void* warp,
                                             const KernelSizes& s,
                                             int64_t b,
                                             double* inv,
                                             bool* ok) {
  if (threadIdx.x == 0 && threadIdx.y == 0) {
    double m[9];
    const int64_t base = b * s.warp_batch_stride;
    for (int i = 0; i < 9; ++i) {
      m[i] = s.warp_is_double ? static_cast<const double*>(warp)[base + i]
                              : static_cast<const float*>(warp)[base + i];
    }
    *ok = invert3x3(m, inv);
  }
  __syncthreads();
}

// The taps of pixel (x, y): offsets into a plane with strides (s_h, s_w) and
// their weights, 0 for a tap outside the image with zeros padding (its offset
// then points at element 0 and is never read).
template <typename acc_t, bool kNearest, bool kBorder>
struct Taps {
  int64_t off[4];
  acc_t w[4];
  bool in[4];
  int n;

  __device__ __forceinline__ Taps(const double* inv,
                                  int64_t x,
                                  int64_t y,
                                  const KernelSizes& s) {
    double sx;
    double sy;
    source_coordinate(
        inv, static_cast<double>(x), static_cast<double>(y), sx, sy);
    sx = clamp_coordinate(sx, static_cast<double>(s.src_w));
    sy = clamp_coordinate(sy, static_cast<double>(s.src_h));
    if (kNearest) {
      n = 1;
      // rint: half to even, as OpenCV's cvRound.
      add(0,
          static_cast<int64_t>(rint(sx)),
          static_cast<int64_t>(rint(sy)),
          acc_t(1),
          s);
    } else {
      n = 4;
      const double fx = floor(sx);
      const double fy = floor(sy);
      const acc_t ax = static_cast<acc_t>(sx - fx);
      const acc_t ay = static_cast<acc_t>(sy - fy);
      const int64_t x0 = static_cast<int64_t>(fx);
      const int64_t y0 = static_cast<int64_t>(fy);
      add(0, x0, y0, (1 - ax) * (1 - ay), s);
      add(1, x0 + 1, y0, ax * (1 - ay), s);
      add(2, x0, y0 + 1, (1 - ax) * ay, s);
      add(3, x0 + 1, y0 + 1, ax * ay, s);
    }
  }

  __device__ __forceinline__ void add(int k,
                                      int64_t ix,
                                      int64_t iy,
                                      acc_t weight,
                                      const KernelSizes& s) {
    if (kBorder) {
      ix = ix < 0 ? 0 : (ix >= s.src_w ? s.src_w - 1 : ix);
      iy = iy < 0 ? 0 : (iy >= s.src_h ? s.src_h - 1 : iy);
      in[k] = true;
    } else {
      in[k] = ix >= 0 && ix < s.src_w && iy >= 0 && iy < s.src_h;
    }
    off[k] = in[k] ? iy * s.s_h + ix * s.s_w : 0;
    w[k] = weight;
  }
};

template <typename scalar_t, typename acc_t>
__device__ __forceinline__ scalar_t to_scalar(acc_t v) {
  if constexpr (std::is_same_v<scalar_t, uint8_t>) {
    // Round half up and saturate, as the CPU kernels do.
    const acc_t r = floor(v + acc_t(0.5));
    return static_cast<uint8_t>(r < 0 ? 0 : (r > 255 ? 255 : r));
  } else {
    return static_cast<scalar_t>(v);
  }
}

// One thread per destination pixel computes the source coordinate once, in
// double as OpenCV and the CPU's float64 loop do (so nearest sampling picks
// their pixel even at a tie; the CPU's float32 and uint8 loops fuse
// multiply-adds, and may take the neighbour at an exact tie), and then samples
// every channel. Each block inverts its image's matrix once, into shared
// memory. The image may have any strides.
template <typename scalar_t, bool kNearest, bool kBorder>
__global__ void __launch_bounds__(kBlockX* kBlockY)
    warp_perspective_kernel_impl(const scalar_t* __restrict__ src,
                                 const void* __restrict__ warp,
                                 scalar_t* __restrict__ out,
                                 int64_t batch,
                                 KernelSizes s) {
  using acc_t = opmath_t<scalar_t>;
  __shared__ double inv[9];
  __shared__ bool ok;
  const int64_t x = static_cast<int64_t>(blockIdx.x) * kBlockX + threadIdx.x;
  const int64_t y0 = static_cast<int64_t>(blockIdx.y) * kBlockY + threadIdx.y;
  // Rows beyond the grid's (kMaxGridY blocks of kBlockY) are taken in strides.
  const int64_t y_step = static_cast<int64_t>(gridDim.y) * kBlockY;
  for (int64_t b = blockIdx.z; b < batch; b += gridDim.z) {
    load_inverse(warp, s, b, inv, &ok);
    const int64_t o_step = s.dst_h * s.dst_w;
    for (int64_t y = y0; x < s.dst_w && y < s.dst_h; y += y_step) {
      scalar_t* o = out + ((b * s.channels) * s.dst_h + y) * s.dst_w + x;
      if (!ok) {
        // A bad matrix left inv unwritten: no taps from it, zeros.
        for (int64_t c = 0; c < s.channels; ++c, o += o_step) {
          *o = scalar_t(0);
        }
        continue;
      }
      const Taps<acc_t, kNearest, kBorder> t(inv, x, y, s);
      const scalar_t* plane = src + b * s.s_b;
      for (int64_t c = 0; c < s.channels; ++c) {
        acc_t v = 0;
#pragma unroll
        for (int k = 0; k < (kNearest ? 1 : 4); ++k) {
          if (t.in[k]) {
            v += t.w[k] * static_cast<acc_t>(plane[t.off[k]]);
          }
        }
        *o = to_scalar<scalar_t, acc_t>(v);
        plane += s.s_c;
        o += o_step;
      }
    }
    // inv is rewritten for the next image only after every thread used it.
    __syncthreads();
  }
}

// The adjoint: every (pixel, channel) adds weight * grad_output to the taps it
// was sampled from. Taps overlap between pixels, hence the atomics (and the
// nondeterministic summation order).
template <typename scalar_t, bool kNearest, bool kBorder>
__global__ void __launch_bounds__(kBlockX* kBlockY)
    warp_perspective_backward_kernel_impl(const scalar_t* __restrict__ grad_out,
                                          const void* __restrict__ warp,
                                          scalar_t* __restrict__ grad_image,
                                          int64_t batch,
                                          Strides go,
                                          KernelSizes s) {
  using acc_t = opmath_t<scalar_t>;
  __shared__ double inv[9];
  __shared__ bool ok;
  const int64_t x = static_cast<int64_t>(blockIdx.x) * kBlockX + threadIdx.x;
  const int64_t y0 = static_cast<int64_t>(blockIdx.y) * kBlockY + threadIdx.y;
  const int64_t y_step = static_cast<int64_t>(gridDim.y) * kBlockY;
  for (int64_t b = blockIdx.z; b < batch; b += gridDim.z) {
    load_inverse(warp, s, b, inv, &ok);
    for (int64_t y = y0; ok && x < s.dst_w && y < s.dst_h; y += y_step) {
      const Taps<acc_t, kNearest, kBorder> t(inv, x, y, s);
      const scalar_t* g = grad_out + b * go.b + y * go.h + x * go.w;
      scalar_t* plane = grad_image + b * s.s_b;
      for (int64_t c = 0; c < s.channels; ++c) {
        const acc_t v = static_cast<acc_t>(*g);
#pragma unroll
        for (int k = 0; k < (kNearest ? 1 : 4); ++k) {
          if (t.in[k]) {
            atomicAdd(plane + t.off[k], static_cast<scalar_t>(t.w[k] * v));
          }
        }
        g += go.c;
        plane += s.s_c;
      }
    }
    __syncthreads();
  }
}

// An uninitialised contiguous (B, C, h, w) tensor of like's dtype and device.
Tensor empty_planes(const Tensor& like, int64_t h, int64_t w) {
  const std::vector<int64_t> sizes{like.size(0), like.size(1), h, w};
  return torch::stable::new_empty(like, sizes);
}

// Rows past kMaxGridY blocks are strided inside the kernels, images past
// kMaxGridZ likewise: CUDA takes every size CPU takes.
dim3 grid_for(const Problem& p, int64_t batch) {
  const int64_t gy = (p.dst_h + kBlockY - 1) / kBlockY;
  return dim3(static_cast<unsigned>((p.dst_w + kBlockX - 1) / kBlockX),
              static_cast<unsigned>(std::min(gy, kMaxGridY)),
              static_cast<unsigned>(std::min(batch, kMaxGridZ)));
}

// The current stream of tensor t's device (torch.cuda.current_stream()).
cudaStream_t current_stream(const Tensor& t) {
  void* stream = nullptr;
  SHARED_BUILD_SHIM_CHECK(
      aoti_torch_get_current_cuda_stream(t.get_device_index(), &stream));
  return static_cast<cudaStream_t>(stream);
}

KernelSizes make_sizes(const Problem& p, const Tensor& t, const Tensor& warp) {
  return KernelSizes{p.input.size(1),
                     p.src_h,
                     p.src_w,
                     p.dst_h,
                     p.dst_w,
                     t.stride(0),
                     t.stride(1),
                     t.stride(2),
                     t.stride(3),
                     warp.dim() == 2 || warp.size(0) == 1 ? 0 : 9,
                     warp.scalar_type() == ScalarType::Double};
}

template <typename F>
void dispatch_modes(const Problem& p, F&& f) {
  const bool nearest = p.interpolation == Interpolation::kNearest;
  const bool border = p.padding == Padding::kBorder;
  if (nearest && border) {
    f(std::true_type{}, std::true_type{});
  } else if (nearest) {
    f(std::true_type{}, std::false_type{});
  } else if (border) {
    f(std::false_type{}, std::true_type{});
  } else {
    f(std::false_type{}, std::false_type{});
  }
}

template <bool kWithByte, typename F>
void dispatch_dtype(ScalarType dtype, F&& f) {
  switch (dtype) {
    case ScalarType::Float:
      f(float{});
      return;
    case ScalarType::Double:
      f(double{});
      return;
    case ScalarType::Byte:
      if constexpr (kWithByte) {
        f(uint8_t{});
        return;
      }
      break;
    default:
      break;
  }
  fail("warp_perspective: the CUDA kernel has no ", dtype, " loop");
}

Tensor warp_perspective_kernel(const Tensor& image,
                               const Tensor& warp,
                               std::optional<std::vector<int64_t>> dsize,
                               StrArg interpolation,
                               StrArg padding_mode) {
  check_forward(image, warp, dsize, interpolation.value, padding_mode.value);
  const Problem p = forward_problem(
      image, warp, dsize, interpolation.value, padding_mode.value);
  SHARED_BUILD_CHECK(image.is_cuda(),
                     "warp_perspective: the CUDA kernel got tensors on ",
                     device_name(image));
  const torch::stable::accelerator::DeviceGuard guard(image.get_device_index());
  const cudaStream_t stream = current_stream(image);
  const int64_t batch = p.input.size(0);
  Tensor out = empty_planes(p.input, p.dst_h, p.dst_w);
  if (out.numel() == 0) {
    return torch::stable::view(out, p.result_sizes);
  }
  const Tensor w = torch::stable::contiguous(p.warp);
  const KernelSizes s = make_sizes(p, p.input, w);
  const dim3 grid = grid_for(p, batch);
  const dim3 block(kBlockX, kBlockY);
  dispatch_dtype<true>(image.scalar_type(), [&](auto zero) {
    using scalar_t = decltype(zero);
    dispatch_modes(p, [&](auto nearest, auto border) {
      const auto kernel = warp_perspective_kernel_impl<scalar_t,
                                                       decltype(nearest)::value,
                                                       decltype(border)::value>;
      const scalar_t* in = p.input.const_data_ptr<scalar_t>();
      scalar_t* result = out.mutable_data_ptr<scalar_t>();
      kernel<<<grid, block, 0, stream>>>(
          in, w.const_data_ptr(), result, batch, s);
      // The stable ABI's C10_CUDA_KERNEL_LAUNCH_CHECK: torch's message.
      STD_CUDA_KERNEL_LAUNCH_CHECK();
    });
  });
  return torch::stable::view(out, p.result_sizes);
}

// Not deterministic (atomic adds in any order): torch's
// use_deterministic_algorithms alert for it is raised by ops.py, which the
// stable ABI cannot reach.
Tensor warp_perspective_backward_kernel(const Tensor& grad_output,
                                        const Tensor& warp,
                                        std::vector<int64_t> image_size,
                                        StrArg interpolation,
                                        StrArg padding_mode) {
  check_backward(
      grad_output, warp, image_size, interpolation.value, padding_mode.value);
  const Problem p = backward_problem(
      grad_output, warp, image_size, interpolation.value, padding_mode.value);
  SHARED_BUILD_CHECK(
      grad_output.is_cuda(),
      "warp_perspective_backward: the CUDA kernel got tensors on ",
      device_name(grad_output));
  const torch::stable::accelerator::DeviceGuard guard(
      grad_output.get_device_index());
  const cudaStream_t stream = current_stream(grad_output);
  const int64_t batch = p.input.size(0);
  Tensor grad_image = empty_planes(p.input, p.src_h, p.src_w);
  torch::stable::zero_(grad_image);
  if (grad_image.numel() == 0 || grad_output.numel() == 0) {
    return torch::stable::view(grad_image, p.result_sizes);
  }
  const Tensor w = torch::stable::contiguous(p.warp);
  const KernelSizes s = make_sizes(p, grad_image, w);
  const Tensor& g = p.input;
  const dim3 grid = grid_for(p, batch);
  const dim3 block(kBlockX, kBlockY);
  dispatch_dtype<false>(grad_output.scalar_type(), [&](auto zero) {
    using scalar_t = decltype(zero);
    dispatch_modes(p, [&](auto nearest, auto border) {
      const auto kernel =
          warp_perspective_backward_kernel_impl<scalar_t,
                                                decltype(nearest)::value,
                                                decltype(border)::value>;
      const scalar_t* grad = g.const_data_ptr<scalar_t>();
      scalar_t* result = grad_image.mutable_data_ptr<scalar_t>();
      const Strides go{g.stride(0), g.stride(1), g.stride(2), g.stride(3)};
      kernel<<<grid, block, 0, stream>>>(
          grad, w.const_data_ptr(), result, batch, go, s);
      // The stable ABI's C10_CUDA_KERNEL_LAUNCH_CHECK: torch's message.
      STD_CUDA_KERNEL_LAUNCH_CHECK();
    });
  });
  return torch::stable::view(grad_image, p.result_sizes);
}

}  // namespace
}  // namespace warp_perspective

STABLE_TORCH_LIBRARY_IMPL(warp_perspective, CUDA, m) {
  m.impl("warp_perspective",
         TORCH_BOX(&warp_perspective::warp_perspective_kernel));
  m.impl("warp_perspective_backward",
         TORCH_BOX(&warp_perspective::warp_perspective_backward_kernel));
}

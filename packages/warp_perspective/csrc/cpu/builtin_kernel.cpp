// The built-in CPU kernels of warp_perspective: the forward sampling (used
// without OpenCV and for float64) and its adjoint, the backward.
//
// The forward works one destination row at a time, all C channels of it, so
// the geometry of a pixel is computed once and shared by every channel. For
// float32 and uint8 one function does the whole row, geometry in registers:
// the row kernels of cpu/sampling_rows.h, one source built three times over
// the vector width (cpu/sampling_avx512.h, cpu/sampling_avx2.h and, for CPUs
// without AVX2, cpu/sampling_portable.h): the AVX ones give the same results
// bit for bit, the portable one the same up to rounding where the target has
// no FMA. For float64 a first loop computes, for every pixel of the row, the
// plane offsets of the taps it reads and their weights (in double, vectorised)
// into tables, and a second loop gathers and blends those taps for each channel
// in turn; both are leaf functions compiled for AVX-512, AVX2 and baseline
// x86-64 (SHARED_BUILD_CPU_CLONES). The backward reuses those tables (float32
// and float64). Rows of all images of the batch are handed out in chunks to
// torch's intra-op threads (cpu/parallel.h), so one large image uses every
// thread too.
#include <shared_build/cpu_dispatch.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#include "cpu/parallel.h"
#include "cpu/sampling_avx2.h"
#include "cpu/sampling_avx512.h"
#include "cpu/sampling_loops.h"
#include "cpu/sampling_portable.h"
#include "warp_perspective.h"

namespace warp_perspective {
namespace {

using namespace cpu;  // NOLINT: the loops and their types

// A few thousand samples per task: below that, waking a thread costs more
// than it saves.
constexpr int64_t kGrainSamples = 16384;

// target_clones does not apply to templates: one named leaf per instance.
#define WP_BILINEAR_TAPS(name, border, weight_t)           \
  SHARED_BUILD_CPU_CLONES void name(const Geometry& g,     \
                                    index_t* o00,          \
                                    index_t* o01,          \
                                    index_t* o10,          \
                                    index_t* o11,          \
                                    weight_t* w00,         \
                                    weight_t* w01,         \
                                    weight_t* w10,         \
                                    weight_t* w11,         \
                                    uint8_t* mask) {       \
    bilinear_taps_loop<border, weight_t>(                  \
        g, o00, o01, o10, o11, w00, w01, w10, w11, mask);  \
  }                                                        \
  void bilinear_taps(std::integral_constant<bool, border>, \
                     const Geometry& g,                    \
                     RowTaps<weight_t>& t) {               \
    name(g,                                                \
         t.o00.data(),                                     \
         t.o01.data(),                                     \
         t.o10.data(),                                     \
         t.o11.data(),                                     \
         t.w00.data(),                                     \
         t.w01.data(),                                     \
         t.w10.data(),                                     \
         t.w11.data(),                                     \
         t.mask.data());                                   \
  }
WP_BILINEAR_TAPS(bilinear_taps_zeros_f, false, float)
WP_BILINEAR_TAPS(bilinear_taps_border_f, true, float)
WP_BILINEAR_TAPS(bilinear_taps_zeros_d, false, double)
WP_BILINEAR_TAPS(bilinear_taps_border_d, true, double)
#undef WP_BILINEAR_TAPS

SHARED_BUILD_CPU_CLONES void nearest_taps_zeros(const Geometry& g,
                                                index_t* off,
                                                uint8_t* mask) {
  nearest_taps_loop<false>(g, off, mask);
}
SHARED_BUILD_CPU_CLONES void nearest_taps_border(const Geometry& g,
                                                 index_t* off,
                                                 uint8_t* mask) {
  nearest_taps_loop<true>(g, off, mask);
}

#define WP_GATHER(scalar_t, weight_t)                                      \
  SHARED_BUILD_CPU_CLONES void bilinear_gather(const scalar_t* src,        \
                                               const RowTaps<weight_t>& t, \
                                               scalar_t* out,              \
                                               int64_t n) {                \
    bilinear_gather_loop<scalar_t, weight_t>(src,                          \
                                             t.o00.data(),                 \
                                             t.o01.data(),                 \
                                             t.o10.data(),                 \
                                             t.o11.data(),                 \
                                             t.w00.data(),                 \
                                             t.w01.data(),                 \
                                             t.w10.data(),                 \
                                             t.w11.data(),                 \
                                             out,                          \
                                             n);                           \
  }                                                                        \
  SHARED_BUILD_CPU_CLONES void nearest_gather(                             \
      const scalar_t* src, const index_t* off, scalar_t* out, int64_t n) { \
    nearest_gather_loop<scalar_t>(src, off, out, n);                       \
  }
WP_GATHER(double, double)
#undef WP_GATHER

// The widest loops this CPU runs: AVX-512 (F, BW, DQ, VL), AVX2 with FMA, or
// portable. WARP_PERSPECTIVE_NO_AVX512=1 caps it at AVX2 and
// WARP_PERSPECTIVE_NO_AVX2=1 at portable (read once; the tests use them to run
// every level on one machine).
enum class Isa { kPortable, kAvx2, kAvx512 };

[[maybe_unused]] bool env_flag(const char* name) {
  const char* env = std::getenv(name);
  return env && std::strcmp(env, "1") == 0;
}

Isa cpu_isa() {
  static const Isa isa = [] {
#ifdef WARP_PERSPECTIVE_HAVE_AVX2
    if (!cpu_has_avx2_fma() || env_flag("WARP_PERSPECTIVE_NO_AVX2")) {
      return Isa::kPortable;
    }
#ifdef WARP_PERSPECTIVE_HAVE_AVX512
    if (cpu_has_avx512() && !env_flag("WARP_PERSPECTIVE_NO_AVX512")) {
      return Isa::kAvx512;
    }
#endif
    return Isa::kAvx2;
#else
    return Isa::kPortable;
#endif
  }();
  return isa;
}

// The AVX2 geometry of the table loops (AVX-512 CPUs included).
bool use_avx2() {
  return cpu_isa() != Isa::kPortable;
}

template <typename weight_t>
void row_taps(const Problem& p, const Geometry& g, RowTaps<weight_t>& t) {
  const bool border = p.padding == Padding::kBorder;
  const bool nearest = p.interpolation == Interpolation::kNearest;
#ifdef WARP_PERSPECTIVE_HAVE_AVX2
  if (use_avx2()) {
    // Nearest uses o00 and mask only.
    if (nearest) {
      (border ? nearest_taps_avx2<true>
              : nearest_taps_avx2<false>)(g, t.o00.data(), t.mask.data());
    } else if (border) {
      bilinear_taps_avx2<true, weight_t>(g, t);
    } else {
      bilinear_taps_avx2<false, weight_t>(g, t);
    }
    return;
  }
#endif
  if (nearest) {
    (border ? nearest_taps_border : nearest_taps_zeros)(
        g, t.o00.data(), t.mask.data());
  } else if (border) {
    bilinear_taps(std::true_type{}, g, t);
  } else {
    bilinear_taps(std::false_type{}, g, t);
  }
}

// The pixels of a row with a tap outside the image (zeros padding only), found
// once per row, 8 masks at a time (most rows have a handful, at the ends).
void find_outside(const uint8_t* mask, int64_t n, std::vector<int32_t>& out) {
  constexpr uint64_t kAllInside = 0x0F0F0F0F0F0F0F0FULL;
  out.clear();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t word;
    std::memcpy(&word, mask + i, sizeof(word));
    if (word == kAllInside) {
      continue;
    }
    for (int64_t k = i; k < i + 8; ++k) {
      if (mask[k] != kAllTapsInside) {
        out.push_back(static_cast<int32_t>(k));
      }
    }
  }
  for (; i < n; ++i) {
    if (mask[i] != kAllTapsInside) {
      out.push_back(static_cast<int32_t>(i));
    }
  }
}

// Those pixels recomputed from their inside taps alone: the vectorised loop
// read src[0] in place of the outside taps, which is harmless (weight 0)
// unless src[0] is inf or NaN.
template <typename scalar_t, typename weight_t>
void fix_outside_taps(const Problem& p,
                      const RowTaps<weight_t>& t,
                      const std::vector<int32_t>& outside,
                      const scalar_t* src,
                      scalar_t* out) {
  const bool nearest = p.interpolation == Interpolation::kNearest;
  for (const int32_t i : outside) {
    const uint8_t bits = t.mask[i];
    if (nearest) {
      out[i] = scalar_t(0);
      continue;
    }
    weight_t v = 0;
    if (bits & 1) {
      v += t.w00[i] * static_cast<weight_t>(src[t.o00[i]]);
    }
    if (bits & 2) {
      v += t.w01[i] * static_cast<weight_t>(src[t.o01[i]]);
    }
    if (bits & 4) {
      v += t.w10[i] * static_cast<weight_t>(src[t.o10[i]]);
    }
    if (bits & 8) {
      v += t.w11[i] * static_cast<weight_t>(src[t.o11[i]]);
    }
    out[i] = static_cast<scalar_t>(v);
  }
}

// The int32 offsets of the loops need each plane's span (h x w elements with
// strides (stride_h, stride_w)) to fit.
void check_plane_extent(int64_t h,
                        int64_t w,
                        int64_t stride_h,
                        int64_t stride_w,
                        const char* name) {
  const int64_t extent = (h - 1) * stride_h + (w - 1) * stride_w;
  SHARED_BUILD_CHECK(
      extent < std::numeric_limits<index_t>::max(),
      "warp_perspective: ",
      name,
      " planes of shape ",
      Sizes{{h, w}},
      " (strides ",
      Sizes{{stride_h, stride_w}},
      ") span 2^31 elements or more, which the CPU kernel does not "
      "support");
}

// The geometry of destination row y over a source plane with strides
// (stride_h, stride_w).
Geometry make_geometry(const Problem& p,
                       int64_t stride_h,
                       int64_t stride_w,
                       const double* inv,
                       int64_t y) {
  return Geometry{inv,
                  static_cast<double>(y),
                  p.dst_w,
                  p.src_w,
                  p.src_h,
                  static_cast<index_t>(stride_w),
                  static_cast<index_t>(stride_h)};
}

template <typename scalar_t>
using RowKernel = void (*)(const RowJob<scalar_t>&);

// The row kernel of this CPU level and mode (float32 and uint8).
template <typename scalar_t>
RowKernel<scalar_t> row_kernel(const Problem& p) {
  const bool border = p.padding == Padding::kBorder;
  const bool nearest = p.interpolation == Interpolation::kNearest;
#ifdef WARP_PERSPECTIVE_HAVE_AVX512
  if (cpu_isa() == Isa::kAvx512) {
    if (nearest) {
      return border ? avx512::nearest_row<scalar_t, true>
                    : avx512::nearest_row<scalar_t, false>;
    }
    return border ? avx512::bilinear_row<scalar_t, true>
                  : avx512::bilinear_row<scalar_t, false>;
  }
#endif
#ifdef WARP_PERSPECTIVE_HAVE_AVX2
  if (cpu_isa() == Isa::kAvx2) {
    if (nearest) {
      return border ? avx2::nearest_row<scalar_t, true>
                    : avx2::nearest_row<scalar_t, false>;
    }
    return border ? avx2::bilinear_row<scalar_t, true>
                  : avx2::bilinear_row<scalar_t, false>;
  }
#endif
  if (nearest) {
    return border ? portable::nearest_row<scalar_t, true>
                  : portable::nearest_row<scalar_t, false>;
  }
  return border ? portable::bilinear_row<scalar_t, true>
                : portable::bilinear_row<scalar_t, false>;
}

// The row kernels (float32 and uint8, every CPU level): geometry in
// registers, every channel of a row per call, no tables and no outside-tap
// pass (their gathers are masked).
template <typename scalar_t>
void forward_rows(const Problem& p,
                  const std::vector<std::array<double, 9>>& inverses,
                  const Tensor& src,
                  Tensor& out,
                  RowKernel<scalar_t> kernel) {
  const int64_t batch = src.size(0);
  const int64_t channels = src.size(1);
  const bool shared_warp = inverses.size() == 1;
  const scalar_t* src_base = src.const_data_ptr<scalar_t>();
  scalar_t* out_base = out.mutable_data_ptr<scalar_t>();
  const int64_t rows_per_chunk = std::max<int64_t>(
      1, kGrainSamples / std::max<int64_t>(1, p.dst_w * channels));
  run_workers(batch * p.dst_h, rows_per_chunk, [&](ChunkQueue& queue) {
    int64_t begin = 0;
    int64_t end = 0;
    while (queue.pop(begin, end)) {
      for (int64_t row = begin; row < end; ++row) {
        const int64_t b = row / p.dst_h;
        const int64_t y = row % p.dst_h;
        const double* inv = inverses[shared_warp ? 0 : b].data();
        const RowJob<scalar_t> job{
            make_geometry(p, src.stride(2), src.stride(3), inv, y),
            src_base + b * src.stride(0),
            out_base + (b * channels * p.dst_h + y) * p.dst_w,
            channels,
            src.stride(1),
            p.dst_h * p.dst_w};
        kernel(job);
      }
    }
  });
}

// The table loops (float64): each row's taps into tables, then every channel
// gathered from them, pixels with a tap outside the image recomputed.
template <typename scalar_t>
void forward_tables(const Problem& p,
                    const std::vector<std::array<double, 9>>& inverses,
                    const Tensor& src,
                    Tensor& out) {
  using weight_t = scalar_t;
  const int64_t batch = src.size(0);
  const int64_t channels = src.size(1);
  const bool shared_warp = inverses.size() == 1;
  const scalar_t* src_base = src.const_data_ptr<scalar_t>();
  scalar_t* out_base = out.mutable_data_ptr<scalar_t>();
  const int64_t rows_per_chunk = std::max<int64_t>(
      1, kGrainSamples / std::max<int64_t>(1, p.dst_w * channels));
  const bool zeros = p.padding == Padding::kZeros;
  const bool nearest = p.interpolation == Interpolation::kNearest;
  run_workers(batch * p.dst_h, rows_per_chunk, [&](ChunkQueue& queue) {
    RowTaps<weight_t> taps(p.dst_w);
    std::vector<int32_t> outside;
    int64_t begin = 0;
    int64_t end = 0;
    while (queue.pop(begin, end)) {
      for (int64_t row = begin; row < end; ++row) {
        const int64_t b = row / p.dst_h;
        const int64_t y = row % p.dst_h;
        const double* inv = inverses[shared_warp ? 0 : b].data();
        row_taps(
            p, make_geometry(p, src.stride(2), src.stride(3), inv, y), taps);
        if (zeros) {
          find_outside(taps.mask.data(), p.dst_w, outside);
        }
        for (int64_t c = 0; c < channels; ++c) {
          const scalar_t* plane =
              src_base + b * src.stride(0) + c * src.stride(1);
          scalar_t* dst =
              out_base + ((b * channels + c) * p.dst_h + y) * p.dst_w;
          if (nearest) {
            nearest_gather(plane, taps.o00.data(), dst, p.dst_w);
          } else {
            bilinear_gather(plane, taps, dst, p.dst_w);
          }
          if (!outside.empty()) {
            fix_outside_taps<scalar_t, weight_t>(p, taps, outside, plane, dst);
          }
        }
      }
    }
  });
}

template <typename scalar_t>
void forward_impl(const Problem& p,
                  const std::vector<std::array<double, 9>>& inverses,
                  const Tensor& src,
                  Tensor& out) {
  if constexpr (std::is_same_v<scalar_t, double>) {
    forward_tables<scalar_t>(p, inverses, src, out);
  } else {
    forward_rows<scalar_t>(p, inverses, src, out, row_kernel<scalar_t>(p));
  }
}

// The adjoint of forward_impl: grad_image[tap] += weight * grad_output[pixel]
// for every tap inside the image. Planes are independent, so they are spread
// over the threads and each is accumulated serially (deterministic).
template <typename scalar_t>
void backward_impl(const Problem& p,
                   const std::vector<std::array<double, 9>>& inverses,
                   const Tensor& grad_out,
                   Tensor& grad_image) {
  using weight_t = scalar_t;
  const int64_t batch = grad_out.size(0);
  const int64_t channels = grad_out.size(1);
  const bool shared_warp = inverses.size() == 1;
  const bool nearest = p.interpolation == Interpolation::kNearest;
  const scalar_t* grad_base = grad_out.const_data_ptr<scalar_t>();
  scalar_t* gi_base = grad_image.mutable_data_ptr<scalar_t>();
  const int64_t plane_size = p.src_h * p.src_w;
  run_workers(batch * channels, 1, [&](ChunkQueue& queue) {
    RowTaps<weight_t> taps(p.dst_w);
    int64_t plane = 0;
    int64_t plane_end = 0;
    while (queue.pop(plane, plane_end)) {
      const int64_t b = plane / channels;
      const int64_t c = plane % channels;
      const double* inv = inverses[shared_warp ? 0 : b].data();
      scalar_t* gi = gi_base + plane * plane_size;
      for (int64_t y = 0; y < p.dst_h; ++y) {
        // grad_image is contiguous: its strides are (src_w, 1).
        row_taps(p, make_geometry(p, p.src_w, 1, inv, y), taps);
        const scalar_t* g = grad_base + b * grad_out.stride(0) +
                            c * grad_out.stride(1) + y * grad_out.stride(2);
        const int64_t gs = grad_out.stride(3);
        for (int64_t i = 0; i < p.dst_w; ++i) {
          const weight_t v = g[i * gs];
          const uint8_t bits = taps.mask[i];
          if (nearest) {
            if (bits) {
              gi[taps.o00[i]] += v;
            }
            continue;
          }
          if (bits & 1) {
            gi[taps.o00[i]] += taps.w00[i] * v;
          }
          if (bits & 2) {
            gi[taps.o01[i]] += taps.w01[i] * v;
          }
          if (bits & 4) {
            gi[taps.o10[i]] += taps.w10[i] * v;
          }
          if (bits & 8) {
            gi[taps.o11[i]] += taps.w11[i] * v;
          }
        }
      }
    }
  });
}

}  // namespace

const char* cpu_geometry() {
  switch (cpu_isa()) {
    case Isa::kAvx512:
      return "avx512";
    case Isa::kAvx2:
      return "avx2";
    default:
      return "portable";
  }
}

void forward_builtin_cpu(const Problem& p,
                         const std::vector<std::array<double, 9>>& inverses,
                         Tensor& out) {
  // Any strides work; the int32 offsets need each plane's span to fit.
  Tensor src = p.input;
  const int64_t extent =
      (src.size(2) - 1) * src.stride(2) + (src.size(3) - 1) * src.stride(3);
  if (extent >= std::numeric_limits<index_t>::max()) {
    src = torch::stable::contiguous(src);
  }
  check_plane_extent(
      src.size(2), src.size(3), src.stride(2), src.stride(3), "image");
  switch (src.scalar_type()) {
    case ScalarType::Float:
      forward_impl<float>(p, inverses, src, out);
      break;
    case ScalarType::Double:
      forward_impl<double>(p, inverses, src, out);
      break;
    case ScalarType::Byte:
      forward_impl<uint8_t>(p, inverses, src, out);
      break;
    default:
      fail("warp_perspective: the CPU kernel has no ",
           src.scalar_type(),
           " loop");
  }
}

void backward_builtin_cpu(const Problem& p,
                          const std::vector<std::array<double, 9>>& inverses,
                          Tensor& grad_image) {
  check_plane_extent(p.src_h, p.src_w, p.src_w, 1, "grad_image");
  switch (p.input.scalar_type()) {
    case ScalarType::Float:
      backward_impl<float>(p, inverses, p.input, grad_image);
      break;
    case ScalarType::Double:
      backward_impl<double>(p, inverses, p.input, grad_image);
      break;
    default:
      fail("warp_perspective_backward: the CPU kernel has no ",
           p.input.scalar_type(),
           " loop");
  }
}

namespace {

Tensor builtin_forward_cpu(const Tensor& image,
                           const Tensor& warp,
                           std::optional<std::vector<int64_t>> dsize,
                           StrArg interpolation,
                           StrArg padding_mode) {
  Problem p = check_forward(
      image, warp, dsize, interpolation.value, padding_mode.value);
  SHARED_BUILD_CHECK(image.is_cpu(),
                     "warp_perspective: the CPU kernel got tensors on ",
                     device_name(image));
  const auto inverses = inverse_warps(p.warp);
  // In the caller's layout; contiguous, so its memory is the (B, C, dst_h,
  // dst_w) the loops write.
  Tensor out = empty_output(image, p.result_sizes);
  if (out.numel() > 0) {
    forward_builtin_cpu(p, inverses, out);
  }
  return out;
}

Tensor backward_cpu(const Tensor& grad_output,
                    const Tensor& warp,
                    std::vector<int64_t> image_size,
                    StrArg interpolation,
                    StrArg padding_mode) {
  Problem p = check_backward(
      grad_output, warp, image_size, interpolation.value, padding_mode.value);
  SHARED_BUILD_CHECK(
      grad_output.is_cpu(),
      "warp_perspective_backward: the CPU kernel got tensors on ",
      device_name(grad_output));
  const auto inverses = inverse_warps(p.warp);
  // In the caller's layout, contiguous: (B, C, src_h, src_w) in memory.
  Tensor grad_image = empty_output(grad_output, p.result_sizes);
  torch::stable::zero_(grad_image);
  if (grad_image.numel() > 0 && grad_output.numel() > 0) {
    backward_builtin_cpu(p, inverses, grad_image);
  }
  return grad_image;
}

}  // namespace
}  // namespace warp_perspective

STABLE_TORCH_LIBRARY_IMPL(warp_perspective, CPU, m) {
  m.impl("_warp_perspective_builtin",
         TORCH_BOX(&warp_perspective::builtin_forward_cpu));
  m.impl("warp_perspective_backward",
         TORCH_BOX(&warp_perspective::backward_cpu));
}

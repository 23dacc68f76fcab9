// The built-in CPU kernels of warp_perspective, the forward sampling and its
// adjoint (the backward): this file picks the SIMD level once (cpu_isa,
// level_kernels; the loops are cpu/sampling_per_level.h) and hands rows of
// every image, in chunks, to torch's intra-op threads (cpu/parallel.h).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <vector>

#include "cpu/parallel.h"
#include "cpu/sampling_avx2.h"
#include "cpu/sampling_avx512.h"
#include "cpu/sampling_common.h"
#include "cpu/sampling_portable.h"
#include "warp_perspective.h"

namespace warp_perspective {
namespace {

using namespace cpu;  // NOLINT: the loops and their types

// A few thousand samples per task: below that, waking a thread costs more
// than it saves.
constexpr int64_t kGrainSamples = 16384;

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

// The one place that picks the CPU level: this level's kernels for the
// problem's dtype and mode.
template <typename scalar_t>
Kernels<scalar_t> level_kernels(const Problem& p) {
  const bool border = p.padding == Padding::kBorder;
  const bool nearest = p.interpolation == Interpolation::kNearest;
  switch (cpu_isa()) {
#ifdef WARP_PERSPECTIVE_HAVE_AVX512
    case Isa::kAvx512:
      return avx512::kernels<scalar_t>(border, nearest);
#endif
#ifdef WARP_PERSPECTIVE_HAVE_AVX2
    case Isa::kAvx2:
      return avx2::kernels<scalar_t>(border, nearest);
#endif
    default:
      return portable::kernels<scalar_t>(border, nearest);
  }
}

// Rows of all images of the batch, in chunks, to torch's intra-op threads:
// one large image uses every thread too. float32 and uint8 take the row
// kernels (geometry in registers, every channel of a row per call), float64
// the table kernels (each row's taps into tables, then every channel gathered
// from them).
template <typename scalar_t>
void forward_impl(const Problem& p,
                  const std::vector<std::array<double, 9>>& inverses,
                  const Tensor& src,
                  Tensor& out) {
  const Kernels<scalar_t> kernels = level_kernels<scalar_t>(p);
  const int64_t batch = src.size(0);
  const int64_t channels = src.size(1);
  const int64_t src_stride_b = src.stride(0);
  const int64_t src_stride_c = src.stride(1);
  const int64_t src_stride_h = src.stride(2);
  const int64_t src_stride_w = src.stride(3);
  const bool shared_warp = inverses.size() == 1;
  const scalar_t* src_base = src.const_data_ptr<scalar_t>();
  scalar_t* out_base = out.mutable_data_ptr<scalar_t>();
  const int64_t rows_per_chunk = std::max<int64_t>(
      1, kGrainSamples / std::max<int64_t>(1, p.dst_w * channels));
  run_workers(batch * p.dst_h, rows_per_chunk, [&](ChunkQueue& queue) {
    std::optional<RowScratch<scalar_t>> scratch;
    if (kernels.table) {
      scratch.emplace(p.dst_w);
    }
    int64_t begin = 0;
    int64_t end = 0;
    while (queue.pop(begin, end)) {
      for (int64_t row = begin; row < end; ++row) {
        const int64_t b = row / p.dst_h;
        const int64_t y = row % p.dst_h;
        const double* inv = inverses[shared_warp ? 0 : b].data();
        const RowJob<scalar_t> job{
            make_geometry(p, src_stride_h, src_stride_w, inv, y),
            src_base + b * src_stride_b,
            out_base + (b * channels * p.dst_h + y) * p.dst_w,
            channels,
            src_stride_c,
            p.dst_h * p.dst_w};
        if (kernels.table) {
          kernels.table(job, *scratch);
        } else {
          kernels.row(job);
        }
      }
    }
  });
}

// The adjoint of forward_impl: grad_image[tap] += weight * grad_output[pixel]
// for every tap inside the image. Planes are independent, so they are spread
// over the threads and each is accumulated serially (deterministic).
template <typename scalar_t>
void backward_impl(const Problem& p,
                   const std::vector<std::array<double, 9>>& inverses,
                   const Tensor& grad_out,
                   Tensor& grad_image) {
  const Kernels<scalar_t> kernels = level_kernels<scalar_t>(p);
  const int64_t batch = grad_out.size(0);
  const int64_t channels = grad_out.size(1);
  const int64_t grad_stride_b = grad_out.stride(0);
  const int64_t grad_stride_c = grad_out.stride(1);
  const int64_t grad_stride_h = grad_out.stride(2);
  const int64_t grad_stride_w = grad_out.stride(3);
  const bool shared_warp = inverses.size() == 1;
  const scalar_t* grad_base = grad_out.const_data_ptr<scalar_t>();
  scalar_t* gi_base = grad_image.mutable_data_ptr<scalar_t>();
  const int64_t plane_size = p.src_h * p.src_w;
  run_workers(batch * channels, 1, [&](ChunkQueue& queue) {
    RowTaps<scalar_t> taps(p.dst_w);
    int64_t plane = 0;
    int64_t plane_end = 0;
    while (queue.pop(plane, plane_end)) {
      const int64_t b = plane / channels;
      const int64_t c = plane % channels;
      const double* inv = inverses[shared_warp ? 0 : b].data();
      scalar_t* gi = gi_base + plane * plane_size;
      const scalar_t* g = grad_base + b * grad_stride_b + c * grad_stride_c;
      for (int64_t y = 0; y < p.dst_h; ++y) {
        // grad_image is contiguous: its strides are (src_w, 1).
        kernels.backward(make_geometry(p, p.src_w, 1, inv, y),
                         g + y * grad_stride_h,
                         grad_stride_w,
                         gi,
                         taps);
      }
    }
  });
}

}  // namespace

const char* cpu_level() {
  switch (cpu_isa()) {
    case Isa::kAvx512:
      return "avx512";
    case Isa::kAvx2:
      return "avx2";
    default:
      return "portable";
  }
}

void builtin_sampling_forward(
    const Problem& p,
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

void builtin_sampling_backward(
    const Problem& p,
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

}  // namespace warp_perspective

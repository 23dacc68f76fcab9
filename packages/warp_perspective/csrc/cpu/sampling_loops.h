// The inner loops of the built-in CPU kernel, free of torch headers so that
// they can be compiled and timed on their own.
#pragma once

#include <torch/headeronly/macros/Macros.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "homography.h"

namespace warp_perspective {
namespace cpu {

// Tap offsets are int32 (twice the gather throughput of int64 with AVX2): a
// plane must span fewer than 2^31 elements, checked before the kernels run.
using index_t = int32_t;

// Bit i of a pixel's mask is set when tap i (00, 01, 10, 11 = top-left,
// top-right, bottom-left, bottom-right) lies inside the source image.
constexpr uint8_t kAllTapsInside = 0xF;

// Per-row scratch: the taps of every pixel of one destination row, as
// structure of arrays so that both loops vectorise.
// Rounded up to whole groups of 8 for the AVX2 loops, which write whole groups.
inline int64_t table_size(int64_t n) {
  return (n + 7) / 8 * 8;
}

template <typename weight_t>
struct RowTaps {
  explicit RowTaps(int64_t n)
      : o00(table_size(n)),
        o01(table_size(n)),
        o10(table_size(n)),
        o11(table_size(n)),
        w00(table_size(n)),
        w01(table_size(n)),
        w10(table_size(n)),
        w11(table_size(n)),
        mask(table_size(n)) {}
  std::vector<index_t> o00, o01, o10, o11;
  std::vector<weight_t> w00, w01, w10, w11;
  std::vector<uint8_t> mask;
};

struct Geometry {
  const double* inv;  // the inverse homography, row-major
  double y;           // the destination row
  int64_t n;          // destination pixels in the row
  int64_t src_w;
  int64_t src_h;
  index_t stride_w;  // source strides, in elements
  index_t stride_h;
};

// One destination row of one image, every channel: what the row kernels that
// keep the geometry in registers (sampling_rows.h) work on.
template <typename scalar_t>
struct RowJob {
  Geometry g;
  const scalar_t* src;  // the image's channel 0
  scalar_t* out;        // the row in the output's channel 0
  int64_t channels;
  int64_t src_stride_c;  // in elements
  int64_t out_stride_c;
};

// The row kernels prefetch the source this many rows below the window they
// read, see bilinear_row in sampling_rows.h.
constexpr int64_t kPrefetchRows = 4;

// A hint to fetch the line of src[offset] into L1; the address may lie past
// the image (a prefetch never faults), hence the integer arithmetic.
template <typename scalar_t>
C10_ALWAYS_INLINE void prefetch_ahead(const scalar_t* src, int64_t offset) {
  __builtin_prefetch(reinterpret_cast<const char*>(
                         reinterpret_cast<uintptr_t>(src) +
                         static_cast<uintptr_t>(offset * sizeof(scalar_t))),
                     0,
                     3);
}

// clang-format off
// The vector operations of sampling_rows.h whose intrinsics differ only by
// the width's prefix P (_mm256, _mm512) and integer suffix SI (si256, si512):
// written once, expanded in each instruction set's Vec.
#define WARP_PERSPECTIVE_VEC_OPS(P, SI)                             \
  static D dset(double v) { return P##_set1_pd(v); }                \
  static D dadd(D a, D b) { return P##_add_pd(a, b); }              \
  static D dsub(D a, D b) { return P##_sub_pd(a, b); }              \
  static D dmul(D a, D b) { return P##_mul_pd(a, b); }              \
  static D dfmadd(D a, D b, D c) { return P##_fmadd_pd(a, b, c); }  \
  static D dmin(D a, D b) { return P##_min_pd(a, b); }              \
  static D dmax(D a, D b) { return P##_max_pd(a, b); }              \
  static F fset(float v) { return P##_set1_ps(v); }                 \
  static F fsub(F a, F b) { return P##_sub_ps(a, b); }              \
  static F fmul(F a, F b) { return P##_mul_ps(a, b); }              \
  static F ffmadd(F a, F b, F c) { return P##_fmadd_ps(a, b, c); }  \
  static I iset(int v) { return P##_set1_epi32(v); }                \
  static I iadd(I a, I b) { return P##_add_epi32(a, b); }           \
  static I isub(I a, I b) { return P##_sub_epi32(a, b); }           \
  static I imul(I a, I b) { return P##_mullo_epi32(a, b); }         \
  static I clamp(I v, I last) {                                     \
    return P##_min_epi32(P##_max_epi32(v, P##_setzero_##SI()), last); \
  }                                                                 \
  static F load(const float* p) { return P##_loadu_ps(p); }
// clang-format on

// Bilinear taps of one row. With zeros padding a tap outside the image gets
// weight 0 and offset 0, and its bit in mask stays clear; with border padding
// taps are clamped into the image and every bit is set.
template <bool kBorder, typename weight_t>
C10_ALWAYS_INLINE void bilinear_taps_loop(const Geometry& g,
                                          index_t* __restrict__ o00,
                                          index_t* __restrict__ o01,
                                          index_t* __restrict__ o10,
                                          index_t* __restrict__ o11,
                                          weight_t* __restrict__ w00,
                                          weight_t* __restrict__ w01,
                                          weight_t* __restrict__ w10,
                                          weight_t* __restrict__ w11,
                                          uint8_t* __restrict__ mask) {
  const double* m = g.inv;
  const double bx = m[1] * g.y + m[2];
  const double by = m[4] * g.y + m[5];
  const double bw = m[7] * g.y + m[8];
  const double fw = static_cast<double>(g.src_w);
  const double fh = static_cast<double>(g.src_h);
  const index_t last_x = static_cast<index_t>(g.src_w - 1);
  const index_t last_y = static_cast<index_t>(g.src_h - 1);
  for (int64_t i = 0; i < g.n; ++i) {
    const double x = static_cast<double>(i);
    const double w0 = m[6] * x + bw;
    // Divide unconditionally, then select: a division under a condition is
    // control flow the vectoriser will not if-convert (it could trap).
    const double rw = 1.0 / w0;
    const double w = w0 != 0.0 ? rw : 0.0;
    const double sx = clamp_coordinate((m[0] * x + bx) * w, fw);
    const double sy = clamp_coordinate((m[3] * x + by) * w, fh);
    const double flx = std::floor(sx);
    const double fly = std::floor(sy);
    const weight_t ax = static_cast<weight_t>(sx - flx);
    const weight_t ay = static_cast<weight_t>(sy - fly);
    index_t x0 = static_cast<index_t>(flx);
    index_t y0 = static_cast<index_t>(fly);
    index_t x1 = x0 + 1;
    index_t y1 = y0 + 1;
    weight_t wx0 = 1 - ax;
    weight_t wx1 = ax;
    weight_t wy0 = 1 - ay;
    weight_t wy1 = ay;
    uint8_t bits = kAllTapsInside;
    if constexpr (kBorder) {
      x0 = std::min(std::max(x0, index_t(0)), last_x);
      x1 = std::min(std::max(x1, index_t(0)), last_x);
      y0 = std::min(std::max(y0, index_t(0)), last_y);
      y1 = std::min(std::max(y1, index_t(0)), last_y);
    } else {
      // One unsigned comparison per bound check: && would be control flow.
      const bool vx0 =
          static_cast<uint32_t>(x0) <= static_cast<uint32_t>(last_x);
      const bool vx1 =
          static_cast<uint32_t>(x1) <= static_cast<uint32_t>(last_x);
      const bool vy0 =
          static_cast<uint32_t>(y0) <= static_cast<uint32_t>(last_y);
      const bool vy1 =
          static_cast<uint32_t>(y1) <= static_cast<uint32_t>(last_y);
      // Zeros padding is separable: a tap is inside when its column and its
      // row are, so zeroing the weight of an outside column or row zeroes
      // exactly the outside taps.
      wx0 = vx0 ? wx0 : weight_t(0);
      wx1 = vx1 ? wx1 : weight_t(0);
      wy0 = vy0 ? wy0 : weight_t(0);
      wy1 = vy1 ? wy1 : weight_t(0);
      x0 = vx0 ? x0 : index_t(0);
      x1 = vx1 ? x1 : index_t(0);
      y0 = vy0 ? y0 : index_t(0);
      y1 = vy1 ? y1 : index_t(0);
      bits = static_cast<uint8_t>((vx0 & vy0) | ((vx1 & vy0) << 1) |
                                  ((vx0 & vy1) << 2) | ((vx1 & vy1) << 3));
    }
    const index_t r0 = y0 * g.stride_h;
    const index_t r1 = y1 * g.stride_h;
    const index_t c0 = x0 * g.stride_w;
    const index_t c1 = x1 * g.stride_w;
    o00[i] = r0 + c0;
    o01[i] = r0 + c1;
    o10[i] = r1 + c0;
    o11[i] = r1 + c1;
    w00[i] = wy0 * wx0;
    w01[i] = wy0 * wx1;
    w10[i] = wy1 * wx0;
    w11[i] = wy1 * wx1;
    mask[i] = bits;
  }
}

// Nearest taps of one row: one offset per pixel, rounded half to even as
// OpenCV's cvRound does. With zeros padding an outside tap gets offset 0 and
// mask 0.
template <bool kBorder>
C10_ALWAYS_INLINE void nearest_taps_loop(const Geometry& g,
                                         index_t* __restrict__ off,
                                         uint8_t* __restrict__ mask) {
  const double* m = g.inv;
  const double bx = m[1] * g.y + m[2];
  const double by = m[4] * g.y + m[5];
  const double bw = m[7] * g.y + m[8];
  const double fw = static_cast<double>(g.src_w);
  const double fh = static_cast<double>(g.src_h);
  const index_t last_x = static_cast<index_t>(g.src_w - 1);
  const index_t last_y = static_cast<index_t>(g.src_h - 1);
  for (int64_t i = 0; i < g.n; ++i) {
    const double x = static_cast<double>(i);
    const double w0 = m[6] * x + bw;
    // Divide unconditionally, then select: a division under a condition is
    // control flow the vectoriser will not if-convert (it could trap).
    const double rw = 1.0 / w0;
    const double w = w0 != 0.0 ? rw : 0.0;
    const double sx = clamp_coordinate((m[0] * x + bx) * w, fw);
    const double sy = clamp_coordinate((m[3] * x + by) * w, fh);
    index_t ix = static_cast<index_t>(std::nearbyint(sx));
    index_t iy = static_cast<index_t>(std::nearbyint(sy));
    uint8_t inside = kAllTapsInside;
    if constexpr (kBorder) {
      ix = std::min(std::max(ix, index_t(0)), last_x);
      iy = std::min(std::max(iy, index_t(0)), last_y);
    } else {
      const bool v =
          (static_cast<uint32_t>(ix) <= static_cast<uint32_t>(last_x)) &
          (static_cast<uint32_t>(iy) <= static_cast<uint32_t>(last_y));
      ix = v ? ix : index_t(0);
      iy = v ? iy : index_t(0);
      inside = v ? kAllTapsInside : uint8_t(0);
    }
    off[i] = iy * g.stride_h + ix * g.stride_w;
    mask[i] = inside;
  }
}

template <typename scalar_t, typename weight_t>
C10_ALWAYS_INLINE void bilinear_gather_loop(const scalar_t* __restrict__ src,
                                            const index_t* __restrict__ o00,
                                            const index_t* __restrict__ o01,
                                            const index_t* __restrict__ o10,
                                            const index_t* __restrict__ o11,
                                            const weight_t* __restrict__ w00,
                                            const weight_t* __restrict__ w01,
                                            const weight_t* __restrict__ w10,
                                            const weight_t* __restrict__ w11,
                                            scalar_t* __restrict__ out,
                                            int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const weight_t v = w00[i] * static_cast<weight_t>(src[o00[i]]) +
                       w01[i] * static_cast<weight_t>(src[o01[i]]) +
                       w10[i] * static_cast<weight_t>(src[o10[i]]) +
                       w11[i] * static_cast<weight_t>(src[o11[i]]);
    out[i] = static_cast<scalar_t>(v);
  }
}

template <typename scalar_t>
C10_ALWAYS_INLINE void nearest_gather_loop(const scalar_t* __restrict__ src,
                                           const index_t* __restrict__ off,
                                           scalar_t* __restrict__ out,
                                           int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    out[i] = src[off[i]];
  }
}

}  // namespace cpu
}  // namespace warp_perspective

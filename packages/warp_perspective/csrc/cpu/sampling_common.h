// What every level of the built-in CPU kernel shares (sampling_per_level.h is
// built once per level over its Vec): the row and table types, the scalar
// gather and fix-up loops that each level inlines, and the kernels' table
// (Kernels). Free of torch headers.
#pragma once

#include <torch/headeronly/macros/Macros.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
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
// structure of arrays so that the gathers vectorise. Rounded up to whole
// groups of the widest level (16 lanes): the tables are written whole groups
// at a time.
inline int64_t table_size(int64_t n) {
  return (n + 15) / 16 * 16;
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
// keep the geometry in registers (sampling_per_level.h) work on.
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
// read, see bilinear_row in sampling_per_level.h.
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
// The vector operations of sampling_per_level.h whose intrinsics differ only by
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

// The pixels of a row with a tap outside the image (zeros padding only), found
// once per row, 8 masks at a time (most rows have a handful, at the ends).
inline void find_outside(const uint8_t* mask,
                         int64_t n,
                         std::vector<int32_t>& out) {
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

// Those pixels recomputed from their inside taps alone: the gather read
// src[0] in place of the outside taps, which is harmless (weight 0) unless
// src[0] is inf or NaN.
template <bool kNearest, typename scalar_t, typename weight_t>
void fix_outside_taps(const RowTaps<weight_t>& t,
                      const std::vector<int32_t>& outside,
                      const scalar_t* src,
                      scalar_t* out) {
  for (const int32_t i : outside) {
    const uint8_t bits = t.mask[i];
    if constexpr (kNearest) {
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

// What a thread keeps across the rows of the float64 forward.
template <typename scalar_t>
struct RowScratch {
  explicit RowScratch(int64_t n) : taps(n) {}
  RowTaps<scalar_t> taps;
  std::vector<int32_t> outside;
};

// A CPU level's kernels for one dtype and mode (sampling_tables_per_level.h's
// kernels()), null where the dtype has none: row for the float32 and uint8
// forward, table for the float64 forward, backward for float32 and float64.
template <typename scalar_t>
struct Kernels {
  void (*row)(const RowJob<scalar_t>&) = nullptr;
  void (*table)(const RowJob<scalar_t>&, RowScratch<scalar_t>&) = nullptr;
  void (*backward)(const Geometry& g,
                   const scalar_t* grad,
                   int64_t grad_stride,
                   scalar_t* grad_image,
                   RowTaps<scalar_t>& taps) = nullptr;
};

}  // namespace cpu
}  // namespace warp_perspective

// The built-in CPU kernel with AVX2 (chosen at run time, see
// builtin_kernel.cpp), two ways:
//
// - Row kernels (float32, uint8; the second half of this file): one
//   destination row of every channel, 8 pixels at a time, the geometry kept
//   in registers while every channel is sampled, and taps picked from vector
//   loads of a window of the source rows where they fit one (see
//   sampling_avx512.h, which does the same 16 pixels at a time). On the
//   2-core AMD EPYC VM with AVX2 forced, this halved the time of the table
//   loops below (1080p, 8 x 3 float32, one thread: ~83 against ~163 ms).
//
// - Geometry tables (float64, and the backward): for one destination row the
//   source coordinates in double (4 lanes per instruction, the same
//   arithmetic as the portable loops in sampling_loops.h and as OpenCV),
//   turned into the row's tap offsets, weights and inside-masks, from which
//   every channel is gathered. GCC does not vectorise the portable loop
//   (double -> int32 and double -> float conversions under selects).
#pragma once

#if defined(__x86_64__) && defined(__GNUC__)
#define WARP_PERSPECTIVE_HAVE_AVX2 1

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "cpu/sampling_loops.h"

namespace warp_perspective {
namespace cpu {

#define WP_AVX2 __attribute__((target("avx2,fma")))

// Source coordinates of 4 pixels x (as doubles), clamped to [-2, size + 1]
// like clamp_coordinate (NaN to -2: MAXPD returns its second operand when
// either is NaN).
WP_AVX2 inline void coords4(const Geometry& a,
                            __m256d x,
                            __m256d& sx,
                            __m256d& sy) {
  const double* m = a.inv;
  const __m256d bx = _mm256_set1_pd(m[1] * a.y + m[2]);
  const __m256d by = _mm256_set1_pd(m[4] * a.y + m[5]);
  const __m256d bw = _mm256_set1_pd(m[7] * a.y + m[8]);
  const __m256d w0 = _mm256_add_pd(_mm256_mul_pd(_mm256_set1_pd(m[6]), x), bw);
  // w == 0 maps to (0, 0), as in OpenCV (and source_coordinate).
  const __m256d nonzero = _mm256_cmp_pd(w0, _mm256_setzero_pd(), _CMP_NEQ_OQ);
  const __m256d w =
      _mm256_and_pd(_mm256_div_pd(_mm256_set1_pd(1.0), w0), nonzero);
  sx = _mm256_mul_pd(_mm256_add_pd(_mm256_mul_pd(_mm256_set1_pd(m[0]), x), bx),
                     w);
  sy = _mm256_mul_pd(_mm256_add_pd(_mm256_mul_pd(_mm256_set1_pd(m[3]), x), by),
                     w);
  const __m256d lo = _mm256_set1_pd(-2.0);
  sx = _mm256_min_pd(_mm256_max_pd(sx, lo),
                     _mm256_set1_pd(static_cast<double>(a.src_w) + 1.0));
  sy = _mm256_min_pd(_mm256_max_pd(sy, lo),
                     _mm256_set1_pd(static_cast<double>(a.src_h) + 1.0));
}

WP_AVX2 inline __m256i join(__m128i lo, __m128i hi) {
  return _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
}

WP_AVX2 inline __m256 join(__m128 lo, __m128 hi) {
  return _mm256_insertf128_ps(_mm256_castps128_ps256(lo), hi, 1);
}

// 0 <= v < size, per lane, as an all-ones / all-zeros mask.
WP_AVX2 inline __m256i inside(__m256i v, __m256i size) {
  return _mm256_and_si256(_mm256_cmpgt_epi32(v, _mm256_set1_epi32(-1)),
                          _mm256_cmpgt_epi32(size, v));
}

WP_AVX2 inline __m256i clamp(__m256i v, __m256i last) {
  return _mm256_min_epi32(_mm256_max_epi32(v, _mm256_setzero_si256()), last);
}

// A mask of 4 int32 lanes (half 0 or 1 of m) widened to 4 double lanes.
WP_AVX2 inline __m256d widen_lo(__m256i m) {
  return _mm256_castsi256_pd(_mm256_cvtepi32_epi64(_mm256_castsi256_si128(m)));
}

WP_AVX2 inline __m256d widen_hi(__m256i m) {
  return _mm256_castsi256_pd(
      _mm256_cvtepi32_epi64(_mm256_extracti128_si256(m, 1)));
}

WP_AVX2 inline void store_offsets(index_t* p, __m256i v) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v);
}

template <typename weight_t>
WP_AVX2 inline void store_weight(weight_t* p, __m256d lo, __m256d hi) {
  if constexpr (std::is_same_v<weight_t, float>) {
    _mm256_storeu_ps(p, join(_mm256_cvtpd_ps(lo), _mm256_cvtpd_ps(hi)));
  } else {
    _mm256_storeu_pd(p, lo);
    _mm256_storeu_pd(p + 4, hi);
  }
}

// Masks (all-ones lanes) of the 4 taps as the 4 bits of one byte per pixel.
WP_AVX2 inline void store_mask(uint8_t* p,
                               __m256i m00,
                               __m256i m01,
                               __m256i m10,
                               __m256i m11) {
  __m256i bits = _mm256_and_si256(m00, _mm256_set1_epi32(1));
  bits = _mm256_or_si256(bits, _mm256_and_si256(m01, _mm256_set1_epi32(2)));
  bits = _mm256_or_si256(bits, _mm256_and_si256(m10, _mm256_set1_epi32(4)));
  bits = _mm256_or_si256(bits, _mm256_and_si256(m11, _mm256_set1_epi32(8)));
  const __m128i w16 = _mm_packus_epi32(_mm256_castsi256_si128(bits),
                                       _mm256_extracti128_si256(bits, 1));
  _mm_storel_epi64(reinterpret_cast<__m128i*>(p), _mm_packus_epi16(w16, w16));
}

// bilinear_taps_loop with AVX2. The tables must hold a multiple of 8 pixels:
// the last group is written whole (lanes past the row hold real taps).
template <bool kBorder, typename weight_t>
WP_AVX2 void bilinear_taps_avx2(const Geometry& g, RowTaps<weight_t>& t) {
  const __m256i size_x = _mm256_set1_epi32(static_cast<int>(g.src_w));
  const __m256i size_y = _mm256_set1_epi32(static_cast<int>(g.src_h));
  const __m256i last_x = _mm256_set1_epi32(static_cast<int>(g.src_w - 1));
  const __m256i last_y = _mm256_set1_epi32(static_cast<int>(g.src_h - 1));
  const __m256i one = _mm256_set1_epi32(1);
  const __m256i sw = _mm256_set1_epi32(g.stride_w);
  const __m256i sh = _mm256_set1_epi32(g.stride_h);
  const __m256d done = _mm256_set1_pd(1.0);
  const __m256d step = _mm256_setr_pd(0.0, 1.0, 2.0, 3.0);
  for (int64_t x0 = 0; x0 < g.n; x0 += 8) {
    const __m256d xa = _mm256_add_pd(_mm256_set1_pd(double(x0)), step);
    const __m256d xb = _mm256_add_pd(xa, _mm256_set1_pd(4.0));
    __m256d sxa, sya, sxb, syb;
    coords4(g, xa, sxa, sya);
    coords4(g, xb, sxb, syb);
    const __m256d fxa = _mm256_floor_pd(sxa), fya = _mm256_floor_pd(sya);
    const __m256d fxb = _mm256_floor_pd(sxb), fyb = _mm256_floor_pd(syb);
    // Weights of the far column / row (ax, ay) and of the near one (1 - a),
    // in double until they are stored.
    __m256d axa = _mm256_sub_pd(sxa, fxa), axb = _mm256_sub_pd(sxb, fxb);
    __m256d aya = _mm256_sub_pd(sya, fya), ayb = _mm256_sub_pd(syb, fyb);
    __m256d bxa = _mm256_sub_pd(done, axa), bxb = _mm256_sub_pd(done, axb);
    __m256d bya = _mm256_sub_pd(done, aya), byb = _mm256_sub_pd(done, ayb);
    __m256i ix0 = join(_mm256_cvttpd_epi32(fxa), _mm256_cvttpd_epi32(fxb));
    __m256i iy0 = join(_mm256_cvttpd_epi32(fya), _mm256_cvttpd_epi32(fyb));
    __m256i ix1 = _mm256_add_epi32(ix0, one);
    __m256i iy1 = _mm256_add_epi32(iy0, one);
    __m256i all = _mm256_set1_epi32(-1);
    __m256i m00 = all, m01 = all, m10 = all, m11 = all;
    if constexpr (kBorder) {
      ix0 = clamp(ix0, last_x);
      ix1 = clamp(ix1, last_x);
      iy0 = clamp(iy0, last_y);
      iy1 = clamp(iy1, last_y);
    } else {
      const __m256i vx0 = inside(ix0, size_x), vx1 = inside(ix1, size_x);
      const __m256i vy0 = inside(iy0, size_y), vy1 = inside(iy1, size_y);
      m00 = _mm256_and_si256(vx0, vy0);
      m01 = _mm256_and_si256(vx1, vy0);
      m10 = _mm256_and_si256(vx0, vy1);
      m11 = _mm256_and_si256(vx1, vy1);
      // As in the portable loop: an outside column or row gets weight 0 and
      // index 0 (zeros padding is separable).
      ix0 = _mm256_and_si256(ix0, vx0);
      ix1 = _mm256_and_si256(ix1, vx1);
      iy0 = _mm256_and_si256(iy0, vy0);
      iy1 = _mm256_and_si256(iy1, vy1);
      bxa = _mm256_and_pd(bxa, widen_lo(vx0));
      bxb = _mm256_and_pd(bxb, widen_hi(vx0));
      axa = _mm256_and_pd(axa, widen_lo(vx1));
      axb = _mm256_and_pd(axb, widen_hi(vx1));
      bya = _mm256_and_pd(bya, widen_lo(vy0));
      byb = _mm256_and_pd(byb, widen_hi(vy0));
      aya = _mm256_and_pd(aya, widen_lo(vy1));
      ayb = _mm256_and_pd(ayb, widen_hi(vy1));
    }
    const __m256i r0 = _mm256_mullo_epi32(iy0, sh);
    const __m256i r1 = _mm256_mullo_epi32(iy1, sh);
    const __m256i c0 = _mm256_mullo_epi32(ix0, sw);
    const __m256i c1 = _mm256_mullo_epi32(ix1, sw);
    store_offsets(t.o00.data() + x0, _mm256_add_epi32(r0, c0));
    store_offsets(t.o01.data() + x0, _mm256_add_epi32(r0, c1));
    store_offsets(t.o10.data() + x0, _mm256_add_epi32(r1, c0));
    store_offsets(t.o11.data() + x0, _mm256_add_epi32(r1, c1));
    store_weight(
        t.w00.data() + x0, _mm256_mul_pd(bya, bxa), _mm256_mul_pd(byb, bxb));
    store_weight(
        t.w01.data() + x0, _mm256_mul_pd(bya, axa), _mm256_mul_pd(byb, axb));
    store_weight(
        t.w10.data() + x0, _mm256_mul_pd(aya, bxa), _mm256_mul_pd(ayb, bxb));
    store_weight(
        t.w11.data() + x0, _mm256_mul_pd(aya, axa), _mm256_mul_pd(ayb, axb));
    store_mask(t.mask.data() + x0, m00, m01, m10, m11);
  }
}

// nearest_taps_loop with AVX2; same table size rule.
template <bool kBorder>
WP_AVX2 void nearest_taps_avx2(const Geometry& g, index_t* off, uint8_t* mask) {
  const __m256i size_x = _mm256_set1_epi32(static_cast<int>(g.src_w));
  const __m256i size_y = _mm256_set1_epi32(static_cast<int>(g.src_h));
  const __m256i last_x = _mm256_set1_epi32(static_cast<int>(g.src_w - 1));
  const __m256i last_y = _mm256_set1_epi32(static_cast<int>(g.src_h - 1));
  const __m256i sw = _mm256_set1_epi32(g.stride_w);
  const __m256i sh = _mm256_set1_epi32(g.stride_h);
  const __m256d step = _mm256_setr_pd(0.0, 1.0, 2.0, 3.0);
  constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  for (int64_t x0 = 0; x0 < g.n; x0 += 8) {
    const __m256d xa = _mm256_add_pd(_mm256_set1_pd(double(x0)), step);
    const __m256d xb = _mm256_add_pd(xa, _mm256_set1_pd(4.0));
    __m256d sxa, sya, sxb, syb;
    coords4(g, xa, sxa, sya);
    coords4(g, xb, sxb, syb);
    // Half to even, as OpenCV's cvRound.
    __m256i ix = join(_mm256_cvttpd_epi32(_mm256_round_pd(sxa, kRound)),
                      _mm256_cvttpd_epi32(_mm256_round_pd(sxb, kRound)));
    __m256i iy = join(_mm256_cvttpd_epi32(_mm256_round_pd(sya, kRound)),
                      _mm256_cvttpd_epi32(_mm256_round_pd(syb, kRound)));
    __m256i valid = _mm256_set1_epi32(-1);
    if constexpr (kBorder) {
      ix = clamp(ix, last_x);
      iy = clamp(iy, last_y);
    } else {
      valid = _mm256_and_si256(inside(ix, size_x), inside(iy, size_y));
      ix = _mm256_and_si256(ix, valid);
      iy = _mm256_and_si256(iy, valid);
    }
    store_offsets(off + x0,
                  _mm256_add_epi32(_mm256_mullo_epi32(iy, sh),
                                   _mm256_mullo_epi32(ix, sw)));
    store_mask(mask + x0, valid, valid, valid, valid);
  }
}

// ---- Row kernels: geometry in registers, every channel of a row ----------
//
// bilinear_row_avx512 and nearest_row_avx512 (sampling_avx512.h) with 8
// pixels per group: a group whose taps fit a window of 16 columns on three
// rows reads each row's window with two loads and picks its taps with two
// vpermps and a blend (AVX2 permutes 8 lanes); other groups gather.

// Destination columns x0 .. x0 + 7 as doubles, past the row's end replaced by
// its last column (see columns16).
WP_AVX2 inline void columns8(const Geometry& g,
                             int64_t x0,
                             __m256d& xa,
                             __m256d& xb) {
  const __m256d last = _mm256_set1_pd(static_cast<double>(g.n - 1));
  const __m256d base = _mm256_set1_pd(static_cast<double>(x0));
  xa = _mm256_min_pd(_mm256_add_pd(base, _mm256_setr_pd(0, 1, 2, 3)), last);
  xb = _mm256_min_pd(_mm256_add_pd(base, _mm256_setr_pd(4, 5, 6, 7)), last);
}

struct Bilinear8 {
  __m256i ix, iy;  // top-left tap, unclamped
  __m256 w00, w01, w10, w11;
};

WP_AVX2 inline Bilinear8 bilinear8(const Geometry& g, int64_t x0) {
  __m256d xa, xb, sxa, sya, sxb, syb;
  columns8(g, x0, xa, xb);
  coords4(g, xa, sxa, sya);
  coords4(g, xb, sxb, syb);
  const __m256d fxa = _mm256_floor_pd(sxa), fxb = _mm256_floor_pd(sxb);
  const __m256d fya = _mm256_floor_pd(sya), fyb = _mm256_floor_pd(syb);
  Bilinear8 t;
  t.ix = join(_mm256_cvttpd_epi32(fxa), _mm256_cvttpd_epi32(fxb));
  t.iy = join(_mm256_cvttpd_epi32(fya), _mm256_cvttpd_epi32(fyb));
  const __m256 ax = join(_mm256_cvtpd_ps(_mm256_sub_pd(sxa, fxa)),
                         _mm256_cvtpd_ps(_mm256_sub_pd(sxb, fxb)));
  const __m256 ay = join(_mm256_cvtpd_ps(_mm256_sub_pd(sya, fya)),
                         _mm256_cvtpd_ps(_mm256_sub_pd(syb, fyb)));
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 bx = _mm256_sub_ps(one, ax);
  const __m256 by = _mm256_sub_ps(one, ay);
  t.w00 = _mm256_mul_ps(by, bx);
  t.w01 = _mm256_mul_ps(by, ax);
  t.w10 = _mm256_mul_ps(ay, bx);
  t.w11 = _mm256_mul_ps(ay, ax);
  return t;
}

WP_AVX2 inline void nearest8(const Geometry& g,
                             int64_t x0,
                             __m256i& ix,
                             __m256i& iy) {
  __m256d xa, xb, sxa, sya, sxb, syb;
  columns8(g, x0, xa, xb);
  coords4(g, xa, sxa, sya);
  coords4(g, xb, sxb, syb);
  constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  ix = join(_mm256_cvttpd_epi32(_mm256_round_pd(sxa, kRound)),
            _mm256_cvttpd_epi32(_mm256_round_pd(sxb, kRound)));
  iy = join(_mm256_cvttpd_epi32(_mm256_round_pd(sya, kRound)),
            _mm256_cvttpd_epi32(_mm256_round_pd(syb, kRound)));
}

WP_AVX2 inline __m256 load8(const float* p) {
  return _mm256_loadu_ps(p);
}

WP_AVX2 inline __m256 load8(const uint8_t* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(
      _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}

// The first n (1 to 8) lanes of v, converted as to_scalar does.
WP_AVX2 inline void store8(float* p, int64_t n, __m256 v) {
  if (n >= 8) {
    _mm256_storeu_ps(p, v);
  } else {
    const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    _mm256_maskstore_ps(
        p,
        _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), lanes),
        v);
  }
}

WP_AVX2 inline void store8(uint8_t* p, int64_t n, __m256 v) {
  // Round half up, then saturate to [0, 255] by the two unsigned packs.
  const __m256i r = _mm256_cvttps_epi32(
      _mm256_floor_ps(_mm256_add_ps(v, _mm256_set1_ps(0.5f))));
  const __m128i w16 = _mm_packus_epi32(_mm256_castsi256_si128(r),
                                       _mm256_extracti128_si256(r, 1));
  const __m128i b8 = _mm_packus_epi16(w16, w16);
  if (n >= 8) {
    _mm_storel_epi64(reinterpret_cast<__m128i*>(p), b8);
  } else {
    alignas(16) uint8_t bytes[16];
    _mm_store_si128(reinterpret_cast<__m128i*>(bytes), b8);
    for (int64_t i = 0; i < n; ++i) {
      p[i] = bytes[i];
    }
  }
}

// src[off] where valid (all-ones lanes), 0 elsewhere (those lanes read
// nothing).
WP_AVX2 inline __m256 gather8(const float* src, __m256i valid, __m256i off) {
  return _mm256_mask_i32gather_ps(
      _mm256_setzero_ps(), src, off, _mm256_castsi256_ps(valid), 4);
}

WP_AVX2 inline __m256 gather8(const uint8_t* src, __m256i valid, __m256i off) {
  alignas(32) int32_t o[8];
  alignas(32) int32_t k[8];
  alignas(32) float v[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(o), off);
  _mm256_store_si256(reinterpret_cast<__m256i*>(k), valid);
  for (int i = 0; i < 8; ++i) {
    v[i] = k[i] ? static_cast<float>(src[o[i]]) : 0.0f;
  }
  return _mm256_load_ps(v);
}

WP_AVX2 inline __m256 blend_taps(const Bilinear8& t,
                                 __m256 v00,
                                 __m256 v01,
                                 __m256 v10,
                                 __m256 v11) {
  __m256 v = _mm256_mul_ps(t.w00, v00);
  v = _mm256_fmadd_ps(t.w01, v01, v);
  v = _mm256_fmadd_ps(t.w10, v10, v);
  return _mm256_fmadd_ps(t.w11, v11, v);
}

// Lanes where mask is all ones take b, the others a.
WP_AVX2 inline __m256 select8(__m256i mask, __m256 a, __m256 b) {
  return _mm256_blendv_ps(a, b, _mm256_castsi256_ps(mask));
}

// Elements index (0 to 15) of the 16-element table (lo, hi); high marks the
// lanes whose index is 8 or more.
WP_AVX2 inline __m256 pick16(__m256 lo,
                             __m256 hi,
                             __m256i index,
                             __m256i high) {
  return select8(high,
                 _mm256_permutevar8x32_ps(lo, index),
                 _mm256_permutevar8x32_ps(hi, index));
}

WP_AVX2 inline bool all_lanes(__m256i mask) {
  return _mm256_movemask_ps(_mm256_castsi256_ps(mask)) == 0xFF;
}

WP_AVX2 inline int hmin8(__m256i v) {
  __m128i m =
      _mm_min_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  m = _mm_min_epi32(m, _mm_shuffle_epi32(m, _MM_SHUFFLE(1, 0, 3, 2)));
  m = _mm_min_epi32(m, _mm_shuffle_epi32(m, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(m);
}

WP_AVX2 inline int hmax8(__m256i v) {
  __m128i m =
      _mm_max_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  m = _mm_max_epi32(m, _mm_shuffle_epi32(m, _MM_SHUFFLE(1, 0, 3, 2)));
  m = _mm_max_epi32(m, _mm_shuffle_epi32(m, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(m);
}

// lo <= v <= hi per lane.
WP_AVX2 inline __m256i between(__m256i v, int lo, int hi) {
  return _mm256_andnot_si256(
      _mm256_or_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(lo), v),
                      _mm256_cmpgt_epi32(v, _mm256_set1_epi32(hi))),
      _mm256_set1_epi32(-1));
}

// find_window for 8 pixels and a window of 16 columns.
template <int kSpan>
WP_AVX2 inline bool find_window8(const Geometry& g,
                                 __m256i ix,
                                 __m256i iy,
                                 int64_t& base,
                                 int64_t& row,
                                 __m256i& lower,
                                 __m256i& index) {
  const int xa = _mm256_cvtsi256_si32(ix);
  const int xb = _mm256_extract_epi32(ix, 7);
  const int ya = _mm256_cvtsi256_si32(iy);
  const int yb = _mm256_extract_epi32(iy, 7);
  const int xlo = std::min(xa, xb);
  const int ylo = std::min(ya, yb);
  const __m256i ok = _mm256_and_si256(
      _mm256_and_si256(between(ix, xlo, xlo + 15 - kSpan),
                       between(ix, 0, static_cast<int>(g.src_w - 1 - kSpan))),
      _mm256_and_si256(between(iy, ylo, ylo + 1),
                       between(iy, 0, static_cast<int>(g.src_h - 1 - kSpan))));
  if (!all_lanes(ok)) {
    return false;
  }
  base = std::min<int64_t>(xlo, g.src_w - 16);
  row = ylo;
  lower = _mm256_cmpeq_epi32(iy, _mm256_set1_epi32(ylo + 1));
  index = _mm256_sub_epi32(ix, _mm256_set1_epi32(static_cast<int>(base)));
  return true;
}

WP_AVX2 inline __m256i clamp8(__m256i v, int last) {
  return _mm256_min_epi32(_mm256_max_epi32(v, _mm256_setzero_si256()),
                          _mm256_set1_epi32(last));
}

template <typename scalar_t, bool kBorder>
WP_AVX2 void bilinear_row_avx2(const RowJob<scalar_t>& job) {
  // Copies: the masked stores below would otherwise make the compiler
  // reload every field of job for every channel.
  const Geometry g = job.g;
  const scalar_t* const src = job.src;
  scalar_t* const out_row = job.out;
  const int64_t channels = job.channels;
  const int64_t src_c = job.src_stride_c;
  const int64_t out_c = job.out_stride_c;
  const bool loads = g.stride_w == 1 && g.src_w >= 16 && g.src_h >= 2;
  const int64_t sh = g.stride_h;
  const __m256i size_x = _mm256_set1_epi32(static_cast<int>(g.src_w));
  const __m256i size_y = _mm256_set1_epi32(static_cast<int>(g.src_h));
  const __m256i one = _mm256_set1_epi32(1);
  const __m256i seven = _mm256_set1_epi32(7);
  for (int64_t x0 = 0; x0 < g.n; x0 += 8) {
    const Bilinear8 t = bilinear8(g, x0);
    const int64_t n = g.n - x0;
    scalar_t* out = out_row + x0;
    int64_t base = 0, row = 0;
    __m256i lower, i0;
    if (loads && find_window8<1>(g, t.ix, t.iy, base, row, lower, i0)) {
      const __m256i i1 = _mm256_add_epi32(i0, one);
      const __m256i h0 = _mm256_cmpgt_epi32(i0, seven);
      const __m256i h1 = _mm256_cmpgt_epi32(i1, seven);
      const int64_t r0 = row * sh + base;
      const int64_t r1 = r0 + sh;
      const int64_t r2 = r1 + (_mm256_testz_si256(lower, lower) ? 0 : sh);
      for (int64_t c = 0; c < channels; ++c) {
        const scalar_t* plane = src + c * src_c;
        prefetch_ahead(plane, r0 + kPrefetchRows * sh + 16);
        const __m256 a0 = load8(plane + r0), b0 = load8(plane + r0 + 8);
        const __m256 a1 = load8(plane + r1), b1 = load8(plane + r1 + 8);
        const __m256 a2 = load8(plane + r2), b2 = load8(plane + r2 + 8);
        const __m256 p00 = pick16(a0, b0, i0, h0);
        const __m256 p01 = pick16(a0, b0, i1, h1);
        const __m256 p10 = pick16(a1, b1, i0, h0);
        const __m256 p11 = pick16(a1, b1, i1, h1);
        const __m256 p20 = pick16(a2, b2, i0, h0);
        const __m256 p21 = pick16(a2, b2, i1, h1);
        store8(out + c * out_c,
               n,
               blend_taps(t,
                          select8(lower, p00, p10),
                          select8(lower, p01, p11),
                          select8(lower, p10, p20),
                          select8(lower, p11, p21)));
      }
      continue;
    }
    // As in bilinear_row_avx512: clamped taps, zeroed outside with zeros
    // padding.
    const int last_x = static_cast<int>(g.src_w - 1);
    const int last_y = static_cast<int>(g.src_h - 1);
    const __m256i ix1 = _mm256_add_epi32(t.ix, one);
    const __m256i iy1 = _mm256_add_epi32(t.iy, one);
    const __m256i all = _mm256_set1_epi32(-1);
    __m256i k00 = all, k01 = all, k10 = all, k11 = all;
    if constexpr (!kBorder) {
      const __m256i vx0 = inside(t.ix, size_x), vx1 = inside(ix1, size_x);
      const __m256i vy0 = inside(t.iy, size_y), vy1 = inside(iy1, size_y);
      k00 = _mm256_and_si256(vx0, vy0);
      k01 = _mm256_and_si256(vx1, vy0);
      k10 = _mm256_and_si256(vx0, vy1);
      k11 = _mm256_and_si256(vx1, vy1);
    }
    const __m256i cx0 = clamp8(t.ix, last_x), cx1 = clamp8(ix1, last_x);
    const __m256i cy0 = clamp8(t.iy, last_y), cy1 = clamp8(iy1, last_y);
    if (loads) {
      const int xlo = hmin8(cx0);
      const int ylo = hmin8(cy0);
      if (hmax8(cx1) - xlo <= 15 && hmax8(cy1) - ylo <= 2) {
        base = std::min<int64_t>(xlo, g.src_w - 16);
        const __m256i vbase = _mm256_set1_epi32(static_cast<int>(base));
        i0 = _mm256_sub_epi32(cx0, vbase);
        const __m256i i1 = _mm256_sub_epi32(cx1, vbase);
        const __m256i h0 = _mm256_cmpgt_epi32(i0, seven);
        const __m256i h1 = _mm256_cmpgt_epi32(i1, seven);
        const __m256i vylo = _mm256_set1_epi32(ylo);
        const __m256i dt = _mm256_sub_epi32(cy0, vylo);
        const __m256i db = _mm256_sub_epi32(cy1, vylo);
        const __m256i two = _mm256_add_epi32(one, one);
        const __m256i t1 = _mm256_cmpeq_epi32(dt, one);
        const __m256i t2 = _mm256_cmpeq_epi32(dt, two);
        const __m256i b1 = _mm256_cmpeq_epi32(db, one);
        const __m256i b2 = _mm256_cmpeq_epi32(db, two);
        const int64_t r0 = ylo * sh + base;
        const int64_t r1 = std::min<int64_t>(ylo + 1, last_y) * sh + base;
        const int64_t r2 = std::min<int64_t>(ylo + 2, last_y) * sh + base;
        for (int64_t c = 0; c < channels; ++c) {
          const scalar_t* plane = src + c * src_c;
          const __m256 a0 = load8(plane + r0), e0 = load8(plane + r0 + 8);
          const __m256 a1 = load8(plane + r1), e1 = load8(plane + r1 + 8);
          const __m256 a2 = load8(plane + r2), e2 = load8(plane + r2 + 8);
          const __m256 p00 = pick16(a0, e0, i0, h0);
          const __m256 p01 = pick16(a0, e0, i1, h1);
          const __m256 p10 = pick16(a1, e1, i0, h0);
          const __m256 p11 = pick16(a1, e1, i1, h1);
          const __m256 p20 = pick16(a2, e2, i0, h0);
          const __m256 p21 = pick16(a2, e2, i1, h1);
          __m256 v00 = select8(t2, select8(t1, p00, p10), p20);
          __m256 v01 = select8(t2, select8(t1, p01, p11), p21);
          __m256 v10 = select8(b2, select8(b1, p00, p10), p20);
          __m256 v11 = select8(b2, select8(b1, p01, p11), p21);
          if constexpr (!kBorder) {
            v00 = _mm256_and_ps(v00, _mm256_castsi256_ps(k00));
            v01 = _mm256_and_ps(v01, _mm256_castsi256_ps(k01));
            v10 = _mm256_and_ps(v10, _mm256_castsi256_ps(k10));
            v11 = _mm256_and_ps(v11, _mm256_castsi256_ps(k11));
          }
          store8(out + c * out_c, n, blend_taps(t, v00, v01, v10, v11));
        }
        continue;
      }
    }
    const __m256i sw = _mm256_set1_epi32(g.stride_w);
    const __m256i shv = _mm256_set1_epi32(g.stride_h);
    const __m256i r0 = _mm256_mullo_epi32(cy0, shv);
    const __m256i r1 = _mm256_mullo_epi32(cy1, shv);
    const __m256i c0 = _mm256_mullo_epi32(cx0, sw);
    const __m256i c1 = _mm256_mullo_epi32(cx1, sw);
    const __m256i o00 = _mm256_add_epi32(r0, c0);
    const __m256i o01 = _mm256_add_epi32(r0, c1);
    const __m256i o10 = _mm256_add_epi32(r1, c0);
    const __m256i o11 = _mm256_add_epi32(r1, c1);
    for (int64_t c = 0; c < channels; ++c) {
      const scalar_t* plane = src + c * src_c;
      store8(out + c * out_c,
             n,
             blend_taps(t,
                        gather8(plane, k00, o00),
                        gather8(plane, k01, o01),
                        gather8(plane, k10, o10),
                        gather8(plane, k11, o11)));
    }
  }
}

template <typename scalar_t, bool kBorder>
WP_AVX2 void nearest_row_avx2(const RowJob<scalar_t>& job) {
  // Copies: the masked stores below would otherwise make the compiler
  // reload every field of job for every channel.
  const Geometry g = job.g;
  const scalar_t* const src = job.src;
  scalar_t* const out_row = job.out;
  const int64_t channels = job.channels;
  const int64_t src_c = job.src_stride_c;
  const int64_t out_c = job.out_stride_c;
  const bool loads = g.stride_w == 1 && g.src_w >= 16 && g.src_h >= 2;
  const int64_t sh = g.stride_h;
  const __m256i size_x = _mm256_set1_epi32(static_cast<int>(g.src_w));
  const __m256i size_y = _mm256_set1_epi32(static_cast<int>(g.src_h));
  const __m256i seven = _mm256_set1_epi32(7);
  for (int64_t x0 = 0; x0 < g.n; x0 += 8) {
    __m256i ix, iy;
    nearest8(g, x0, ix, iy);
    const int64_t n = g.n - x0;
    scalar_t* out = out_row + x0;
    int64_t base = 0, row = 0;
    __m256i lower, index;
    if (loads && find_window8<0>(g, ix, iy, base, row, lower, index)) {
      const __m256i high = _mm256_cmpgt_epi32(index, seven);
      const int64_t r0 = row * sh + base;
      const int64_t r1 = r0 + (_mm256_testz_si256(lower, lower) ? 0 : sh);
      for (int64_t c = 0; c < channels; ++c) {
        const scalar_t* plane = src + c * src_c;
        prefetch_ahead(plane, r0 + kPrefetchRows * sh + 16);
        const __m256 p0 =
            pick16(load8(plane + r0), load8(plane + r0 + 8), index, high);
        const __m256 p1 =
            pick16(load8(plane + r1), load8(plane + r1 + 8), index, high);
        store8(out + c * out_c, n, select8(lower, p0, p1));
      }
      continue;
    }
    __m256i valid = _mm256_set1_epi32(-1);
    if constexpr (!kBorder) {
      valid = _mm256_and_si256(inside(ix, size_x), inside(iy, size_y));
    }
    const int last_x = static_cast<int>(g.src_w - 1);
    const int last_y = static_cast<int>(g.src_h - 1);
    const __m256i cx = clamp8(ix, last_x);
    const __m256i cy = clamp8(iy, last_y);
    if (loads) {
      const int xlo = hmin8(cx);
      const int ylo = hmin8(cy);
      if (hmax8(cx) - xlo <= 15 && hmax8(cy) - ylo <= 1) {
        base = std::min<int64_t>(xlo, g.src_w - 16);
        index = _mm256_sub_epi32(cx, _mm256_set1_epi32(static_cast<int>(base)));
        const __m256i high = _mm256_cmpgt_epi32(index, seven);
        lower = _mm256_cmpeq_epi32(cy, _mm256_set1_epi32(ylo + 1));
        const int64_t r0 = ylo * sh + base;
        const int64_t r1 = std::min<int64_t>(ylo + 1, last_y) * sh + base;
        for (int64_t c = 0; c < channels; ++c) {
          const scalar_t* plane = src + c * src_c;
          const __m256 p0 =
              pick16(load8(plane + r0), load8(plane + r0 + 8), index, high);
          const __m256 p1 =
              pick16(load8(plane + r1), load8(plane + r1 + 8), index, high);
          store8(out + c * out_c,
                 n,
                 _mm256_and_ps(select8(lower, p0, p1),
                               _mm256_castsi256_ps(valid)));
        }
        continue;
      }
    }
    const __m256i off =
        _mm256_add_epi32(_mm256_mullo_epi32(cy, _mm256_set1_epi32(g.stride_h)),
                         _mm256_mullo_epi32(cx, _mm256_set1_epi32(g.stride_w)));
    for (int64_t c = 0; c < channels; ++c) {
      const scalar_t* plane = src + c * src_c;
      store8(out + c * out_c, n, gather8(plane, valid, off));
    }
  }
}

#undef WP_AVX2

inline bool cpu_has_avx2_fma() {
  static const bool has =
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
}

}  // namespace cpu
}  // namespace warp_perspective

#endif  // x86-64 GCC/Clang

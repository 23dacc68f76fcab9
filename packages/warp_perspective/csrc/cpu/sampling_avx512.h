// The forward sampling of the built-in CPU kernel with AVX-512 (chosen at run
// time, see builtin_kernel.cpp), for float32 and uint8 images: one destination
// row of one image, every channel, 16 pixels at a time, with the geometry of
// the 16 pixels (coordinates in double, taps and weights) kept in registers
// while every channel is sampled from it.
//
// Loads instead of gathers. Near-identity warps (rectification, augmentation)
// read, for 16 neighbouring destination pixels, source columns that lie within
// a window of 32 on at most two neighbouring rows (three rows of taps). Such a
// group loads that window of each of those rows with two unaligned vector
// loads and picks each pixel's taps from it with a two-table permute
// (vpermt2ps), then selects each pixel's row with a mask blend. Every other
// group (near the border, steep rotation, strong zoom, rows that are not
// contiguous) gathers its taps, masked so that taps outside the image read
// nothing and contribute exactly 0 with zeros padding. Both paths blend the
// same weights in the same order, so a pixel's value does not depend on the
// path its group took.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__)
#define WARP_PERSPECTIVE_HAVE_AVX512 1

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "cpu/sampling_loops.h"

// GCC 12's AVX-512 intrinsics pass _mm512_undefined_*() results as the ignored
// merge source of masked builtins; inlined into the kernels below,
// -Wmaybe-uninitialized reports that '__Y' hundreds of times. A false positive
// of the GCC headers, silenced for this file only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace warp_perspective {
namespace cpu {

#define WP_AVX512 \
  __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma")))

// The per-row constants of the source coordinates: x' = m0 x + bx, y' =
// m3 x + by, w = m6 x + bw for destination column x.
struct RowCoeffs512 {
  __m512d m0, m3, m6, bx, by, bw, hi_x, hi_y, last;
};

WP_AVX512 inline RowCoeffs512 row_coeffs512(const Geometry& g) {
  const double* m = g.inv;
  RowCoeffs512 k;
  k.m0 = _mm512_set1_pd(m[0]);
  k.m3 = _mm512_set1_pd(m[3]);
  k.m6 = _mm512_set1_pd(m[6]);
  k.bx = _mm512_set1_pd(m[1] * g.y + m[2]);
  k.by = _mm512_set1_pd(m[4] * g.y + m[5]);
  k.bw = _mm512_set1_pd(m[7] * g.y + m[8]);
  k.hi_x = _mm512_set1_pd(static_cast<double>(g.src_w) + 1.0);
  k.hi_y = _mm512_set1_pd(static_cast<double>(g.src_h) + 1.0);
  k.last = _mm512_set1_pd(static_cast<double>(g.n - 1));
  return k;
}

// Source coordinates of the 8 destination columns x, clamped to [-2, size + 1]
// as clamp_coordinate does (NaN to -2: MAXPD returns its second operand when
// either is NaN); w == 0 maps to (0, 0) as in OpenCV.
WP_AVX512 inline void coords8(const RowCoeffs512& k,
                              __m512d x,
                              __m512d& sx,
                              __m512d& sy) {
  const __m512d w0 = _mm512_fmadd_pd(k.m6, x, k.bw);
  const __mmask8 nonzero =
      _mm512_cmp_pd_mask(w0, _mm512_setzero_pd(), _CMP_NEQ_OQ);
  // Masked lanes are not divided (no division by zero).
  const __m512d w = _mm512_maskz_div_pd(nonzero, _mm512_set1_pd(1.0), w0);
  sx = _mm512_mul_pd(_mm512_fmadd_pd(k.m0, x, k.bx), w);
  sy = _mm512_mul_pd(_mm512_fmadd_pd(k.m3, x, k.by), w);
  const __m512d lo = _mm512_set1_pd(-2.0);
  sx = _mm512_min_pd(_mm512_max_pd(sx, lo), k.hi_x);
  sy = _mm512_min_pd(_mm512_max_pd(sy, lo), k.hi_y);
}

// Destination columns x0 .. x0 + 15 as doubles, columns past the row's end
// replaced by its last one: those lanes repeat a real pixel (so they pass or
// fail the window test as it does) and are never stored.
WP_AVX512 inline void columns16(const RowCoeffs512& k,
                                int64_t x0,
                                __m512d& xa,
                                __m512d& xb) {
  const __m512d base = _mm512_set1_pd(static_cast<double>(x0));
  xa = _mm512_min_pd(
      _mm512_add_pd(base, _mm512_setr_pd(0, 1, 2, 3, 4, 5, 6, 7)), k.last);
  xb = _mm512_min_pd(
      _mm512_add_pd(base, _mm512_setr_pd(8, 9, 10, 11, 12, 13, 14, 15)),
      k.last);
}

WP_AVX512 inline __m512i join16(__m256i lo, __m256i hi) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

WP_AVX512 inline __m512 join16(__m256 lo, __m256 hi) {
  return _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1);
}

// Lanes 0 and 15 of v.
WP_AVX512 inline int first_lane(__m512i v) {
  return _mm_cvtsi128_si32(_mm512_castsi512_si128(v));
}

WP_AVX512 inline int last_lane(__m512i v) {
  return _mm_extract_epi32(_mm512_extracti32x4_epi32(v, 3), 3);
}

// The taps of 16 pixels: the top-left tap (ix, iy), unclamped, and the four
// weights, in float (products of the float fractions).
struct Bilinear16 {
  __m512i ix, iy;
  __m512 w00, w01, w10, w11;
};

WP_AVX512 inline Bilinear16 bilinear16(const RowCoeffs512& k, int64_t x0) {
  __m512d xa, xb, sxa, sya, sxb, syb;
  columns16(k, x0, xa, xb);
  coords8(k, xa, sxa, sya);
  coords8(k, xb, sxb, syb);
  constexpr int kFloor = _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC;
  const __m512d fxa = _mm512_roundscale_pd(sxa, kFloor);
  const __m512d fxb = _mm512_roundscale_pd(sxb, kFloor);
  const __m512d fya = _mm512_roundscale_pd(sya, kFloor);
  const __m512d fyb = _mm512_roundscale_pd(syb, kFloor);
  Bilinear16 t;
  t.ix = join16(_mm512_cvttpd_epi32(fxa), _mm512_cvttpd_epi32(fxb));
  t.iy = join16(_mm512_cvttpd_epi32(fya), _mm512_cvttpd_epi32(fyb));
  const __m512 ax = join16(_mm512_cvtpd_ps(_mm512_sub_pd(sxa, fxa)),
                           _mm512_cvtpd_ps(_mm512_sub_pd(sxb, fxb)));
  const __m512 ay = join16(_mm512_cvtpd_ps(_mm512_sub_pd(sya, fya)),
                           _mm512_cvtpd_ps(_mm512_sub_pd(syb, fyb)));
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 bx = _mm512_sub_ps(one, ax);
  const __m512 by = _mm512_sub_ps(one, ay);
  t.w00 = _mm512_mul_ps(by, bx);
  t.w01 = _mm512_mul_ps(by, ax);
  t.w10 = _mm512_mul_ps(ay, bx);
  t.w11 = _mm512_mul_ps(ay, ax);
  return t;
}

// The tap of 16 pixels for nearest sampling, rounded half to even (cvRound).
WP_AVX512 inline void nearest16(const RowCoeffs512& k,
                                int64_t x0,
                                __m512i& ix,
                                __m512i& iy) {
  __m512d xa, xb, sxa, sya, sxb, syb;
  columns16(k, x0, xa, xb);
  coords8(k, xa, sxa, sya);
  coords8(k, xb, sxb, syb);
  constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  ix = join16(_mm512_cvttpd_epi32(_mm512_roundscale_pd(sxa, kRound)),
              _mm512_cvttpd_epi32(_mm512_roundscale_pd(sxb, kRound)));
  iy = join16(_mm512_cvttpd_epi32(_mm512_roundscale_pd(sya, kRound)),
              _mm512_cvttpd_epi32(_mm512_roundscale_pd(syb, kRound)));
}

// 16 consecutive source elements as floats.
WP_AVX512 inline __m512 load16(const float* p) {
  return _mm512_loadu_ps(p);
}

WP_AVX512 inline __m512 load16(const uint8_t* p) {
  return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}

// The lanes of keep of v, converted as to_scalar does (uint8: round half up,
// saturate).
WP_AVX512 inline void store16(float* p, __mmask16 keep, __m512 v) {
  _mm512_mask_storeu_ps(p, keep, v);
}

WP_AVX512 inline void store16(uint8_t* p, __mmask16 keep, __m512 v) {
  constexpr int kFloor = _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC;
  const __m512i r = _mm512_max_epi32(
      _mm512_cvt_roundps_epi32(_mm512_add_ps(v, _mm512_set1_ps(0.5f)), kFloor),
      _mm512_setzero_si512());
  _mm_mask_storeu_epi8(p, keep, _mm512_cvtusepi32_epi8(r));
}

// src[off] for the lanes of valid, 0 elsewhere (those lanes read nothing).
WP_AVX512 inline __m512 gather16(const float* src,
                                 __mmask16 valid,
                                 __m512i off) {
  return _mm512_mask_i32gather_ps(_mm512_setzero_ps(), valid, off, src, 4);
}

WP_AVX512 inline __m512 gather16(const uint8_t* src,
                                 __mmask16 valid,
                                 __m512i off) {
  // No byte gather; a dword gather would read up to 3 bytes past the image.
  alignas(64) int32_t o[16];
  alignas(64) float v[16];
  _mm512_store_si512(o, off);
  for (int i = 0; i < 16; ++i) {
    v[i] = (valid >> i) & 1 ? static_cast<float>(src[o[i]]) : 0.0f;
  }
  return _mm512_load_ps(v);
}

WP_AVX512 inline __m512 blend_taps(const Bilinear16& t,
                                   __m512 v00,
                                   __m512 v01,
                                   __m512 v10,
                                   __m512 v11) {
  __m512 v = _mm512_mul_ps(t.w00, v00);
  v = _mm512_fmadd_ps(t.w01, v01, v);
  v = _mm512_fmadd_ps(t.w10, v10, v);
  return _mm512_fmadd_ps(t.w11, v11, v);
}

WP_AVX512 inline __m512i clamp16(__m512i v, __m512i last) {
  return _mm512_min_epi32(_mm512_max_epi32(v, _mm512_setzero_si512()), last);
}

// Where a group of 16 pixels reads its taps from when it can use loads: the
// window of 32 columns starting at column base, on rows row .. row + 1 (+ 1
// for bilinear's bottom taps); lower marks the pixels whose tap row is row + 1.
struct Window16 {
  int64_t base;
  int64_t row;
  __mmask16 lower;
  __m512i index;  // each pixel's (left) tap column - base
};

// Whether every pixel's taps (ix .. ix + span, iy .. iy + span), span 1 for
// bilinear and 0 for nearest, lie inside the source and within a window of 32
// columns and two tap rows, and if so where. Coordinates along a destination
// row are monotonic (away from w = 0), so the first and last pixels bound the
// group; every lane is checked against those bounds all the same.
template <int kSpan>
WP_AVX512 inline bool find_window(const Geometry& g,
                                  __m512i ix,
                                  __m512i iy,
                                  Window16& win) {
  const int xa = first_lane(ix), xb = last_lane(ix);
  const int ya = first_lane(iy), yb = last_lane(iy);
  const int xlo = std::min(xa, xb);
  const int ylo = std::min(ya, yb);
  const __m512i dx = _mm512_sub_epi32(ix, _mm512_set1_epi32(xlo));
  const __m512i dy = _mm512_sub_epi32(iy, _mm512_set1_epi32(ylo));
  const __mmask16 ok =
      _mm512_cmple_epu32_mask(dx, _mm512_set1_epi32(31 - kSpan)) &
      _mm512_cmple_epu32_mask(dy, _mm512_set1_epi32(1)) &
      _mm512_cmple_epu32_mask(
          ix, _mm512_set1_epi32(static_cast<int>(g.src_w - 1 - kSpan))) &
      _mm512_cmple_epu32_mask(
          iy, _mm512_set1_epi32(static_cast<int>(g.src_h - 1 - kSpan)));
  if (ok != 0xFFFF) {
    return false;
  }
  // The window must not run past the row: slide it left at the right edge.
  win.base = std::min<int64_t>(xlo, g.src_w - 32);
  win.row = ylo;
  win.lower = _mm512_cmpeq_epi32_mask(dy, _mm512_set1_epi32(1));
  win.index =
      _mm512_sub_epi32(ix, _mm512_set1_epi32(static_cast<int>(win.base)));
  return true;
}

// bilinear_taps_loop + bilinear_gather_loop for one row of every channel.
// Requires the image's planes to span fewer than 2^31 elements (int32 gather
// offsets), as the table loops do.
template <typename scalar_t, bool kBorder>
WP_AVX512 void bilinear_row_avx512(const RowJob<scalar_t>& job) {
  // Copies: the masked stores below would otherwise make the compiler
  // reload every field of job for every channel.
  const Geometry g = job.g;
  const scalar_t* const src = job.src;
  scalar_t* const out_row = job.out;
  const int64_t channels = job.channels;
  const int64_t src_c = job.src_stride_c;
  const int64_t out_c = job.out_stride_c;
  const RowCoeffs512 k = row_coeffs512(g);
  // Loads need whole rows of at least one window, contiguous.
  const bool loads = g.stride_w == 1 && g.src_w >= 32 && g.src_h >= 2;
  const int64_t sh = g.stride_h;
  const __m512i size_x = _mm512_set1_epi32(static_cast<int>(g.src_w));
  const __m512i size_y = _mm512_set1_epi32(static_cast<int>(g.src_h));
  const __m512i one = _mm512_set1_epi32(1);
  for (int64_t x0 = 0; x0 < g.n; x0 += 16) {
    const Bilinear16 t = bilinear16(k, x0);
    const __mmask16 keep = g.n - x0 >= 16
                               ? __mmask16(0xFFFF)
                               : static_cast<__mmask16>((1u << (g.n - x0)) - 1);
    scalar_t* out = out_row + x0;
    Window16 win;
    if (loads && find_window<1>(g, t.ix, t.iy, win)) {
      const __m512i i0 = win.index;
      const __m512i i1 = _mm512_add_epi32(i0, one);
      // Rows row, row + 1 and row + 2; the last only exists (and is only
      // needed) when some pixel's top tap is on row + 1.
      const int64_t r0 = win.row * sh + win.base;
      const int64_t r1 = r0 + sh;
      const int64_t r2 = r1 + (win.lower ? sh : 0);
      for (int64_t c = 0; c < channels; ++c) {
        const scalar_t* plane = src + c * src_c;
        // The line that the rows two destination rows below will read. Along
        // a destination row a sheared or rotated warp crosses a source row
        // every few dozen pixels, a pattern the hardware prefetchers miss;
        // without this a 1080p batch spent half its time waiting for loads.
        prefetch_ahead(plane, r0 + kPrefetchRows * sh + 16);
        const __m512 a0 = load16(plane + r0), b0 = load16(plane + r0 + 16);
        const __m512 a1 = load16(plane + r1), b1 = load16(plane + r1 + 16);
        const __m512 a2 = load16(plane + r2), b2 = load16(plane + r2 + 16);
        const __m512 p00 = _mm512_permutex2var_ps(a0, i0, b0);
        const __m512 p01 = _mm512_permutex2var_ps(a0, i1, b0);
        const __m512 p10 = _mm512_permutex2var_ps(a1, i0, b1);
        const __m512 p11 = _mm512_permutex2var_ps(a1, i1, b1);
        const __m512 p20 = _mm512_permutex2var_ps(a2, i0, b2);
        const __m512 p21 = _mm512_permutex2var_ps(a2, i1, b2);
        const __m512 v = blend_taps(t,
                                    _mm512_mask_blend_ps(win.lower, p00, p10),
                                    _mm512_mask_blend_ps(win.lower, p01, p11),
                                    _mm512_mask_blend_ps(win.lower, p10, p20),
                                    _mm512_mask_blend_ps(win.lower, p11, p21));
        store16(out + c * out_c, keep, v);
      }
      continue;
    }
    // Near the border, or too wide or steep for the window above. The taps
    // clamped into the image are what border padding reads; zeros padding
    // reads them too and zeroes the outside ones (masks k).
    const __m512i last_x = _mm512_sub_epi32(size_x, one);
    const __m512i last_y = _mm512_sub_epi32(size_y, one);
    const __m512i ix1 = _mm512_add_epi32(t.ix, one);
    const __m512i iy1 = _mm512_add_epi32(t.iy, one);
    __mmask16 k00 = 0xFFFF, k01 = 0xFFFF, k10 = 0xFFFF, k11 = 0xFFFF;
    if constexpr (!kBorder) {
      const __mmask16 vx0 = _mm512_cmplt_epu32_mask(t.ix, size_x);
      const __mmask16 vx1 = _mm512_cmplt_epu32_mask(ix1, size_x);
      const __mmask16 vy0 = _mm512_cmplt_epu32_mask(t.iy, size_y);
      const __mmask16 vy1 = _mm512_cmplt_epu32_mask(iy1, size_y);
      k00 = vx0 & vy0;
      k01 = vx1 & vy0;
      k10 = vx0 & vy1;
      k11 = vx1 & vy1;
    }
    const __m512i cx0 = clamp16(t.ix, last_x), cx1 = clamp16(ix1, last_x);
    const __m512i cy0 = clamp16(t.iy, last_y), cy1 = clamp16(iy1, last_y);
    if (loads) {
      // The border's groups: the clamped taps within a window of 32 columns
      // and three rows, where a pixel's two tap rows may be the same (clamped)
      // and either may be any of the three.
      const int xlo = _mm512_reduce_min_epi32(cx0);
      const int ylo = _mm512_reduce_min_epi32(cy0);
      if (_mm512_reduce_max_epi32(cx1) - xlo <= 31 &&
          _mm512_reduce_max_epi32(cy1) - ylo <= 2) {
        const int64_t base = std::min<int64_t>(xlo, g.src_w - 32);
        const __m512i vbase = _mm512_set1_epi32(static_cast<int>(base));
        const __m512i i0 = _mm512_sub_epi32(cx0, vbase);
        const __m512i i1 = _mm512_sub_epi32(cx1, vbase);
        const __m512i vylo = _mm512_set1_epi32(ylo);
        const __m512i dt = _mm512_sub_epi32(cy0, vylo);
        const __m512i db = _mm512_sub_epi32(cy1, vylo);
        const __m512i two = _mm512_add_epi32(one, one);
        const __mmask16 t1 = _mm512_cmpeq_epi32_mask(dt, one);
        const __mmask16 t2 = _mm512_cmpeq_epi32_mask(dt, two);
        const __mmask16 b1 = _mm512_cmpeq_epi32_mask(db, one);
        const __mmask16 b2 = _mm512_cmpeq_epi32_mask(db, two);
        const int64_t r0 = ylo * sh + base;
        const int64_t r1 = std::min<int64_t>(ylo + 1, g.src_h - 1) * sh + base;
        const int64_t r2 = std::min<int64_t>(ylo + 2, g.src_h - 1) * sh + base;
        for (int64_t c = 0; c < channels; ++c) {
          const scalar_t* plane = src + c * src_c;
          const __m512 a0 = load16(plane + r0), b0 = load16(plane + r0 + 16);
          const __m512 a1 = load16(plane + r1), b1v = load16(plane + r1 + 16);
          const __m512 a2 = load16(plane + r2), b2v = load16(plane + r2 + 16);
          const __m512 p00 = _mm512_permutex2var_ps(a0, i0, b0);
          const __m512 p01 = _mm512_permutex2var_ps(a0, i1, b0);
          const __m512 p10 = _mm512_permutex2var_ps(a1, i0, b1v);
          const __m512 p11 = _mm512_permutex2var_ps(a1, i1, b1v);
          const __m512 p20 = _mm512_permutex2var_ps(a2, i0, b2v);
          const __m512 p21 = _mm512_permutex2var_ps(a2, i1, b2v);
          __m512 v00 =
              _mm512_mask_blend_ps(t2, _mm512_mask_blend_ps(t1, p00, p10), p20);
          __m512 v01 =
              _mm512_mask_blend_ps(t2, _mm512_mask_blend_ps(t1, p01, p11), p21);
          __m512 v10 =
              _mm512_mask_blend_ps(b2, _mm512_mask_blend_ps(b1, p00, p10), p20);
          __m512 v11 =
              _mm512_mask_blend_ps(b2, _mm512_mask_blend_ps(b1, p01, p11), p21);
          if constexpr (!kBorder) {
            v00 = _mm512_maskz_mov_ps(k00, v00);
            v01 = _mm512_maskz_mov_ps(k01, v01);
            v10 = _mm512_maskz_mov_ps(k10, v10);
            v11 = _mm512_maskz_mov_ps(k11, v11);
          }
          store16(out + c * out_c, keep, blend_taps(t, v00, v01, v10, v11));
        }
        continue;
      }
    }
    const __m512i sw = _mm512_set1_epi32(g.stride_w);
    const __m512i shv = _mm512_set1_epi32(g.stride_h);
    const __m512i r0 = _mm512_mullo_epi32(cy0, shv);
    const __m512i r1 = _mm512_mullo_epi32(cy1, shv);
    const __m512i c0 = _mm512_mullo_epi32(cx0, sw);
    const __m512i c1 = _mm512_mullo_epi32(cx1, sw);
    const __m512i o00 = _mm512_add_epi32(r0, c0);
    const __m512i o01 = _mm512_add_epi32(r0, c1);
    const __m512i o10 = _mm512_add_epi32(r1, c0);
    const __m512i o11 = _mm512_add_epi32(r1, c1);
    for (int64_t c = 0; c < channels; ++c) {
      const scalar_t* plane = src + c * src_c;
      const __m512 v = blend_taps(t,
                                  gather16(plane, k00, o00),
                                  gather16(plane, k01, o01),
                                  gather16(plane, k10, o10),
                                  gather16(plane, k11, o11));
      store16(out + c * out_c, keep, v);
    }
  }
}

// nearest_taps_loop + nearest_gather_loop for one row of every channel.
template <typename scalar_t, bool kBorder>
WP_AVX512 void nearest_row_avx512(const RowJob<scalar_t>& job) {
  // Copies: the masked stores below would otherwise make the compiler
  // reload every field of job for every channel.
  const Geometry g = job.g;
  const scalar_t* const src = job.src;
  scalar_t* const out_row = job.out;
  const int64_t channels = job.channels;
  const int64_t src_c = job.src_stride_c;
  const int64_t out_c = job.out_stride_c;
  const RowCoeffs512 k = row_coeffs512(g);
  const bool loads = g.stride_w == 1 && g.src_w >= 32 && g.src_h >= 2;
  const int64_t sh = g.stride_h;
  const __m512i size_x = _mm512_set1_epi32(static_cast<int>(g.src_w));
  const __m512i size_y = _mm512_set1_epi32(static_cast<int>(g.src_h));
  const __m512i one = _mm512_set1_epi32(1);
  for (int64_t x0 = 0; x0 < g.n; x0 += 16) {
    __m512i ix, iy;
    nearest16(k, x0, ix, iy);
    const __mmask16 keep = g.n - x0 >= 16
                               ? __mmask16(0xFFFF)
                               : static_cast<__mmask16>((1u << (g.n - x0)) - 1);
    scalar_t* out = out_row + x0;
    Window16 win;
    if (loads && find_window<0>(g, ix, iy, win)) {
      const int64_t r0 = win.row * sh + win.base;
      const int64_t r1 = r0 + (win.lower ? sh : 0);
      for (int64_t c = 0; c < channels; ++c) {
        const scalar_t* plane = src + c * src_c;
        prefetch_ahead(plane, r0 + kPrefetchRows * sh + 16);
        const __m512 p0 = _mm512_permutex2var_ps(
            load16(plane + r0), win.index, load16(plane + r0 + 16));
        const __m512 p1 = _mm512_permutex2var_ps(
            load16(plane + r1), win.index, load16(plane + r1 + 16));
        store16(out + c * out_c, keep, _mm512_mask_blend_ps(win.lower, p0, p1));
      }
      continue;
    }
    // As in bilinear_row_avx512: the clamped tap, zeroed outside the image
    // with zeros padding.
    __mmask16 valid = 0xFFFF;
    if constexpr (!kBorder) {
      valid = _mm512_cmplt_epu32_mask(ix, size_x) &
              _mm512_cmplt_epu32_mask(iy, size_y);
    }
    const __m512i cx = clamp16(ix, _mm512_sub_epi32(size_x, one));
    const __m512i cy = clamp16(iy, _mm512_sub_epi32(size_y, one));
    if (loads) {
      const int xlo = _mm512_reduce_min_epi32(cx);
      const int ylo = _mm512_reduce_min_epi32(cy);
      if (_mm512_reduce_max_epi32(cx) - xlo <= 31 &&
          _mm512_reduce_max_epi32(cy) - ylo <= 1) {
        const int64_t base = std::min<int64_t>(xlo, g.src_w - 32);
        const __m512i index =
            _mm512_sub_epi32(cx, _mm512_set1_epi32(static_cast<int>(base)));
        const __mmask16 lower = _mm512_cmpeq_epi32_mask(
            _mm512_sub_epi32(cy, _mm512_set1_epi32(ylo)), one);
        const int64_t r0 = ylo * sh + base;
        const int64_t r1 = std::min<int64_t>(ylo + 1, g.src_h - 1) * sh + base;
        for (int64_t c = 0; c < channels; ++c) {
          const scalar_t* plane = src + c * src_c;
          const __m512 p0 = _mm512_permutex2var_ps(
              load16(plane + r0), index, load16(plane + r0 + 16));
          const __m512 p1 = _mm512_permutex2var_ps(
              load16(plane + r1), index, load16(plane + r1 + 16));
          store16(
              out + c * out_c,
              keep,
              _mm512_maskz_mov_ps(valid, _mm512_mask_blend_ps(lower, p0, p1)));
        }
        continue;
      }
    }
    const __m512i off =
        _mm512_add_epi32(_mm512_mullo_epi32(cy, _mm512_set1_epi32(g.stride_h)),
                         _mm512_mullo_epi32(cx, _mm512_set1_epi32(g.stride_w)));
    for (int64_t c = 0; c < channels; ++c) {
      const scalar_t* plane = src + c * src_c;
      store16(out + c * out_c, keep, gather16(plane, valid, off));
    }
  }
}

#undef WP_AVX512

inline bool cpu_has_avx512() {
  static const bool has =
      __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx2") &&
      __builtin_cpu_supports("fma");
  return has;
}

}  // namespace cpu
}  // namespace warp_perspective

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#endif  // x86-64 GCC/Clang

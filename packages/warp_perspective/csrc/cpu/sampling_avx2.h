// The built-in CPU kernel with AVX2 (chosen at run time, see
// builtin_kernel.cpp), two ways:
//
// - Row kernels (float32, uint8; the second half of this file): the AVX2
//   build of sampling_rows.h, one destination row of every channel, 8 pixels
//   at a time, the geometry kept in registers while every channel is sampled,
//   and taps picked from vector loads of a window of the source rows where
//   they fit one (sampling_avx512.h builds the same source 16 pixels at a
//   time). On the
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

#undef WP_AVX2

// ---- Row kernels: sampling_rows.h with 8 pixels per group ----------------
//
// A group whose taps fit a window of 16 columns on three rows reads each
// row's window with two loads and picks its taps with two vpermps and a blend
// (AVX2 permutes 8 lanes), or with one load and one vpermps where its taps fit
// the window's first 8 columns (Vec::narrow); other groups gather.

#pragma GCC push_options
#pragma GCC target("avx2,fma")

namespace avx2 {

// The vector width of sampling_rows.h: 8 float or int32 lanes, 4 doubles.
// Without mask registers a lane mask is a vector of all-ones / all-zeros lanes.
struct Vec {
  static constexpr int kLanes = 8;
  static constexpr int kWindow = 16;         // the columns two loads cover
  static constexpr bool kCopyLanes = false;  // see copy_lanes
  using D = __m256d;
  using F = __m256;
  using I = __m256i;
  using M = __m256i;
  struct Index {
    __m256i i;     // 0 to 15
    __m256i high;  // lanes whose i is 8 or more
  };
  WARP_PERSPECTIVE_VEC_OPS(_mm256, si256)
  using Tail = int64_t;  // how many lanes a store writes

  // Lanes 0 .. 3 (half 0) or 4 .. 7 (half 1) of a group, as doubles.
  static D diota(int half) {
    return half == 0 ? _mm256_setr_pd(0, 1, 2, 3) : _mm256_setr_pd(4, 5, 6, 7);
  }
  // 1 / w, and 0 where w == 0.
  static D recip_or_zero(D w) {
    return _mm256_and_pd(_mm256_div_pd(_mm256_set1_pd(1.0), w),
                         _mm256_cmp_pd(w, _mm256_setzero_pd(), _CMP_NEQ_OQ));
  }
  static D dfloor(D v) {
    return _mm256_floor_pd(v);
  }
  static D dround(D v) {
    return _mm256_round_pd(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  static I to_int(D lo, D hi) {
    return _mm256_inserti128_si256(
        _mm256_castsi128_si256(_mm256_cvttpd_epi32(lo)),
        _mm256_cvttpd_epi32(hi),
        1);
  }
  static F to_float(D lo, D hi) {
    return _mm256_insertf128_ps(
        _mm256_castps128_ps256(_mm256_cvtpd_ps(lo)), _mm256_cvtpd_ps(hi), 1);
  }

  static int first_lane(I v) {
    return _mm256_cvtsi256_si32(v);
  }
  static int last_lane(I v) {
    return _mm256_extract_epi32(v, 7);
  }
  static int hmin(I v) {
    __m128i m = _mm_min_epi32(_mm256_castsi256_si128(v),
                              _mm256_extracti128_si256(v, 1));
    m = _mm_min_epi32(m, _mm_shuffle_epi32(m, _MM_SHUFFLE(1, 0, 3, 2)));
    m = _mm_min_epi32(m, _mm_shuffle_epi32(m, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(m);
  }
  static int hmax(I v) {
    __m128i m = _mm_max_epi32(_mm256_castsi256_si128(v),
                              _mm256_extracti128_si256(v, 1));
    m = _mm_max_epi32(m, _mm_shuffle_epi32(m, _MM_SHUFFLE(1, 0, 3, 2)));
    m = _mm_max_epi32(m, _mm_shuffle_epi32(m, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(m);
  }

  static M every() {
    return _mm256_set1_epi32(-1);
  }
  static M mand(M a, M b) {
    return _mm256_and_si256(a, b);
  }
  static bool all(M m) {
    return _mm256_movemask_ps(_mm256_castsi256_ps(m)) == 0xFF;
  }
  static bool any(M m) {
    return !_mm256_testz_si256(m, m);
  }
  static M eq(I a, I b) {
    return _mm256_cmpeq_epi32(a, b);
  }
  static M le_unsigned(I a, I b) {
    return _mm256_cmpeq_epi32(_mm256_max_epu32(a, b), b);
  }
  // 0 <= v < size.
  static M inside(I v, I size) {
    return _mm256_and_si256(_mm256_cmpgt_epi32(v, _mm256_set1_epi32(-1)),
                            _mm256_cmpgt_epi32(size, v));
  }
  // Lanes of m take b, the others a.
  static F select(M m, F a, F b) {
    return _mm256_blendv_ps(a, b, _mm256_castsi256_ps(m));
  }
  static F zero_unless(M m, F v) {
    return _mm256_and_ps(v, _mm256_castsi256_ps(m));
  }

  static Index index(I i) {
    return {i, _mm256_cmpgt_epi32(i, _mm256_set1_epi32(7))};
  }
  static I indices(const Index& i) {
    return i.i;
  }
  // Elements i (0 to 15) of the table (lo, hi).
  static F pick(F lo, F hi, const Index& i) {
    return select(i.high,
                  _mm256_permutevar8x32_ps(lo, i.i),
                  _mm256_permutevar8x32_ps(hi, i.i));
  }
  // Whether every index is below 8: then pick1 of one load does, one vpermps
  // instead of two and a blend.
  static bool narrow(const Index& i) {
    return _mm256_testz_si256(i.high, i.high);
  }
  // Elements i (0 to 7) of v.
  static F pick1(F v, const Index& i) {
    return _mm256_permutevar8x32_ps(v, i.i);
  }

  static F load(const uint8_t* p) {
    return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(
        _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  }
  static Tail tail(int64_t n) {
    return n;
  }
  // The first n (1 to 8) lanes of v (uint8: as the AVX-512 store).
  static void store(float* p, Tail n, F v) {
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
  static void store(uint8_t* p, Tail n, F v) {
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
  // src[off] where valid, 0 elsewhere (those lanes read nothing).
  static F gather(const float* src, M valid, I off) {
    return _mm256_mask_i32gather_ps(
        _mm256_setzero_ps(), src, off, _mm256_castsi256_ps(valid), 4);
  }
  static F gather(const uint8_t* src, M valid, I off) {
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
};

#include "cpu/sampling_rows.h"

}  // namespace avx2

#pragma GCC pop_options

inline bool cpu_has_avx2_fma() {
  static const bool has =
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
}

}  // namespace cpu
}  // namespace warp_perspective

#endif  // x86-64 GCC/Clang

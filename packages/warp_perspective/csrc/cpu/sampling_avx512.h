// The AVX-512 level of the built-in CPU kernel (chosen at run time, see
// builtin_sampling.cpp): sampling_per_level.h built 16 pixels at a time, with
// this Vec; taps picked from a window of 32 columns with a two-table permute
// (vpermt2ps), row blends and tails under mask registers.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__)
#define WARP_PERSPECTIVE_HAVE_AVX512 1

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "cpu/sampling_common.h"

// GCC 12's AVX-512 intrinsics (the conversions and inserts used below) start
// from _mm*_undefined_*(), which -Wmaybe-uninitialized reports as "'__Y' may be
// used uninitialized" once they are inlined here: a false positive, silenced
// for this file only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma")

namespace warp_perspective {
namespace cpu {
namespace avx512 {

// The vector width of sampling_per_level.h: 16 float or int32 lanes, 8 doubles.
struct Vec {
  static constexpr int kLanes = 16;
  static constexpr int kWindow = 32;         // the columns two loads cover
  static constexpr bool kCopyLanes = false;  // see copy_lanes
  using D = __m512d;
  using F = __m512;
  using I = __m512i;
  using M = __mmask16;
  using Index = __m512i;
  WARP_PERSPECTIVE_VEC_OPS(_mm512, si512)
  using Tail = __mmask16;

  // Lanes 0 .. 7 (half 0) or 8 .. 15 (half 1) of a group, as doubles.
  static D diota(int half) {
    return half == 0 ? _mm512_setr_pd(0, 1, 2, 3, 4, 5, 6, 7)
                     : _mm512_setr_pd(8, 9, 10, 11, 12, 13, 14, 15);
  }
  // 1 / w, and 0 where w == 0 (those lanes are not divided).
  static D recip_or_zero(D w) {
    const __mmask8 nonzero =
        _mm512_cmp_pd_mask(w, _mm512_setzero_pd(), _CMP_NEQ_OQ);
    return _mm512_maskz_div_pd(nonzero, _mm512_set1_pd(1.0), w);
  }
  static D dfloor(D v) {
    return _mm512_roundscale_pd(v, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  }
  static D dround(D v) {
    return _mm512_roundscale_pd(v,
                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  // The two halves of a group, as int32 or float lanes.
  static I to_int(D lo, D hi) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvttpd_epi32(lo)),
                              _mm512_cvttpd_epi32(hi),
                              1);
  }
  static F to_float(D lo, D hi) {
    return _mm512_insertf32x8(
        _mm512_castps256_ps512(_mm512_cvtpd_ps(lo)), _mm512_cvtpd_ps(hi), 1);
  }

  static int first_lane(I v) {
    return _mm_cvtsi128_si32(_mm512_castsi512_si128(v));
  }
  static int last_lane(I v) {
    return _mm_extract_epi32(_mm512_extracti32x4_epi32(v, 3), 3);
  }
  static int hmin(I v) {
    return _mm512_reduce_min_epi32(v);
  }
  static int hmax(I v) {
    return _mm512_reduce_max_epi32(v);
  }

  static M every() {
    return 0xFFFF;
  }
  static M mand(M a, M b) {
    return a & b;
  }
  static bool all(M m) {
    return m == 0xFFFF;
  }
  static bool any(M m) {
    return m != 0;
  }
  static M eq(I a, I b) {
    return _mm512_cmpeq_epi32_mask(a, b);
  }
  static M le_unsigned(I a, I b) {
    return _mm512_cmple_epu32_mask(a, b);
  }
  // 0 <= v < size.
  static M inside(I v, I size) {
    return _mm512_cmplt_epu32_mask(v, size);
  }
  // Lanes of m take b, the others a.
  static F select(M m, F a, F b) {
    return _mm512_mask_blend_ps(m, a, b);
  }
  static F zero_unless(M m, F v) {
    return _mm512_maskz_mov_ps(m, v);
  }

  static Index index(I i) {
    return i;
  }
  static I indices(Index i) {
    return i;
  }
  // Elements i (0 to 31) of the table (lo, hi).
  static F pick(F lo, F hi, Index i) {
    return _mm512_permutex2var_ps(lo, i, hi);
  }
  // Whether every index is below 16: then pick1 of one load does.
  static bool narrow(Index i) {
    return _mm512_cmpge_epu32_mask(i, _mm512_set1_epi32(kLanes)) == 0;
  }
  // Elements i (0 to 15) of v.
  static F pick1(F v, Index i) {
    return _mm512_permutexvar_ps(i, v);
  }

  // 16 consecutive source elements as floats.
  static F load(const uint8_t* p) {
    return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }
  // The lanes a store writes: the first n (all from 16 on).
  static Tail tail(int64_t n) {
    return n >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << n) - 1);
  }
  // The lanes of keep of v (uint8: rounded half up and saturated, as
  // OpenCV's fixed-point arithmetic does; see sampling_portable.h's store).
  static void store(float* p, Tail keep, F v) {
    _mm512_mask_storeu_ps(p, keep, v);
  }
  static void store(uint8_t* p, Tail keep, F v) {
    constexpr int kFloor = _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC;
    const __m512i r =
        _mm512_max_epi32(_mm512_cvt_roundps_epi32(
                             _mm512_add_ps(v, _mm512_set1_ps(0.5f)), kFloor),
                         _mm512_setzero_si512());
    _mm_mask_storeu_epi8(p, keep, _mm512_cvtusepi32_epi8(r));
  }
  // ---- the tables (sampling_tables_per_level.h): whole groups, int32 offsets
  static I izero_unless(M m, I v) {
    return _mm512_maskz_mov_epi32(m, v);
  }
  // Half 0 (lanes 0 .. 7) or 1 of a group where m holds, 0 elsewhere.
  static D dzero_unless(M m, int half, D v) {
    return _mm512_maskz_mov_pd(static_cast<__mmask8>(m >> (8 * half)), v);
  }
  static void istore(int32_t* p, I v) {
    _mm512_storeu_si512(p, v);
  }
  static void dstore(double* p, D v) {
    _mm512_storeu_pd(p, v);
  }
  // Lanes of v in [0, 255], as bytes.
  static void store_bytes(uint8_t* p, I v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm512_cvtepi32_epi8(v));
  }
  // src[off] for the lanes of valid, 0 elsewhere (those lanes read nothing).
  static F gather(const float* src, M valid, I off) {
    return _mm512_mask_i32gather_ps(_mm512_setzero_ps(), valid, off, src, 4);
  }
  static F gather(const uint8_t* src, M valid, I off) {
    // No byte gather; a dword gather would read up to 3 bytes past the image.
    alignas(64) int32_t o[16];
    alignas(64) float v[16];
    _mm512_store_si512(o, off);
    for (int i = 0; i < 16; ++i) {
      v[i] = (valid >> i) & 1 ? static_cast<float>(src[o[i]]) : 0.0f;
    }
    return _mm512_load_ps(v);
  }
};

#include "cpu/sampling_per_level.h"

}  // namespace avx512

#pragma GCC pop_options
#pragma GCC diagnostic pop

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

#endif  // x86-64 GCC/Clang

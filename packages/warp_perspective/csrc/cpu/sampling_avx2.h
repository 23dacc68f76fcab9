// The AVX2 level of the built-in CPU kernel (chosen at run time, see
// builtin_sampling.cpp): sampling_per_level.h built 8 pixels at a time, with
// this Vec. sampling_avx512.h builds the same source 16 pixels at a time.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__)
#define WARP_PERSPECTIVE_HAVE_AVX2 1

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "cpu/sampling_common.h"

namespace warp_perspective {
namespace cpu {

// A group whose taps fit a window of 16 columns on three rows reads each
// row's window with two loads and picks its taps with two vpermps and a blend
// (AVX2 permutes 8 lanes), or with one load and one vpermps where its taps fit
// the window's first 8 columns (Vec::narrow); other groups gather.

#pragma GCC push_options
#pragma GCC target("avx2,fma")

namespace avx2 {

// The vector width of sampling_per_level.h: 8 float or int32 lanes, 4 doubles.
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
  // ---- the tables (sampling_tables_per_level.h): whole groups, int32 offsets
  static I izero_unless(M m, I v) {
    return _mm256_and_si256(m, v);
  }
  // Half 0 (lanes 0 .. 3) or 1 of a group where m holds, 0 elsewhere.
  static D dzero_unless(M m, int half, D v) {
    const __m128i h =
        half == 0 ? _mm256_castsi256_si128(m) : _mm256_extracti128_si256(m, 1);
    return _mm256_and_pd(v, _mm256_castsi256_pd(_mm256_cvtepi32_epi64(h)));
  }
  static void istore(int32_t* p, I v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v);
  }
  static void dstore(double* p, D v) {
    _mm256_storeu_pd(p, v);
  }
  // Lanes of v in [0, 255], as bytes (the two unsigned packs).
  static void store_bytes(uint8_t* p, I v) {
    const __m128i w16 = _mm_packus_epi32(_mm256_castsi256_si128(v),
                                         _mm256_extracti128_si256(v, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(p), _mm_packus_epi16(w16, w16));
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

#include "cpu/sampling_per_level.h"

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

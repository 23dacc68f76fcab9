// The portable level of the built-in CPU kernel (sampling_per_level.h built 4
// pixels at a time): CPUs without AVX2, WARP_PERSPECTIVE_NO_AVX2=1, and targets
// other than x86-64. GCC/Clang vector extensions instead of intrinsics: their
// arithmetic stays SIMD where an array loop holding selects or double -> int
// conversions is often left scalar; per-lane loops where the baseline target
// has no instruction (permutes, gathers, reductions).
#pragma once

#include <cstdint>
#include <cstring>

#include "cpu/sampling_common.h"

// GCC warns that passing 32- and 64-byte vectors by value differs from the
// AVX ABI; these inline functions never cross a library boundary. It reports
// that at the end of the file including this one, so the warning stays off
// for the rest of it (there is no pop).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

namespace warp_perspective {
namespace cpu {
namespace portable {

struct Vec {
  static constexpr int kLanes = 4;
  static constexpr int kWindow = 8;  // the columns two loads cover
  // Nearest sampling copies pixels lane by lane (copy_lanes in
  // sampling_per_level.h) rather than through windows and float.
  static constexpr bool kCopyLanes = true;
  // 16-byte vectors, the width of SSE2 and NEON: GCC lowers comparisons of
  // wider vectors to scalar code at the baseline target.
  typedef double D __attribute__((vector_size(16)));  // kLanes / 2 doubles
  typedef float F __attribute__((vector_size(16)));
  typedef int32_t I __attribute__((vector_size(16)));
  typedef uint32_t U __attribute__((vector_size(16)));
  typedef int64_t L __attribute__((vector_size(16)));  // D's bits
  typedef float F2 __attribute__((vector_size(8)));    // half of F
  typedef int32_t I2 __attribute__((vector_size(8)));  // half of I
  typedef uint8_t B4 __attribute__((vector_size(4)));  // kLanes bytes
  using M = I;           // all-ones / all-zeros lanes
  using Index = I;       // 0 to 7
  using Tail = int64_t;  // how many lanes a store writes

  // ---- double lanes: the source coordinates ----
  static D dset(double v) {
    return D{v, v};
  }
  static D dadd(D a, D b) {
    return a + b;
  }
  static D dsub(D a, D b) {
    return a - b;
  }
  static D dmul(D a, D b) {
    return a * b;
  }
  // a * b + c, rounded once (as vfmadd) where the target has FMA (AArch64,
  // x86-64 v3), else a multiply then an add (baseline x86-64). There the row
  // kernels' float32 results differ from the AVX levels' by the rounding of
  // the weights, uint8 within 1, nearest taps only where a coordinate falls
  // within rounding of a half; emulating the fused operation costs several
  // times the whole kernel. The tables fuse nothing at any level (madd<false>
  // in sampling_per_level.h), so they agree bit for bit everywhere.
  C10_ALWAYS_INLINE static D dfmadd(D a, D b, D c) {
#ifdef __FP_FAST_FMA
    return D{__builtin_fma(a[0], b[0], c[0]), __builtin_fma(a[1], b[1], c[1])};
#else
    return a * b + c;
#endif
  }
  // As maxpd / minpd: the second operand when either is NaN.
  static D dmin(D a, D b) {
    return a < b ? a : b;
  }
  static D dmax(D a, D b) {
    return b < a ? a : b;
  }
  static D diota(int half) {
    return half == 0 ? D{0, 1} : D{2, 3};
  }
  // 1 / w, and 0 where w == 0 or is NaN (an ordered comparison, as the AVX
  // builds' _CMP_NEQ_OQ).
  static D recip_or_zero(D w) {
    const D r = 1.0 / w;
    return (D)((L)r & ((w < 0.0) | (w > 0.0)));
  }
  // Rounded half to even: for |v| < 2^51, as the clamped coordinates are,
  // v + 1.5 * 2^52 has no fraction bits left.
  static D dround(D v) {
    const double kMagic = 6755399441055744.0;
    return (v + kMagic) - kMagic;
  }
  static D dfloor(D v) {
    const D r = dround(v);
    return r - (D)((L)dset(1.0) & (r > v));
  }
  // Integral values (rounded above) in int32, as cvttpd2dq.
  static I to_int(D lo, D hi) {
    return __builtin_shufflevector(__builtin_convertvector(lo, I2),
                                   __builtin_convertvector(hi, I2),
                                   0,
                                   1,
                                   2,
                                   3);
  }
  static F to_float(D lo, D hi) {
    return join(__builtin_convertvector(lo, F2),
                __builtin_convertvector(hi, F2));
  }

  // ---- float lanes: weights and samples ----
  static F fset(float v) {
    return F{v, v, v, v};
  }
  static F fsub(F a, F b) {
    return a - b;
  }
  static F fmul(F a, F b) {
    return a * b;
  }
  // a * b + c, rounded once (as vfmadd) where the target has FMA.
  C10_ALWAYS_INLINE static F ffmadd(F a, F b, F c) {
#ifdef __FP_FAST_FMAF
    F r;
    for (int i = 0; i < kLanes; ++i) {
      r[i] = __builtin_fmaf(a[i], b[i], c[i]);
    }
    return r;
#else
    return a * b + c;
#endif
  }

  // ---- int32 lanes and masks ----
  static I iset(int v) {
    return I{v, v, v, v};
  }
  static I iadd(I a, I b) {
    return a + b;
  }
  static I isub(I a, I b) {
    return a - b;
  }
  static I imul(I a, I b) {
    return a * b;
  }
  static I clamp(I v, I last) {
    v = select_bits<I, I>(v < 0, v, I{});
    return select_bits<I, I>(v > last, v, last);
  }
  static int first_lane(I v) {
    return v[0];
  }
  static int last_lane(I v) {
    return v[kLanes - 1];
  }
  static int hmin(I v) {
    const I m = select_bits<I, I>(v > __builtin_shufflevector(v, v, 2, 3, 0, 1),
                                  v,
                                  __builtin_shufflevector(v, v, 2, 3, 0, 1));
    return m[0] < m[1] ? m[0] : m[1];
  }
  static int hmax(I v) {
    const I m = select_bits<I, I>(v < __builtin_shufflevector(v, v, 2, 3, 0, 1),
                                  v,
                                  __builtin_shufflevector(v, v, 2, 3, 0, 1));
    return m[0] > m[1] ? m[0] : m[1];
  }
  static M every() {
    return iset(-1);
  }
  static M mand(M a, M b) {
    return a & b;
  }
  static bool all(M m) {
    return (m[0] & m[1] & m[2] & m[3]) != 0;
  }
  static bool any(M m) {
    return (m[0] | m[1] | m[2] | m[3]) != 0;
  }
  static M eq(I a, I b) {
    return a == b;
  }
  static M le_unsigned(I a, I b) {
    return (U)a <= (U)b;
  }
  // 0 <= v < size (size > 0).
  static M inside(I v, I size) {
    return (U)v < (U)size;
  }
  // Lanes of m take b, the others a.
  static F select(M m, F a, F b) {
    return select_bits<F, I>(m, a, b);
  }
  static F zero_unless(M m, F v) {
    return (F)((I)v & m);
  }

  // ---- windows, gathers, stores ----
  static Index index(I i) {
    return i;
  }
  static I indices(Index i) {
    return i;
  }
  // Elements i (0 to 7) of the table (lo, hi).
  static F pick(F lo, F hi, Index i) {
    float t[2 * kLanes];
    std::memcpy(t, &lo, sizeof(lo));
    std::memcpy(t + kLanes, &hi, sizeof(hi));
    return F{t[i[0]], t[i[1]], t[i[2]], t[i[3]]};
  }
  // Whether every index is below kLanes: then pick1 of one load does.
  static bool narrow(Index i) {
    return ((i[0] | i[1] | i[2] | i[3]) & ~(kLanes - 1)) == 0;
  }
  // Elements i (0 to 3) of v.
  static F pick1(F v, Index i) {
    return F{v[i[0]], v[i[1]], v[i[2]], v[i[3]]};
  }
  static F load(const float* p) {
    F v;
    std::memcpy(&v, p, sizeof(v));
    return v;
  }
  static F load(const uint8_t* p) {
    B4 v;
    std::memcpy(&v, p, sizeof(v));
    return __builtin_convertvector(v, F);
  }
  static Tail tail(int64_t n) {
    return n;
  }
  // The first n lanes (all from kLanes on) of v.
  static void store(float* p, Tail n, F v) {
    if (n >= kLanes) {
      std::memcpy(p, &v, sizeof(v));
    } else {
      for (int64_t k = 0; k < n; ++k) {
        p[k] = v[k];
      }
    }
  }
  // Round half up and saturate: floor(v + 0.5) clamped to [0, 255], as the
  // AVX builds do for any blend of uint8 taps (those lie in [0, 255]). The
  // clamp comes first, in float (NaN gives 0), so that truncating converts.
  static void store(uint8_t* p, Tail n, F v) {
    F x = v + 0.5f;
    x = zero_unless(x > 0.0f, x);
    x = select(x > 255.0f, x, fset(255.0f));
    const B4 bytes = __builtin_convertvector(__builtin_convertvector(x, I), B4);
    if (n >= kLanes) {
      std::memcpy(p, &bytes, kLanes);
    } else {
      for (int64_t k = 0; k < n; ++k) {
        p[k] = bytes[k];
      }
    }
  }
  // ---- the tables (sampling_tables_per_level.h): whole groups, int32 offsets
  static I izero_unless(M m, I v) {
    return v & m;
  }
  // Half 0 (lanes 0, 1) or 1 of a group where m holds, 0 elsewhere.
  static D dzero_unless(M m, int half, D v) {
    const I2 h = half == 0 ? __builtin_shufflevector(m, m, 0, 1)
                           : __builtin_shufflevector(m, m, 2, 3);
    return (D)((L)v & __builtin_convertvector(h, L));
  }
  static void istore(int32_t* p, I v) {
    std::memcpy(p, &v, sizeof(v));
  }
  static void dstore(double* p, D v) {
    std::memcpy(p, &v, sizeof(v));
  }
  // Lanes of v in [0, 255], as bytes.
  static void store_bytes(uint8_t* p, I v) {
    const B4 bytes = __builtin_convertvector(v, B4);
    std::memcpy(p, &bytes, kLanes);
  }
  // src[off] where valid, 0 elsewhere (those lanes read nothing).
  template <typename scalar_t>
  static F gather(const scalar_t* src, M valid, I off) {
    F r;
    for (int k = 0; k < kLanes; ++k) {
      r[k] = valid[k] ? static_cast<float>(src[off[k]]) : 0.0f;
    }
    return r;
  }

 private:
  // Lanes of m (all-ones / all-zeros, as bits B) take b, the others a.
  template <typename V, typename B>
  static V select_bits(B m, V a, V b) {
    return (V)(((B)a & ~m) | ((B)b & m));
  }
  static F join(F2 lo, F2 hi) {
    return __builtin_shufflevector(lo, hi, 0, 1, 2, 3);
  }
};

#include "cpu/sampling_per_level.h"

}  // namespace portable
}  // namespace cpu
}  // namespace warp_perspective

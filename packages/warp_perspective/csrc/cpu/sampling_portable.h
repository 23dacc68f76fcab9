// The portable build of the row kernels (sampling_rows.h): float32 and uint8
// images on CPUs without AVX2 (or with WARP_PERSPECTIVE_NO_AVX2=1), and on
// targets other than x86-64. No intrinsics: GCC/Clang vector extensions, which
// both compilers lower to the target's vectors (two SSE2 registers per Vec at
// the baseline x86-64 target), with plain per-lane loops where no baseline
// instruction exists (permutes, gathers, reductions). Vector extensions rather
// than loops over arrays: their arithmetic is SIMD whatever the vectoriser
// decides, and an array loop holding selects or double -> int conversions is
// one it often leaves scalar (see sampling_avx2.h on the table loops).
//
// Results are bit for bit those of the AVX2 and AVX-512 builds, which use
// fused multiply-adds (the coordinates in double, the blend in float), round
// with the x86 rounding instructions and convert with cvtt. Where the target
// has no FMA instruction (baseline x86-64) ffmadd and dfmadd are emulated
// exactly, with error-free transformations and rounding to odd (Boldo and
// Melquiond, "Emulation of FMA and correctly rounded sums: proved algorithms
// using rounding to odd", IEEE TC 2008), and floor / round half to even with
// the 1.5 * 2^52 addition, which rounds to nearest even in the default
// rounding mode.
#pragma once

#include <cstdint>
#include <cstring>

#include "cpu/sampling_loops.h"

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
  // a * b + c rounded once, as vfmadd.
  C10_ALWAYS_INLINE static D dfmadd(D a, D b, D c) {
#ifdef __FP_FAST_FMA
    return D{__builtin_fma(a[0], b[0], c[0]), __builtin_fma(a[1], b[1], c[1])};
#else
    // a * b = uh + ul exactly (Dekker's product, Veltkamp's split; exact
    // unless a * b underflows or |a|, |b| exceed 2^995, far beyond a
    // homography's coefficients and a row's columns), then c + uh + ul
    // rounded once: (th, tl) = c + uh exactly, and th + (tl + ul rounded to
    // odd) rounds as the exact sum would.
    const D uh = a * b;
    const D ul = product_error(a, b, uh);
    D th, tl;
    two_sum(c, uh, th, tl);
    return th + sum_to_odd(tl, ul);
#endif
  }
  // As maxpd / minpd: the second operand when either is NaN.
  static D dmin(D a, D b) {
    return select_bits<D, L>(a < b, b, a);
  }
  static D dmax(D a, D b) {
    return select_bits<D, L>(a > b, b, a);
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
  // a * b + c rounded once, as vfmadd.
  C10_ALWAYS_INLINE static F ffmadd(F a, F b, F c) {
#ifdef __FP_FAST_FMAF
    F r;
    for (int i = 0; i < kLanes; ++i) {
      r[i] = __builtin_fmaf(a[i], b[i], c[i]);
    }
    return r;
#else
    // In double the product of two floats is exact, and their sum s rounds
    // to float as the exact sum would unless s is a tie for float rounding
    // (then the exact sum may lie on either side of it): a normal float's
    // tie has 1 then 28 zeros as its last 29 significand bits; ties between
    // subnormal floats are below 2^-126. Rare: those groups are redone with
    // the sum rounded to odd, which rounds correctly (53 >= 24 + 2 bits).
    const D plo = widen(a, 0) * widen(b, 0), phi = widen(a, 1) * widen(b, 1);
    const D clo = widen(c, 0), chi = widen(c, 1);
    const D slo = plo + clo, shi = phi + chi;
    if (__builtin_expect(any(float_tie(slo) | float_tie(shi)), 0)) {
      return ffmadd_to_odd(plo, clo, phi, chi);
    }
    return to_float(slo, shi);
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
  // Round half up and saturate as the AVX-512 build does: floor(v + 0.5)
  // converted as cvtps2dq does (NaN and values out of int32 range become
  // INT32_MIN), then clamped to [0, 255]. Truncating instead of flooring
  // changes only values in (-1, 0), which clamp to 0 either way. (The AVX2
  // build's packs saturate through int16, giving 0 from 32767.5 up; a blend
  // of uint8 taps never comes near.)
  static void store(uint8_t* p, Tail n, F v) {
    const F x = v + 0.5f;
    const M in_range = (x >= -2147483648.0f) & (x < 2147483648.0f);
    const I i = __builtin_convertvector((F)((I)x & in_range), I) & in_range;
    const B4 bytes = __builtin_convertvector(clamp(i, iset(255)), B4);
    if (n >= kLanes) {
      std::memcpy(p, &bytes, kLanes);
    } else {
      for (int64_t k = 0; k < n; ++k) {
        p[k] = bytes[k];
      }
    }
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
  // Lanes 2 half .. 2 half + 1 of v in double.
  static D widen(F v, int half) {
    // The high half moved down first: GCC converts the low half of a vector
    // with one cvtps2pd, other lanes one at a time.
    const F w = half == 0 ? v : __builtin_shufflevector(v, v, 2, 3, 2, 3);
    return __builtin_convertvector(__builtin_shufflevector(w, w, 0, 1), D);
  }
  // ffmadd's rare case, out of line.
  __attribute__((noinline, cold)) static F ffmadd_to_odd(D plo,
                                                         D clo,
                                                         D phi,
                                                         D chi) {
    return to_float(sum_to_odd(plo, clo), sum_to_odd(phi, chi));
  }
  // Lanes where s may be a tie for rounding to float, as a mask of I (in
  // the 32-bit halves holding s's low bits, 0 in the others).
  static I float_tie(D s) {
    const I tie = ((I)s & I{0x1FFFFFFF, 0, 0x1FFFFFFF, 0}) ==
                  I{0x10000000, 1, 0x10000000, 1};
    const D size = (D)((L)s & ~(L)dset(-0.0));  // |s|
    const I tiny = (I)(size < 1.1754943508222875e-38) & (I)(size > 0.0);
    return tie | tiny;
  }
  // s + e == x + y exactly, s = x + y rounded (Knuth's TwoSum).
  static void two_sum(D x, D y, D& s, D& e) {
    s = x + y;
    const D yy = s - x;
    e = (x - (s - yy)) + (y - yy);
  }
  // x + y rounded to odd: if inexact, the neighbour of the exact sum whose
  // last significand bit is 1. Infinities and NaN pass through.
  static D sum_to_odd(D x, D y) {
    D s, e;
    two_sum(x, y, s, e);
    // The tests on the low bit and on the signs are made on 32-bit halves
    // (SSE2 has no 64-bit comparisons) and spread to both halves.
    const I sb = (I)s;
    const I even = (sb & 1) == 0;          // in the low halves
    const I same_sign = (sb ^ (I)e) >= 0;  // in the high halves
    const L even64 = (L)__builtin_shufflevector(even, even, 0, 0, 2, 2);
    const L same64 =
        (L)__builtin_shufflevector(same_sign, same_sign, 1, 1, 3, 3);
    const L inexact = (e < 0.0) | (e > 0.0);
    // One step away from zero when e has the sign of s, else towards it.
    return (D)((L)s + (inexact & even64 & (~same64 | 1)));
  }
#ifndef __FP_FAST_FMA
  // The rounding error of uh = a * b (Dekker).
  static D product_error(D a, D b, D uh) {
    const D split = dset(134217729.0);  // 2^27 + 1
    const D ga = a * split, gb = b * split;
    const D ah = ga - (ga - a), bh = gb - (gb - b);
    const D al = a - ah, bl = b - bh;
    return ((ah * bh - uh) + ah * bl + al * bh) + al * bl;
  }
#endif
};

#include "cpu/sampling_rows.h"

}  // namespace portable
}  // namespace cpu
}  // namespace warp_perspective

// exp, expm1 and tanh as straight-line arithmetic that GCC vectorizes in the
// AVX2 and AVX-512 clones of SHARED_BUILD_CPU_CLONES (std::exp and std::tanh
// are library calls that stop it; at::vec::Vectorized has only its scalar
// path in an extension); lltm_pointwise.h builds sigmoid and elu on them.
#pragma once

#include <c10/macros/Macros.h>

#include <cstdint>
#include <cstring>

// Accuracy, measured against long double over 2e6 random arguments in
// [-100, 100] and in [-5, 5]: exp within 1 ulp, expm1 within 2 ulp, sigmoid
// (1 / (1 + exp(-x))) and tanh within 2.5 ulp, for float and for double. NaN
// propagates. Limits, by design: exp saturates at exp(88) (float) / exp(709)
// (double) and expm1 is meant for x <= 0; the LLTM cell needs no more (sigmoid
// of a large argument is 1 or a denormal either way).
namespace lltm_cpu {
namespace vec_math {

template <typename T>
struct Consts;

template <>
struct Consts<float> {
  using Bits = uint32_t;
  // exp(x) is computed as 2^n * exp(r); n must stay a normal exponent.
  static constexpr float kLow = -87.0f;
  static constexpr float kHigh = 88.0f;
  static constexpr float kLog2e = 1.44269504088896341f;
  // ln 2 split in two: n * kLn2High is exact for |n| < 2^15.
  static constexpr float kLn2High = 0.693359375f;
  static constexpr float kLn2Low = -2.12194440054690583e-4f;
  // Adding 1.5 * 2^23 rounds to an integer held in the low mantissa bits.
  static constexpr float kShifter = 12582912.0f;
  static constexpr Bits kShifterBits = 0x4B400000u;
  static constexpr Bits kExponentBias = 127;
  static constexpr int kMantissaBits = 23;
};

template <>
struct Consts<double> {
  using Bits = uint64_t;
  static constexpr double kLow = -708.0;
  static constexpr double kHigh = 709.0;
  static constexpr double kLog2e = 1.4426950408889634074;
  static constexpr double kLn2High = 6.93147180369123816490e-01;
  static constexpr double kLn2Low = 1.90821492927058770002e-10;
  static constexpr double kShifter = 6755399441055744.0;  // 1.5 * 2^52
  static constexpr Bits kShifterBits = 0x4338000000000000ull;
  static constexpr Bits kExponentBias = 1023;
  static constexpr int kMantissaBits = 52;
};

template <typename To, typename From>
C10_ALWAYS_INLINE To bits_as(From value) {
  static_assert(sizeof(To) == sizeof(From), "bit cast between sizes");
  To out;
  std::memcpy(&out, &value, sizeof(out));
  return out;
}

// expm1(r) for |r| <= ln(2) / 2 by its Taylor series, cut where the remainder
// is below half an ulp (degree 7 for float, 13 for double).
C10_ALWAYS_INLINE float expm1_reduced(float r) {
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  return r + r * r * p;
}

C10_ALWAYS_INLINE double expm1_reduced(double r) {
  double p = 1.0 / 6227020800.0;
  p = p * r + 1.0 / 479001600.0;
  p = p * r + 1.0 / 39916800.0;
  p = p * r + 1.0 / 3628800.0;
  p = p * r + 1.0 / 362880.0;
  p = p * r + 1.0 / 40320.0;
  p = p * r + 1.0 / 5040.0;
  p = p * r + 1.0 / 720.0;
  p = p * r + 1.0 / 120.0;
  p = p * r + 1.0 / 24.0;
  p = p * r + 1.0 / 6.0;
  p = p * r + 0.5;
  return r + r * r * p;
}

// Writes x = n * ln 2 + r with |r| <= ln(2) / 2; returns expm1(r) and sets
// scale = 2^n. The clamps are comparisons, which are false for NaN, so NaN
// reaches the polynomial and comes out as NaN.
template <typename T>
C10_ALWAYS_INLINE T reduce(T x, T& scale) {
  using C = Consts<T>;
  using Bits = typename C::Bits;
  x = x < C::kLow ? C::kLow : x;
  x = x > C::kHigh ? C::kHigh : x;
  const T shifted = x * C::kLog2e + C::kShifter;
  const T n = shifted - C::kShifter;
  const Bits n_bits = bits_as<Bits>(shifted) - C::kShifterBits;
  scale = bits_as<T>(
      static_cast<Bits>((n_bits + C::kExponentBias) << C::kMantissaBits));
  const T r = (x - n * C::kLn2High) - n * C::kLn2Low;
  return expm1_reduced(r);
}

template <typename T>
C10_ALWAYS_INLINE T exp(T x) {
  T scale;
  const T p = reduce(x, scale);
  return scale + scale * p;
}

template <typename T>
C10_ALWAYS_INLINE T expm1(T x) {
  T scale;
  const T p = reduce(x, scale);
  return scale * p + (scale - T(1));
}

// tanh(|x|) = -e / (e + 2) with e = expm1(-2|x|) in (-1, 0]: no cancellation
// near 0, and no overflow for large |x|.
template <typename T>
C10_ALWAYS_INLINE T tanh(T x) {
  const T a = x < T(0) ? -x : x;
  const T e = expm1(T(-2) * a);
  const T t = -e / (e + T(2));
  return x < T(0) ? -t : t;
}

}  // namespace vec_math
}  // namespace lltm_cpu

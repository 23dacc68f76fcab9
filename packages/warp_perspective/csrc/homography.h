// The sampling geometry of warp_perspective, shared by the CPU and CUDA
// kernels (host and device code): inverting the 3x3 matrix and mapping a
// destination pixel to its source coordinate exactly as cv2.warpPerspective
// does (pixel centres at integer coordinates, double precision). Every product
// and sum here rounds on its own on every backend (pyproject.toml: the CPU
// build has -ffp-contract=off, the CUDA one --fmad=false), so that nearest
// sampling picks the same pixel at a tie and the singular test decides alike.
#pragma once

#include <torch/headeronly/macros/Macros.h>

#include <cmath>

namespace warp_perspective {

// Below this |det| / (|row0| |row1| |row2|) a matrix counts as singular. The
// ratio is invariant to scaling rows (Hadamard: it lies in [0, 1]), so a
// homography that zooms by 1e-4 passes and one with two dependent rows does
// not; float32 rounding of a well-conditioned matrix moves it by ~1e-7.
constexpr double kSingularRatio = 1e-12;

// inv = m^-1 by the adjugate, in double. Returns false (inv untouched) when m
// has a non-finite entry or is singular in the sense above.
C10_HOST_DEVICE inline bool invert3x3(const double* m, double* inv) {
  for (int i = 0; i < 9; ++i) {
    // x - x is 0 for every finite x and NaN for inf and NaN (no fast-math).
    if (!(m[i] - m[i] == 0.0)) {
      return false;
    }
  }
  const double c0 = m[4] * m[8] - m[5] * m[7];
  const double c1 = m[5] * m[6] - m[3] * m[8];
  const double c2 = m[3] * m[7] - m[4] * m[6];
  const double det = m[0] * c0 + m[1] * c1 + m[2] * c2;
  const double r0 = ::sqrt(m[0] * m[0] + m[1] * m[1] + m[2] * m[2]);
  const double r1 = ::sqrt(m[3] * m[3] + m[4] * m[4] + m[5] * m[5]);
  const double r2 = ::sqrt(m[6] * m[6] + m[7] * m[7] + m[8] * m[8]);
  // Written so that NaN (0/0 for a zero row) also counts as singular.
  if (!(::fabs(det) > kSingularRatio * r0 * r1 * r2)) {
    return false;
  }
  const double s = 1.0 / det;
  inv[0] = c0 * s;
  inv[1] = (m[2] * m[7] - m[1] * m[8]) * s;
  inv[2] = (m[1] * m[5] - m[2] * m[4]) * s;
  inv[3] = c1 * s;
  inv[4] = (m[0] * m[8] - m[2] * m[6]) * s;
  inv[5] = (m[2] * m[3] - m[0] * m[5]) * s;
  inv[6] = c2 * s;
  inv[7] = (m[1] * m[6] - m[0] * m[7]) * s;
  inv[8] = (m[0] * m[4] - m[1] * m[3]) * s;
  return true;
}

// The source coordinate of destination pixel (x, y) under the inverse
// homography inv. Like OpenCV, a pixel whose homogeneous w is exactly 0 maps to
// (0, 0) rather than to infinity.
C10_HOST_DEVICE C10_ALWAYS_INLINE void source_coordinate(const double* inv,
                                                         double x,
                                                         double y,
                                                         double& sx,
                                                         double& sy) {
  double w = inv[6] * x + (inv[7] * y + inv[8]);
  w = w != 0.0 ? 1.0 / w : 0.0;
  sx = (inv[0] * x + (inv[1] * y + inv[2])) * w;
  sy = (inv[3] * x + (inv[4] * y + inv[5])) * w;
}

// Source coordinates are clamped to [-2, size + 1] before they become integer
// tap indices: every coordinate beyond samples exactly as the bound does (all
// taps outside for zeros padding, the edge pixel for border padding), and the
// conversion to int can no longer overflow. NaN goes to the lower bound.
C10_HOST_DEVICE C10_ALWAYS_INLINE double clamp_coordinate(double v,
                                                          double size) {
  v = v > -2.0 ? v : -2.0;
  return v < size + 1.0 ? v : size + 1.0;
}

}  // namespace warp_perspective

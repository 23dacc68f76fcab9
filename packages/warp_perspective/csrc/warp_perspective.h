// What the op's registration and its CPU and CUDA kernels share: the problem
// a kernel works on, built from arguments the checks (checks.h) have
// accepted, and the declarations of the CPU sampling and the build's facts.
//
// The library is built on LibTorch's stable ABI: it includes only
// torch/csrc/stable, torch/headeronly and the C shim, so one build loads
// under every torch from the target release on. Autograd and the fake kernels
// (torch.compile, torch.export, the meta device) are Python, in
// src/warp_perspective/ops.py: the stable API has neither C++ autograd nor
// symbolic sizes.
#pragma once

#include <shared_build/stable_checks.h>
#include <shared_build/stable_compat.h>
#include <shared_build/stable_string.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace warp_perspective {

// A str argument of a kernel (torch 2.13's std::string conversion leaks).
using shared_build::StrArg;
using torch::headeronly::ScalarType;
using torch::stable::Tensor;

// The sentences of the data-dependent checks, which no fake kernel can make.
using shared_build::fail;
using shared_build::Sizes;

enum class Interpolation { kBilinear, kNearest };
enum class Padding { kZeros, kBorder };

// What every kernel of warp_perspective works on, after the checks. The
// sampling maps the source image (src_h x src_w) to the destination
// (dst_h x dst_w); the forward reads the source and writes the destination,
// the backward reads the destination's gradient and writes the source's.
// Hidden like torch::stable::Tensor, whose namespace torch marks hidden: a
// struct holding one must not be exported from the library either.
struct __attribute__((visibility("hidden"))) Problem {
  // (B, C, H, W) view (no copy) of what the kernel reads: the image (forward)
  // or grad_output (backward).
  Tensor input;
  Tensor warp;  // (3, 3) shared by the batch, or (B, 3, 3)
  int64_t src_h = 0;
  int64_t src_w = 0;
  int64_t dst_h = 0;
  int64_t dst_w = 0;
  Interpolation interpolation = Interpolation::kBilinear;
  Padding padding = Padding::kZeros;
  // The result's shape in the caller's layout: (H, W), (C, H, W) or
  // (B, C, H, W).
  std::vector<int64_t> result_sizes;
};

// The mode strings, which check_modes has accepted.
inline Interpolation parse_interpolation(const std::string& s) {
  return s == "nearest" ? Interpolation::kNearest : Interpolation::kBilinear;
}

inline Padding parse_padding(const std::string& s) {
  return s == "border" ? Padding::kBorder : Padding::kZeros;
}

inline Tensor as_bchw(const Tensor& x) {
  if (x.dim() == 2) {
    return torch::stable::unsqueeze(torch::stable::unsqueeze(x, 0), 0);
  }
  return x.dim() == 3 ? torch::stable::unsqueeze(x, 0) : x;
}

// The problem of warp_perspective, from arguments check_forward has accepted.
inline Problem forward_problem(const Tensor& image,
                               const Tensor& warp,
                               const std::optional<std::vector<int64_t>>& dsize,
                               const std::string& interpolation,
                               const std::string& padding_mode) {
  Problem p;
  p.interpolation = parse_interpolation(interpolation);
  p.padding = parse_padding(padding_mode);
  p.src_h = image.size(-2);
  p.src_w = image.size(-1);
  p.dst_h = dsize.has_value() ? (*dsize)[0] : p.src_h;
  p.dst_w = dsize.has_value() ? (*dsize)[1] : p.src_w;
  p.input = as_bchw(image);
  p.warp = warp;
  p.result_sizes = shared_build::sizes_of(image).values;
  p.result_sizes[image.dim() - 2] = p.dst_h;
  p.result_sizes[image.dim() - 1] = p.dst_w;
  return p;
}

// The problem of warp_perspective_backward, from arguments check_backward has
// accepted.
inline Problem backward_problem(const Tensor& grad_output,
                                const Tensor& warp,
                                const std::vector<int64_t>& image_size,
                                const std::string& interpolation,
                                const std::string& padding_mode) {
  const int64_t dim = grad_output.dim();
  Problem p;
  p.interpolation = parse_interpolation(interpolation);
  p.padding = parse_padding(padding_mode);
  p.src_h = image_size[dim - 2];
  p.src_w = image_size[dim - 1];
  p.dst_h = grad_output.size(-2);
  p.dst_w = grad_output.size(-1);
  p.input = as_bchw(grad_output);
  p.warp = warp;
  p.result_sizes = image_size;
  return p;
}

// The built-in sampling (cpu/builtin_sampling.cpp), used without OpenCV, for
// float64, and for the backward pass. out (B, C, dst_h, dst_w) and grad_image
// (B, C, src_h, src_w) are contiguous and allocated; grad_image is zero.
void builtin_sampling_forward(
    const Problem& p,
    const std::vector<std::array<double, 9>>& inverses,
    Tensor& out);
void builtin_sampling_backward(
    const Problem& p,
    const std::vector<std::array<double, 9>>& inverses,
    Tensor& grad_image);

// OpenCV's sampling (cpu/warp_perspective_kernel.cpp): true when it computed
// out, false when this build has no OpenCV or the case is one it leaves to the
// built-in sampling.
bool opencv_sampling_forward(const Problem& p,
                             const std::vector<std::array<double, 9>>& inverses,
                             Tensor& out);

// "opencv" when this build has the OpenCV backend, else "builtin".
const char* cpu_backend();
// "builtin" or "opencv": the backend the public op's CPU kernel uses.
const char* cpu_default_backend();
// The OpenCV version compiled against, or "" without OpenCV.
const char* opencv_version();
// "avx512", "avx2" or "portable": the loops the built-in CPU kernel runs on
// this machine (WARP_PERSPECTIVE_NO_AVX512=1 caps it at "avx2",
// WARP_PERSPECTIVE_NO_AVX2=1 forces "portable").
const char* cpu_level();

}  // namespace warp_perspective

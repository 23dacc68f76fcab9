// Declarations shared by the op's registration, its autograd and its CPU and
// CUDA kernels.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/OptionalArrayRef.h>
#include <c10/util/string_view.h>

#include <array>
#include <cstdint>
#include <vector>

namespace warp_perspective {

enum class Interpolation { kBilinear, kNearest };
enum class Padding { kZeros, kBorder };

// What every kernel of warp_perspective works on, after the checks. The
// sampling maps the source image (src_h x src_w) to the destination
// (dst_h x dst_w); the forward reads the source and writes the destination,
// the backward reads the destination's gradient and writes the source's.
struct Problem {
  // (B, C, H, W) view (no copy) of what the kernel reads: the image (forward)
  // or grad_output (backward).
  at::Tensor input;
  at::Tensor warp;  // (1, 3, 3) shared by the batch, or (B, 3, 3)
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

// Checks the arguments of warp_perspective (dims, sizes, dtypes, devices,
// dsize, mode strings) and returns them normalised. Throws c10::Error
// (RuntimeError in Python) with a sentence naming the offending values. The
// Meta kernels (the fake kernels of torch.compile and torch.export) run the
// same checks over symbolic sizes.
Problem check_forward(const at::Tensor& image,
                      const at::Tensor& warp,
                      at::OptionalIntArrayRef dsize,
                      c10::string_view interpolation,
                      c10::string_view padding_mode);

// The same for warp_perspective_backward: grad_output has the forward's output
// shape, image_size is the forward input's shape.
Problem check_backward(const at::Tensor& grad_output,
                       const at::Tensor& warp,
                       at::IntArrayRef image_size,
                       c10::string_view interpolation,
                       c10::string_view padding_mode);

// The inverse of every matrix of warp, in double, row-major; throws naming
// the matrix when one is singular or not finite. Copies warp to the host
// first if it lives on a GPU (a synchronisation).
std::vector<std::array<double, 9>> inverse_warps(const at::Tensor& warp);

// The built-in CPU kernels, used without OpenCV, for float64, and for the
// backward pass. out (B, C, dst_h, dst_w) and grad_image (B, C, src_h, src_w)
// are contiguous and allocated; grad_image is zero.
void forward_builtin_cpu(const Problem& p,
                         const std::vector<std::array<double, 9>>& inverses,
                         at::Tensor& out);
void backward_builtin_cpu(const Problem& p,
                          const std::vector<std::array<double, 9>>& inverses,
                          at::Tensor& grad_image);

// The OpenCV CPU kernel: true when it computed out, false when this build
// has no OpenCV or the case is one it leaves to the built-in kernel.
bool forward_opencv_cpu(const Problem& p,
                        const std::vector<std::array<double, 9>>& inverses,
                        at::Tensor& out);

// "opencv" when this build has the OpenCV backend, else "builtin".
const char* cpu_backend();
// "builtin" or "opencv": the backend the public op's CPU kernel uses.
const char* cpu_default_backend();
// The OpenCV version compiled against, or "" without OpenCV.
const char* opencv_version();
// "avx512", "avx2" or "portable": the loops the built-in CPU kernel runs on
// this machine (WARP_PERSPECTIVE_NO_AVX512=1 caps it at "avx2",
// WARP_PERSPECTIVE_NO_AVX2=1 forces "portable").
const char* cpu_geometry();

}  // namespace warp_perspective

// The argument checks of warp_perspective's real kernels, one function per op
// (check_forward, check_backward), run before a kernel reads anything: inline,
// because both libraries run them (the CPU one, _C, and the CUDA one, _C_cuda,
// which a CPU-only torch never loads). ops.py's fake kernels run functions of
// the same names over symbolic sizes, in the same words
// (tests/test_warp_perspective.py sends every bad input through both and
// compares the messages).
#pragma once

#include <shared_build/stable_checks.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/Layout.h>
#include <torch/headeronly/core/ScalarType.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace warp_perspective {

using shared_build::device_name;
using shared_build::fail;
using shared_build::layout_name;
using shared_build::Sizes;
using shared_build::sizes_of;
using torch::headeronly::ScalarType;
using torch::stable::Tensor;

inline void check_modes(const std::string& interpolation,
                        const std::string& padding_mode) {
  if (interpolation != "bilinear" && interpolation != "nearest") {
    fail("warp_perspective: interpolation must be \"bilinear\" or ",
         "\"nearest\", got \"",
         interpolation,
         "\"");
  }
  if (padding_mode != "zeros" && padding_mode != "border") {
    fail(
        "warp_perspective: padding_mode must be \"zeros\" or \"border\", got "
        "\"",
        padding_mode,
        "\"");
  }
}

// Checks shared by the forward (on the image) and the backward (on
// grad_output, whose leading dims are the image's): the warp's shape, dtype,
// device and batch size against those of x.
inline void check_warp(const Tensor& x,
                       const char* x_name,
                       const Tensor& warp) {
  SHARED_BUILD_CHECK(warp.defined(), "warp_perspective: warp is undefined");
  SHARED_BUILD_CHECK(
      warp.layout() == torch::headeronly::Layout::Strided,
      "warp_perspective: warp must be a dense (strided) tensor, got ",
      layout_name(warp.layout()));
  SHARED_BUILD_CHECK(
      (warp.dim() == 2 || warp.dim() == 3) && warp.size(-1) == 3 &&
          warp.size(-2) == 3,
      "warp_perspective: warp must be a 3x3 matrix or a batch of "
      "them (B, 3, 3), got shape ",
      sizes_of(warp));
  SHARED_BUILD_CHECK(x.device() == warp.device(),
                     "warp_perspective: ",
                     x_name,
                     " and warp must be on the same device, got ",
                     x_name,
                     " on ",
                     device_name(x),
                     " and warp on ",
                     device_name(warp));
  const ScalarType wtype = warp.scalar_type();
  if (x.scalar_type() == ScalarType::Byte) {
    SHARED_BUILD_CHECK(
        wtype == ScalarType::Float || wtype == ScalarType::Double,
        "warp_perspective: warp must be float32 or float64 for a "
        "uint8 image, got ",
        wtype);
  } else {
    SHARED_BUILD_CHECK(wtype == x.scalar_type(),
                       "warp_perspective: ",
                       x_name,
                       " and warp must have the same dtype, got ",
                       x_name,
                       " ",
                       x.scalar_type(),
                       " and warp ",
                       wtype,
                       " (convert one, e.g. warp.to(",
                       x_name,
                       ".dtype))");
  }
  const int64_t batch = x.dim() == 4 ? x.size(0) : 1;
  if (warp.dim() == 3) {
    SHARED_BUILD_CHECK(
        warp.size(0) == batch,
        "warp_perspective: batch sizes differ: warp holds ",
        warp.size(0),
        " matrices (shape ",
        sizes_of(warp),
        ") but ",
        x_name,
        " has batch size ",
        batch,
        " (shape ",
        sizes_of(x),
        "); pass one matrix per image, or a single (3, 3) matrix "
        "for all of them");
  }
}

inline void check_image(const Tensor& x, const char* name) {
  SHARED_BUILD_CHECK(x.defined(), "warp_perspective: ", name, " is undefined");
  SHARED_BUILD_CHECK(x.layout() == torch::headeronly::Layout::Strided,
                     "warp_perspective: ",
                     name,
                     " must be a dense (strided) tensor, got ",
                     layout_name(x.layout()));
  SHARED_BUILD_CHECK(x.dim() >= 2 && x.dim() <= 4,
                     "warp_perspective: ",
                     name,
                     " must be (H, W), (C, H, W) or (B, C, H, W), got a ",
                     x.dim(),
                     "-D tensor of shape ",
                     sizes_of(x));
}

// Whether sizes (element counts along each dimension) times element_size
// bytes stay below 2^62, in double: their product may overflow int64.
inline bool fits_in_a_tensor(const std::vector<int64_t>& sizes,
                             size_t element_size) {
  double bytes = static_cast<double>(element_size);
  for (const int64_t size : sizes) {
    bytes *= static_cast<double>(size);
  }
  return bytes < 0x1p62;
}

// The checks of warp_perspective (dims, sizes, dtypes, devices, dsize, mode
// strings). Throws (RuntimeError in Python) with a sentence naming the
// offending values. Every real kernel runs them, whoever calls it: Python,
// TorchScript, a C++ program.
inline void check_forward(const Tensor& image,
                          const Tensor& warp,
                          const std::optional<std::vector<int64_t>>& dsize,
                          const std::string& interpolation,
                          const std::string& padding_mode) {
  check_image(image, "image");
  const ScalarType dtype = image.scalar_type();
  SHARED_BUILD_CHECK(
      dtype == ScalarType::Float || dtype == ScalarType::Double ||
          dtype == ScalarType::Byte,
      "warp_perspective: image dtype must be float32, float64 or "
      "uint8, got ",
      dtype);
  SHARED_BUILD_CHECK(
      image.size(-1) > 0 && image.size(-2) > 0,
      "warp_perspective: image must have at least one pixel, got "
      "shape ",
      sizes_of(image));
  check_warp(image, "image", warp);
  check_modes(interpolation, padding_mode);
  if (dsize.has_value()) {
    const std::vector<int64_t>& d = *dsize;
    SHARED_BUILD_CHECK(
        d.size() == 2 && d[0] > 0 && d[1] > 0,
        "warp_perspective: dsize must be (out_h, out_w) with both "
        "positive, got ",
        Sizes{d});
    // A result whose byte size overflows int64 fails in the allocator with a
    // message that does not say where the size came from.
    const int64_t planes = image.numel() / (image.size(-2) * image.size(-1));
    SHARED_BUILD_CHECK(
        fits_in_a_tensor({d[0], d[1], planes}, image.element_size()),
        "warp_perspective: dsize ",
        Sizes{d},
        " makes an output of ",
        planes,
        " planes of ",
        d[0],
        " x ",
        d[1],
        " pixels, more bytes than a tensor can hold");
  }
}

// The same for warp_perspective_backward: grad_output has the forward's output
// shape, image_size is the forward input's shape.
inline void check_backward(const Tensor& grad_output,
                           const Tensor& warp,
                           const std::vector<int64_t>& image_size,
                           const std::string& interpolation,
                           const std::string& padding_mode) {
  check_image(grad_output, "grad_output");
  const ScalarType dtype = grad_output.scalar_type();
  SHARED_BUILD_CHECK(
      dtype == ScalarType::Float || dtype == ScalarType::Double,
      "warp_perspective_backward: grad_output dtype must be float32 "
      "or float64, got ",
      dtype);
  const int64_t dim = grad_output.dim();
  bool same_lead = static_cast<int64_t>(image_size.size()) == dim;
  for (int64_t i = 0; same_lead && i < dim - 2; ++i) {
    same_lead = image_size[i] == grad_output.size(i);
  }
  SHARED_BUILD_CHECK(
      same_lead && image_size[dim - 2] > 0 && image_size[dim - 1] > 0,
      "warp_perspective_backward: image_size ",
      Sizes{image_size},
      " does not fit grad_output of shape ",
      sizes_of(grad_output),
      " (same rank and leading dims, positive H and W)");
  SHARED_BUILD_CHECK(fits_in_a_tensor(image_size, grad_output.element_size()),
                     "warp_perspective_backward: image_size ",
                     Sizes{image_size},
                     " is more bytes than a tensor can hold");
  check_warp(grad_output, "grad_output", warp);
  check_modes(interpolation, padding_mode);
}

}  // namespace warp_perspective

// The argument checks of warp_perspective's real kernels, and the host-side
// inversion of the matrices: inline, because both libraries need them (the
// CPU one, _C, and the CUDA one, _C_cuda, which a CPU-only torch never
// loads). ops.py's fake kernels check the same things over symbolic sizes, in
// the same words (tests/test_warp_perspective.py sends every bad input
// through both and compares the messages).
#pragma once

#include <torch/headeronly/core/Layout.h>

#include <sstream>
#include <string>

#include "homography.h"
#include "warp_perspective.h"

namespace warp_perspective {

using shared_build::device_name;
using shared_build::layout_name;
using shared_build::sizes_of;

inline Interpolation parse_interpolation(const std::string& s) {
  if (s == "bilinear") {
    return Interpolation::kBilinear;
  }
  if (s == "nearest") {
    return Interpolation::kNearest;
  }
  fail("warp_perspective: interpolation must be \"bilinear\" or ",
       "\"nearest\", got \"",
       s,
       "\"");
}

inline Padding parse_padding(const std::string& s) {
  if (s == "zeros") {
    return Padding::kZeros;
  }
  if (s == "border") {
    return Padding::kBorder;
  }
  fail("warp_perspective: padding_mode must be \"zeros\" or \"border\", got \"",
       s,
       "\"");
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

inline Tensor as_bchw(const Tensor& x) {
  if (x.dim() == 2) {
    return torch::stable::unsqueeze(torch::stable::unsqueeze(x, 0), 0);
  }
  return x.dim() == 3 ? torch::stable::unsqueeze(x, 0) : x;
}

inline std::string format_matrix(const double* m) {
  std::ostringstream s;
  s << "[[" << m[0] << ", " << m[1] << ", " << m[2] << "], [" << m[3] << ", "
    << m[4] << ", " << m[5] << "], [" << m[6] << ", " << m[7] << ", " << m[8]
    << "]]";
  return s.str();
}

// Checks the arguments of warp_perspective (dims, sizes, dtypes, devices,
// dsize, mode strings) and returns them normalised. Throws (RuntimeError in
// Python) with a sentence naming the offending values. Every real kernel runs
// these checks, whoever calls it: Python, TorchScript, a C++ program.
inline Problem forward_problem(const Tensor& image,
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
  Problem p;
  p.interpolation = parse_interpolation(interpolation);
  p.padding = parse_padding(padding_mode);
  p.src_h = image.size(-2);
  p.src_w = image.size(-1);
  p.dst_h = p.src_h;
  p.dst_w = p.src_w;
  if (dsize.has_value()) {
    const std::vector<int64_t>& d = *dsize;
    SHARED_BUILD_CHECK(
        d.size() == 2 && d[0] > 0 && d[1] > 0,
        "warp_perspective: dsize must be (out_h, out_w) with both "
        "positive, got ",
        Sizes{d});
    // A result whose byte size overflows int64 fails in the allocator with a
    // message that does not say where the size came from.
    const int64_t planes = image.numel() / (p.src_h * p.src_w);
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
    p.dst_h = d[0];
    p.dst_w = d[1];
  }
  p.input = as_bchw(image);
  p.warp = warp;
  p.result_sizes = sizes_of(image).values;
  p.result_sizes[image.dim() - 2] = p.dst_h;
  p.result_sizes[image.dim() - 1] = p.dst_w;
  return p;
}

// The same for warp_perspective_backward: grad_output has the forward's output
// shape, image_size is the forward input's shape.
inline Problem backward_problem(const Tensor& grad_output,
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

// The inverse of every matrix of warp (on the CPU), in double, row-major;
// throws naming the matrix when one is singular or not finite. The CUDA
// kernels invert on the device instead (no synchronisation) and write zeros.
inline std::vector<std::array<double, 9>> inverse_warps(const Tensor& warp) {
  // Read in place, any strides, float or double: every call into torch's
  // dispatcher costs about a microsecond here.
  const Tensor& host = warp;
  const int64_t dim = host.dim();
  const int64_t count = dim == 3 ? host.size(0) : 1;
  const int64_t stride_b = dim == 3 ? host.stride(0) : 0;
  const int64_t stride_r = host.stride(dim - 2);
  const int64_t stride_c = host.stride(dim - 1);
  const bool is_double = host.scalar_type() == ScalarType::Double;
  const void* data = host.const_data_ptr();
  std::vector<std::array<double, 9>> inverses(count);
  for (int64_t i = 0; i < count; ++i) {
    double mi[9];
    for (int64_t r = 0; r < 3; ++r) {
      for (int64_t c = 0; c < 3; ++c) {
        const int64_t at = i * stride_b + r * stride_r + c * stride_c;
        mi[3 * r + c] = is_double ? static_cast<const double*>(data)[at]
                                  : static_cast<const float*>(data)[at];
      }
    }
    if (!invert3x3(mi, inverses[i].data())) {
      bool finite = true;
      for (int k = 0; k < 9; ++k) {
        finite = finite && (mi[k] - mi[k] == 0.0);
      }
      SHARED_BUILD_CHECK(finite,
                         "warp_perspective: warp matrix ",
                         i,
                         " has a non-finite entry: ",
                         format_matrix(mi));
      fail("warp_perspective: warp matrix ",
           i,
           " is singular (or nearly: |det| <= ",
           kSingularRatio,
           " x the product of its row norms): ",
           format_matrix(mi),
           "; a homography must be invertible");
    }
  }
  return inverses;
}

// An uninitialised contiguous (B, C, h, w) tensor of like's dtype and device.
inline Tensor empty_planes(const Tensor& like, int64_t h, int64_t w) {
  const std::vector<int64_t> sizes{like.size(0), like.size(1), h, w};
  return torch::stable::new_empty(like, sizes);
}

}  // namespace warp_perspective

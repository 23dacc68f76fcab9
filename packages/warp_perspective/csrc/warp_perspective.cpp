// The warp_perspective operator library: the op schemas, the input checks
// every kernel runs first (and the Meta kernels, the fake ones, too), and the
// host-side inversion of the matrices.
//
// Built as a plain shared library (no Python module, no libpython): Python
// loads it with torch.ops.load_library, a C++ program links it, and in both
// the TORCH_LIBRARY block below registers the ops with the dispatcher.
#include "warp_perspective.h"

#include <ATen/core/Dict.h>
#include <ATen/ops/empty.h>
#include <c10/core/SymBool.h>
#include <c10/core/SymInt.h>
#include <c10/core/SymIntArrayRef.h>
#include <c10/util/irange.h>
#include <torch/library.h>

#include <sstream>
#include <string>

#include "homography.h"

namespace warp_perspective {
namespace {

Interpolation parse_interpolation(c10::string_view s) {
  if (s == "bilinear") {
    return Interpolation::kBilinear;
  }
  if (s == "nearest") {
    return Interpolation::kNearest;
  }
  TORCH_CHECK(false,
              "warp_perspective: interpolation must be \"bilinear\" or "
              "\"nearest\", got \"",
              std::string(s),
              "\"");
}

Padding parse_padding(c10::string_view s) {
  if (s == "zeros") {
    return Padding::kZeros;
  }
  if (s == "border") {
    return Padding::kBorder;
  }
  TORCH_CHECK(false,
              "warp_perspective: padding_mode must be \"zeros\" or "
              "\"border\", got \"",
              std::string(s),
              "\"");
}

// Checks shared by the forward (on the image) and the backward (on
// grad_output, whose leading dims are the image's): the warp's shape, dtype,
// device and batch size against those of x.
void check_warp(const at::Tensor& x,
                const char* x_name,
                const at::Tensor& warp) {
  TORCH_CHECK(warp.defined(), "warp_perspective: warp is an undefined tensor");
  TORCH_CHECK(warp.layout() == at::kStrided,
              "warp_perspective: warp must be a dense (strided) tensor, got ",
              warp.layout());
  TORCH_CHECK((warp.dim() == 2 || warp.dim() == 3) && warp.sym_size(-1) == 3 &&
                  warp.sym_size(-2) == 3,
              "warp_perspective: warp must be a 3x3 matrix or a batch of "
              "them (B, 3, 3), got shape ",
              warp.sym_sizes());
  TORCH_CHECK(x.device() == warp.device(),
              "warp_perspective: ",
              x_name,
              " and warp must be on the same device, got ",
              x_name,
              " on ",
              x.device(),
              " and warp on ",
              warp.device());
  const auto wtype = warp.scalar_type();
  if (x.scalar_type() == at::kByte) {
    TORCH_CHECK(wtype == at::kFloat || wtype == at::kDouble,
                "warp_perspective: warp must be float32 or float64 for a "
                "uint8 image, got ",
                wtype);
  } else {
    TORCH_CHECK(wtype == x.scalar_type(),
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
  const c10::SymInt batch = x.dim() == 4 ? x.sym_size(0) : c10::SymInt(1);
  if (warp.dim() == 3) {
    TORCH_CHECK(warp.sym_size(0) == batch,
                "warp_perspective: batch sizes differ: warp holds ",
                warp.sym_size(0),
                " matrices (shape ",
                warp.sym_sizes(),
                ") but ",
                x_name,
                " has batch size ",
                batch,
                " (shape ",
                x.sym_sizes(),
                "); pass one matrix per image, or a single (3, 3) matrix "
                "for all of them");
  }
}

void check_image(const at::Tensor& x, const char* name) {
  TORCH_CHECK(x.defined(), "warp_perspective: ", name, " is undefined");
  TORCH_CHECK(x.layout() == at::kStrided,
              "warp_perspective: ",
              name,
              " must be a dense (strided) tensor, got ",
              x.layout());
  TORCH_CHECK(x.dim() >= 2 && x.dim() <= 4,
              "warp_perspective: ",
              name,
              " must be (H, W), (C, H, W) or (B, C, H, W), got a ",
              x.dim(),
              "-D tensor of shape ",
              x.sym_sizes());
}

// Whether sizes (element counts along each dimension) times element_size
// bytes stay below 2^62: in double when the sizes are known (their product
// may overflow int64), as a deferred runtime assert when they are symbolic.
bool fits_in_a_tensor(c10::SymIntArrayRef sizes, int64_t element_size) {
  double bytes = static_cast<double>(element_size);
  bool known = true;
  for (const c10::SymInt& size : sizes) {
    const auto value = size.maybe_as_int();
    known = known && value.has_value();
    bytes *= value.has_value() ? static_cast<double>(*value) : 1.0;
  }
  if (known) {
    return bytes < 0x1p62;
  }
  c10::SymInt symbolic(element_size);
  for (const c10::SymInt& size : sizes) {
    symbolic = symbolic * size;
  }
  return symbolic.sym_lt(int64_t{1} << 62).expect_true(__FILE__, __LINE__);
}

at::Tensor as_bchw(const at::Tensor& x) {
  if (x.dim() == 2) {
    return x.unsqueeze(0).unsqueeze(0);
  }
  return x.dim() == 3 ? x.unsqueeze(0) : x;
}

std::string format_matrix(const double* m) {
  std::ostringstream s;
  s << "[[" << m[0] << ", " << m[1] << ", " << m[2] << "], [" << m[3] << ", "
    << m[4] << ", " << m[5] << "], [" << m[6] << ", " << m[7] << ", " << m[8]
    << "]]";
  return s.str();
}

// The checks of check_forward and check_backward alone, over symbolic sizes:
// the Meta kernels at the end of this file run them too.
void check_forward_args(const at::Tensor& image,
                        const at::Tensor& warp,
                        at::OptionalSymIntArrayRef dsize,
                        c10::string_view interpolation,
                        c10::string_view padding_mode) {
  check_image(image, "image");
  const auto dtype = image.scalar_type();
  TORCH_CHECK(dtype == at::kFloat || dtype == at::kDouble || dtype == at::kByte,
              "warp_perspective: image dtype must be float32, float64 or "
              "uint8, got ",
              dtype);
  TORCH_CHECK(image.sym_size(-1) > 0 && image.sym_size(-2) > 0,
              "warp_perspective: image must have at least one pixel, got "
              "shape ",
              image.sym_sizes());
  check_warp(image, "image", warp);
  parse_interpolation(interpolation);
  parse_padding(padding_mode);
  if (dsize.has_value()) {
    const auto d = *dsize;
    TORCH_CHECK(d.size() == 2 && d[0] > 0 && d[1] > 0,
                "warp_perspective: dsize must be (out_h, out_w) with both "
                "positive, got ",
                d);
    // A result whose byte size overflows int64 fails in the allocator with a
    // message that does not say where the size came from.
    const c10::SymInt planes =
        image.sym_numel() / (image.sym_size(-1) * image.sym_size(-2));
    TORCH_CHECK(fits_in_a_tensor({d[0], d[1], planes}, image.element_size()),
                "warp_perspective: dsize ",
                d,
                " makes an output of ",
                planes,
                " planes of ",
                d[0],
                " x ",
                d[1],
                " pixels, more bytes than a tensor can hold");
  }
}

void check_backward_args(const at::Tensor& grad_output,
                         const at::Tensor& warp,
                         c10::SymIntArrayRef image_size,
                         c10::string_view interpolation,
                         c10::string_view padding_mode) {
  check_image(grad_output, "grad_output");
  const auto dtype = grad_output.scalar_type();
  TORCH_CHECK(dtype == at::kFloat || dtype == at::kDouble,
              "warp_perspective_backward: grad_output dtype must be float32 "
              "or float64, got ",
              dtype);
  const int64_t dim = grad_output.dim();
  bool same_lead = static_cast<int64_t>(image_size.size()) == dim;
  for (int64_t i = 0; same_lead && i < dim - 2; ++i) {
    same_lead = image_size[i] == grad_output.sym_size(i);
  }
  TORCH_CHECK(same_lead && image_size[dim - 2] > 0 && image_size[dim - 1] > 0,
              "warp_perspective_backward: image_size ",
              image_size,
              " does not fit grad_output of shape ",
              grad_output.sym_sizes(),
              " (same rank and leading dims, positive H and W)");
  TORCH_CHECK(fits_in_a_tensor(image_size, grad_output.element_size()),
              "warp_perspective_backward: image_size ",
              image_size,
              " is more bytes than a tensor can hold");
  check_warp(grad_output, "grad_output", warp);
  parse_interpolation(interpolation);
  parse_padding(padding_mode);
}

}  // namespace

Problem check_forward(const at::Tensor& image,
                      const at::Tensor& warp,
                      at::OptionalIntArrayRef dsize,
                      c10::string_view interpolation,
                      c10::string_view padding_mode) {
  check_forward_args(image,
                     warp,
                     dsize.has_value() ? at::OptionalSymIntArrayRef(
                                             c10::fromIntArrayRefSlow(*dsize))
                                       : at::OptionalSymIntArrayRef(),
                     interpolation,
                     padding_mode);
  Problem p;
  p.interpolation = parse_interpolation(interpolation);
  p.padding = parse_padding(padding_mode);
  p.dst_h = dsize.has_value() ? (*dsize)[0] : image.size(-2);
  p.dst_w = dsize.has_value() ? (*dsize)[1] : image.size(-1);
  p.src_h = image.size(-2);
  p.src_w = image.size(-1);
  p.input = as_bchw(image);
  p.warp = warp.dim() == 2 ? warp.unsqueeze(0) : warp;
  p.result_sizes = image.sizes().vec();
  p.result_sizes[image.dim() - 2] = p.dst_h;
  p.result_sizes[image.dim() - 1] = p.dst_w;
  return p;
}

Problem check_backward(const at::Tensor& grad_output,
                       const at::Tensor& warp,
                       at::IntArrayRef image_size,
                       c10::string_view interpolation,
                       c10::string_view padding_mode) {
  check_backward_args(grad_output,
                      warp,
                      c10::fromIntArrayRefSlow(image_size),
                      interpolation,
                      padding_mode);
  const int64_t dim = grad_output.dim();
  Problem p;
  p.interpolation = parse_interpolation(interpolation);
  p.padding = parse_padding(padding_mode);
  p.src_h = image_size[dim - 2];
  p.src_w = image_size[dim - 1];
  p.dst_h = grad_output.size(-2);
  p.dst_w = grad_output.size(-1);
  p.input = as_bchw(grad_output);
  p.warp = warp.dim() == 2 ? warp.unsqueeze(0) : warp;
  p.result_sizes = image_size.vec();
  return p;
}

std::vector<std::array<double, 9>> inverse_warps(const at::Tensor& warp) {
  const at::Tensor host =
      warp.to(at::kCPU, at::kDouble).contiguous().view({-1, 9});
  const double* m = host.const_data_ptr<double>();
  std::vector<std::array<double, 9>> inverses(host.size(0));
  for (const auto i : c10::irange(host.size(0))) {
    const double* mi = m + 9 * i;
    if (!invert3x3(mi, inverses[i].data())) {
      bool finite = true;
      for (int k = 0; k < 9; ++k) {
        finite = finite && (mi[k] - mi[k] == 0.0);
      }
      TORCH_CHECK(finite,
                  "warp_perspective: warp matrix ",
                  i,
                  " has a non-finite entry: ",
                  format_matrix(mi));
      TORCH_CHECK(false,
                  "warp_perspective: warp matrix ",
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

}  // namespace warp_perspective

namespace {

c10::Dict<std::string, std::string> build_config() {
  c10::Dict<std::string, std::string> config;
  config.insert("cpu_backend", warp_perspective::cpu_backend());
  config.insert("cpu_default", warp_perspective::cpu_default_backend());
  config.insert("opencv", warp_perspective::opencv_version());
  config.insert("cpu_geometry", warp_perspective::cpu_geometry());
#ifdef WITH_CUDA
  config.insert("cuda", "yes");
#else
  config.insert("cuda", "no");
#endif
  config.insert("cxx11_abi", std::to_string(_GLIBCXX_USE_CXX11_ABI));
  return config;
}

// ---- Meta kernels -----------------------------------------------------------
// The fake kernels of torch.compile, torch.export and the meta device: the
// kernels' own checks over symbolic sizes, then an empty result of the shape.
// The one check that needs values (an invertible warp) cannot run here.

at::Tensor forward_meta(const at::Tensor& image,
                        const at::Tensor& warp,
                        at::OptionalSymIntArrayRef dsize,
                        c10::string_view interpolation,
                        c10::string_view padding_mode) {
  warp_perspective::check_forward_args(
      image, warp, dsize, interpolation, padding_mode);
  std::vector<c10::SymInt> sizes = image.sym_sizes().vec();
  if (dsize.has_value()) {
    sizes[sizes.size() - 2] = (*dsize)[0];
    sizes[sizes.size() - 1] = (*dsize)[1];
  }
  return image.new_empty_symint(sizes);
}

at::Tensor backward_meta(const at::Tensor& grad_output,
                         const at::Tensor& warp,
                         c10::SymIntArrayRef image_size,
                         c10::string_view interpolation,
                         c10::string_view padding_mode) {
  warp_perspective::check_backward_args(
      grad_output, warp, image_size, interpolation, padding_mode);
  return grad_output.new_empty_symint(image_size);
}

}  // namespace

TORCH_LIBRARY(warp_perspective, m) {
  m.def(
      "warp_perspective(Tensor image, Tensor warp, SymInt[]? dsize=None, "
      "str interpolation=\"bilinear\", str padding_mode=\"zeros\") -> Tensor",
      {at::Tag::pt2_compliant_tag});
  // The adjoint of the forward's sampling, a linear map of grad_output:
  // scatters each output pixel's gradient to the taps it was read from.
  m.def(
      "warp_perspective_backward(Tensor grad_output, Tensor warp, "
      "SymInt[] image_size, str interpolation, str padding_mode) -> Tensor",
      {at::Tag::pt2_compliant_tag});
  // The built-in CPU kernel and the OpenCV one whatever the build's default,
  // for warp_perspective(..., backend=...) and the tests and benchmarks. The
  // OpenCV op raises in a build without OpenCV. Not part of the API: call the
  // Python wrapper's backend argument.
  m.def(
      "_warp_perspective_builtin(Tensor image, Tensor warp, SymInt[]? "
      "dsize=None, str interpolation=\"bilinear\", str "
      "padding_mode=\"zeros\") -> Tensor");
  m.def(
      "_warp_perspective_opencv(Tensor image, Tensor warp, SymInt[]? "
      "dsize=None, str interpolation=\"bilinear\", str "
      "padding_mode=\"zeros\") -> Tensor");
  // What this library was built with: cpu_backend, cpu_default, opencv, cuda,
  // cxx11_abi, and the CPU loops it runs here (cpu_geometry).
  m.def("_build_config() -> Dict(str, str)", &build_config);
}

TORCH_LIBRARY_IMPL(warp_perspective, Meta, m) {
  m.impl("warp_perspective", &forward_meta);
  m.impl("_warp_perspective_builtin", &forward_meta);
  m.impl("_warp_perspective_opencv", &forward_meta);
  m.impl("warp_perspective_backward", &backward_meta);
}

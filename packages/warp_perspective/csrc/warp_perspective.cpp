// The warp_perspective operator library: the op schemas, in a plain shared
// library on the stable ABI (no Python module) that Python loads with
// torch.ops.load_library and a C++ program links. The checks every real kernel
// runs are in checks.h; the fake kernels and autograd in
// src/warp_perspective/ops.py, whose fake kernels repeat the checks in the
// same words (a test sends every bad input through both and compares).
#include <sstream>
#include <string>

#include <shared_build/stable_compat.h>

#include "warp_perspective.h"

namespace {

// What this library was built with, one "key=value" per line: cpu_backend,
// cpu_default, opencv, cxx11_abi, and the CPU loops it runs here
// (cpu_level). A string because the stable ABI returns no Dict; ops.py's
// build_config() makes it one.
std::string build_config_kernel() {
  std::ostringstream config;
  config << "cpu_backend=" << warp_perspective::cpu_backend() << "\n"
         << "cpu_default=" << warp_perspective::cpu_default_backend() << "\n"
         << "opencv=" << warp_perspective::opencv_version() << "\n"
         << "cpu_level=" << warp_perspective::cpu_level() << "\n"
         << "cxx11_abi=" << _GLIBCXX_USE_CXX11_ABI << "\n";
  return config.str();
}

}  // namespace

STABLE_TORCH_LIBRARY(warp_perspective, m) {
  shared_build::def_pt2_compliant(
      m,
      "warp_perspective(Tensor image, Tensor warp, SymInt[]? dsize=None, "
      "str interpolation=\"bilinear\", str padding_mode=\"zeros\") -> Tensor");
  // The adjoint of the forward's sampling, a linear map of grad_output:
  // scatters each output pixel's gradient to the taps it was read from.
  shared_build::def_pt2_compliant(
      m,
      "warp_perspective_backward(Tensor grad_output, Tensor warp, "
      "SymInt[] image_size, str interpolation, str padding_mode) -> Tensor");
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
  m.def("_build_config() -> str");
}

STABLE_TORCH_LIBRARY_IMPL(warp_perspective, CompositeExplicitAutograd, m) {
  m.impl("_build_config", TORCH_BOX(&build_config_kernel));
}

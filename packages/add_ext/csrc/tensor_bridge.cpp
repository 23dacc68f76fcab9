// The part of add_ext's Python module that needs torch's Python headers: they
// use CPython's full API and do not compile under Py_LIMITED_API, which the
// build sets for the whole package (one abi3 wheel for CPython >= 3.10). So
// this file alone is compiled without it, and uses no more of CPython than the
// limited API has: torch_python's exported functions, and the object header
// that every CPython >= 3.10 (but the free-threaded builds, which have no abi3)
// lays out alike. abi3audit checks the built library for any call outside the
// limited API (tests/test_release.py).
#undef Py_LIMITED_API

#include "tensor_bridge.h"

#include <ATen/PythonTorchFunctionTLS.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>

namespace add_ext::python {
namespace {

// The GIL released for a scope, taken back however the scope ends.
class GilReleased {
 public:
  GilReleased() : state_(PyEval_SaveThread()) {}
  ~GilReleased() {
    PyEval_RestoreThread(state_);
  }
  GilReleased(const GilReleased&) = delete;
  GilReleased& operator=(const GilReleased&) = delete;

 private:
  PyThreadState* state_;
};

}  // namespace

bool plain_tensors(PyObject* x, PyObject* y) {
  return THPVariable_CheckExact(x) && THPVariable_CheckExact(y) &&
         !at::impl::torch_function_mode_enabled();
}

PyObject* add(PyObject* x, PyObject* y, double alpha) {
  HANDLE_TH_ERRORS
  static const auto op =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("add_ext::add", "")
          .typed<at::Tensor(const at::Tensor&, const at::Tensor&, double)>();
  const at::Tensor& xt = THPVariable_Unpack(x);
  const at::Tensor& yt = THPVariable_Unpack(y);
  at::Tensor out;
  {
    GilReleased no_gil;
    out = op.call(xt, yt, alpha);
  }
  return THPVariable_Wrap(std::move(out));
  END_HANDLE_TH_ERRORS
}

}  // namespace add_ext::python

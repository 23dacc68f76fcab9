// The Python module, with a direct entry to add_ext::add for eager calls: it
// calls the op unboxed from C++, cheaper per call than torch.ops' boxed path
// (the package README has the figures). What it does not handle (tensor
// subclasses, __torch_function__ modes, wrong argument types) goes to the
// torch.ops overload, so behaviour and errors are the op's own; under
// torch.compile, ops.py substitutes the overload for this function.
#include <ATen/PythonTorchFunctionTLS.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/python.h>

namespace add_ext {
namespace {

namespace py = pybind11;

const py::object& op_overload() {
  // Leaked on purpose: a static py::object would be destroyed after the
  // interpreter.
  static const py::object* overload = new py::object(
      py::module_::import("torch").attr("ops").attr("add_ext").attr("add").attr(
          "default"));
  return *overload;
}

// torch.Tensor or nn.Parameter exactly: no __torch_function__ of a subclass to
// honour.
bool is_plain_tensor(py::handle obj) {
  return THPVariable_CheckExact(obj.ptr());
}

py::object add_entry(py::handle x, py::handle y, py::handle alpha) {
  if (!is_plain_tensor(x) || !is_plain_tensor(y) ||
      !(PyFloat_CheckExact(alpha.ptr()) || PyLong_CheckExact(alpha.ptr())) ||
      at::impl::torch_function_mode_enabled()) {
    return op_overload()(x, y, alpha);
  }
  static const auto op =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("add_ext::add", "")
          .typed<at::Tensor(const at::Tensor&, const at::Tensor&, double)>();
  const double a = PyFloat_AsDouble(alpha.ptr());
  if (a == -1.0 && PyErr_Occurred()) {
    throw py::error_already_set();
  }
  const at::Tensor& xt = THPVariable_Unpack(x.ptr());
  const at::Tensor& yt = THPVariable_Unpack(y.ptr());
  at::Tensor out;
  {
    py::gil_scoped_release no_gil;
    out = op.call(xt, yt, a);
  }
  return py::reinterpret_steal<py::object>(THPVariable_Wrap(std::move(out)));
}

}  // namespace
}  // namespace add_ext

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "add_ext: alpha * x + y as a PyTorch custom op";
  m.def("add",
        &add_ext::add_entry,
        "alpha * x + y: the add_ext::add op, called from C++ for plain tensors",
        py::arg("x"),
        py::arg("y"),
        py::arg("alpha") = 1.0);
}

// The Python module, add_ext._C (importing it loads the library, whose
// TORCH_LIBRARY blocks register the op), with a direct entry to add_ext::add
// for eager calls: _C.add calls the op unboxed from C++, cheaper per call than
// torch.ops' boxed path (the package README has the figures). What it does not
// handle (tensor subclasses, __torch_function__ modes, keyword arguments, other
// argument types or counts) goes to the torch.ops overload, so behaviour and
// errors are the op's own; under torch.compile, ops.py substitutes the overload
// for this function. This file uses CPython's limited API only (one abi3 wheel
// for CPython >= 3.10); tensor_bridge.cpp holds what needs torch's Python
// layer.
#include <shared_build/python_module.h>

#include <initializer_list>

#include "tensor_bridge.h"

namespace add_ext {
namespace {

// torch.ops.add_ext.add.default, looked up on first use and kept: the op lives
// as long as the interpreter. Called with the GIL held.
PyObject* op_overload() {
  static PyObject* overload = nullptr;
  if (overload == nullptr) {
    PyObject* object = PyImport_ImportModule("torch");
    for (const char* name : {"ops", "add_ext", "add", "default"}) {
      if (object == nullptr) {
        break;
      }
      PyObject* attribute = PyObject_GetAttrString(object, name);
      Py_DECREF(object);
      object = attribute;
    }
    overload = object;
  }
  return overload;
}

// The call as it came, made on the torch.ops overload.
PyObject* call_op(PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  PyObject* overload = op_overload();
  if (overload == nullptr) {
    return nullptr;
  }
  PyObject* positional = PyTuple_New(nargs);
  if (positional == nullptr) {
    return nullptr;
  }
  for (Py_ssize_t i = 0; i < nargs; ++i) {
    Py_INCREF(args[i]);
    PyTuple_SetItem(positional, i, args[i]);
  }
  PyObject* keywords = nullptr;
  const Py_ssize_t nkw = kwnames == nullptr ? 0 : PyTuple_Size(kwnames);
  if (nkw > 0) {
    keywords = PyDict_New();
    for (Py_ssize_t i = 0; keywords != nullptr && i < nkw; ++i) {
      if (PyDict_SetItem(
              keywords, PyTuple_GetItem(kwnames, i), args[nargs + i]) < 0) {
        Py_CLEAR(keywords);
      }
    }
    if (keywords == nullptr) {
      Py_DECREF(positional);
      return nullptr;
    }
  }
  PyObject* result = PyObject_Call(overload, positional, keywords);
  Py_DECREF(positional);
  Py_XDECREF(keywords);
  return result;
}

// add(x, y, alpha=1.0)
PyObject* add(PyObject* /*module*/,
              PyObject* const* args,
              Py_ssize_t nargs,
              PyObject* kwnames) {
  const bool fast = kwnames == nullptr && (nargs == 2 || nargs == 3) &&
                    (nargs == 2 || PyFloat_CheckExact(args[2]) ||
                     PyLong_CheckExact(args[2])) &&
                    python::plain_tensors(args[0], args[1]);
  if (!fast) {
    return call_op(args, nargs, kwnames);
  }
  const double alpha = nargs == 3 ? PyFloat_AsDouble(args[2]) : 1.0;
  if (alpha == -1.0 && PyErr_Occurred()) {
    // An int past double's range: the op's own error, as for any other alpha
    // it cannot take.
    PyErr_Clear();
    return call_op(args, nargs, kwnames);
  }
  return python::add(args[0], args[1], alpha);
}

// Through void (*)(void): a METH_FASTCALL | METH_KEYWORDS function has a
// signature of its own, which PyMethodDef holds as a PyCFunction.
PyMethodDef methods[] = {
    {"add",
     reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(add)),
     METH_FASTCALL | METH_KEYWORDS,
     "add(x, y, alpha=1.0)\n--\n\nalpha * x + y: the add_ext::add op, called "
     "from C++ for plain tensors"},
    {nullptr, nullptr, 0, nullptr},
};

}  // namespace
}  // namespace add_ext

SHARED_BUILD_PYTHON_MODULE_WITH_METHODS(
    "add_ext: alpha * x + y as a PyTorch custom op",
    add_ext::methods)

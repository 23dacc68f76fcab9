// What add_ext's Python module takes from torch's Python layer
// (libtorch_python): tensors out of and into Python objects, and C++ errors
// raised as torch raises them. Declared in Python's own types only, so that
// bindings.cpp compiles under the limited API; tensor_bridge.cpp defines them
// with torch's Python headers, which do not compile under it.
#pragma once

#include <Python.h>

namespace add_ext::python {

// x and y are torch.Tensor or nn.Parameter exactly and no __torch_function__
// mode is on: nothing in torch's Python machinery is owed a look at the call.
bool plain_tensors(PyObject* x, PyObject* y);

// add_ext::add(x, y, alpha) called unboxed, the GIL released while it runs. x
// and y must have passed plain_tensors. A new reference, or nullptr with the
// exception torch.ops would have raised set.
PyObject* add(PyObject* x, PyObject* y, double alpha);

}  // namespace add_ext::python

// The Python module init of a package's extension, named by
// TORCH_EXTENSION_NAME so it matches the module Python imports. The module is
// empty (importing it loads the ops) or holds a PyMethodDef table
// (..._WITH_METHODS); only the limited API, so one wheel serves CPython 3.10+.
#pragma once

#include <Python.h>

#ifndef TORCH_EXTENSION_NAME
#error \
    "TORCH_EXTENSION_NAME is not defined: build through shared_build (setup.py)"
#endif

#define SHARED_BUILD_STR_(x) #x
#define SHARED_BUILD_STR(x) SHARED_BUILD_STR_(x)
#define SHARED_BUILD_CAT_(a, b) a##b
#define SHARED_BUILD_CAT(a, b) SHARED_BUILD_CAT_(a, b)

#define SHARED_BUILD_PYTHON_MODULE(doc) \
  SHARED_BUILD_PYTHON_MODULE_WITH_METHODS(doc, nullptr)

#define SHARED_BUILD_PYTHON_MODULE_WITH_METHODS(doc, methods)              \
  extern "C" PyMODINIT_FUNC SHARED_BUILD_CAT(PyInit_,                      \
                                             TORCH_EXTENSION_NAME)(void) { \
    static PyModuleDef module_def = {                                      \
        PyModuleDef_HEAD_INIT,                                             \
        SHARED_BUILD_STR(TORCH_EXTENSION_NAME),                            \
        doc,                                                               \
        -1,                                                                \
        methods,                                                           \
        nullptr,                                                           \
        nullptr,                                                           \
        nullptr,                                                           \
        nullptr,                                                           \
    };                                                                     \
    return PyModule_Create(&module_def);                                   \
  }

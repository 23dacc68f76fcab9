// A `str` argument of a stable-ABI kernel, read without leaking: torch 2.13's
// stable headers convert it with `return *new std::string(...)`, one heap copy
// leaked per call, and a stable-ABI wheel is built with 2.13's headers (2.14
// fixed them). A kernel takes its `str` arguments as shared_build::StrArg,
// whose conversion frees torch's string handle and keeps nothing else.
#pragma once

#include <torch/csrc/stable/stableivalue_conversions.h>

#include "stable_compat.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace shared_build {

struct StrArg {
  std::string value;
};

}  // namespace shared_build

namespace torch::stable::detail {

template <>
struct ToImpl<shared_build::StrArg> {
  static shared_build::StrArg call(StableIValue val,
                                   [[maybe_unused]] uint64_t version,
                                   [[maybe_unused]] bool is_internal) {
    StringHandle handle = torch::stable::detail::to<StringHandle>(val);
    size_t length = 0;
    const char* data = nullptr;
    SHARED_BUILD_SHIM_CHECK(torch_string_length(handle, &length));
    SHARED_BUILD_SHIM_CHECK(torch_string_c_str(handle, &data));
    shared_build::StrArg arg{std::string(data, length)};
    SHARED_BUILD_SHIM_CHECK(torch_delete_string(handle));
    return arg;
  }
};

}  // namespace torch::stable::detail

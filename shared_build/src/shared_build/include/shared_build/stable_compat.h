// What differs between the stable-ABI headers of the torch releases a build
// may target (2.11 on); each compiles to the newer call where it exists.
#pragma once

#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/version.h>

// torch 2.13 renamed the shim's error check; 2.11 and 2.12 call it
// TORCH_ERROR_CODE_CHECK (torch/headeronly/util/shim_utils.h).
#ifdef STABLE_TORCH_ERROR_CODE_CHECK
#define SHARED_BUILD_SHIM_CHECK(call) STABLE_TORCH_ERROR_CODE_CHECK(call)
#else
#define SHARED_BUILD_SHIM_CHECK(call) TORCH_ERROR_CODE_CHECK(call)
#endif

// Op tags through the stable library arrived in torch 2.12.
#if defined(TORCH_VERSION_2_12_0) && \
    TORCH_FEATURE_VERSION >= TORCH_VERSION_2_12_0
#define SHARED_BUILD_HAS_OP_TAGS 1
#else
#define SHARED_BUILD_HAS_OP_TAGS 0
#endif

namespace shared_build {

// m.def(schema) tagged pt2_compliant (the op works under torch.compile and
// passes opcheck); untagged where the headers cannot set tags.
inline void def_pt2_compliant(torch::stable::detail::StableLibrary& m,
                              const char* schema) {
#if SHARED_BUILD_HAS_OP_TAGS
  m.def(schema, {torch::headeronly::Tag::pt2_compliant_tag});
#else
  m.def(schema);
#endif
}

}  // namespace shared_build

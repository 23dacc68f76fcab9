// Argument checks that several packages' ops share, with the sentences their
// tests assert: "<op>: <name> must be ...". SymInt-aware (sizes are printed
// with sym_sizes()), so a Meta kernel runs them under torch.compile's dynamic
// shapes as the real kernel does.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <cstdint>

namespace shared_build {

inline void check_dense(const char* op, const char* name, const at::Tensor& t) {
  TORCH_CHECK(t.layout() == at::kStrided,
              op,
              ": ",
              name,
              " must be a dense (strided) tensor, got layout ",
              t.layout());
}

// meaning names the dimensions, e.g. "(batch, features)".
inline void check_dim(const char* op,
                      const char* name,
                      const at::Tensor& t,
                      int64_t dim,
                      const char* meaning) {
  TORCH_CHECK(t.dim() == dim,
              op,
              ": ",
              name,
              " must be ",
              dim,
              "-D ",
              meaning,
              ", got a ",
              t.dim(),
              "-D tensor of shape ",
              t.sym_sizes());
}

// why says where the expected shape comes from, e.g. "like grad_h".
inline void check_shape(const char* op,
                        const char* name,
                        const at::Tensor& t,
                        c10::SymIntArrayRef expected,
                        const char* why) {
  TORCH_CHECK(t.sym_sizes() == expected,
              op,
              ": ",
              name,
              " must have shape ",
              expected,
              " (",
              why,
              "), got ",
              t.sym_sizes());
}

}  // namespace shared_build

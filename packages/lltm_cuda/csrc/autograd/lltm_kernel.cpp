// lltm_cuda's Autograd kernels: lltm_common/csrc/lltm_autograd.h for Cuda.
#include <torch/library.h>
#include "lltm_common/lltm_autograd.h"

#include "lltm_cuda.h"

using lltm_cuda::Cuda;

TORCH_LIBRARY_IMPL(lltm_cuda, Autograd, m) {
  m.impl("forward", lltm::forward_autograd<Cuda>);
  m.impl("backward", lltm::backward_autograd<Cuda>);
  m.impl("_backward_pointwise", lltm::backward_pointwise_autograd<Cuda>);
}

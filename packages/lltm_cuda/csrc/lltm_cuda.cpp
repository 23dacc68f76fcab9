// lltm_cuda's operator library: the LLTM's schemas and its Meta kernels (from
// lltm_common/csrc/lltm.h), and, under CompositeExplicitAutograd, the kernels
// of every device type but CUDA, which check the arguments and then say where
// to go instead. The CUDA kernels are in cuda/lltm_kernel.cu, the Autograd
// ones in autograd/lltm_kernel.cpp.
#include <shared_build/python_module.h>
#include <torch/library.h>
#include "lltm_common/lltm.h"

#include "lltm_cuda.h"

SHARED_BUILD_PYTHON_MODULE(
    "lltm_cuda: the LLTM cell as PyTorch custom ops with fused CUDA kernels")

using lltm_cuda::Cuda;

TORCH_LIBRARY(lltm_cuda, m) {
  lltm::define_ops(m);
}

TORCH_LIBRARY_IMPL(lltm_cuda, Meta, m) {
  m.impl("forward", lltm::forward_meta<Cuda>);
  m.impl("backward", lltm::backward_meta<Cuda>);
  m.impl("_backward_pointwise", lltm::backward_pointwise_meta<Cuda>);
}

TORCH_LIBRARY_IMPL(lltm_cuda, CompositeExplicitAutograd, m) {
  using lltm::Run;
  m.impl("forward", &lltm::forward_kernel<Cuda, Run::kOtherDevice>);
  m.impl("backward", &lltm::backward_kernel<Cuda, Run::kOtherDevice>);
  m.impl("_backward_pointwise",
         &lltm::backward_pointwise_kernel<Cuda, Run::kOtherDevice>);
}

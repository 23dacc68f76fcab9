// lltm_cuda: the LLTM ops of lltm_common/ (schemas, checks, Meta and autograd
// kernels, shared with lltm_cpu) under the lltm_cuda namespace, with the fused
// CUDA passes of cuda/lltm_kernel.cu.
#include <lltm.h>
#include <shared_build/python_module.h>
#include <torch/library.h>

SHARED_BUILD_PYTHON_MODULE(
    "lltm_cuda: the LLTM cell as PyTorch custom ops with fused CUDA kernels")

namespace lltm_cuda {
const c10::DeviceType kDeviceType = c10::DeviceType::CUDA;
const char* const kOtherDeviceHint =
    "lltm_cuda runs on CUDA tensors only. Use lltm_cpu for CPU tensors (same "
    "API), or move the tensors to a GPU with .cuda().";
}  // namespace lltm_cuda

TORCH_LIBRARY(lltm_cuda, m) {
  lltm_cuda::define_ops(m);
}
TORCH_LIBRARY_IMPL(lltm_cuda, CUDA, m) {
  lltm_cuda::impl_device_kernels(m);
}
TORCH_LIBRARY_IMPL(lltm_cuda, CPU, m) {
  lltm_cuda::impl_other_device_kernels(m);
}

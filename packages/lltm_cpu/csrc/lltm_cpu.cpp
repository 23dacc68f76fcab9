// lltm_cpu: the LLTM ops of lltm_common/ (schemas, checks, Meta and autograd
// kernels, shared with lltm_cuda) under the lltm_cpu namespace, with the fused
// CPU passes of cpu/lltm_kernel.cpp.
#include <lltm.h>
#include <shared_build/python_module.h>
#include <torch/library.h>

SHARED_BUILD_PYTHON_MODULE(
    "lltm_cpu: the LLTM cell as PyTorch custom ops with fused CPU kernels")

namespace lltm_cpu {
const c10::DeviceType kDeviceType = c10::DeviceType::CPU;
const char* const kOtherDeviceHint =
    "lltm_cpu has CPU kernels only. Use lltm_cuda for CUDA tensors (same "
    "API), or move the tensors to the CPU.";
}  // namespace lltm_cpu

TORCH_LIBRARY(lltm_cpu, m) {
  lltm_cpu::define_ops(m);
}
TORCH_LIBRARY_IMPL(lltm_cpu, CPU, m) {
  lltm_cpu::impl_device_kernels(m);
}
TORCH_LIBRARY_IMPL(lltm_cpu, CUDA, m) {
  lltm_cpu::impl_other_device_kernels(m);
}

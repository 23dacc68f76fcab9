// lltm_cpu: the LLTM ops of lltm_common/ (schemas, checks, Meta and autograd
// kernels and the TORCH_LIBRARY blocks, shared with lltm_cuda) under the
// lltm_cpu namespace, with the fused CPU passes of cpu/lltm_kernel.cpp.
#include <lltm.h>
#include <shared_build/python_module.h>

SHARED_BUILD_PYTHON_MODULE(
    "lltm_cpu: the LLTM cell as PyTorch custom ops with fused CPU kernels")

const char* const lltm_cpu::kOtherDeviceHint =
    "lltm_cpu has CPU kernels only. Use lltm_cuda for CUDA tensors (same "
    "API), or move the tensors to the CPU.";

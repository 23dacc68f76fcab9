// lltm_cuda: the LLTM ops of lltm_common/ (schemas, checks, Meta and autograd
// kernels and the TORCH_LIBRARY blocks, shared with lltm_cpu) under the
// lltm_cuda namespace, with the fused CUDA passes of cuda/lltm_kernel.cu.
#include <lltm.h>
#include <shared_build/python_module.h>

SHARED_BUILD_PYTHON_MODULE(
    "lltm_cuda: the LLTM cell as PyTorch custom ops with fused CUDA kernels")

const char* const lltm_cuda::kOtherDeviceHint =
    "lltm_cuda runs on CUDA tensors only. Use lltm_cpu for CPU tensors (same "
    "API), or move the tensors to a GPU with .cuda().";

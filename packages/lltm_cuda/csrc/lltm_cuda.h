// lltm_cuda: the LLTM ops of lltm_common/csrc/lltm.h (one source with
// lltm_cpu) for this package's device; what its templates need to know.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/DeviceType.h>
#include "lltm_common/lltm.h"

#include <tuple>

namespace lltm_cuda {

struct Cuda {
  static constexpr const char* kName = "lltm_cuda";
  static constexpr c10::DeviceType kDeviceType = c10::DeviceType::CUDA;
  static constexpr const char* kOtherDeviceHint =
      "lltm_cuda runs on CUDA tensors only. Use lltm_cpu for CPU tensors (same "
      "API), or move the tensors to a GPU with .cuda().";

  // The fused pointwise passes, in cuda/lltm_kernel.cu.
  static void forward_pointwise(const lltm::Step& step);
  static std::tuple<at::Tensor, at::Tensor, at::Tensor> backward_pointwise(
      const lltm::Step& step);
};

}  // namespace lltm_cuda

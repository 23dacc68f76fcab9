// lltm_cpu: the LLTM ops of lltm_common/csrc/lltm.h (one source with
// lltm_cuda) for this package's device; what its templates need to know.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/DeviceType.h>
#include "lltm_common/lltm.h"

#include <tuple>

namespace lltm_cpu {

struct Cpu {
  static constexpr const char* kName = "lltm_cpu";
  static constexpr c10::DeviceType kDeviceType = c10::DeviceType::CPU;
  static constexpr const char* kOtherDeviceHint =
      "lltm_cpu has CPU kernels only. Use lltm_cuda for CUDA tensors (same "
      "API), or move the tensors to the CPU.";

  // The fused pointwise passes, in cpu/lltm_kernel.cpp.
  static void forward_pointwise(const lltm::Step& step);
  static std::tuple<at::Tensor, at::Tensor, at::Tensor> backward_pointwise(
      const lltm::Step& step);
};

}  // namespace lltm_cpu

// lltm_cpu's operator library: the LLTM's schemas and its Meta kernels (from
// lltm_common/csrc/lltm.h), and, under CompositeExplicitAutograd, the kernels
// of every device type but CPU, which check the arguments and then say where
// to go instead. The CPU kernels are in cpu/lltm_kernel.cpp, the Autograd
// ones in autograd/lltm_kernel.cpp.
#include <shared_build/python_module.h>
#include <torch/library.h>
#include "lltm_common/lltm.h"

#include "lltm_cpu.h"

SHARED_BUILD_PYTHON_MODULE(
    "lltm_cpu: the LLTM cell as PyTorch custom ops with fused CPU kernels")

using lltm_cpu::Cpu;

TORCH_LIBRARY(lltm_cpu, m) {
  lltm::define_ops(m);
}

TORCH_LIBRARY_IMPL(lltm_cpu, Meta, m) {
  m.impl("forward", lltm::forward_meta<Cpu>);
  m.impl("backward", lltm::backward_meta<Cpu>);
  m.impl("_backward_pointwise", lltm::backward_pointwise_meta<Cpu>);
}

TORCH_LIBRARY_IMPL(lltm_cpu, CompositeExplicitAutograd, m) {
  using lltm::Run;
  m.impl("forward", &lltm::forward_kernel<Cpu, Run::kOtherDevice>);
  m.impl("backward", &lltm::backward_kernel<Cpu, Run::kOtherDevice>);
  m.impl("_backward_pointwise",
         &lltm::backward_pointwise_kernel<Cpu, Run::kOtherDevice>);
}

// lltm_cpu's Autograd kernels: lltm_common/csrc/lltm_autograd.h for Cpu.
#include <torch/library.h>
#include "lltm_common/lltm_autograd.h"

#include "lltm_cpu.h"

using lltm_cpu::Cpu;

TORCH_LIBRARY_IMPL(lltm_cpu, Autograd, m) {
  m.impl("forward", lltm::forward_autograd<Cpu>);
  m.impl("backward", lltm::backward_autograd<Cpu>);
  m.impl("_backward_pointwise", lltm::backward_pointwise_autograd<Cpu>);
}

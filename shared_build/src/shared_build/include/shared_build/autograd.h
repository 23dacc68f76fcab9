// Helpers for an op's C++ Autograd kernel (full ABI). Function::apply builds a
// graph node on every call, even when nothing requires grad; a kernel with
// nothing to record calls the op below autograd, as ATen's own kernels do.
#pragma once

#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/grad_mode.h>

namespace shared_build {

// Whether a call has anything for autograd to do: a gradient to record, or a
// forward-mode tangent (level 0), which must reach Function::apply so that it
// raises that a C++ Function has no jvp rather than being dropped.
template <typename... Tensors>
bool autograd_needed(const Tensors&... args) {
  const bool record =
      at::GradMode::is_enabled() && (args.requires_grad() || ...);
  return record || (args._fw_grad(/*level=*/0).defined() || ...);
}

// op (a TypedOperatorHandle) called with the dispatch keys from autograd down
// excluded: its backend kernel, without re-entering this autograd kernel.
template <typename TypedOp, typename... Args>
auto call_below_autograd(const TypedOp& op, const Args&... args) {
  at::AutoDispatchBelowADInplaceOrView guard;
  return op.call(args...);
}

}  // namespace shared_build

// Helpers for an op's C++ Autograd kernel (full ABI:
// torch::autograd::Function).
//
// Function::apply builds a graph node, its context, variable lists and output
// wrappers on every call, even when nothing requires grad.
// An autograd kernel that has nothing to record can call the op's kernel below
// autograd directly, as ATen's own autograd kernels do.
#pragma once

#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/grad_mode.h>

namespace shared_build {

// Whether a call has anything for autograd to do: a gradient to record (grad
// mode on and an argument that requires grad) or a forward-mode tangent (level
// 0, the only one autograd's own kernels look at), which must reach
// Function::apply so that it raises that a C++ custom Function has no jvp: the
// fast path must not silently drop a tangent.
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

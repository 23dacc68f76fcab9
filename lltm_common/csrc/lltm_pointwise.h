// The LLTM's pointwise math for one element, and the data pointers of a step,
// written once for the CPU passes of lltm_cpu and the CUDA kernels of
// lltm_cuda. Each device supplies Math, a struct with static exp, expm1 and
// tanh for its compute type T (at::opmath_type of the storage dtype);
// everything else is here.
#pragma once

#include <c10/macros/Macros.h>
#include "lltm.h"

namespace lltm {

// Where one step's tensors are, for the pointwise passes: contiguous,
// gate_weights and d_gates (batch, 3 * state) [input | output | candidate],
// the rest (batch, state). Taken by value; the CPU passes hand the pointers on
// as __restrict__ parameters, which GCC needs to vectorize.
template <typename scalar_t>
struct ForwardData {
  const scalar_t* gate_weights;
  const scalar_t* old_cell;
  scalar_t* new_h;
  scalar_t* new_cell;
  scalar_t* input_gate;
  scalar_t* output_gate;
  scalar_t* candidate_cell;
};

template <typename scalar_t>
struct BackwardData {
  const scalar_t* grad_h;
  const scalar_t* grad_cell;
  const scalar_t* new_cell;
  const scalar_t* gate_weights;
  scalar_t* d_old_cell;
  scalar_t* d_gates;
};

template <typename scalar_t>
ForwardData<scalar_t> forward_data(const Step& step) {
  return {in<scalar_t>(step.gate_weights),
          in<scalar_t>(step.old_cell),
          out<scalar_t>(step.new_h),
          out<scalar_t>(step.new_cell),
          out<scalar_t>(step.input_gate),
          out<scalar_t>(step.output_gate),
          out<scalar_t>(step.candidate_cell)};
}

// d_old_cell and d_gates are the pass's results, allocated by the caller.
template <typename scalar_t>
BackwardData<scalar_t> backward_data(const Step& step,
                                     const at::Tensor& d_old_cell,
                                     const at::Tensor& d_gates) {
  return {in<scalar_t>(step.grad_h),
          in<scalar_t>(step.grad_cell),
          in<scalar_t>(step.new_cell),
          in<scalar_t>(step.gate_weights),
          out<scalar_t>(d_old_cell),
          out<scalar_t>(d_gates)};
}

// The three activations of one element.
template <typename T>
struct Gates {
  T input;
  T output;
  T candidate;
};

// What forward writes for one element: the activations, the new cell state
// and new_h.
template <typename T>
struct ForwardElement {
  Gates<T> gates;
  T new_cell;
  T new_h;
};

// The activations of the three gate pre-activations z: sigmoid, sigmoid, elu
// (alpha = 1, expm1 keeps the digits of small negative z). Forward writes
// them; backward recomputes them the same way.
template <typename Math, typename T>
C10_HOST_DEVICE C10_ALWAYS_INLINE Gates<T> activations(Gates<T> z) {
  return {T(1) / (T(1) + Math::exp(-z.input)),
          T(1) / (T(1) + Math::exp(-z.output)),
          z.candidate > T(0) ? z.candidate : Math::expm1(z.candidate)};
}

// From the three gate pre-activations z and the old cell state: the
// activations, new_cell = old_cell + candidate * input,
// new_h = tanh(new_cell) * output.
template <typename Math, typename T>
C10_HOST_DEVICE C10_ALWAYS_INLINE ForwardElement<T> forward_element(
    Gates<T> z,
    T old_cell) {
  const Gates<T> a = activations<Math>(z);
  const T cell = old_cell + a.candidate * a.input;
  return {a, cell, Math::tanh(cell) * a.output};
}

// What backward writes for one element: the gradient of the old cell state
// and of the three gate pre-activations.
template <typename T>
struct BackwardElement {
  T d_old_cell;
  Gates<T> d_gates;
};

// From the incoming gradients, new_cell and the three gate pre-activations z:
// the activations recomputed from z (the pass reads three fewer tensors than
// it would reading them back), the sigmoid derivatives from them, elu's from
// its pre-activation, and tanh(new_cell) from new_cell.
template <typename Math, typename T>
C10_HOST_DEVICE C10_ALWAYS_INLINE BackwardElement<T>
backward_element(T grad_h, T grad_cell, Gates<T> z, T new_cell) {
  const Gates<T> a = activations<Math>(z);
  const T i = a.input;
  const T o = a.output;
  const T c = a.candidate;
  const T d_c_dz = z.candidate > T(0) ? T(1) : Math::exp(z.candidate);
  const T t = Math::tanh(new_cell);
  const T d_cell = grad_h * o * (T(1) - t * t) + grad_cell;
  return {d_cell,
          {d_cell * c * i * (T(1) - i),
           grad_h * t * o * (T(1) - o),
           d_cell * i * d_c_dz}};
}

}  // namespace lltm

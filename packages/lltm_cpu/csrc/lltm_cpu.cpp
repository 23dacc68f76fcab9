// The lltm_cpu operator library: the ops' schemas, their input checks, the
// Python module, and a CUDA-key kernel that says where CUDA tensors belong.
#include "lltm_cpu.h"

#include <c10/util/ArrayRef.h>
#include <shared_build/python_module.h>
#include <torch/library.h>

#include <initializer_list>
#include <utility>

SHARED_BUILD_PYTHON_MODULE(
    "lltm_cpu: the LLTM cell as PyTorch custom ops with fused CPU kernels")

namespace lltm_cpu {
namespace {

using NamedTensor = std::pair<const char*, const at::Tensor*>;

void check_dims(const char* op,
                const char* name,
                const at::Tensor& t,
                int64_t dims,
                const char* meaning) {
  TORCH_CHECK(t.defined(), op, ": ", name, " is an undefined tensor");
  TORCH_CHECK(t.layout() == at::kStrided,
              op,
              ": ",
              name,
              " must be a dense (strided) tensor, got layout ",
              t.layout());
  TORCH_CHECK(t.dim() == dims,
              op,
              ": ",
              name,
              " must be ",
              dims,
              "-D ",
              meaning,
              ", got a ",
              t.dim(),
              "-D tensor of shape ",
              t.sizes());
}

// One floating dtype and one device for every argument; the first argument is
// the one the others are compared with.
void check_dtype_and_device(const char* op,
                            std::initializer_list<NamedTensor> tensors) {
  const NamedTensor& first = *tensors.begin();
  const auto dtype = first.second->scalar_type();
  const auto device = first.second->device();
  for (const NamedTensor& t : tensors) {
    TORCH_CHECK(t.second->device() == device,
                op,
                ": all tensors must be on the same device, got ",
                first.first,
                " on ",
                device,
                " and ",
                t.first,
                " on ",
                t.second->device());
    TORCH_CHECK(t.second->scalar_type() == dtype,
                op,
                ": all tensors must have the same dtype, got ",
                first.first,
                " ",
                dtype,
                " and ",
                t.first,
                " ",
                t.second->scalar_type());
  }
  TORCH_CHECK(dtype == at::kFloat || dtype == at::kDouble ||
                  dtype == at::kBFloat16 || dtype == at::kHalf,
              op,
              ": dtype must be float32, float64, bfloat16 or float16, got ",
              dtype);
}

void check_shape(const char* op,
                 const char* name,
                 const at::Tensor& t,
                 c10::IntArrayRef expected,
                 const char* why) {
  TORCH_CHECK(t.sizes() == expected,
              op,
              ": ",
              name,
              " must have shape ",
              expected,
              " (",
              why,
              "), got ",
              t.sizes());
}

}  // namespace

LltmSizes check_forward_inputs(const at::Tensor& input,
                               const at::Tensor& weights,
                               const at::Tensor& bias,
                               const at::Tensor& old_h,
                               const at::Tensor& old_cell) {
  constexpr const char* op = "lltm_cpu.forward";
  check_dims(op, "input", input, 2, "(batch, input_features)");
  check_dims(op,
             "weights",
             weights,
             2,
             "(3 * state_size, input_features + state_size)");
  check_dims(op, "bias", bias, 1, "(3 * state_size,)");
  check_dims(op, "old_h", old_h, 2, "(batch, state_size)");
  check_dims(op, "old_cell", old_cell, 2, "(batch, state_size)");
  check_dtype_and_device(op,
                         {{"input", &input},
                          {"weights", &weights},
                          {"bias", &bias},
                          {"old_h", &old_h},
                          {"old_cell", &old_cell}});
  const int64_t batch = input.size(0);
  const int64_t features = input.size(1);
  const int64_t state = old_h.size(1);
  TORCH_CHECK(old_h.size(0) == batch,
              op,
              ": old_h must have the batch size of input, ",
              batch,
              ", got old_h of shape ",
              old_h.sizes(),
              " and input of shape ",
              input.sizes());
  check_shape(op, "old_cell", old_cell, old_h.sizes(), "the shape of old_h");
  check_shape(op,
              "weights",
              weights,
              {3 * state, features + state},
              "3 * state_size, input_features + state_size; state_size is "
              "old_h.size(1) and input_features is input.size(1)");
  check_shape(op,
              "bias",
              bias,
              {3 * state},
              "3 * state_size; state_size is old_h.size(1)");
  return {batch, features, state};
}

LltmSizes check_backward_pointwise_inputs(const char* op,
                                          const at::Tensor& grad_h,
                                          const at::Tensor& grad_cell,
                                          const at::Tensor& new_cell,
                                          const at::Tensor& input_gate,
                                          const at::Tensor& output_gate,
                                          const at::Tensor& candidate_cell,
                                          const at::Tensor& gate_weights) {
  constexpr const char* state_dims = "(batch, state_size)";
  check_dims(op, "grad_h", grad_h, 2, state_dims);
  check_dims(op, "grad_cell", grad_cell, 2, state_dims);
  check_dims(op, "new_cell", new_cell, 2, state_dims);
  check_dims(op, "input_gate", input_gate, 2, state_dims);
  check_dims(op, "output_gate", output_gate, 2, state_dims);
  check_dims(op, "candidate_cell", candidate_cell, 2, state_dims);
  check_dims(op, "gate_weights", gate_weights, 2, "(batch, 3 * state_size)");
  check_dtype_and_device(op,
                         {{"grad_h", &grad_h},
                          {"grad_cell", &grad_cell},
                          {"new_cell", &new_cell},
                          {"input_gate", &input_gate},
                          {"output_gate", &output_gate},
                          {"candidate_cell", &candidate_cell},
                          {"gate_weights", &gate_weights}});
  const int64_t batch = grad_h.size(0);
  const int64_t state = grad_h.size(1);
  constexpr const char* like_grad_h = "the shape of grad_h";
  check_shape(op, "grad_cell", grad_cell, grad_h.sizes(), like_grad_h);
  check_shape(op, "new_cell", new_cell, grad_h.sizes(), like_grad_h);
  check_shape(op, "input_gate", input_gate, grad_h.sizes(), like_grad_h);
  check_shape(op, "output_gate", output_gate, grad_h.sizes(), like_grad_h);
  check_shape(
      op, "candidate_cell", candidate_cell, grad_h.sizes(), like_grad_h);
  check_shape(op,
              "gate_weights",
              gate_weights,
              {batch, 3 * state},
              "batch, 3 * state_size; from grad_h");
  return {batch, 0, state};
}

LltmSizes check_backward_inputs(const at::Tensor& grad_h,
                                const at::Tensor& grad_cell,
                                const at::Tensor& new_cell,
                                const at::Tensor& input_gate,
                                const at::Tensor& output_gate,
                                const at::Tensor& candidate_cell,
                                const at::Tensor& X,
                                const at::Tensor& gate_weights,
                                const at::Tensor& weights) {
  constexpr const char* op = "lltm_cpu.backward";
  check_dims(op, "X", X, 2, "(batch, state_size + input_features)");
  check_dims(op,
             "weights",
             weights,
             2,
             "(3 * state_size, state_size + input_features)");
  LltmSizes sizes = check_backward_pointwise_inputs(op,
                                                    grad_h,
                                                    grad_cell,
                                                    new_cell,
                                                    input_gate,
                                                    output_gate,
                                                    candidate_cell,
                                                    gate_weights);
  check_dtype_and_device(
      op, {{"grad_h", &grad_h}, {"X", &X}, {"weights", &weights}});
  const int64_t batch = sizes.batch;
  const int64_t state = sizes.state_size;
  TORCH_CHECK(X.size(0) == batch && X.size(1) >= state,
              op,
              ": X must have shape (batch, state_size + input_features) with "
              "batch ",
              batch,
              " and at least state_size = ",
              state,
              " columns (grad_h has shape ",
              grad_h.sizes(),
              "), got ",
              X.sizes());
  sizes.input_features = X.size(1) - state;
  check_shape(op,
              "weights",
              weights,
              {3 * state, X.size(1)},
              "3 * state_size, X.size(1); state_size is grad_h.size(1)");
  return sizes;
}

namespace {

// lltm_cpu has CPU kernels only. Without this kernel a CUDA tensor would meet
// the dispatcher's "Could not run 'lltm_cpu::forward' with arguments from the
// 'CUDA' backend"; this says what to do instead.
[[noreturn]] void refuse_cuda(const char* op, const at::Tensor& t) {
  TORCH_CHECK(false,
              op,
              ": got tensors on ",
              t.device(),
              "; lltm_cpu has CPU kernels only. Use lltm_cuda for CUDA tensors "
              "(same API), or move the tensors to the CPU.");
}

std::tuple<at::Tensor,
           at::Tensor,
           at::Tensor,
           at::Tensor,
           at::Tensor,
           at::Tensor,
           at::Tensor>
forward_on_cuda(const at::Tensor& input,
                const at::Tensor& weights,
                const at::Tensor& bias,
                const at::Tensor& old_h,
                const at::Tensor& old_cell) {
  check_forward_inputs(input, weights, bias, old_h, old_cell);
  refuse_cuda("lltm_cpu.forward", input);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>
backward_on_cuda(const at::Tensor& grad_h,
                 const at::Tensor& grad_cell,
                 const at::Tensor& new_cell,
                 const at::Tensor& input_gate,
                 const at::Tensor& output_gate,
                 const at::Tensor& candidate_cell,
                 const at::Tensor& X,
                 const at::Tensor& gate_weights,
                 const at::Tensor& weights) {
  check_backward_inputs(grad_h,
                        grad_cell,
                        new_cell,
                        input_gate,
                        output_gate,
                        candidate_cell,
                        X,
                        gate_weights,
                        weights);
  refuse_cuda("lltm_cpu.backward", grad_h);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> backward_pointwise_on_cuda(
    const at::Tensor& grad_h,
    const at::Tensor& grad_cell,
    const at::Tensor& new_cell,
    const at::Tensor& input_gate,
    const at::Tensor& output_gate,
    const at::Tensor& candidate_cell,
    const at::Tensor& gate_weights) {
  constexpr const char* op = "lltm_cpu._backward_pointwise";
  check_backward_pointwise_inputs(op,
                                  grad_h,
                                  grad_cell,
                                  new_cell,
                                  input_gate,
                                  output_gate,
                                  candidate_cell,
                                  gate_weights);
  refuse_cuda(op, grad_h);
}

}  // namespace
}  // namespace lltm_cpu

TORCH_LIBRARY(lltm_cpu, m) {
  m.def(
      "forward(Tensor input, Tensor weights, Tensor bias, Tensor old_h, "
      "Tensor old_cell) -> (Tensor new_h, Tensor new_cell, Tensor input_gate, "
      "Tensor output_gate, Tensor candidate_cell, Tensor X, "
      "Tensor gate_weights)",
      {at::Tag::pt2_compliant_tag});
  m.def(
      "backward(Tensor grad_h, Tensor grad_cell, Tensor new_cell, "
      "Tensor input_gate, Tensor output_gate, Tensor candidate_cell, "
      "Tensor X, Tensor gate_weights, Tensor weights) -> (Tensor d_old_h, "
      "Tensor d_input, Tensor d_weights, Tensor d_bias, Tensor d_old_cell)",
      {at::Tag::pt2_compliant_tag});
  // Internal: the fused pointwise half of backward (no GEMM). The autograd
  // kernel of forward calls it and then only the GEMMs whose gradients are
  // needed (see autograd.cpp).
  m.def(
      "_backward_pointwise(Tensor grad_h, Tensor grad_cell, Tensor new_cell, "
      "Tensor input_gate, Tensor output_gate, Tensor candidate_cell, "
      "Tensor gate_weights) -> (Tensor d_gates, Tensor d_bias, "
      "Tensor d_old_cell)",
      {at::Tag::pt2_compliant_tag});
}

TORCH_LIBRARY_IMPL(lltm_cpu, CUDA, m) {
  m.impl("forward", &lltm_cpu::forward_on_cuda);
  m.impl("backward", &lltm_cpu::backward_on_cuda);
  m.impl("_backward_pointwise", &lltm_cpu::backward_pointwise_on_cuda);
}

// The CPU part of the LLTM ops (lltm_common/csrc/lltm.h): the pointwise work
// of forward and backward in one fused, vectorized pass per direction, parallel
// over the batch. The GEMMs around it run through ATen (MKL here), in
// lltm_common/csrc/lltm.h, whose kernels this file registers.
#include <ATen/AccumulateType.h>
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <shared_build/cpu_dispatch.h>
#include <torch/library.h>
#include "lltm_common/lltm.h"
#include "lltm_common/lltm_pointwise.h"

#include <algorithm>
#include <cstdint>
#include <tuple>
#include <vector>

#if defined(__x86_64__) || defined(_M_X64)
#include <xmmintrin.h>
#endif

#include "cpu/vec_math.h"
#include "lltm_cpu.h"

namespace lltm_cpu {

namespace {

// Rows of the batch per task: enough elements that a task outweighs waking a
// thread of the pool. Half of ATen's elementwise grain (32768), because each
// element here costs several exp-like evaluations instead of one add; the
// tutorial shape (2048 elements) stays on one thread. Not tuned by
// measurement: this VM was too busy for two-thread timings to mean anything.
constexpr int64_t kGrainElements = 16384;

int64_t rows_per_task(int64_t state) {
  return std::max<int64_t>(1, kGrainElements / std::max<int64_t>(state, 1));
}

// Loads and stores between a storage dtype and its math type. c10's own
// bfloat16 conversion branches on NaN, which stops GCC from vectorizing the
// loop; this one selects instead (same rounding: to nearest, ties to even; NaN
// stays NaN). float16 keeps c10's conversion: correct, but its loops run one
// element at a time.
template <typename scalar_t>
struct Convert {
  using opmath_t = at::opmath_type<scalar_t>;
  static C10_ALWAYS_INLINE opmath_t load(scalar_t v) {
    return static_cast<opmath_t>(v);
  }
  static C10_ALWAYS_INLINE scalar_t store(opmath_t v) {
    return static_cast<scalar_t>(v);
  }
};

template <>
struct Convert<c10::BFloat16> {
  static C10_ALWAYS_INLINE float load(c10::BFloat16 v) {
    return vec_math::bits_as<float>(static_cast<uint32_t>(v.x) << 16);
  }
  static C10_ALWAYS_INLINE c10::BFloat16 store(float v) {
    const uint32_t u = vec_math::bits_as<uint32_t>(v);
    const auto rounded =
        static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
    return c10::BFloat16(v != v ? static_cast<uint16_t>(0x7FC0) : rounded,
                         c10::BFloat16::from_bits());
  }
};

// vec_math's exp, expm1 and tanh for the element math of lltm_pointwise.h:
// branch-free, so that GCC vectorizes the loops below.
struct VecMath {
  template <typename T>
  static C10_ALWAYS_INLINE T exp(T x) {
    return vec_math::exp(x);
  }
  template <typename T>
  static C10_ALWAYS_INLINE T expm1(T x) {
    return vec_math::expm1(x);
  }
  template <typename T>
  static C10_ALWAYS_INLINE T tanh(T x) {
    return vec_math::tanh(x);
  }
};

// Denormals flushed to zero (FTZ) and read as zero (DAZ) on this thread while
// a pass runs, the thread's own setting restored after. GCC vectorizes each
// select of an exp argument clamp by computing the clamped lanes' results from
// constants, in every lane: sigmoid(-88) = 6.05e-39 is one, a denormal, which
// backward multiplies by grad_h and then discards. Each such product took a
// microcode assist: the backward pass took 12.1 us at the tutorial's shape
// (16 x 128) and 40.2 us at 64 x 128 whatever the values, as long as grad_h
// was not zero; 6.5 us and 16.7 us with the flush (2-core Xeon, torch 2.15.0,
// one thread). Only values below the normal range (1.2e-38 in float, 2.2e-308
// in double) change: arithmetic that would give one gives zero (FTZ), and one
// read by a pass is zero (DAZ).
class FlushDenormals {
 public:
#if defined(__x86_64__) || defined(_M_X64)
  FlushDenormals() : saved_(_mm_getcsr()) {
    constexpr unsigned kFlushToZero = 0x8000;
    constexpr unsigned kDenormalsAreZero = 0x0040;
    _mm_setcsr(saved_ | kFlushToZero | kDenormalsAreZero);
  }
  ~FlushDenormals() {
    _mm_setcsr(saved_);
  }

 private:
  unsigned saved_;
#else
  FlushDenormals() = default;
#endif
  FlushDenormals(const FlushDenormals&) = delete;
  FlushDenormals& operator=(const FlushDenormals&) = delete;
};

// ---- forward pointwise ------------------------------------------------------

// Rows [begin, end) of the batch, one row at a time, one pass over its gates.
// The pointers are __restrict__ parameters, not struct members: GCC vectorizes
// the loop only when it knows the tensors do not overlap.
template <typename scalar_t>
C10_ALWAYS_INLINE void forward_rows_impl(const scalar_t* __restrict__ gates,
                                         const scalar_t* __restrict__ old_cell,
                                         scalar_t* __restrict__ new_h,
                                         scalar_t* __restrict__ new_cell,
                                         scalar_t* __restrict__ input_gate,
                                         scalar_t* __restrict__ output_gate,
                                         scalar_t* __restrict__ candidate,
                                         int64_t begin,
                                         int64_t end,
                                         int64_t state) {
  using opmath_t = at::opmath_type<scalar_t>;
  using C = Convert<scalar_t>;
  for (int64_t r = begin; r < end; ++r) {
    const scalar_t* __restrict__ g = gates + r * 3 * state;
    const int64_t o = r * state;
    for (int64_t j = 0; j < state; ++j) {
      const lltm::Gates<opmath_t> z{
          C::load(g[j]), C::load(g[state + j]), C::load(g[2 * state + j])};
      const auto e =
          lltm::forward_element<VecMath>(z, C::load(old_cell[o + j]));
      new_cell[o + j] = C::store(e.new_cell);
      new_h[o + j] = C::store(e.new_h);
      input_gate[o + j] = C::store(e.gates.input);
      output_gate[o + j] = C::store(e.gates.output);
      candidate[o + j] = C::store(e.gates.candidate);
    }
  }
}

// target_clones does not apply to templates: one named leaf per dtype.
#define LLTM_DEFINE_FORWARD_ROWS(scalar_t)                                 \
  SHARED_BUILD_CPU_CLONES void forward_rows(lltm::ForwardData<scalar_t> d, \
                                            int64_t begin,                 \
                                            int64_t end,                   \
                                            int64_t state) {               \
    forward_rows_impl<scalar_t>(d.gate_weights,                            \
                                d.old_cell,                                \
                                d.new_h,                                   \
                                d.new_cell,                                \
                                d.input_gate,                              \
                                d.output_gate,                             \
                                d.candidate_cell,                          \
                                begin,                                     \
                                end,                                       \
                                state);                                    \
  }

LLTM_DEFINE_FORWARD_ROWS(float)
LLTM_DEFINE_FORWARD_ROWS(double)
LLTM_DEFINE_FORWARD_ROWS(c10::BFloat16)
LLTM_DEFINE_FORWARD_ROWS(c10::Half)
#undef LLTM_DEFINE_FORWARD_ROWS

// ---- backward pointwise -----------------------------------------------------

// d_gates (rows, 3 * state) and d_old_cell (rows, state) from the incoming
// gradients, new_cell and the gates (backward_element of lltm_pointwise.h,
// which recomputes the activations);
// the column sums of d_gates (d_bias) are added to bias_acc in acc_t.
template <typename scalar_t, typename acc_t>
C10_ALWAYS_INLINE void backward_rows_impl(
    const scalar_t* __restrict__ grad_h,
    const scalar_t* __restrict__ grad_cell,
    const scalar_t* __restrict__ new_cell,
    const scalar_t* __restrict__ gate_weights,
    scalar_t* __restrict__ d_old_cell,
    scalar_t* __restrict__ d_gates,
    acc_t* __restrict__ bias_acc,
    int64_t begin,
    int64_t end,
    int64_t state) {
  using opmath_t = at::opmath_type<scalar_t>;
  using C = Convert<scalar_t>;
  for (int64_t r = begin; r < end; ++r) {
    const int64_t o = r * state;
    const scalar_t* __restrict__ z = gate_weights + r * 3 * state;
    scalar_t* __restrict__ dg = d_gates + r * 3 * state;
    for (int64_t j = 0; j < state; ++j) {
      const lltm::Gates<opmath_t> gates{
          C::load(z[j]), C::load(z[state + j]), C::load(z[2 * state + j])};
      const auto e = lltm::backward_element<VecMath>(C::load(grad_h[o + j]),
                                                     C::load(grad_cell[o + j]),
                                                     gates,
                                                     C::load(new_cell[o + j]));
      d_old_cell[o + j] = C::store(e.d_old_cell);
      dg[j] = C::store(e.d_gates.input);
      dg[state + j] = C::store(e.d_gates.output);
      dg[2 * state + j] = C::store(e.d_gates.candidate);
      bias_acc[j] += static_cast<acc_t>(e.d_gates.input);
      bias_acc[state + j] += static_cast<acc_t>(e.d_gates.output);
      bias_acc[2 * state + j] += static_cast<acc_t>(e.d_gates.candidate);
    }
  }
}

#define LLTM_DEFINE_BACKWARD_ROWS(scalar_t)                      \
  SHARED_BUILD_CPU_CLONES void backward_rows(                    \
      lltm::BackwardData<scalar_t> d,                            \
      at::acc_type<scalar_t, false>* bias_acc,                   \
      int64_t begin,                                             \
      int64_t end,                                               \
      int64_t state) {                                           \
    backward_rows_impl<scalar_t, at::acc_type<scalar_t, false>>( \
        d.grad_h,                                                \
        d.grad_cell,                                             \
        d.new_cell,                                              \
        d.gate_weights,                                          \
        d.d_old_cell,                                            \
        d.d_gates,                                               \
        bias_acc,                                                \
        begin,                                                   \
        end,                                                     \
        state);                                                  \
  }

LLTM_DEFINE_BACKWARD_ROWS(float)
LLTM_DEFINE_BACKWARD_ROWS(double)
LLTM_DEFINE_BACKWARD_ROWS(c10::BFloat16)
LLTM_DEFINE_BACKWARD_ROWS(c10::Half)
#undef LLTM_DEFINE_BACKWARD_ROWS

}  // namespace

void Cpu::forward_pointwise(const lltm::Step& step) {
  const int64_t batch = step.old_cell.size(0);
  const int64_t state = step.old_cell.size(1);
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kBFloat16,
      at::kHalf,
      step.old_cell.scalar_type(),
      "lltm_cpu_forward",
      [&] {
        const auto d = lltm::forward_data<scalar_t>(step);
        at::parallel_for(
            0, batch, rows_per_task(state), [&](int64_t begin, int64_t end) {
              const FlushDenormals flush;
              forward_rows(d, begin, end, state);
            });
      });
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> Cpu::backward_pointwise(
    const lltm::Step& step) {
  const int64_t batch = step.grad_h.size(0);
  const int64_t state = step.grad_h.size(1);
  const auto options = step.grad_h.options();
  at::Tensor d_gates = at::empty({batch, 3 * state}, options);
  at::Tensor d_old_cell = at::empty({batch, state}, options);
  at::Tensor d_bias = at::empty({3 * state}, options);
  // The batch is cut into fixed tasks, each summing its rows' d_gates into its
  // own row of partial sums; the partial sums are added in task order. d_bias
  // is then the same for any number of threads.
  const int64_t rows = rows_per_task(state);
  const int64_t tasks = (batch + rows - 1) / rows;
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kBFloat16,
      at::kHalf,
      step.grad_h.scalar_type(),
      "lltm_cpu_backward",
      [&] {
        using acc_t = at::acc_type<scalar_t, false>;
        std::vector<acc_t> partial(tasks * 3 * state, acc_t(0));
        const auto d = lltm::backward_data<scalar_t>(step, d_old_cell, d_gates);
        at::parallel_for(0, tasks, 1, [&](int64_t first, int64_t last) {
          const FlushDenormals flush;
          for (int64_t task = first; task < last; ++task) {
            const int64_t begin = task * rows;
            const int64_t end = std::min(batch, begin + rows);
            backward_rows(
                d, partial.data() + task * 3 * state, begin, end, state);
          }
        });
        scalar_t* db = d_bias.mutable_data_ptr<scalar_t>();
        for (int64_t k = 0; k < 3 * state; ++k) {
          acc_t sum = partial[k];
          for (int64_t task = 1; task < tasks; ++task) {
            sum += partial[task * 3 * state + k];
          }
          db[k] = static_cast<scalar_t>(sum);
        }
      });
  return {d_gates, d_bias, d_old_cell};
}

}  // namespace lltm_cpu

TORCH_LIBRARY_IMPL(lltm_cpu, CPU, m) {
  using lltm_cpu::Cpu;
  m.impl("forward", &lltm::forward_kernel<Cpu>);
  m.impl("backward", &lltm::backward_kernel<Cpu>);
  m.impl("_backward_pointwise", &lltm::backward_pointwise_kernel<Cpu>);
}

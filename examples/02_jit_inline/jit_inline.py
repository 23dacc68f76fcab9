"""A few-line op from a string with load_inline, and why it needs -fopenmp to run in parallel.

The op is out = alpha * x + y over float32, split across threads with at::parallel_for.
load_inline compiles it twice, without and with -fopenmp, and the example reports how many
threads each build's at::parallel_for used: at::parallel_for is a header template whose
`#pragma omp parallel` is compiled into the extension itself, and
torch.utils.cpp_extension never adds -fopenmp, so without the flag the loop runs on one
thread, silently.
"""

from __future__ import annotations

import time

import torch
from torch.utils.cpp_extension import load_inline

# no_implicit_headers=True: load_inline would otherwise prepend <torch/extension.h>, the
# whole C++ frontend, to these few lines (20.9 s instead of 7.0 s for a one-line op on our
# 2-core machine; examples/README.md).
SOURCE = r"""
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <torch/csrc/Exceptions.h>

#include <algorithm>
#include <atomic>

at::Tensor axpy(const at::Tensor& x, const at::Tensor& y, double alpha) {
  TORCH_CHECK(x.scalar_type() == at::kFloat && y.scalar_type() == at::kFloat && x.device().is_cpu() && y.device().is_cpu(),
              "axpy: x and y must be float32 CPU tensors, got ", x.scalar_type(), " on ", x.device(), " and ", y.scalar_type(), " on ", y.device());
  TORCH_CHECK(x.sizes() == y.sizes(), "axpy: x and y must have the same shape, got ", x.sizes(), " and ", y.sizes());
  at::Tensor xc = x.contiguous(), yc = y.contiguous(), out = at::empty_like(xc);
  const float* xp = xc.const_data_ptr<float>();
  const float* yp = yc.const_data_ptr<float>();
  float* op = out.mutable_data_ptr<float>();
  const float a = static_cast<float>(alpha);
  at::parallel_for(0, xc.numel(), /*grain_size=*/32768, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) op[i] = a * xp[i] + yp[i];
  });
  return out;
}

// How many threads one at::parallel_for over n items (grain 1) ran on.
int64_t parallel_for_threads(int64_t n) {
  std::atomic<int64_t> highest{0};
  at::parallel_for(0, n, /*grain_size=*/1, [&](int64_t, int64_t) {
    const int64_t id = at::get_thread_num();
    int64_t seen = highest.load();
    while (id > seen && !highest.compare_exchange_weak(seen, id)) {}
  });
  return highest.load() + 1;
}
"""


def build(name: str, cflags: list[str]):
    start = time.perf_counter()
    module = load_inline(
        name=name,
        cpp_sources=SOURCE,
        functions=["axpy", "parallel_for_threads"],
        extra_cflags=["-O3", *cflags],
        no_implicit_headers=True,
    )
    print(
        f"{name}: load_inline({' '.join(cflags) or 'no -fopenmp'}) {time.perf_counter() - start:.1f} s"
    )
    return module


def microseconds(fn, calls: int = 40, rounds: int = 25, budget_s: float = 2.0) -> float:
    """Best average over rounds of calls: a rough figure for the reader, asserted nowhere.

    The best round is the one least disturbed by other work on the machine; the rounds stop
    after budget_s, so a slow case cannot stretch the example.
    """
    for _ in range(10):
        fn()
    best = float("inf")
    deadline = time.perf_counter() + budget_s
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - start) / calls)
        if time.perf_counter() > deadline:
            break
    return best * 1e6


def main() -> None:
    # Two threads at least, even on a one-core machine: the point is how many threads
    # at::parallel_for uses, not how fast they are.
    threads = max(2, torch.get_num_threads())
    torch.set_num_threads(threads)
    serial = build("inline_axpy_serial", [])
    openmp = build("inline_axpy_openmp", ["-fopenmp"])

    x, y = torch.randn(1_000_000), torch.randn(1_000_000)
    for module in (serial, openmp):
        torch.testing.assert_close(module.axpy(x, y, 2.0), torch.add(y, x, alpha=2.0))
        torch.testing.assert_close(module.axpy(x[::2], y[::2], -1.0), y[::2] - x[::2])
    print("axpy matches torch.add in both builds")

    used_serial = serial.parallel_for_threads(1024)
    used_openmp = openmp.parallel_for_threads(1024)
    print(f"torch.get_num_threads() = {threads}")
    print(f"at::parallel_for threads, built without -fopenmp: {used_serial}")
    print(f"at::parallel_for threads, built with -fopenmp:    {used_openmp}")
    assert used_serial == 1, used_serial
    assert used_openmp == threads, (used_openmp, threads)

    print("time per call at 1e6 floats (rough; the machine may be busy):")
    print(f"  without -fopenmp: {microseconds(lambda: serial.axpy(x, y, 2.0)):6.0f} us")
    print(f"  with -fopenmp:    {microseconds(lambda: openmp.axpy(x, y, 2.0)):6.0f} us")
    print(f"  torch.add:        {microseconds(lambda: torch.add(y, x, alpha=2.0)):6.0f} us")

    try:
        openmp.axpy(x, torch.ones(3), 1.0)
    except RuntimeError as error:
        assert "must have the same shape" in str(error), error
        print(f"bad input raises RuntimeError: {str(error).splitlines()[0]}")
    else:
        raise AssertionError("axpy accepted tensors of different shapes")


if __name__ == "__main__":
    main()

// How the CPU kernels use torch's intra-op threads and allocate their outputs.
#pragma once

#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

namespace warp_perspective {
namespace cpu {

// Chunks [0, n) handed out one at a time, to whichever thread asks first.
class ChunkQueue {
 public:
  ChunkQueue(int64_t n, int64_t chunk)
      : n_(n), chunk_(std::max<int64_t>(1, chunk)) {}

  bool pop(int64_t& begin, int64_t& end) {
    begin = next_.fetch_add(chunk_, std::memory_order_relaxed);
    if (begin >= n_) {
      return false;
    }
    end = std::min(n_, begin + chunk_);
    return true;
  }

  int64_t chunks() const {
    return (n_ + chunk_ - 1) / chunk_;
  }

 private:
  std::atomic<int64_t> next_{0};
  const int64_t n_;
  const int64_t chunk_;
};

// Runs worker(queue) on up to torch.get_num_threads() threads of torch's
// intra-op pool; each worker sets up its scratch once and pops chunks until
// none is left. parallel_for alone splits the range statically, one piece
// per thread, so a thread that the OS descheduled (another process on the
// machine, a slower core) holds up the whole call; here the others take over
// its share. Called from inside a parallel region (torch runs a nested
// parallel_for inline), the first worker drains the queue and the others find
// it empty.
template <typename Worker>
void run_workers(int64_t n, int64_t chunk, const Worker& worker) {
  ChunkQueue queue(n, chunk);
  const int64_t workers = std::min<int64_t>(
      queue.chunks(), static_cast<int64_t>(torch::stable::get_num_threads()));
  if (workers <= 1) {
    worker(queue);
    return;
  }
  torch::stable::parallel_for(0, workers, 1, [&](int64_t begin, int64_t end) {
    for (int64_t w = begin; w < end; ++w) {
      worker(queue);
    }
  });
}

#if defined(__linux__) && defined(MADV_HUGEPAGE) && \
    !defined(MADV_POPULATE_WRITE)
#define MADV_POPULATE_WRITE 23  // Linux 5.14; older kernels say EINVAL
#endif

// An empty contiguous tensor of like's dtype and device, with the memory
// advised for transparent huge pages when it is large, and those pages mapped
// before the kernels write them.
//
// A fresh output of a few hundred MB takes tens of thousands of 4 KB page
// faults on first touch, which can cost more than the warp; huge pages take a
// 512th of them (where THP is in "madvise" mode, the common default; torch
// does the same for every allocation with THP_MEM_ALLOC_ENABLE=1). A huge page
// is zeroed by the thread that first touches it while any other thread
// touching it waits, and two threads' row chunks often share one; so with
// several threads each first populates its own range of whole pages
// (MADV_POPULATE_WRITE). With one thread, faulting as the kernel writes is
// cheaper: the zeroed lines are still in cache when they are written.
inline torch::stable::Tensor empty_output(const torch::stable::Tensor& like,
                                          const std::vector<int64_t>& sizes) {
  torch::stable::Tensor out = torch::stable::new_empty(like, sizes);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr size_t kHugePage = size_t(2) << 20;
  const size_t bytes = static_cast<size_t>(out.numel()) * out.element_size();
  if (bytes >= 4 * kHugePage) {
    // Advise the 2 MB-aligned interior; the untouched pages are ours alone.
    const auto start = reinterpret_cast<uintptr_t>(out.data_ptr());
    const uintptr_t first = (start + kHugePage - 1) & ~(kHugePage - 1);
    const uintptr_t last = (start + bytes) & ~(kHugePage - 1);
    if (last > first) {
      madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
      if (torch::stable::get_num_threads() == 1) {
        return out;
      }
      const auto pages = static_cast<int64_t>((last - first) / kHugePage);
      torch::stable::parallel_for(0, pages, 8, [&](int64_t begin, int64_t end) {
        madvise(reinterpret_cast<void*>(first + begin * kHugePage),
                (end - begin) * kHugePage,
                MADV_POPULATE_WRITE);
      });
    }
  }
#endif
  return out;
}

}  // namespace cpu
}  // namespace warp_perspective

// How the CPU kernels use torch's intra-op threads.
#pragma once

#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

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

}  // namespace cpu
}  // namespace warp_perspective

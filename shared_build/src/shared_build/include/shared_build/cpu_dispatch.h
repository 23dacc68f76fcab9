// Runtime CPU dispatch for hand-written CPU loops.
//
// An extension's translation units are compiled for the baseline x86-64 ISA
// (SSE2), and ATen's at::vec::Vectorized only uses AVX2/AVX-512 inside ATen's
// own per-capability builds; in an extension it falls back to its generic path.
// Marking a leaf loop with SHARED_BUILD_CPU_CLONES makes GCC compile it three
// times (AVX-512, AVX2+FMA, baseline) and pick the best one for the running CPU
// when the library loads, so the wheel runs on any x86-64 CPU and is fast on
// current ones. Keep the marked function a leaf: what it calls is only
// specialised if inlined into it (mark helpers C10_ALWAYS_INLINE).
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    defined(__linux__)
#define SHARED_BUILD_CPU_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define SHARED_BUILD_CPU_CLONES
#endif

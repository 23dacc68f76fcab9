// Runtime CPU dispatch for hand-written loops: an extension is compiled for
// baseline x86-64, and at::vec::Vectorized has only its generic path outside
// ATen. SHARED_BUILD_CPU_CLONES makes GCC compile a loop for AVX-512, AVX2+FMA
// and baseline and pick one when the library loads. Keep the marked function
// a leaf: what it calls is specialised only if inlined into it (mark helpers
// C10_ALWAYS_INLINE).
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    defined(__linux__)
#define SHARED_BUILD_CPU_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define SHARED_BUILD_CPU_CLONES
#endif

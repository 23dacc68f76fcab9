// Stands in for glibc's <sys/single_threaded.h> (glibc 2.32 and newer) in every
// build, so that a library built on a newer distribution loads on glibc 2.28
// (manylinux_2_28). libstdc++ (GCC 11 on) reads glibc's variable
// __libc_single_threaded through this header to skip the atomic operations of
// reference counts (std::shared_ptr, std::string's locale) in a program that
// never started a thread; the reference makes the library need GLIBC_2.32. Here
// the variable is a constant "not single-threaded" of this translation unit:
// the counts stay atomic, which is correct in every program and costs a few
// nanoseconds in a single-threaded one, and no glibc symbol is referenced.
// shared_build puts this folder on the include path ahead of the system's
// (-isystem).
#pragma once

static const char shared_build_libc_single_threaded = 0;
#define __libc_single_threaded shared_build_libc_single_threaded

// Stands in for glibc's <sys/single_threaded.h> (2.32 on), ahead of the
// system's headers, so a library loads on glibc 2.28 (manylinux_2_28).
// libstdc++ reads __libc_single_threaded through it to skip atomic reference
// counts, which needs GLIBC_2.32; here it is a constant "not single-threaded":
// the counts stay atomic, correct everywhere, and no glibc symbol is used.
#pragma once

static const char shared_build_libc_single_threaded = 0;
#define __libc_single_threaded shared_build_libc_single_threaded

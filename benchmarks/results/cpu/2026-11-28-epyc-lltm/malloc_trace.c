// Which allocations land in the block that a freed 15.7 MB LLTM weight gradient leaves in
// glibc's heap: an LD_PRELOAD shim that writes to /tmp/malloc_trace.<pid>
//   A <pointer> <size>  every allocation of 200,000 bytes or more,
//   F <pointer> <size>  the free of one of those,
//   S <pointer> <size>  any allocation inside the last freed gradient's 15,728,640 bytes
//                       (until a gradient is placed there again).
//   gcc -O2 -shared -fPIC -o malloc_trace.so malloc_trace.c -ldl -lpthread
//   LD_PRELOAD=$PWD/malloc_trace.so python faults.py alone 2
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define GRADIENT 15728640u
#define SLOTS 8192
#define TOMBSTONE ((void*)1)

static int out = -1;
static void* (*real_malloc)(size_t);
static void (*real_free)(void*);
static int (*real_posix_memalign)(void**, size_t, size_t);
static void* tracked[SLOTS];
static size_t tracked_size[SLOTS];
static uintptr_t hole;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void init(void) {
  if (!real_malloc) {
    real_malloc = dlsym(RTLD_NEXT, "malloc");
    real_free = dlsym(RTLD_NEXT, "free");
    real_posix_memalign = dlsym(RTLD_NEXT, "posix_memalign");
  }
  if (out < 0) {
    char path[64];
    snprintf(path, sizeof path, "/tmp/malloc_trace.%d", getpid());
    out = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  }
}

static void line(char kind, void* p, size_t size) {
  char text[64];
  int n = snprintf(text, sizeof text, "%c %p %zu\n", kind, p, size);
  if (write(out, text, n) < 0) {
  }
}

static void allocated(void* p, size_t size) {
  if (!p) return;
  pthread_mutex_lock(&lock);
  if (hole && (uintptr_t)p >= hole && (uintptr_t)p < hole + GRADIENT) {
    line('S', p, size);
    if (size == GRADIENT) hole = 0;
  }
  if (size >= 200000) {
    unsigned h = ((uintptr_t)p >> 6) % SLOTS;
    for (int i = 0; i < SLOTS; i++, h = (h + 1) % SLOTS) {
      if (!tracked[h] || tracked[h] == TOMBSTONE) {
        tracked[h] = p;
        tracked_size[h] = size;
        break;
      }
    }
    line('A', p, size);
  }
  pthread_mutex_unlock(&lock);
}

void* malloc(size_t size) {
  init();
  void* p = real_malloc(size);
  allocated(p, size);
  return p;
}

int posix_memalign(void** p, size_t alignment, size_t size) {
  init();
  int error = real_posix_memalign(p, alignment, size);
  if (!error) allocated(*p, size);
  return error;
}

void free(void* p) {
  init();
  if (p) {
    pthread_mutex_lock(&lock);
    unsigned h = ((uintptr_t)p >> 6) % SLOTS;
    for (int i = 0; i < SLOTS && tracked[h]; i++, h = (h + 1) % SLOTS) {
      if (tracked[h] == p) {
        line('F', p, tracked_size[h]);
        if (tracked_size[h] == GRADIENT) hole = (uintptr_t)p;
        tracked[h] = TOMBSTONE;
        break;
      }
    }
    pthread_mutex_unlock(&lock);
  }
  real_free(p);
}

"""Wall, user and system time and minor page faults of single calls (getrusage), one thread
each: ours on the bench's homographies, the cv2 loop, and the two copy floors, at 256x256,
1080p and 4K. Run from this folder with where_time_goes.py's PYTHONPATH and the bench's GLIBC_TUNABLES.
"""

import resource
import time

import cv2
import torch
import where_time_goes as w

torch.set_num_threads(1)
cv2.setNumThreads(1)
print("| size | row | wall ms | user ms | sys ms | minor faults |")
for size in ["256x256", "1080p", "4K"]:
    h, wd = w.SIZES[size]
    image, impls = w.impls_for(h, wd, [])
    for name in ("ours (bench)", "cv2 loop", "copy, fresh output", "copy, reused output"):
        fn = impls[name]
        fn()
        for _ in range(3):
            r0 = resource.getrusage(resource.RUSAGE_SELF)
            t0 = time.perf_counter()
            fn()
            t = time.perf_counter() - t0
            r1 = resource.getrusage(resource.RUSAGE_SELF)
            user, sys_ = r1.ru_utime - r0.ru_utime, r1.ru_stime - r0.ru_stime
            print(f"| {size} | {name} | {t * 1e3:.1f} | {user * 1e3:.0f} | {sys_ * 1e3:.0f} | "
                  f"{r1.ru_minflt - r0.ru_minflt} |", flush=True)  # fmt: skip
    del image, impls

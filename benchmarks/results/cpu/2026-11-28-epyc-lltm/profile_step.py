"""Self CPU time per step of lltm_cpu's and eager's training step at the large shape, split
into its three GEMMs and the rest: the best of three rounds of 30 profiled steps.

    python profile_step.py [threads]
"""

from __future__ import annotations

import sys

import torch
from large_step import models_and_step
from torch.profiler import ProfilerActivity, profile

STEPS = 30


def main() -> None:
    torch.set_num_threads(int(sys.argv[1]) if len(sys.argv) > 1 else torch.get_num_threads())
    ours, eager, step = models_and_step()

    best: dict[str, tuple] = {}
    for _ in range(3):
        for name, model in (("lltm_cpu", ours), ("eager", eager)):
            for _ in range(5):
                step(model)
            with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
                for _ in range(STEPS):
                    step(model)
            gemms = {
                f"{e.key}{e.input_shapes[:2]}": e.self_cpu_time_total / STEPS / 1e3
                for e in prof.key_averages(group_by_input_shape=True)
                if e.key in ("aten::mm", "aten::addmm")
            }
            total = sum(e.self_cpu_time_total for e in prof.key_averages()) / STEPS / 1e3
            if name not in best or total < best[name][0]:
                best[name] = (total, gemms)
    for name, (total, gemms) in best.items():
        gemm = sum(gemms.values())
        print(f"{torch.__version__} {name}: step {total:.2f} ms, GEMMs {gemm:.2f}, "
              f"the rest {total - gemm:.2f}")  # fmt: skip
        for key, ms in sorted(gemms.items()):
            print(f"    {key}: {ms:.2f} ms")


if __name__ == "__main__":
    main()

"""Self CPU time per step of lltm_cpu's and eager's training step at the large shape, split
into its three GEMMs and the rest: the best of three rounds of 30 profiled steps.

    python profile_step.py [threads]
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "lltm_common" / "bench"))
import lltm_bench

import lltm_cpu

STEPS = 30


def main() -> None:
    torch.set_num_threads(int(sys.argv[1]) if len(sys.argv) > 1 else torch.get_num_threads())
    batch, features, state = lltm_bench.LARGE
    torch.manual_seed(0)
    ours = lltm_cpu.LLTM(features, state)
    eager = lltm_bench.EagerLLTM(features, state)
    eager.load_state_dict(ours.state_dict())
    x = torch.randn(batch, features)
    h = torch.randn(batch, state, requires_grad=True)
    c = torch.randn(batch, state, requires_grad=True)
    grads = [torch.randn(batch, state), torch.randn(batch, state)]

    def step(model):
        new_h, new_cell = model(x, (h, c))
        torch.autograd.grad([new_h, new_cell], [*model.parameters(), h, c], grads)

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

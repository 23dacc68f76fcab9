"""Train an LLTM to predict the next sample of a sine wave, and show the loss falling.

Each sequence is sin(f * t + phase) plus a little noise, with a random frequency and phase;
after every step the model predicts the next clean sample. The LLTM cell (lltm_cpu, or
lltm_cuda on a GPU: the same API) is unrolled over the sequence, a linear head reads new_h.
No download: the data are generated here. Exits with status 1 if the loss does not fall
to less than a quarter of where it started.
"""

from __future__ import annotations

import argparse
import math
import sys
import time

import torch
from torch import nn


def make_batch(batch: int, length: int, generator: torch.Generator) -> tuple[torch.Tensor, ...]:
    """inputs (length, batch, 1) and targets (length, batch, 1): the next clean sample."""
    freq = 0.1 + 0.4 * torch.rand(batch, 1, generator=generator)
    phase = 2 * math.pi * torch.rand(batch, 1, generator=generator)
    t = torch.arange(length + 1, dtype=torch.float32)
    clean = torch.sin(freq * t + phase)  # (batch, length + 1)
    noisy = clean + 0.05 * torch.randn(clean.shape, generator=generator)
    return noisy[:, :-1].T.unsqueeze(-1), clean[:, 1:].T.unsqueeze(-1)


class SineModel(nn.Module):
    """An LLTM cell unrolled over time, and a linear read-out of its hidden state."""

    def __init__(self, lltm, state_size: int = 32) -> None:
        super().__init__()
        self.state_size = state_size
        self.cell = lltm.LLTM(input_features=1, state_size=state_size)
        self.head = nn.Linear(state_size, 1)

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        batch = inputs.shape[1]
        h = inputs.new_zeros(batch, self.state_size)
        c = inputs.new_zeros(batch, self.state_size)
        outputs = []
        for x in inputs:
            h, c = self.cell(x, (h, c))
            outputs.append(self.head(h))
        return torch.stack(outputs)


def pick_backend(device: str):
    if device == "cuda":
        import lltm_cuda

        return lltm_cuda
    import lltm_cpu

    return lltm_cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--length", type=int, default=30)
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="CPU threads (default 1: this model's GEMMs are too small to gain from more, "
        "and extra threads only wait on each other, badly so on a busy machine)",
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    device = args.device
    if device == "auto":
        device = "cpu"
        if torch.cuda.is_available():
            try:
                import lltm_cuda  # noqa: F401

                device = "cuda"
            except ImportError:
                pass
    lltm = pick_backend(device)
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(0)
    model = SineModel(lltm).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    print(f"training an LLTM ({lltm.__name__} on {device}) to predict a sine wave's next sample")

    losses = []
    start = time.perf_counter()
    for step in range(1, args.steps + 1):
        inputs, targets = (t.to(device) for t in make_batch(args.batch, args.length, generator))
        loss = nn.functional.mse_loss(model(inputs), targets)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if step == 1 or step % 50 == 0:
            print(f"step {step:4d}  loss {loss.item():.4f}")
    seconds = time.perf_counter() - start

    first = sum(losses[:10]) / 10
    last = sum(losses[-10:]) / 10
    print(
        f"mean loss of the first 10 steps {first:.4f}, of the last 10 {last:.4f} "
        f"({args.steps} steps in {seconds:.1f} s)"
    )
    if not last < 0.25 * first:
        print("FAILED: the loss did not fall to a quarter of where it started", file=sys.stderr)
        return 1
    print("OK: the loss fell")
    return 0


if __name__ == "__main__":
    sys.exit(main())

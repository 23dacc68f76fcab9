"""Example 07's LLTM training under DistributedDataParallel: 2 processes, gloo, one machine.

Every rank draws the same global batch from the same seed and trains on its own slice of
it; DDP averages the gradients. At the end each rank saves its parameters, and the parent
process checks that

  1. the parameters are identical (bit for bit) on every rank, and
  2. they equal those of one process training on the whole global batch for the same steps,
     up to float rounding (the gradient is summed in another order; --dtype float64 makes
     that rounding small enough for a tight tolerance).

Exits with status 1 if either fails, or if the loss did not fall (runs of 50+ steps).
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import tempfile
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel

# The model and the data are example 07's.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "07_lltm_training"))
from train import SineModel, make_batch

import lltm_cpu


def train(model: nn.Module, args: argparse.Namespace, rank: int, world_size: int) -> list[float]:
    """args.steps Adam steps on slice `rank` of `world_size` of each global batch; returns
    the losses (of this slice)."""
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    generator = torch.Generator().manual_seed(0)  # the same global batches on every rank
    per_rank = args.batch // world_size
    mine = slice(rank * per_rank, (rank + 1) * per_rank)
    losses = []
    for _ in range(args.steps):
        inputs, targets = (t.to(args.dtype) for t in make_batch(args.batch, args.length, generator))
        loss = nn.functional.mse_loss(model(inputs[:, mine]), targets[:, mine])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()  # under DDP: gradients all-reduced (averaged) across ranks here
        optimizer.step()
        losses.append(loss.item())
    return losses


def worker(rank: int, world_size: int, args: argparse.Namespace, workdir: str) -> None:
    torch.set_num_threads(1)  # one core per process
    dist.init_process_group(
        "gloo",
        init_method=f"file://{os.path.join(workdir, 'rendezvous')}",
        rank=rank,
        world_size=world_size,
    )
    model = None
    try:
        torch.manual_seed(rank)  # different on purpose: DDP broadcasts rank 0's parameters
        model = DistributedDataParallel(SineModel(lltm_cpu).to(args.dtype))
        if rank == 0:  # after DDP's broadcast: what every rank starts from
            torch.save(model.module.state_dict(), os.path.join(workdir, "initial.pt"))
        losses = train(model, args, rank, world_size)
        # Saved, not all-reduced: the parent averages them. With torch 2.14's gloo a
        # collective on a tensor that Python also holds can be released by gloo's worker
        # thread after the interpreter began to exit, and that thread then aborts the
        # process ("terminate called without an active exception", 3 runs in 20 here).
        torch.save(torch.tensor(losses), os.path.join(workdir, f"losses{rank}.pt"))
        torch.save(model.module.state_dict(), os.path.join(workdir, f"rank{rank}.pt"))
    finally:
        # DDP holds the process group through reference cycles, which only the garbage
        # collector frees: free it now, while Python is fully alive, so that
        # destroy_process_group releases the group and joins gloo's threads.
        del model
        gc.collect()
        dist.destroy_process_group()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch", type=int, default=64, help="global batch, split across ranks")
    parser.add_argument("--length", type=int, default=30)
    parser.add_argument("--lr", type=float, default=1e-2)
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    parser.add_argument(
        "--workdir", default=None, help="where the ranks save (default: a temp dir)"
    )
    args = parser.parse_args()
    args.dtype = getattr(torch, args.dtype)
    if args.batch % args.world_size:
        parser.error(f"--batch {args.batch} must be a multiple of --world-size {args.world_size}")
    workdir = args.workdir or tempfile.mkdtemp(prefix="lltm-ddp-")
    os.makedirs(workdir, exist_ok=True)
    for pattern in ("rank*.pt", "losses*.pt"):
        for stale in Path(workdir).glob(pattern):
            stale.unlink()
    rendezvous = Path(workdir, "rendezvous")
    if rendezvous.exists():
        rendezvous.unlink()

    print(
        f"DDP: {args.world_size} processes (gloo), {args.steps} steps, global batch {args.batch}",
        flush=True,
    )
    mp.spawn(worker, args=(args.world_size, args, workdir), nprocs=args.world_size, join=True)

    # The global loss of each step: the mean of the ranks' losses.
    losses = torch.stack(
        [
            torch.load(os.path.join(workdir, f"losses{r}.pt"), weights_only=True)
            for r in range(args.world_size)
        ]
    ).mean(0)
    for step in range(len(losses)):
        if step == 0 or (step + 1) % 50 == 0 or step + 1 == len(losses):
            print(f"step {step + 1:4d}  loss {losses[step].item():.4f}", flush=True)

    ranks = [
        torch.load(os.path.join(workdir, f"rank{r}.pt"), weights_only=True)
        for r in range(args.world_size)
    ]
    identical = all(
        torch.equal(ranks[0][name], other[name]) for other in ranks[1:] for name in ranks[0]
    )
    print(f"parameters identical on all {args.world_size} ranks: {identical}")

    torch.set_num_threads(1)
    torch.manual_seed(0)
    # rank 0's initial parameters (seed 0), which DDP broadcast
    single = SineModel(lltm_cpu).to(args.dtype)
    train(single, args, rank=0, world_size=1)
    torch.save(single.state_dict(), os.path.join(workdir, "single.pt"))
    worst = max(
        (ranks[0][name] - value).abs().max().item() for name, value in single.state_dict().items()
    )
    # The sums of the gradient run in another order (two half-batch means averaged, against
    # one mean), and Adam carries the rounding from step to step.
    rtol, atol = (1e-3, 1e-4) if args.dtype == torch.float32 else (1e-9, 1e-10)
    equal = all(
        torch.allclose(ranks[0][name], value, rtol=rtol, atol=atol)
        for name, value in single.state_dict().items()
    )
    print(
        f"equal to single-process training on the whole batch: {equal} "
        f"(largest difference {worst:.2e})"
    )

    ok = identical and equal
    if args.steps >= 50:
        first, last = losses[:10].mean().item(), losses[-10:].mean().item()
        fell = last < 0.25 * first
        print(f"mean loss of the first 10 steps {first:.4f}, of the last 10 {last:.4f}")
        ok = ok and fell
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

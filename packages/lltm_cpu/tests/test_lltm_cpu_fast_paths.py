"""The CPU passes' paths taken on purpose: one task and several, on both sides of where
the split changes, and every tail of the vectorized loop over a row.

csrc/cpu/lltm_kernel.cpp runs each fused pass over the batch in tasks of rows_per_task
rows (16384 elements' worth, at least one row): forward through at::parallel_for with that
grain, backward in fixed tasks whose partial sums of d_bias are added in task order. Within
a row GCC's clones run 16 (AVX-512), 8 (AVX2) or 4 floats at a time and finish with a tail.
tasks() below is that split in Python; SHAPES reach one task, exactly one task's rows, one
row more, several tasks with a short last one, and a state wider than the grain (one row a
task), with state sizes that leave every tail. Each call's results equal the float64
reference (float32), or the float32 pass rounded by torch, to the bit (bfloat16, float16),
and do not depend on the thread count.
"""

from __future__ import annotations

import pytest
import torch
from lltm_common.battery import in_float32_rounded, tolerance
from lltm_common.reference import lltm_backward_pointwise, lltm_forward, make_inputs

import lltm_cpu

GRAIN = 16384  # lltm_kernel.cpp's kGrainElements


def tasks(batch: int, state: int) -> int:
    """How many tasks a pass cuts a batch into (rows_per_task)."""
    rows = max(1, GRAIN // max(state, 1))
    return -(-batch // rows)


# (batch, state): tails of every vector width at one task; 128 rows of 128 (one task,
# exactly full), 129 (a second task of one row), 300 (three); a row wider than the grain.
SHAPES = [(3, s) for s in (1, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33)]
SHAPES += [(128, 128), (129, 128), (300, 128), (3, GRAIN + 3)]


def test_the_shapes_reach_every_split():
    split = {(b, s): tasks(b, s) for b, s in SHAPES}
    assert split[(128, 128)] == 1 and split[(129, 128)] == 2 and split[(300, 128)] == 3
    assert split[(3, GRAIN + 3)] == 3
    widths = [s for _, s in SHAPES]
    for lanes in (4, 8, 16):  # no tail, a tail of one, a tail of lanes - 1
        assert {0, 1, lanes - 1} <= {s % lanes for s in widths}, lanes


def _calls(batch: int, state: int, dtype: torch.dtype):
    """forward's inputs (None for a state wider than the grain: its weights would take
    gigabytes) and _backward_pointwise's, from the float64 reference's forward."""
    g = torch.Generator().manual_seed(batch * 100003 + state)
    if state > GRAIN:
        gates = torch.randn(batch, 3 * state, dtype=torch.float64, generator=g)
        saved = [None, torch.randn(batch, state, dtype=torch.float64, generator=g), gates]
    else:
        inputs = make_inputs(batch, 4, state, dtype=torch.float64, generator=g)
        _, *saved = lltm_forward(*inputs)
    grads = [torch.randn(batch, state, dtype=torch.float64, generator=g) for _ in "hc"]
    pointwise = [t.to(dtype) for t in (*grads, saved[1], saved[-1])]
    return None if state > GRAIN else [t.to(dtype) for t in inputs], pointwise


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize(("batch", "state"), SHAPES, ids=lambda v: str(v))
def test_every_split_and_tail_gives_the_reference(batch, state, dtype):
    inputs, pointwise = _calls(batch, state, dtype)
    results = {}
    previous = torch.get_num_threads()
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            results[threads] = [
                lltm_cpu.forward(*inputs)[:5] if inputs else [],
                torch.ops.lltm_cpu._backward_pointwise(*pointwise),
            ]
    finally:
        torch.set_num_threads(previous)
    what = f"{tasks(batch, state)} tasks"
    for ours, theirs in zip(results[1], results[2], strict=True):
        for a, b in zip(ours, theirs, strict=True):
            assert torch.equal(a, b), f"{what}: one thread and two differ"
    forward, (d_gates, d_bias, d_old_cell) = results[2]
    if dtype == torch.float32:
        want = lltm_forward(*(t.double() for t in inputs))[:5] if inputs else []
        want_back = lltm_backward_pointwise(*pointwise)
        tol = tolerance(dtype)
        for ours, ref in zip(
            [*forward, d_gates, d_bias, d_old_cell], [*want, *want_back], strict=True
        ):
            torch.testing.assert_close(ours.double(), ref, **tol, msg=lambda m: f"{what}: {m}")
    else:  # the stores: the float32 pass rounded by torch, to the bit (not d_bias)
        exact = in_float32_rounded(torch.ops.lltm_cpu._backward_pointwise)(*pointwise)
        for ours, ref in ((d_gates, exact[0]), (d_old_cell, exact[2])):
            assert torch.equal(ours.view(torch.int16), ref.view(torch.int16)), what

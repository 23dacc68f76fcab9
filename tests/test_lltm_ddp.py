"""examples/08_lltm_ddp under test: a few steps of LLTM training with DDP (gloo, 2
processes) leave identical parameters on both ranks, equal to single-process training on
the same data."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("lltm_cpu", reason="lltm_cpu is not installed in this environment")

SCRIPT = Path(__file__).resolve().parents[1] / "examples" / "08_lltm_ddp" / "train_ddp.py"


@pytest.mark.slow
@pytest.mark.skipif(
    not (torch.distributed.is_available() and torch.distributed.is_gloo_available()),
    reason="torch.distributed with gloo is not available in this torch build",
)
def test_ddp_two_ranks_match_each_other_and_single_process(tmp_path):
    # float64, so that the one legitimate difference (the order in which the gradient is
    # summed) stays far below the tolerance.
    result = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            *("--steps", "4", "--batch", "16", "--length", "12"),
            *("--dtype", "float64", "--workdir", str(tmp_path)),
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "parameters identical on all 2 ranks: True" in result.stdout

    load = lambda name: torch.load(tmp_path / name, weights_only=True)  # noqa: E731
    initial, single = load("initial.pt"), load("single.pt")
    rank0, rank1 = load("rank0.pt"), load("rank1.pt")
    assert set(rank0) == set(rank1) == set(single) == set(initial)
    assert "cell.weights" in rank0 and "cell.bias" in rank0
    for name in rank0:
        assert torch.equal(rank0[name], rank1[name]), name
        torch.testing.assert_close(rank0[name], single[name], rtol=1e-12, atol=1e-13, msg=name)
        # Training moved every parameter: not an untouched model compared with itself.
        assert (rank0[name] - initial[name]).abs().max() > 1e-4, name

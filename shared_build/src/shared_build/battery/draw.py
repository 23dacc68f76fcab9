"""Hypothesis strategies for an op's property test: sides and tensors in drawn layouts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

VIEWS = ("contiguous", "transposed", "sliced", "expanded")


def sides() -> Any:
    """A hypothesis strategy of tensor sides: 0, 1, small odd ones, and ones just past the
    vector widths (8, 16, 32 floats)."""
    from hypothesis import strategies as st

    return st.one_of(
        st.sampled_from([0, 1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 33, 63, 65]), st.integers(0, 70)
    )


def tensors(
    shape: Sequence[int], dtype: Any, device: str = "cpu", views: Sequence[str] = VIEWS
) -> Any:
    """A hypothesis strategy of tensors of ``shape``: standard normal values (uint8: 0..255)
    from a drawn seed, in a drawn memory layout (``views``): contiguous, transposed, sliced
    (a storage offset and a stride of 2) or expanded (stride 0 where the draw repeats)."""
    from hypothesis import strategies as st

    @st.composite
    def draw(draw: Any) -> Any:
        import torch

        g = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
        if dtype == torch.uint8:
            t = torch.randint(0, 256, tuple(shape), generator=g, dtype=dtype).to(device)
        else:
            t = torch.randn(tuple(shape), generator=g, dtype=torch.float64).to(device, dtype)
        return as_view(t, draw(st.sampled_from(list(views))))

    return draw()


def as_view(t: Any, view: str) -> Any:
    """The values of t (expanded: of a broadcast part of t) in the memory layout ``view``."""
    import torch

    shape = tuple(t.shape)
    if view == "transposed" and t.dim() >= 2:
        return t.permute(*reversed(range(t.dim()))).contiguous().permute(*reversed(range(t.dim())))
    if view == "sliced" and t.dim() >= 1:
        wide = torch.zeros((*shape[:-1], 2 * shape[-1] + 1), dtype=t.dtype, device=t.device)
        wide[..., 1::2] = t
        return wide[..., 1::2]
    if view == "expanded" and t.dim() >= 1:
        keep = [s if i % 2 == 0 else 1 for i, s in enumerate(shape)]
        return t[tuple(slice(0, k) for k in keep)].clone().expand(*shape)
    return t

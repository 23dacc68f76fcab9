"""Every path of the built-in CPU kernel's row loops (csrc/cpu/sampling_per_level.h) is
taken on purpose, at every CPU level, and gives the reference's result there.

The float32 and uint8 row kernels sample a group of kLanes destination pixels (16 on
AVX-512, 8 on AVX2, 4 portable) from a window of 2 * kLanes source columns when every
tap of the group lies in one (find_window), in one of four variants (narrow: every left
tap in the window's first kLanes columns; two rows or three), from a window of the taps
clamped into the image near the border, or else by gathers; nearest sampling likewise,
and the portable level copies nearest pixels lane by lane. model_paths() below is that
decision written in Python over the same double coordinates: it says which path each
group of a call takes at a given lane count. PATH_CALLS are calls that, between them,
reach every path at every level, including the groups where the window test flips: a
group whose widest tap is the last column a window holds (taken) and one column further
(refused). test_every_path_is_reached checks the model says so; test_every_level_gives_
the_reference_on_every_path runs PATH_CALLS at each level (a subprocess each, the level
forced by WARP_PERSPECTIVE_NO_AVX512 / _NO_AVX2) against warp_reference.py. A window
bound off by the bilinear tap's span (kWindow - 1 for kWindow - 1 - kSpan) reads a
pixel one past the window in the refused-by-one groups and fails there, at every level.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from collections import Counter

import pytest
import torch
from warp_reference import reference

LANES = {"avx512": 16, "avx2": 8, "portable": 4}
# Inverse maps (destination to source) whose coordinates are multiples of 1/32 plus an
# offset of 1/128 or 1/256: at least 1/256 from every integer and every half, so that
# floor and round in the kernel (fused or not, from the float32 matrix) agree with the
# model. Scales: 1 (narrow windows), 1.5 (wide), about 2 (where a bilinear window of any
# level flips: 2 * 15 = 30 and 2.0625 * 15 = 30.9 columns at 16 lanes, 14 and 14.4 at 8,
# 6 and 6.2 at 4) and 2.125 to 2.5 (where nearest's flips: 31.9 columns at 16 lanes, 15.8
# at 8, 7.5 at 4), with and without a shear that
# moves the tap row along a destination row (three-row windows), shifted so that groups
# run past the image's edges (its border paths).
SCALES = (1.0, 1.5, 2.0, 33 / 16, 2.125, 2.25, 2.5)
SHEARS = (0.0, 3 / 32)
SHIFTS = (1 / 128, -3 + 1 / 128)
SOURCE, DSIZE = (26, 123), (11, 45)  # 45 columns: a tail at every lane count


def inverse_map(scale: float, shear: float, shift: float) -> torch.Tensor:
    """x' = scale x + shift, y' = shear x + 2 y + 1/256 + 3 (destination to source)."""
    return torch.tensor(
        [[scale, 0.0, shift], [shear, 2.0, 3 + 1 / 256], [0.0, 0.0, 1.0]], dtype=torch.float64
    )


# x' = 3.1 / (22.27 - x), y' = 8.3 + y / (64 (22.27 - x)): the one inverse map whose source
# columns are not monotone along a destination row, across its vanishing point (x = 22.27).
# The portable level's group of destination columns 20-23 reads source columns 1, 2, 11 and
# -4 (outside: the border window path): the widest tap is lane 2's, the only group of any
# call where it is neither the first nor the last lane. A horizontal max (Vec::hmax) that
# misses a lane takes the border window there and reads past it.
VANISHING = torch.tensor(
    [[0.0, 0.0, 3.1], [-8.3, 1 / 64, 8.3 * 22.27], [-1.0, 0.0, 22.27]], dtype=torch.float64
)


def path_calls() -> list[tuple[str, torch.Tensor, str, tuple[int, int]]]:
    """(name, the warp (source to destination), the image's layout, dsize): the contiguous
    calls of every scale, shear and shift, and the layouts and sizes that cannot load
    windows (columns not adjacent, an image narrower than a window, one row)."""
    calls = [
        (f"scale {s}, shear {c}, shift {t}", torch.linalg.inv(inverse_map(s, c, t)), "contiguous", DSIZE)
        for s, c, t in itertools.product(SCALES, SHEARS, SHIFTS)
    ]  # fmt: skip
    calls.append(
        ("vanishing point inside a group", torch.linalg.inv(VANISHING), "contiguous", DSIZE)
    )
    near_identity = torch.linalg.inv(inverse_map(1.0, 3 / 32, 1 / 128))
    calls.append(("transposed image", near_identity, "transposed", DSIZE))
    calls.append(("channels_last image", near_identity, "channels_last", DSIZE))
    calls.append(("image 7 columns wide", near_identity, "narrow", (5, 9)))
    calls.append(("image one row tall", near_identity, "one row", (3, 30)))
    return calls


def make_image(layout: str, dtype: torch.dtype) -> torch.Tensor:
    g = torch.Generator().manual_seed(7)
    h, w = {"narrow": (SOURCE[0], 7), "one row": (1, SOURCE[1])}.get(layout, SOURCE)
    image = torch.rand(2, 3, h, w, generator=g, dtype=torch.float64)
    image = (image * 255).round().to(dtype) if dtype == torch.uint8 else image.to(dtype)
    if layout == "transposed":
        return image.transpose(-1, -2).contiguous().transpose(-1, -2)
    if layout == "channels_last":
        return image.contiguous(memory_format=torch.channels_last)
    return image


def model_paths(warp, layout, dsize, lanes: int, nearest: bool) -> Counter:
    """The path of each group of `lanes` destination pixels, as the row kernels of
    sampling_per_level.h decide it (find_window, then bilinear_row's or nearest_row's
    fallbacks), over every destination row; plus "at the bound" for window groups whose
    widest tap is the window's last column and "refused by one" for groups that fail the
    window test only by one column."""
    src_h, src_w = {"narrow": (SOURCE[0], 7), "one row": (1, SOURCE[1])}.get(layout, SOURCE)
    inv = torch.linalg.inv(warp.double())
    dst_h, dst_w = dsize
    y, x = torch.meshgrid(
        torch.arange(dst_h, dtype=torch.float64), torch.arange(dst_w, dtype=torch.float64),
        indexing="ij",
    )  # fmt: skip
    w = inv[2, 0] * x + (inv[2, 1] * y + inv[2, 2])
    w = torch.where(w != 0, 1 / w, 0.0)
    sx = ((inv[0, 0] * x + (inv[0, 1] * y + inv[0, 2])) * w).clamp(-2, src_w + 1)
    sy = ((inv[1, 0] * x + (inv[1, 1] * y + inv[1, 2])) * w).clamp(-2, src_h + 1)
    for s, size in ((sx, src_w), (sy, src_h)):  # the model's floor and round are the kernel's
        frac = (s - s.floor())[(s > -2) & (s < size + 1)]  # clamped ones: exact integers
        assert ((frac - 0.5).abs() > 1e-4).all() and ((frac - 0.5).abs() < 0.5 - 1e-4).all()
    ix, iy = ((s.round() if nearest else s.floor()).long() for s in (sx, sy))
    # (row, group, lane): lanes past the row's end repeat its last pixel, as the kernel's.
    groups = -(-dst_w // lanes)
    lane = torch.arange(groups * lanes).clamp(max=dst_w - 1).view(groups, lanes)
    gx, gy = ix[:, lane], iy[:, lane]
    span, window = (0 if nearest else 1), 2 * lanes
    xlo = torch.minimum(gx[..., :1], gx[..., -1:])
    ylo = torch.minimum(gy[..., :1], gy[..., -1:])
    dx, dy = gx - xlo, gy - ylo
    widest = dx.amax(-1)
    loads = layout in ("contiguous", "narrow", "one row") and src_w >= window and src_h >= 2
    fits = (
        (gx >= 0) & (gx <= src_w - 1 - span) & (gy >= 0) & (gy <= src_h - 1 - span)
        & (dx >= 0) & (dy >= 0) & (dy <= 1)
    ).all(-1) & loads  # fmt: skip
    windowed = fits & (widest <= window - 1 - span)
    narrow = (gx - torch.clamp(xlo, max=src_w - window) < lanes).all(-1)
    third = (dy == 1).any(-1)
    cx0, cy0 = gx.clamp(0, src_w - 1), gy.clamp(0, src_h - 1)
    cx1, cy1 = (gx + span).clamp(0, src_w - 1), (gy + span).clamp(0, src_h - 1)
    border = loads & (cx1.amax(-1) - cx0.amin(-1) <= window - 1)
    border &= cy1.amax(-1) - cy0.amin(-1) <= 1 + span
    paths: Counter = Counter()
    if nearest:
        paths["window, narrow, 1 row"] = int((windowed & narrow & ~third).sum())
        paths["window, 2 rows"] = int((windowed & ~(narrow & ~third)).sum())
    else:
        for n, t in itertools.product((True, False), (False, True)):
            name = f"window, {'narrow' if n else 'wide'}, {'3 rows' if t else '2 rows'}"
            paths[name] = int((windowed & (narrow == n) & (third == t)).sum())
    if nearest and lanes == LANES["portable"]:  # no windows: every group copies lanes
        paths = Counter({"copy lanes": int(windowed.numel())})
    else:
        paths["border window"] = int((~windowed & border).sum())
        paths["gather"] = int((~windowed & ~border).sum())
    paths["at the bound"] = int((windowed & (widest == window - 1 - span)).sum())
    paths["refused by one"] = int((fits & (widest == window - span)).sum())
    return +paths  # the paths taken at least once


# What each level's row kernels can take: the portable nearest kernel copies lanes.
EXPECTED = {
    False: {"window, narrow, 2 rows", "window, narrow, 3 rows", "window, wide, 2 rows",
            "window, wide, 3 rows", "border window", "gather", "at the bound", "refused by one"},
    True: {"window, narrow, 1 row", "window, 2 rows", "border window", "gather", "at the bound",
           "refused by one"},
}  # fmt: skip


@pytest.mark.parametrize("level", LANES)
@pytest.mark.parametrize("nearest", [False, True], ids=["bilinear", "nearest"])
def test_every_path_is_reached(level, nearest):
    reached = Counter()
    for _, warp, layout, dsize in path_calls():
        reached += model_paths(warp, layout, dsize, LANES[level], nearest)
    expected = EXPECTED[nearest]
    if nearest and level == "portable":  # no windows; the window test is still decided
        expected = {"copy lanes", "at the bound", "refused by one"}
    assert set(reached) == expected, f"{level} {'nearest' if nearest else 'bilinear'}: {reached}"


def level_outputs() -> dict:
    """The built-in kernel's result for every PATH_CALL, dtype (float32, uint8) and mode, at
    this process's CPU level ("cpu_level")."""
    import warp_perspective

    outs = {"cpu_level": warp_perspective.build_config()["cpu_level"]}
    for name, warp, layout, dsize in path_calls():
        for dtype, mode, padding in itertools.product(
            (torch.float32, torch.uint8), ("bilinear", "nearest"), ("zeros", "border")
        ):
            m = warp.to(torch.float32 if dtype == torch.float32 else torch.float64)
            outs[(name, str(dtype), mode, padding)] = (
                torch.ops.warp_perspective._warp_perspective_builtin(
                    make_image(layout, dtype), m, list(dsize), mode, padding
                )
            )
    return outs


_LEVEL_SCRIPT = """
import sys, torch
sys.path.insert(0, sys.argv[2])
from test_warp_perspective_fast_paths import level_outputs
torch.save(level_outputs(), sys.argv[1])
"""
# The levels below this process's, each forced in a fresh process (the level is read once).
_LOWER = {
    "avx512": ("WARP_PERSPECTIVE_NO_AVX512", "WARP_PERSPECTIVE_NO_AVX2"),
    "avx2": ("WARP_PERSPECTIVE_NO_AVX2",),
}


def test_every_level_gives_the_reference_on_every_path(tmp_path):
    """PATH_CALLS at every CPU level against warp_reference.py: float32 within 2e-6 of the
    value range (the battery's tolerance), uint8 within one count, nearest exactly (no
    coordinate near a half). This process's level runs here, the lower ones each in a
    subprocess."""
    calls = {name: (warp, layout, dsize) for name, warp, layout, dsize in path_calls()}
    runs = [level_outputs()]
    for flag in _LOWER.get(runs[0]["cpu_level"], ()):
        path = tmp_path / f"{flag}.pt"
        subprocess.run(
            [sys.executable, "-c", _LEVEL_SCRIPT, str(path), os.path.dirname(__file__)],
            check=True,
            env={**os.environ, flag: "1"},
        )
        runs.append(torch.load(path))
    levels, wanted = [outs.pop("cpu_level") for outs in runs], {}
    assert levels[-1] == "portable", f"levels run: {levels}"
    for level, outs in zip(levels, runs, strict=True):
        for key, got in outs.items():
            call, dtype, mode, padding = key
            if key not in wanted:
                warp, layout, dsize = calls[call]
                image = make_image(layout, getattr(torch, dtype.removeprefix("torch.")))
                m = warp.to(torch.float32 if image.dtype == torch.float32 else torch.float64)
                wanted[key] = reference(image, m, dsize, mode, padding)
            atol = 0 if mode == "nearest" else (1 if dtype == "torch.uint8" else 2e-6)
            torch.testing.assert_close(
                got, wanted[key], atol=atol, rtol=0,
                msg=lambda m, k=(level, *key): f"{k}: {m}",
            )  # fmt: skip

"""warp_perspective in plain PyTorch, written from the math: the one reference of this
package's suite and of its test battery declaration (warp_perspective_battery.py)."""

from __future__ import annotations

import torch


def reference_and_ties(
    image: torch.Tensor,
    matrix: torch.Tensor,
    dsize: tuple[int, int] | None = None,
    interpolation: str = "bilinear",
    padding_mode: str = "zeros",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Destination pixel (x, y) samples the source at M^-1 (x, y, 1) (pixel centres at
    integers, w = 0 mapped to (0, 0) as OpenCV does); bilinear weights from the fractional
    parts, taps outside the image read 0 ("zeros") or the nearest edge pixel ("border");
    nearest rounds half to even. In float64, rounded once to the image's dtype.

    Returns (result, ties): ties marks the pixels whose nearest source is within 1e-6 of a
    tie, where the last bit of the inverse decides (all False for bilinear)."""
    squeeze = image.dim()
    x = image.double().cpu()
    if squeeze == 2:
        x = x[None, None]
    elif squeeze == 3:
        x = x[None]
    b, c, h, w = x.shape
    out_h, out_w = dsize if dsize is not None else (h, w)
    mats = matrix.double().cpu().reshape(-1, 3, 3).expand(b, 3, 3)
    ys, xs = torch.meshgrid(
        torch.arange(out_h, dtype=torch.float64),
        torch.arange(out_w, dtype=torch.float64),
        indexing="ij",
    )
    result = torch.zeros(b, c, out_h, out_w, dtype=torch.float64)
    ties = torch.zeros(b, out_h, out_w, dtype=torch.bool)
    for i in range(b):
        inv = torch.linalg.inv(mats[i])
        den = inv[2, 0] * xs + inv[2, 1] * ys + inv[2, 2]
        den = torch.where(den != 0, 1 / den, torch.zeros_like(den))
        sx = (inv[0, 0] * xs + inv[0, 1] * ys + inv[0, 2]) * den
        sy = (inv[1, 0] * xs + inv[1, 1] * ys + inv[1, 2]) * den

        def tap(ix, iy, weight, i=i):
            inside = (ix >= 0) & (ix < w) & (iy >= 0) & (iy < h)
            if padding_mode == "border":
                ix, iy, inside = ix.clamp(0, w - 1), iy.clamp(0, h - 1), torch.ones_like(inside)
            values = x[i][:, iy.clamp(0, h - 1), ix.clamp(0, w - 1)]
            return torch.where(inside, weight * values, torch.zeros_like(values))

        if interpolation == "nearest":
            ties[i] = ((sx - sx.floor() - 0.5).abs() < 1e-6) | (
                (sy - sy.floor() - 0.5).abs() < 1e-6
            )
            result[i] = tap(torch.round(sx).long(), torch.round(sy).long(), 1.0)
        else:
            fx, fy = torch.floor(sx), torch.floor(sy)
            ax, ay = sx - fx, sy - fy
            x0, y0 = fx.long(), fy.long()
            result[i] = (
                tap(x0, y0, (1 - ax) * (1 - ay))
                + tap(x0 + 1, y0, ax * (1 - ay))
                + tap(x0, y0 + 1, (1 - ax) * ay)
                + tap(x0 + 1, y0 + 1, ax * ay)
            )
    if image.dtype == torch.uint8:
        result = torch.floor(result + 0.5).clamp(0, 255)
    result = result.to(image.dtype)
    ties = ties[:, None].expand_as(result)
    if squeeze == 2:
        return result[0, 0], ties[0, 0]
    return (result[0], ties[0]) if squeeze == 3 else (result, ties)


def reference(*args, **kwargs) -> torch.Tensor:
    """The result of reference_and_ties (same arguments)."""
    return reference_and_ties(*args, **kwargs)[0]

"""Spatial transformers, as PyTorch's: `affine_grid` (the sampling positions an affine map gives) and
`grid_sample` (an image read at positions in [-1, 1]: bilinear or nearest, with zeros, border or
reflection padding), written with gathers and weights, so they differentiate in the image and in the
grid. NCHW.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import functions, ops
from .errors import ShapeError
from .shapes import shape_text
from .tensor import Tensor

MODES = ("bilinear", "nearest")
PADDINGS = ("zeros", "border", "reflection")


def _base(size: int, align_corners: bool) -> np.ndarray:
    """The normalised coordinates of `size` pixel centres (align_corners: of the corner pixels' centres)."""
    if align_corners:
        return np.linspace(-1.0, 1.0, size) if size > 1 else np.zeros(1)
    return (2 * np.arange(size) + 1) / size - 1


def affine_grid(theta: Tensor, size: Any, align_corners: bool = False) -> Tensor:
    """For theta [N, 2, 3] and size (N, C, H, W): grid[n, h, w] = theta[n] @ (x_w, y_h, 1), the sampling
    position of each output pixel, [N, H, W, 2] (x first)."""
    if theta.ndim != 3 or tuple(theta.shape[1:]) != (2, 3):
        raise ShapeError(f"affine_grid takes theta [N, 2, 3], got {shape_text(theta.shape)}")
    n, _, h, w = size
    xs, ys = _base(w, align_corners), _base(h, align_corners)
    points = np.stack(
        [np.broadcast_to(xs, (h, w)), np.broadcast_to(ys[:, None], (h, w)), np.ones((h, w))], -1
    )
    base = ops.tensor(points.reshape(1, h * w, 3)).cast(theta.dtype)
    return (base @ theta.transpose(1, 2)).reshape(n, h, w, 2)


def _reflect(x: Tensor, twice_low: int, twice_high: int) -> Tensor:
    """x reflected into [twice_low / 2, twice_high / 2] (PyTorch's reflect_coordinates)."""
    if twice_low == twice_high:
        return x * 0
    low, span = twice_low / 2, (twice_high - twice_low) / 2
    x = (x - low).abs()
    flips = (x / span).floor()
    extra = ops.fmod(x, span)
    return ops.where(ops.fmod(flips, 2) == 0, extra + low, span - extra + low)


def _pixel(coord: Tensor, size: int, align_corners: bool, padding_mode: str) -> Tensor:
    """A normalised coordinate as a pixel position, padded as `padding_mode` says (zeros: as it is)."""
    x = (coord + 1) / 2 * (size - 1) if align_corners else ((coord + 1) * size - 1) / 2
    if padding_mode == "reflection":
        x = _reflect(x, 0, 2 * (size - 1)) if align_corners else _reflect(x, -1, 2 * size - 1)
    if padding_mode in ("border", "reflection"):
        x = functions.clamp(x, 0, size - 1)
    return x


def grid_sample(
    input: Tensor,
    grid: Tensor,
    mode: str = "bilinear",
    padding_mode: str = "zeros",
    align_corners: bool = False,
) -> Tensor:
    """input [N, C, H, W] read at grid [N, Ho, Wo, 2] (x, y in [-1, 1]): [N, C, Ho, Wo]. Bilinear weighs
    the four nearest pixels, nearest takes the closest (halves to even); a pixel outside the image reads
    0 (zeros), the edge (border) or its mirror image (reflection)."""
    if mode not in MODES or padding_mode not in PADDINGS:
        raise ValueError(f"grid_sample: mode one of {MODES} and padding_mode one of {PADDINGS}")
    if input.ndim != 4 or grid.ndim != 4 or grid.shape[3] != 2 or grid.shape[0] != input.shape[0]:
        raise ShapeError(
            f"grid_sample takes input [N, C, H, W] and grid [N, Ho, Wo, 2], got {shape_text(input.shape)} "
            f"and {shape_text(grid.shape)}"
        )
    n, c, h, w = input.shape
    ho, wo = grid.shape[1], grid.shape[2]
    x = _pixel(grid[..., 0].reshape(n, 1, -1), w, align_corners, padding_mode)  # [N, 1, Ho * Wo]
    y = _pixel(grid[..., 1].reshape(n, 1, -1), h, align_corners, padding_mode)
    flat = input.reshape(n, c, h * w)

    def read(row: Tensor, col: Tensor) -> Tensor:
        """input at integer positions (as floats), 0 outside the image."""
        inside = (row >= 0) & (row <= h - 1) & (col >= 0) & (col <= w - 1)
        index = (functions.clamp(row, 0, h - 1) * w + functions.clamp(col, 0, w - 1)).cast("i64")
        values = ops.gather(flat, index.expand(n, c, index.shape[2]), axis=2)
        return ops.where(inside, values, 0.0)

    if mode == "nearest":
        out = read(y.round().detach(), x.round().detach())
    else:
        x0, y0 = x.floor().detach(), y.floor().detach()
        wx, wy = x - x0, y - y0
        top = read(y0, x0) * (1 - wx) + read(y0, x0 + 1) * wx
        bottom = read(y0 + 1, x0) * (1 - wx) + read(y0 + 1, x0 + 1) * wx
        out = top * (1 - wy) + bottom * wy
    return out.reshape(n, c, ho, wo)

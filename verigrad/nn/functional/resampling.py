"""Images resampled, as PyTorch's: `interpolate` (nearest by whole factors, or bilinear to any size),
`affine_grid` (the sampling positions an affine map gives) and `grid_sample` (an image read at positions
in [-1, 1]: bilinear or nearest, with zeros, border or reflection padding), written with gathers and
weights, so they differentiate in the image and in the grid. NCHW unless a `layout` says otherwise.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ... import functions, ops
from ...errors import ShapeError
from ...ops.composite._common import pair
from ...shapes import shape_text
from ...tensor import Tensor
from ._windows import IntPair

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


def interpolate(
    x: Tensor,
    size: IntPair | None = None,
    scale_factor: Any = None,
    mode: str = "nearest",
    align_corners: bool | None = None,
    layout: str = "NCHW",
) -> Tensor:
    """Images resized to `size` (H, W) or by `scale_factor`, as PyTorch's interpolate: "nearest" by
    whole factors (each pixel repeated), or "bilinear" to any size (each output pixel a weighted mean of
    its four nearest input pixels, at PyTorch's source coordinates for `align_corners` False or True)."""
    h_axis = 2 if layout == "NCHW" else 1
    if mode == "nearest":
        if size is not None or align_corners is not None:
            raise ValueError(
                "interpolate: mode='nearest' takes a whole scale_factor (no size, no align_corners)"
            )
        fh, fw = pair(scale_factor, "interpolate's scale_factor", 1)
        return functions.repeat_interleave(functions.repeat_interleave(x, fh, h_axis), fw, h_axis + 1)
    if mode != "bilinear":
        raise ValueError(f"interpolate: mode must be 'nearest' or 'bilinear', got {mode!r}")
    if (size is None) == (scale_factor is None):
        raise ValueError("interpolate: give one of size and scale_factor")
    factors = scale_factor if isinstance(scale_factor, tuple | list) else (scale_factor, scale_factor)
    sizes = size if isinstance(size, tuple | list) else (size, size)
    for axis, factor, wanted in zip((h_axis, h_axis + 1), factors, sizes):
        n = x.shape[axis]
        if not isinstance(n, int):
            raise ShapeError(f"interpolate: bilinear needs concrete sizes, got {n}")
        out = wanted if wanted is not None else math.floor(n * factor)
        low, high, weight = (ops.from_numpy(a) for a in _linear_taps(n, out, factor, bool(align_corners)))
        w = weight.reshape([-1 if a == axis else 1 for a in range(x.ndim)]).cast(x.dtype)
        x = ops.take(x, low, axis=axis) * (1 - w) + ops.take(x, high, axis=axis) * w
    return x


def _linear_taps(n: int, out: int, factor: float | None, align_corners: bool) -> tuple:
    """For each of `out` positions resampled from `n`: the two input positions it lies between and its
    weight toward the second, at PyTorch's source coordinates."""
    i = np.arange(out, dtype=np.float64)
    if align_corners:
        src = i * ((n - 1) / (out - 1)) if out > 1 else np.zeros(out)
    else:
        scale = 1.0 / factor if factor is not None else n / out
        src = np.maximum((i + 0.5) * scale - 0.5, 0.0)
    low = np.minimum(np.floor(src).astype(np.int64), n - 1)
    return low, np.minimum(low + 1, n - 1), src - low

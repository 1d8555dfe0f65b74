"""torch.grid_sampler_2d (grid_sample with aten's integer codes for the mode and padding) and
torch.grid_sampler_3d (its volume counterpart: trilinear or nearest, written with gathers and weights as
grid_sample is, so it differentiates in both the input and the grid)."""

from __future__ import annotations

from ... import functions, ops
from ...errors import ShapeError
from ...shapes import shape_text
from ...tensor import Tensor
from .resampling import _pixel, grid_sample

_MODES = ("bilinear", "nearest", "bicubic")
_PADDINGS = ("zeros", "border", "reflection")


def _decoded(name: str, interpolation_mode: int, padding_mode: int) -> tuple[str, str]:
    """(mode, padding) of aten's codes; bicubic refused (verigrad's grid_sample has none)."""
    codes = (("interpolation_mode", interpolation_mode, _MODES), ("padding_mode", padding_mode, _PADDINGS))
    for what, code, names in codes:
        if not isinstance(code, int) or isinstance(code, bool) or not 0 <= code < len(names):
            allowed = ", ".join(f"{i} ({n})" for i, n in enumerate(names))
            raise ValueError(f"{name}: {what} must be one of {allowed}, got {code!r}")
    if interpolation_mode == 2:
        raise NotImplementedError(f"{name}: interpolation_mode 2 (bicubic) is not implemented")
    return _MODES[interpolation_mode], _PADDINGS[padding_mode]


def grid_sampler_2d(
    input: Tensor, grid: Tensor, interpolation_mode: int, padding_mode: int, align_corners: bool
) -> Tensor:
    """grid_sample(input, grid, mode, padding_mode, align_corners) with the mode 0 bilinear, 1 nearest,
    2 bicubic and the padding 0 zeros, 1 border, 2 reflection, as torch.grid_sampler_2d."""
    mode, padding = _decoded("grid_sampler_2d", interpolation_mode, padding_mode)
    return grid_sample(input, grid, mode=mode, padding_mode=padding, align_corners=align_corners)


def grid_sampler_3d(
    input: Tensor, grid: Tensor, interpolation_mode: int, padding_mode: int, align_corners: bool
) -> Tensor:
    """input [N, C, D, H, W] read at grid [N, Do, Ho, Wo, 3] (x, y, z in [-1, 1]): [N, C, Do, Ho, Wo], as
    torch.grid_sampler_3d (mode 0 trilinear, 1 nearest; padding 0 zeros, 1 border, 2 reflection)."""
    mode, padding = _decoded("grid_sampler_3d", interpolation_mode, padding_mode)
    if input.ndim != 5 or grid.ndim != 5 or grid.shape[4] != 3 or grid.shape[0] != input.shape[0]:
        raise ShapeError(
            f"grid_sampler_3d takes input [N, C, D, H, W] and grid [N, Do, Ho, Wo, 3], got "
            f"{shape_text(input.shape)} and {shape_text(grid.shape)}"
        )
    n, c, d, h, w = input.shape
    out_shape = (n, c, *grid.shape[1:4])
    x, y, z = (
        _pixel(grid[..., axis].reshape(n, 1, -1), size, align_corners, padding)
        for axis, size in enumerate((w, h, d))
    )
    flat = input.reshape(n, c, d * h * w)

    def read(plane: Tensor, row: Tensor, col: Tensor) -> Tensor:
        """input at integer positions (as floats), 0 outside the volume."""
        inside = (plane >= 0) & (plane <= d - 1) & (row >= 0) & (row <= h - 1) & (col >= 0) & (col <= w - 1)
        at = functions.clamp(plane, 0, d - 1) * (h * w) + functions.clamp(row, 0, h - 1) * w
        index = (at + functions.clamp(col, 0, w - 1)).cast("i64")
        values = ops.gather(flat, index.expand(n, c, index.shape[2]), axis=2)
        return ops.where(inside, values, 0.0)

    if mode == "nearest":
        return read(z.round().detach(), y.round().detach(), x.round().detach()).reshape(out_shape)
    x0, y0, z0 = x.floor().detach(), y.floor().detach(), z.floor().detach()
    wx, wy, wz = x - x0, y - y0, z - z0

    def plane(p: Tensor) -> Tensor:
        top = read(p, y0, x0) * (1 - wx) + read(p, y0, x0 + 1) * wx
        bottom = read(p, y0 + 1, x0) * (1 - wx) + read(p, y0 + 1, x0 + 1) * wx
        return top * (1 - wy) + bottom * wy

    return (plane(z0) * (1 - wz) + plane(z0 + 1) * wz).reshape(out_shape)

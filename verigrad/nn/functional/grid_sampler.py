"""torch.grid_sampler_2d and torch.grid_sampler_3d: grid_sample with aten's integer codes for the mode
and the padding."""

from __future__ import annotations

from ...errors import ShapeError
from ...shapes import shape_text
from ...tensor import Tensor
from .resampling import grid_sample

_MODES = ("bilinear", "nearest", "bicubic")
_PADDINGS = ("zeros", "border", "reflection")


def _decoded(name: str, interpolation_mode: int, padding_mode: int) -> tuple[str, str]:
    """(mode, padding) of aten's codes."""
    codes = (("interpolation_mode", interpolation_mode, _MODES), ("padding_mode", padding_mode, _PADDINGS))
    for what, code, names in codes:
        if not isinstance(code, int) or isinstance(code, bool) or not 0 <= code < len(names):
            allowed = ", ".join(f"{i} ({n})" for i, n in enumerate(names))
            raise ValueError(f"{name}: {what} must be one of {allowed}, got {code!r}")
    return _MODES[interpolation_mode], _PADDINGS[padding_mode]


def _sampled(
    name: str, rank: int, input: Tensor, grid: Tensor, mode: int, padding: int, corners: bool
) -> Tensor:
    """grid_sample of a rank-`rank` spatial input, its shapes checked under aten's name."""
    interpolation, padding_mode = _decoded(name, mode, padding)
    if input.ndim != rank + 2 or grid.ndim != rank + 2 or grid.shape[-1] != rank:
        axes = "N, C, H, W" if rank == 2 else "N, C, D, H, W"
        places = "N, Ho, Wo, 2" if rank == 2 else "N, Do, Ho, Wo, 3"
        raise ShapeError(
            f"{name} takes input [{axes}] and grid [{places}], got "
            f"{shape_text(input.shape)} and {shape_text(grid.shape)}"
        )
    return grid_sample(input, grid, mode=interpolation, padding_mode=padding_mode, align_corners=corners)


def grid_sampler_2d(
    input: Tensor, grid: Tensor, interpolation_mode: int, padding_mode: int, align_corners: bool
) -> Tensor:
    """grid_sample(input, grid, mode, padding_mode, align_corners) with the mode 0 bilinear, 1 nearest,
    2 bicubic and the padding 0 zeros, 1 border, 2 reflection, as torch.grid_sampler_2d."""
    return _sampled("grid_sampler_2d", 2, input, grid, interpolation_mode, padding_mode, align_corners)


def grid_sampler_3d(
    input: Tensor, grid: Tensor, interpolation_mode: int, padding_mode: int, align_corners: bool
) -> Tensor:
    """input [N, C, D, H, W] read at grid [N, Do, Ho, Wo, 3] (x, y, z in [-1, 1]): [N, C, Do, Ho, Wo], as
    torch.grid_sampler_3d (mode 0 trilinear, 1 nearest; padding 0 zeros, 1 border, 2 reflection)."""
    return _sampled("grid_sampler_3d", 3, input, grid, interpolation_mode, padding_mode, align_corners)

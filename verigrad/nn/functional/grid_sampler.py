"""torch.grid_sampler_2d: grid_sample with aten's integer codes for the mode and padding."""

from __future__ import annotations

from ...tensor import Tensor
from .resampling import grid_sample

_MODES = ("bilinear", "nearest", "bicubic")
_PADDINGS = ("zeros", "border", "reflection")


def grid_sampler_2d(
    input: Tensor, grid: Tensor, interpolation_mode: int, padding_mode: int, align_corners: bool
) -> Tensor:
    """grid_sample(input, grid, mode, padding_mode, align_corners) with the mode 0 bilinear, 1 nearest,
    2 bicubic and the padding 0 zeros, 1 border, 2 reflection, as torch.grid_sampler_2d."""
    for name, code, names in (
        ("interpolation_mode", interpolation_mode, _MODES),
        ("padding_mode", padding_mode, _PADDINGS),
    ):
        if not isinstance(code, int) or isinstance(code, bool) or not 0 <= code < len(names):
            allowed = ", ".join(f"{i} ({n})" for i, n in enumerate(names))
            raise ValueError(f"grid_sampler_2d: {name} must be one of {allowed}, got {code!r}")
    if interpolation_mode == 2:
        raise NotImplementedError("grid_sampler_2d: interpolation_mode 2 (bicubic) is not implemented")
    mode, padding = _MODES[interpolation_mode], _PADDINGS[padding_mode]
    return grid_sample(input, grid, mode=mode, padding_mode=padding, align_corners=align_corners)

"""Channels traded for pixels, as in `torch.nn.functional`: pixel_shuffle and pixel_unshuffle."""

from __future__ import annotations

from ...errors import ShapeError
from ...tensor import Tensor


def pixel_shuffle(input: Tensor, upscale_factor: int) -> Tensor:
    """[..., C r^2, H, W] -> [..., C, H r, W r]: each group of r^2 channels spread over an r x r block."""
    r = upscale_factor
    *lead, c, h, w = input.shape
    if c % (r * r):
        raise ShapeError(f"pixel_shuffle: {c} channels do not split into groups of {r}^2")
    blocks = input.reshape(*lead, c // (r * r), r, r, h, w)
    k = len(lead)
    return blocks.permute(*range(k + 1), k + 3, k + 1, k + 4, k + 2).reshape(
        *lead, c // (r * r), h * r, w * r
    )


def pixel_unshuffle(input: Tensor, downscale_factor: int) -> Tensor:
    """The inverse of pixel_shuffle: [..., C, H r, W r] -> [..., C r^2, H, W]."""
    r = downscale_factor
    *lead, c, hr, wr = input.shape
    if hr % r or wr % r:
        raise ShapeError(f"pixel_unshuffle: {hr}x{wr} does not split into blocks of {r}x{r}")
    blocks = input.reshape(*lead, c, hr // r, r, wr // r, r)
    k = len(lead)
    return blocks.permute(*range(k + 1), k + 2, k + 4, k + 1, k + 3).reshape(
        *lead, c * r * r, hr // r, wr // r
    )

"""PixelShuffle and PixelUnshuffle, as PyTorch's: channels traded for pixels and back."""

from __future__ import annotations

from ..tensor import Tensor
from . import functional as F
from .module import Module


class PixelShuffle(Module):
    """[N, C r^2, H, W] -> [N, C, H r, W r] (see F.pixel_shuffle)."""

    def __init__(self, upscale_factor: int):
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, x: Tensor) -> Tensor:
        return F.pixel_shuffle(x, self.upscale_factor)

    def extra_repr(self) -> str:
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    """[N, C, H r, W r] -> [N, C r^2, H, W] (see F.pixel_unshuffle)."""

    def __init__(self, downscale_factor: int):
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, x: Tensor) -> Tensor:
        return F.pixel_unshuffle(x, self.downscale_factor)

    def extra_repr(self) -> str:
        return f"downscale_factor={self.downscale_factor}"

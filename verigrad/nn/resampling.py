"""Upsample, as PyTorch's: images resized (see F.interpolate)."""

from __future__ import annotations

from typing import Any

from ..tensor import Tensor
from . import functional as F
from .module import Module


class Upsample(Module):
    """Upsampling: nearest by whole factors, or bilinear to any size (see F.interpolate)."""

    def __init__(
        self,
        size: Any = None,
        scale_factor: Any = None,
        mode: str = "nearest",
        align_corners: bool | None = None,
        layout: str = "NCHW",
    ):
        super().__init__()
        self.size, self.scale_factor, self.mode, self.layout = size, scale_factor, mode, layout
        self.align_corners = align_corners

    def forward(self, x: Tensor) -> Tensor:
        return F.interpolate(x, self.size, self.scale_factor, self.mode, self.align_corners, self.layout)

    def extra_repr(self) -> str:
        return f"scale_factor={self.scale_factor}, mode={self.mode!r}"

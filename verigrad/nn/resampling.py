"""Upsampling layers, as PyTorch's: Upsample, UpsamplingNearest2d, UpsamplingBilinear2d (see
F.interpolate)."""

from __future__ import annotations

from typing import Any

from ..tensor import Tensor
from . import functional as F
from .module import Module


class Upsample(Module):
    """Resizing to `size` or by `scale_factor` in any of F.interpolate's modes (and `layout`)."""

    def __init__(
        self,
        size: Any = None,
        scale_factor: Any = None,
        mode: str = "nearest",
        align_corners: bool | None = None,
        recompute_scale_factor: bool | None = None,
        *,
        layout: str = "NCHW",
    ):
        super().__init__()
        if isinstance(scale_factor, tuple | list):  # kept as floats, as PyTorch keeps them
            scale_factor = tuple(float(s) for s in scale_factor)
        elif scale_factor:
            scale_factor = float(scale_factor)
        self.size, self.scale_factor, self.mode, self.layout = size, scale_factor or None, mode, layout
        self.align_corners, self.recompute_scale_factor = align_corners, recompute_scale_factor

    def forward(self, x: Tensor) -> Tensor:
        options = (self.align_corners, self.recompute_scale_factor)
        return F.interpolate(x, self.size, self.scale_factor, self.mode, *options, layout=self.layout)

    def extra_repr(self) -> str:
        what = (
            f"scale_factor={self.scale_factor!r}" if self.scale_factor is not None else f"size={self.size!r}"
        )
        return f"{what}, mode={self.mode!r}"


class UpsamplingNearest2d(Upsample):
    """Nearest upsampling of [N, C, H, W] (PyTorch's floor(i * scale) source pixels)."""

    def __init__(self, size: Any = None, scale_factor: Any = None):
        super().__init__(size, scale_factor, "nearest")


class UpsamplingBilinear2d(Upsample):
    """Bilinear upsampling of [N, C, H, W] with align_corners=True, as PyTorch's."""

    def __init__(self, size: Any = None, scale_factor: Any = None):
        super().__init__(size, scale_factor, "bilinear", align_corners=True)

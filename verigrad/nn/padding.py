"""Padding layers, as PyTorch's: ZeroPad2d, ReflectionPad2d, ReplicationPad2d (see F.pad)."""

from __future__ import annotations

from typing import Any

from ..tensor import Tensor
from . import functional as F
from .module import Module


class _Pad2d(Module):
    """F.pad of the last two axes by `padding` (one width for all four sides, or (left, right, top,
    bottom)) in this class's mode."""

    mode = "constant"

    def __init__(self, padding: Any):
        super().__init__()
        self.padding = (padding,) * 4 if isinstance(padding, int) else tuple(padding)

    def forward(self, x: Tensor) -> Tensor:
        return F.pad(x, self.padding, mode=self.mode)


class ZeroPad2d(_Pad2d):
    mode = "constant"


class ReflectionPad2d(_Pad2d):
    mode = "reflect"


class ReplicationPad2d(_Pad2d):
    mode = "replicate"

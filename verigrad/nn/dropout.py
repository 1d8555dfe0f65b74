"""Dropout layers, as PyTorch's: Dropout (of elements) and Dropout2d (of channels)."""

from __future__ import annotations

from ..tensor import Tensor
from . import functional as F
from .module import Module


class Dropout(Module):
    """Zeroes each element with probability p in training (scaling the rest by 1/(1-p))."""

    def __init__(self, p: float = 0.5):
        super().__init__()
        if not 0 <= p < 1:
            raise ValueError(f"dropout probability must be in [0, 1), got {p}")
        self.p = p

    def forward(self, x: Tensor) -> Tensor:
        return F.dropout(x, self.p, training=self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"


class Dropout2d(Dropout):
    """Zeroes whole channels of [N, C, H, W] with probability p in training (see F.dropout2d)."""

    def forward(self, x: Tensor) -> Tensor:
        return F.dropout2d(x, self.p, training=self.training)

"""Dropout layers, as PyTorch's: Dropout and AlphaDropout (of elements), Dropout1d, Dropout2d, Dropout3d
and FeatureAlphaDropout (of channels)."""

from __future__ import annotations

from ..tensor import Tensor
from . import functional as F
from .functional.activations import _inplace
from .module import Module


class Dropout(Module):
    """Zeroes each element with probability p in training (scaling the rest by 1/(1-p)); `inplace` as
    F.relu's (written into the input where it takes no part in a gradient)."""

    drop = staticmethod(F.dropout)

    def __init__(self, p: float = 0.5, inplace: bool = False):
        super().__init__()
        if not 0 <= p <= 1:
            raise ValueError(f"{type(self).__name__}: dropout probability must be in [0, 1], got {p}")
        self.p, self.inplace = p, inplace

    def forward(self, x: Tensor) -> Tensor:
        y = self.drop(x, self.p, training=self.training)
        return y if y is x else _inplace(x, y, self.inplace)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class Dropout2d(Dropout):
    """Zeroes whole channels of [N, C, H, W] with probability p in training (see F.dropout2d)."""

    drop = staticmethod(F.dropout2d)


class Dropout1d(Dropout):
    """Zeroes whole channels of [N, C, L] with probability p in training (see F.dropout1d)."""

    drop = staticmethod(F.dropout1d)


class Dropout3d(Dropout):
    """Zeroes whole channels of [N, C, D, H, W] with probability p in training (see F.dropout3d)."""

    drop = staticmethod(F.dropout3d)


class AlphaDropout(Dropout):
    """SELU's dropout in training (see F.alpha_dropout): mean and variance kept."""

    drop = staticmethod(F.alpha_dropout)


class FeatureAlphaDropout(Dropout):
    """SELU's dropout of whole channels in training (see F.feature_alpha_dropout)."""

    drop = staticmethod(F.feature_alpha_dropout)

"""`verigrad.fft`, as torch.fft: the real-valued functions only (verigrad has no complex dtype, so the
transforms themselves are missing): fftshift and ifftshift."""

from __future__ import annotations

from typing import Any

from .functions.rearrange import roll
from .shapes import normalize_axis
from .tensor import Tensor

__all__ = ["fftshift", "ifftshift"]


def _shift(x: Tensor, dim: Any, sign: int) -> Tensor:
    axes = range(x.ndim) if dim is None else ((dim,) if isinstance(dim, int) else tuple(dim))
    axes = [normalize_axis(a, max(x.ndim, 1)) for a in axes]
    if not axes or x.ndim == 0:
        return x.clone()
    return roll(x, [sign * (x.shape[a] // 2) for a in axes], axes)


def fftshift(input: Tensor, dim: Any = None) -> Tensor:
    """input rolled by half of each axis in `dim` (all by default): the zero frequency to the centre."""
    return _shift(input, dim, 1)


def ifftshift(input: Tensor, dim: Any = None) -> Tensor:
    """The inverse of fftshift: rolled back by half of each axis in `dim` (all by default)."""
    return _shift(input, dim, -1)

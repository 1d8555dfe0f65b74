"""Padding layers, as PyTorch's: ZeroPad, ConstantPad, ReflectionPad, ReplicationPad and CircularPad in
1-D, 2-D and 3-D (see F.pad)."""

from __future__ import annotations

from typing import Any

from ..tensor import Tensor
from . import functional as F
from .module import Module


class _Pad(Module):
    """F.pad of the last `axes` axes by `padding` (one width for every side, or (left, right, top,
    bottom, front, back) as F.pad orders them) in this class's mode."""

    mode, axes = "constant", 2

    def __init__(self, padding: Any, value: float | None = None):
        super().__init__()
        self.padding = (padding,) * (2 * self.axes) if isinstance(padding, int) else tuple(padding)
        if len(self.padding) != 2 * self.axes:
            raise ValueError(
                f"{type(self).__name__}: padding must be an int or {2 * self.axes} ints, got {padding!r}"
            )
        self.value = value

    def forward(self, x: Tensor) -> Tensor:
        return F.pad(x, self.padding, mode=self.mode, value=self.value)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ZeroPad1d(_Pad):
    """F.pad of the last 1 axes, zeros."""

    mode, axes = "constant", 1

    def __init__(self, padding: Any):
        super().__init__(padding, 0.0)


class ZeroPad2d(_Pad):
    """F.pad of the last 2 axes, zeros."""

    mode, axes = "constant", 2

    def __init__(self, padding: Any):
        super().__init__(padding, 0.0)


class ZeroPad3d(_Pad):
    """F.pad of the last 3 axes, zeros."""

    mode, axes = "constant", 3

    def __init__(self, padding: Any):
        super().__init__(padding, 0.0)


class _ConstantPad(_Pad):
    """PyTorch prints a constant pad's padding and value by name."""

    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPad):
    """F.pad of the last 1 axes with `value`."""

    mode, axes = "constant", 1

    def __init__(self, padding: Any, value: float):
        super().__init__(padding, value)


class ConstantPad2d(_ConstantPad):
    """F.pad of the last 2 axes with `value`."""

    mode, axes = "constant", 2

    def __init__(self, padding: Any, value: float):
        super().__init__(padding, value)


class ConstantPad3d(_ConstantPad):
    """F.pad of the last 3 axes with `value`."""

    mode, axes = "constant", 3

    def __init__(self, padding: Any, value: float):
        super().__init__(padding, value)


class ReflectionPad1d(_Pad):
    """F.pad of the last 1 axes, mode 'reflect'."""

    mode, axes = "reflect", 1

    def __init__(self, padding: Any):
        super().__init__(padding)


class ReflectionPad2d(_Pad):
    """F.pad of the last 2 axes, mode 'reflect'."""

    mode, axes = "reflect", 2

    def __init__(self, padding: Any):
        super().__init__(padding)


class ReflectionPad3d(_Pad):
    """F.pad of the last 3 axes, mode 'reflect'."""

    mode, axes = "reflect", 3

    def __init__(self, padding: Any):
        super().__init__(padding)


class ReplicationPad1d(_Pad):
    """F.pad of the last 1 axes, mode 'replicate'."""

    mode, axes = "replicate", 1

    def __init__(self, padding: Any):
        super().__init__(padding)


class ReplicationPad2d(_Pad):
    """F.pad of the last 2 axes, mode 'replicate'."""

    mode, axes = "replicate", 2

    def __init__(self, padding: Any):
        super().__init__(padding)


class ReplicationPad3d(_Pad):
    """F.pad of the last 3 axes, mode 'replicate'."""

    mode, axes = "replicate", 3

    def __init__(self, padding: Any):
        super().__init__(padding)


class CircularPad1d(_Pad):
    """F.pad of the last 1 axes, mode 'circular'."""

    mode, axes = "circular", 1

    def __init__(self, padding: Any):
        super().__init__(padding)


class CircularPad2d(_Pad):
    """F.pad of the last 2 axes, mode 'circular'."""

    mode, axes = "circular", 2

    def __init__(self, padding: Any):
        super().__init__(padding)


class CircularPad3d(_Pad):
    """F.pad of the last 3 axes, mode 'circular'."""

    mode, axes = "circular", 3

    def __init__(self, padding: Any):
        super().__init__(padding)

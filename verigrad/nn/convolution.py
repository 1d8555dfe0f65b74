"""Convolution layers, as PyTorch's: Conv1d, Conv2d, ConvTranspose2d, and Unfold/Fold (im2col and back)."""

from __future__ import annotations

from typing import Any

from ..dtypes import f32
from ..shapes import DimLike
from ..tensor import Tensor
from . import functional as F
from .init import fan_in_bound, uniform
from .module import Module


def _pair(v: Any) -> tuple[Any, Any]:
    return (v, v) if not isinstance(v, tuple | list) else tuple(v)  # type: ignore[return-value]


class Conv1d(Module):
    """1-D convolution of [N, C, L]: weight [out, in, k] (PyTorch's initialisation)."""

    def __init__(
        self,
        in_channels: DimLike,
        out_channels: DimLike,
        kernel_size: int,
        stride: int = 1,
        padding: int = 0,
        dilation: int = 1,
        bias: bool = True,
        dtype: Any = f32,
    ):
        super().__init__()
        self.in_channels, self.out_channels, self.kernel_size = in_channels, out_channels, kernel_size
        self.stride, self.padding, self.dilation = stride, padding, dilation
        bound = fan_in_bound(in_channels * kernel_size)
        self.weight = uniform((out_channels, in_channels, kernel_size), bound, dtype)
        self.bias = uniform((out_channels,), bound, dtype) if bias else None

    def forward(self, x: Tensor) -> Tensor:
        return F.conv1d(x, self.weight, self.bias, self.stride, self.padding, self.dilation)

    def extra_repr(self) -> str:
        return (
            f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}, "
            f"padding={self.padding}"
        )


class Conv2d(Module):
    """2-D convolution. NCHW: weight [out, in, kh, kw]; NHWC: weight [kh, kw, in, out]."""

    def __init__(
        self,
        in_channels: DimLike,
        out_channels: DimLike,
        kernel_size: int | tuple[int, int],
        stride: int | tuple[int, int] = 1,
        padding: int | tuple[int, int] | str = 0,
        dilation: int | tuple[int, int] = 1,
        bias: bool = True,
        layout: str = "NCHW",
        dtype: Any = f32,
        groups: int = 1,
    ):
        super().__init__()
        kh, kw = _pair(kernel_size)
        self.in_channels, self.out_channels, self.kernel_size = in_channels, out_channels, (kh, kw)
        self.stride, self.padding, self.dilation, self.layout = stride, padding, dilation, layout
        self.groups = groups
        bound = fan_in_bound(in_channels // groups * kh * kw)
        shape = (
            (out_channels, in_channels // groups, kh, kw)
            if layout == "NCHW"
            else (kh, kw, in_channels, out_channels)
        )
        self.weight = uniform(shape, bound, dtype)
        self.bias = uniform((out_channels,), bound, dtype) if bias else None

    def forward(self, x: Tensor) -> Tensor:
        return F.conv2d(
            x, self.weight, self.bias, self.stride, self.padding, self.dilation, self.layout, self.groups
        )

    def extra_repr(self) -> str:
        return (
            f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}, "
            f"padding={self.padding}, layout={self.layout}"
        )


class ConvTranspose2d(Module):
    """Transposed 2-D convolution of NCHW images: weight [in, out, kh, kw] (PyTorch's layout and
    initialisation; see F.conv_transpose2d)."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int | tuple[int, int],
        stride: int | tuple[int, int] = 1,
        padding: int | tuple[int, int] = 0,
        output_padding: int | tuple[int, int] = 0,
        bias: bool = True,
        dilation: int | tuple[int, int] = 1,
        dtype: Any = f32,
    ):
        super().__init__()
        kh, kw = _pair(kernel_size)
        self.in_channels, self.out_channels, self.kernel_size = in_channels, out_channels, (kh, kw)
        self.stride, self.padding, self.output_padding, self.dilation = (
            stride,
            padding,
            output_padding,
            dilation,
        )
        bound = fan_in_bound(out_channels * kh * kw)  # PyTorch's fan-in of this weight: its dim 1
        self.weight = uniform((in_channels, out_channels, kh, kw), bound, dtype)
        self.bias = uniform((out_channels,), bound, dtype) if bias else None

    def forward(self, x: Tensor) -> Tensor:
        return F.conv_transpose2d(
            x, self.weight, self.bias, self.stride, self.padding, self.output_padding, self.dilation
        )

    def extra_repr(self) -> str:
        return (
            f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        )


class Unfold(Module):
    """Every sliding block as a column (see F.unfold)."""

    def __init__(self, kernel_size: Any, dilation: Any = 1, padding: Any = 0, stride: Any = 1):
        super().__init__()
        self.window = {"kernel_size": kernel_size, "dilation": dilation, "padding": padding, "stride": stride}

    def forward(self, x: Tensor) -> Tensor:
        return F.unfold(x, **self.window)


class Fold(Unfold):
    """Columns summed back into an image of `output_size` (see F.fold)."""

    def __init__(
        self, output_size: Any, kernel_size: Any, dilation: Any = 1, padding: Any = 0, stride: Any = 1
    ):
        super().__init__(kernel_size, dilation, padding, stride)
        self.output_size = output_size

    def forward(self, x: Tensor) -> Tensor:
        return F.fold(x, self.output_size, **self.window)

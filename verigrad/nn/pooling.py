"""Pooling layers, as PyTorch's: max and average pooling in 1-D and 2-D, adaptive pooling, MaxUnpool2d."""

from __future__ import annotations

from typing import Any

from ..tensor import Tensor
from . import functional as F
from .module import Module


class MaxPool1d(Module):
    def __init__(self, kernel_size: int, stride: int | None = None, padding: int = 0):
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding

    def forward(self, x: Tensor) -> Tensor:
        return F.max_pool1d(x, self.kernel_size, self.stride, self.padding)


class AvgPool1d(MaxPool1d):
    def forward(self, x: Tensor) -> Tensor:
        return F.avg_pool1d(x, self.kernel_size, self.stride, self.padding)


class MaxPool2d(Module):
    """Window maxima (see F.max_pool2d): PyTorch's arguments, and `layout`."""

    def __init__(
        self,
        kernel_size: Any,
        stride: Any = None,
        padding: Any = 0,
        dilation: Any = 1,
        return_indices: bool = False,
        ceil_mode: bool = False,
        layout: str = "NCHW",
    ):
        super().__init__()
        self.kernel_size, self.stride, self.padding, self.dilation = kernel_size, stride, padding, dilation
        self.return_indices, self.ceil_mode, self.layout = return_indices, ceil_mode, layout

    def forward(self, x: Tensor) -> Any:
        window = (self.kernel_size, self.stride, self.padding, self.dilation)
        return F.max_pool2d(x, *window, self.ceil_mode, self.return_indices, layout=self.layout)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride or self.kernel_size}"


class AvgPool2d(Module):
    """Window means (see F.avg_pool2d): PyTorch's arguments, and `layout`."""

    def __init__(
        self,
        kernel_size: Any,
        stride: Any = None,
        padding: Any = 0,
        ceil_mode: bool = False,
        count_include_pad: bool = True,
        divisor_override: int | None = None,
        layout: str = "NCHW",
    ):
        super().__init__()
        self.kernel_size, self.stride, self.padding, self.layout = kernel_size, stride, padding, layout
        self.ceil_mode, self.count_include_pad, self.divisor_override = (
            ceil_mode,
            count_include_pad,
            divisor_override,
        )

    def forward(self, x: Tensor) -> Tensor:
        options = (self.ceil_mode, self.count_include_pad, self.divisor_override)
        return F.avg_pool2d(x, self.kernel_size, self.stride, self.padding, *options, layout=self.layout)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride or self.kernel_size}"


class MaxUnpool2d(Module):
    """max_pool2d's values put back at their indices (see F.max_unpool2d)."""

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0):
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding

    def forward(self, x: Tensor, indices: Tensor, output_size: Any = None) -> Tensor:
        return F.max_unpool2d(x, indices, self.kernel_size, self.stride, self.padding, output_size)


class AdaptiveAvgPool2d(Module):
    """Means over an output_size grid (see F.adaptive_avg_pool2d)."""

    def __init__(self, output_size: Any, layout: str = "NCHW"):
        super().__init__()
        self.output_size, self.layout = output_size, layout

    def forward(self, x: Tensor) -> Tensor:
        return F.adaptive_avg_pool2d(x, self.output_size, self.layout)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveMaxPool2d(Module):
    """Maxima over an output_size grid (see F.adaptive_max_pool2d)."""

    def __init__(self, output_size: Any, return_indices: bool = False):
        super().__init__()
        self.output_size, self.return_indices = output_size, return_indices

    def forward(self, x: Tensor) -> Tensor:
        return F.adaptive_max_pool2d(x, self.output_size, self.return_indices)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"

"""Pooling layers, as PyTorch's: max and average pooling in 1-D, 2-D and 3-D, adaptive pooling, lp pooling
and MaxUnpool2d."""

from __future__ import annotations

from typing import Any

from ..tensor import Tensor
from . import functional as F
from .module import Module


def _sizes(v: Any, n: int) -> tuple:
    return tuple(v) if isinstance(v, tuple | list) else (v,) * n


def _one(v: Any) -> tuple:
    return _sizes(v, 1)


class MaxPool1d(Module):
    """Window maxima of [N, C, L] (see F.max_pool1d)."""

    def __init__(
        self,
        kernel_size: Any,
        stride: Any = None,
        padding: Any = 0,
        dilation: Any = 1,
        return_indices: bool = False,
        ceil_mode: bool = False,
    ):
        super().__init__()
        self.kernel_size, self.padding, self.dilation = kernel_size, padding, dilation
        self.stride = stride if stride is not None else kernel_size  # as PyTorch keeps it
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def forward(self, x: Tensor) -> Any:
        window = (self.kernel_size, self.stride, self.padding, self.dilation)
        return self.pool(x, *window, self.ceil_mode, self.return_indices)

    pool = staticmethod(F.max_pool1d)

    def extra_repr(self) -> str:
        return (
            f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
            f"dilation={self.dilation}, ceil_mode={self.ceil_mode}"
        )


class MaxPool3d(MaxPool1d):
    """Window maxima of [N, C, D, H, W] (see F.max_pool3d)."""

    pool = staticmethod(F.max_pool3d)


class AvgPool1d(Module):
    """Window means of [N, C, L] (see F.avg_pool1d)."""

    def __init__(
        self,
        kernel_size: Any,
        stride: Any = None,
        padding: Any = 0,
        ceil_mode: bool = False,
        count_include_pad: bool = True,
    ):
        super().__init__()
        self.kernel_size, self.padding = _one(kernel_size), _one(padding)  # PyTorch keeps 1-tuples here
        self.stride = _one(stride if stride is not None else kernel_size)
        self.ceil_mode, self.count_include_pad = ceil_mode, count_include_pad

    def forward(self, x: Tensor) -> Tensor:
        options = (self.ceil_mode, self.count_include_pad)
        return F.avg_pool1d(x, self.kernel_size, self.stride, self.padding, *options)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool3d(Module):
    """Window means of [N, C, D, H, W] (see F.avg_pool3d)."""

    def __init__(
        self,
        kernel_size: Any,
        stride: Any = None,
        padding: Any = 0,
        ceil_mode: bool = False,
        count_include_pad: bool = True,
        divisor_override: int | None = None,
    ):
        super().__init__()
        self.kernel_size, self.padding = kernel_size, padding
        self.stride = stride if stride is not None else kernel_size  # as PyTorch keeps it
        self.ceil_mode, self.count_include_pad = ceil_mode, count_include_pad
        self.divisor_override = divisor_override

    def forward(self, x: Tensor) -> Tensor:
        options = (self.ceil_mode, self.count_include_pad, self.divisor_override)
        return self.pool(x, self.kernel_size, self.stride, self.padding, *options)

    pool = staticmethod(F.avg_pool3d)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class LPPool1d(Module):
    """The p-norm of each window of [N, C, L] (see F.lp_pool1d)."""

    pool = staticmethod(F.lp_pool1d)

    def __init__(self, norm_type: float, kernel_size: Any, stride: Any = None, ceil_mode: bool = False):
        super().__init__()
        self.norm_type, self.kernel_size, self.stride, self.ceil_mode = (
            norm_type,
            kernel_size,
            stride,
            ceil_mode,
        )

    def forward(self, x: Tensor) -> Tensor:
        return self.pool(x, self.norm_type, self.kernel_size, self.stride, self.ceil_mode)

    def extra_repr(self) -> str:
        return (
            f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, stride={self.stride}, "
            f"ceil_mode={self.ceil_mode}"
        )


class LPPool2d(LPPool1d):
    """The p-norm of each window of [N, C, H, W] (see F.lp_pool2d)."""

    pool = staticmethod(F.lp_pool2d)


class LPPool3d(LPPool1d):
    """The p-norm of each window of [N, C, D, H, W] (see F.lp_pool3d)."""

    pool = staticmethod(F.lp_pool3d)


class MaxPool2d(MaxPool1d):
    """Window maxima (see F.max_pool2d): PyTorch's arguments, and verigrad's keyword `layout`."""

    def __init__(
        self,
        kernel_size: Any,
        stride: Any = None,
        padding: Any = 0,
        dilation: Any = 1,
        return_indices: bool = False,
        ceil_mode: bool = False,
        *,
        layout: str = "NCHW",
    ):
        super().__init__(kernel_size, stride, padding, dilation, return_indices, ceil_mode)
        self.layout = layout

    def forward(self, x: Tensor) -> Any:
        window = (self.kernel_size, self.stride, self.padding, self.dilation)
        return F.max_pool2d(x, *window, self.ceil_mode, self.return_indices, layout=self.layout)


class AvgPool2d(AvgPool3d):
    """Window means (see F.avg_pool2d): PyTorch's arguments, and verigrad's keyword `layout`."""

    def __init__(
        self,
        kernel_size: Any,
        stride: Any = None,
        padding: Any = 0,
        ceil_mode: bool = False,
        count_include_pad: bool = True,
        divisor_override: int | None = None,
        *,
        layout: str = "NCHW",
    ):
        super().__init__(kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)
        self.layout = layout

    def forward(self, x: Tensor) -> Tensor:
        options = (self.ceil_mode, self.count_include_pad, self.divisor_override)
        return F.avg_pool2d(x, self.kernel_size, self.stride, self.padding, *options, layout=self.layout)


class MaxUnpool2d(Module):
    """max_pool2d's values put back at their indices (see F.max_unpool2d)."""

    unpool = staticmethod(F.max_unpool2d)
    dims = 2

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0):
        super().__init__()
        n = self.dims  # PyTorch keeps n-tuples here
        self.kernel_size, self.padding = _sizes(kernel_size, n), _sizes(padding, n)
        self.stride = _sizes(stride if stride is not None else kernel_size, n)

    def forward(self, x: Tensor, indices: Tensor, output_size: Any = None) -> Tensor:
        return self.unpool(x, indices, self.kernel_size, self.stride, self.padding, output_size)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool1d(MaxUnpool2d):
    """max_pool1d's values put back at their indices (see F.max_unpool1d)."""

    unpool = staticmethod(F.max_unpool1d)
    dims = 1


class MaxUnpool3d(MaxUnpool2d):
    """max_pool3d's values put back at their indices (see F.max_unpool3d)."""

    unpool = staticmethod(F.max_unpool3d)
    dims = 3


class AdaptiveAvgPool2d(Module):
    """Means over an output_size grid (see F.adaptive_avg_pool2d)."""

    def __init__(self, output_size: Any, *, layout: str = "NCHW"):
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


class AdaptiveAvgPool1d(Module):
    """Means over an output_size of windows of [N, C, L] (see F.adaptive_avg_pool1d)."""

    pool = staticmethod(F.adaptive_avg_pool1d)

    def __init__(self, output_size: Any):
        super().__init__()
        self.output_size = output_size

    def forward(self, x: Tensor) -> Tensor:
        return self.pool(x, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveAvgPool3d(AdaptiveAvgPool1d):
    """Means over an output_size grid of [N, C, D, H, W] (see F.adaptive_avg_pool3d)."""

    pool = staticmethod(F.adaptive_avg_pool3d)


class AdaptiveMaxPool1d(AdaptiveMaxPool2d):
    """Maxima over an output_size of windows of [N, C, L] (see F.adaptive_max_pool1d)."""

    def forward(self, x: Tensor) -> Tensor:
        return F.adaptive_max_pool1d(x, self.output_size, self.return_indices)


class AdaptiveMaxPool3d(AdaptiveMaxPool2d):
    """Maxima over an output_size grid of [N, C, D, H, W] (see F.adaptive_max_pool3d)."""

    def forward(self, x: Tensor) -> Tensor:
        return F.adaptive_max_pool3d(x, self.output_size, self.return_indices)


class FractionalMaxPool2d(Module):
    """Max pooling over pseudo-random windows of kernel_size to output_size, or output_ratio of the input
    (see F.fractional_max_pool2d); with return_indices also each maximum's position."""

    dims = 2

    def __init__(
        self,
        kernel_size: Any,
        output_size: Any = None,
        output_ratio: Any = None,
        return_indices: bool = False,
        _random_samples: Tensor | None = None,
    ):
        super().__init__()
        name = type(self).__name__
        if (output_size is None) == (output_ratio is None):
            raise ValueError(f"{name} requires specifying exactly one of output_size and output_ratio")
        if output_ratio is not None and not all(0 < r < 1 for r in _sizes(output_ratio, self.dims)):
            raise ValueError(f"{name}: output_ratio must be between 0 and 1, got {output_ratio!r}")
        self.kernel_size, self.output_size, self.output_ratio = kernel_size, output_size, output_ratio
        self.return_indices = return_indices
        self._random_samples = _random_samples

    def forward(self, x: Tensor) -> Any:
        pool = F.fractional_max_pool2d if self.dims == 2 else F.fractional_max_pool3d
        return pool(
            x,
            self.kernel_size,
            self.output_size,
            self.output_ratio,
            self.return_indices,
            self._random_samples,
        )


class FractionalMaxPool3d(FractionalMaxPool2d):
    """FractionalMaxPool2d over volumes (see F.fractional_max_pool3d)."""

    dims = 3

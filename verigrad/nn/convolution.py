"""Convolution layers, as PyTorch's: Conv1d/2d/3d (groups, dilation, padding "same"/"valid", padding_mode),
ConvTranspose1d/2d/3d, and Unfold/Fold (im2col and back)."""

from __future__ import annotations

import math
from typing import Any

from ..shapes import DimLike
from ..tensor import Tensor
from . import functional as F
from .init import _uniform_param, fan_in_bound
from .module import Module, check_dtypes, factory_dtype

PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


def _sizes(v: Any, n: int) -> tuple:
    return (v,) * n if not isinstance(v, tuple | list) else tuple(v)


def _window(v: Any, n: int) -> Any:
    """A window setting as PyTorch keeps it: a tuple of n sizes, or the string "same" or "valid"."""
    return v if isinstance(v, str) else _sizes(v, n)


class _ConvNd(Module):
    """PyTorch's _ConvNd: the weight [out, in / groups, *kernel] (transposed: [in, out / groups, *kernel]),
    its bias, and padding_mode (the input padded by F.pad in that mode, then convolved unpadded)."""

    dims = 2
    transposed = False

    def __init__(
        self,
        in_channels: DimLike,
        out_channels: DimLike,
        kernel_size: Any,
        stride: Any,
        padding: Any,
        dilation: Any,
        groups: int,
        bias: bool,
        padding_mode: str,
        device: Any,
        dtype: Any,
        output_padding: Any = 0,
    ):
        super().__init__()
        name = type(self).__name__
        dtype = factory_dtype(name, device, dtype)
        if padding_mode not in PADDING_MODES:
            raise ValueError(
                f"{name}: padding_mode must be one of {', '.join(PADDING_MODES)}, got {padding_mode!r}"
            )
        if self.transposed and padding_mode != "zeros":
            raise ValueError(f'{name}: only "zeros" padding_mode is supported')
        if (
            not isinstance(groups, int)
            or groups < 1
            or (groups > 1 and (in_channels % groups or out_channels % groups))
        ):
            raise ValueError(
                f"{name}: in_channels and out_channels must be divisible by groups, got {groups!r}"
            )
        if isinstance(padding, str) and (padding not in ("same", "valid") or self.transposed):
            raise ValueError(f"{name}: padding {padding!r} is not 'valid' or 'same' (or a transposed one)")
        kernel = _sizes(kernel_size, self.dims)
        n = self.dims
        self.in_channels, self.out_channels, self.kernel_size = in_channels, out_channels, kernel
        self.stride, self.padding, self.dilation = _sizes(stride, n), _window(padding, n), _sizes(dilation, n)
        self.groups, self.output_padding, self.padding_mode = groups, _sizes(output_padding, n), padding_mode
        receptive = math.prod(kernel)
        if self.transposed:
            shape = (in_channels, out_channels // groups, *kernel)
            bound = fan_in_bound(out_channels // groups * receptive)  # PyTorch's fan-in: the weight's dim 1
        else:
            shape = (out_channels, in_channels // groups, *kernel)
            bound = fan_in_bound(in_channels // groups * receptive)
        self.weight = _uniform_param(shape, bound, dtype)
        self.bias = _uniform_param((out_channels,), bound, dtype) if bias else None

    def _padded(self, x: Tensor) -> tuple[Tensor, Any]:
        """x and the padding left for the convolution: padding_mode other than zeros pads x first."""
        if self.padding_mode == "zeros":
            return x, self.padding
        if self.padding == "valid":
            return x, 0
        if self.padding == "same":
            totals = [d * (k - 1) for d, k in zip(_sizes(self.dilation, self.dims), self.kernel_size)]
            sides = [(t // 2, t - t // 2) for t in totals]
        else:
            sides = [(p, p) for p in _sizes(self.padding, self.dims)]
        return F.pad(x, [w for side in reversed(sides) for w in side], mode=self.padding_mode), 0

    def _check_input(self, x: Tensor) -> Tensor:
        """The weight, read once (a parametrized weight is computed at each read: spectral_norm's power
        iteration steps at each), after checking x's dtype against it."""
        weight = self.weight
        check_dtypes(type(self).__name__, weight, ("input", x))
        return weight

    def extra_repr(self) -> str:
        """PyTorch's: the settings that differ from their defaults, after the channels, kernel and stride."""
        n = self.dims
        text = (
            f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        )
        if self.padding != (0,) * n:
            text += f", padding={self.padding}"
        if self.dilation != (1,) * n:
            text += f", dilation={self.dilation}"
        if self.output_padding != (0,) * n:
            text += f", output_padding={self.output_padding}"
        if self.groups != 1:
            text += f", groups={self.groups}"
        if self.bias is None:
            text += ", bias=False"
        return text + ("" if self.padding_mode == "zeros" else f", padding_mode={self.padding_mode}")


class Conv1d(_ConvNd):
    """1-D convolution of [N, C, L]: weight [out, in / groups, k] (PyTorch's arguments and initialisation)."""

    dims = 1

    def __init__(
        self,
        in_channels: DimLike,
        out_channels: DimLike,
        kernel_size: Any,
        stride: Any = 1,
        padding: Any = 0,
        dilation: Any = 1,
        groups: int = 1,
        bias: bool = True,
        padding_mode: str = "zeros",
        device: Any = None,
        dtype: Any = None,
    ):
        super().__init__(
            in_channels,
            out_channels,
            kernel_size,
            stride,
            padding,
            dilation,
            groups,
            bias,
            padding_mode,
            device,
            dtype,
        )

    def forward(self, x: Tensor) -> Tensor:
        weight = self._check_input(x)
        x, padding = self._padded(x)
        return self.conv(x, weight, self.bias, self.stride, padding, self.dilation, self.groups)

    conv = staticmethod(F.conv1d)


class Conv2d(_ConvNd):
    """2-D convolution. NCHW: weight [out, in / groups, kh, kw]; NHWC (`layout`): weight [kh, kw, in, out]."""

    def __init__(
        self,
        in_channels: DimLike,
        out_channels: DimLike,
        kernel_size: Any,
        stride: Any = 1,
        padding: Any = 0,
        dilation: Any = 1,
        groups: int = 1,
        bias: bool = True,
        padding_mode: str = "zeros",
        device: Any = None,
        dtype: Any = None,
        *,
        layout: str = "NCHW",
    ):
        super().__init__(
            in_channels,
            out_channels,
            kernel_size,
            stride,
            padding,
            dilation,
            groups,
            bias,
            padding_mode,
            device,
            dtype,
        )
        self.layout = layout
        if layout == "NHWC":
            if padding_mode != "zeros":
                raise ValueError("Conv2d: layout 'NHWC' takes padding_mode 'zeros'")
            self.weight = self.weight.detach().permute(2, 3, 1, 0).contiguous().requires_grad_(True)

    def forward(self, x: Tensor) -> Tensor:
        weight = self._check_input(x)
        x, padding = self._padded(x)
        window = (self.stride, padding, self.dilation, self.groups)
        return F.conv2d(x, weight, self.bias, *window, layout=self.layout)

    def extra_repr(self) -> str:
        return super().extra_repr() + ("" if self.layout == "NCHW" else f", layout={self.layout}")


class Conv3d(Conv1d):
    """3-D convolution of [N, C, D, H, W]: weight [out, in / groups, kd, kh, kw]."""

    dims = 3
    conv = staticmethod(F.conv3d)


class ConvTranspose1d(_ConvNd):
    """Transposed 1-D convolution of [N, C, L]: weight [in, out / groups, k] (see F.conv_transpose1d)."""

    dims, transposed = 1, True

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: Any,
        stride: Any = 1,
        padding: Any = 0,
        output_padding: Any = 0,
        groups: int = 1,
        bias: bool = True,
        dilation: Any = 1,
        padding_mode: str = "zeros",
        device: Any = None,
        dtype: Any = None,
    ):
        super().__init__(
            in_channels,
            out_channels,
            kernel_size,
            stride,
            padding,
            dilation,
            groups,
            bias,
            padding_mode,
            device,
            dtype,
            output_padding,
        )

    def forward(self, x: Tensor, output_size: Any = None) -> Tensor:
        """The transposed convolution of x; `output_size` (the spatial sizes, or with the batch and
        channels too) picks the output padding that reaches it, as PyTorch's."""
        weight = self._check_input(x)
        output_padding = self.output_padding if output_size is None else self._padding_to(x, output_size)
        return self.conv(
            x,
            weight,
            self.bias,
            self.stride,
            self.padding,
            output_padding,
            self.groups,
            self.dilation,
        )

    def _padding_to(self, x: Tensor, output_size: Any) -> tuple[int, ...]:
        n = self.dims
        leading = x.ndim - n
        sizes = [int(s) for s in output_size]
        if len(sizes) == leading + n:
            sizes = sizes[leading:]
        if len(sizes) != n:
            raise ValueError(
                f"ConvTranspose{n}D: for {x.ndim}D input, output_size must have {n} or {leading + n} "
                f"elements (got {len(sizes)})"
            )
        least = [
            (x.shape[leading + d] - 1) * self.stride[d]
            - 2 * self.padding[d]
            + self.dilation[d] * (self.kernel_size[d] - 1)
            + 1
            for d in range(n)
        ]
        most = [low + self.stride[d] - 1 for d, low in enumerate(least)]
        if any(not low <= size <= high for size, low, high in zip(sizes, least, most)):
            raise ValueError(
                f"requested an output size of {sizes}, but valid sizes range from {least} to {most} "
                f"(for an input of {list(x.shape[leading:])})"
            )
        return tuple(size - low for size, low in zip(sizes, least))

    conv = staticmethod(F.conv_transpose1d)


class ConvTranspose2d(ConvTranspose1d):
    """Transposed 2-D convolution of NCHW images: weight [in, out / groups, kh, kw] (see
    F.conv_transpose2d)."""

    dims = 2
    conv = staticmethod(F.conv_transpose2d)


class ConvTranspose3d(ConvTranspose1d):
    """Transposed 3-D convolution of [N, C, D, H, W]: weight [in, out / groups, kd, kh, kw]."""

    dims = 3
    conv = staticmethod(F.conv_transpose3d)


class Unfold(Module):
    """Every sliding block as a column (see F.unfold)."""

    def __init__(self, kernel_size: Any, dilation: Any = 1, padding: Any = 0, stride: Any = 1):
        super().__init__()
        self.kernel_size, self.dilation, self.padding, self.stride = kernel_size, dilation, padding, stride

    def _window(self) -> dict[str, Any]:
        return {
            "kernel_size": self.kernel_size,
            "dilation": self.dilation,
            "padding": self.padding,
            "stride": self.stride,
        }

    def forward(self, x: Tensor) -> Tensor:
        return F.unfold(x, **self._window())

    def extra_repr(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self._window().items())


class Fold(Unfold):
    """Columns summed back into an image of `output_size` (see F.fold)."""

    def __init__(
        self, output_size: Any, kernel_size: Any, dilation: Any = 1, padding: Any = 0, stride: Any = 1
    ):
        super().__init__(kernel_size, dilation, padding, stride)
        self.output_size = output_size

    def forward(self, x: Tensor) -> Tensor:
        return F.fold(x, self.output_size, **self._window())

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}, " + super().extra_repr()

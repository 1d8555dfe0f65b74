"""Layers: Linear, Conv2d, pooling, Flatten, Dropout, normalisation, Embedding, activations, losses."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..autograd import no_grad
from ..dtypes import f32, f64
from ..errors import ShapeError
from ..ops import arange as ops_arange
from ..ops import full, ones, tensor, zeros
from ..shapes import DimLike, shape_text
from ..tensor import Tensor, describe
from . import functional as F
from .functional.losses import REDUCTIONS
from .init import fan_in_bound, normal, uniform
from .module import Module


def _pair(v: Any) -> tuple[Any, Any]:
    return (v, v) if not isinstance(v, tuple | list) else tuple(v)  # type: ignore[return-value]


class Linear(Module):
    """y = x @ weight.T + bias, weight [out_features, in_features] (Kaiming-uniform, as PyTorch)."""

    def __init__(self, in_features: DimLike, out_features: DimLike, bias: bool = True, dtype: Any = f32):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        bound = fan_in_bound(in_features)
        self.weight = uniform((out_features, in_features), bound, dtype)
        self.bias = uniform((out_features,), bound, dtype) if bias else None

    def forward(self, x: Tensor) -> Tensor:
        y = x @ self.weight.T
        return y + self.bias if self.bias is not None else y

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"
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


class Flatten(Module):
    def __init__(self, start_dim: int = 1, end_dim: int = -1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, x: Tensor) -> Tensor:
        return x.flatten(self.start_dim, self.end_dim)


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


class Upsample(Module):
    """Upsampling: nearest by whole factors, or bilinear to any size (see F.interpolate)."""

    def __init__(
        self,
        size: Any = None,
        scale_factor: Any = None,
        mode: str = "nearest",
        align_corners: bool | None = None,
        layout: str = "NCHW",
    ):
        super().__init__()
        self.size, self.scale_factor, self.mode, self.layout = size, scale_factor, mode, layout
        self.align_corners = align_corners

    def forward(self, x: Tensor) -> Tensor:
        return F.interpolate(x, self.size, self.scale_factor, self.mode, self.align_corners, self.layout)

    def extra_repr(self) -> str:
        return f"scale_factor={self.scale_factor}, mode={self.mode!r}"


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


class PixelShuffle(Module):
    """[N, C r^2, H, W] -> [N, C, H r, W r] (see F.pixel_shuffle)."""

    def __init__(self, upscale_factor: int):
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, x: Tensor) -> Tensor:
        return F.pixel_shuffle(x, self.upscale_factor)


class PixelUnshuffle(Module):
    """[N, C, H r, W r] -> [N, C r^2, H, W] (see F.pixel_unshuffle)."""

    def __init__(self, downscale_factor: int):
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, x: Tensor) -> Tensor:
        return F.pixel_unshuffle(x, self.downscale_factor)


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


class Dropout2d(Dropout):
    """Zeroes whole channels of [N, C, H, W] with probability p in training (see F.dropout2d)."""

    def forward(self, x: Tensor) -> Tensor:
        return F.dropout2d(x, self.p, training=self.training)


class _BatchNorm(Module):
    """Batch normalisation per channel over the other axes, with running statistics for eval()."""

    ranks: tuple[int, ...] = ()

    def __init__(self, num_features: DimLike, eps: float = 1e-5, momentum: float = 0.1, dtype: Any = f32):
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.weight = ones(num_features, dtype=dtype, requires_grad=True)
        self.bias = zeros(num_features, dtype=dtype, requires_grad=True)
        self.register_buffer("running_mean", zeros(num_features, dtype=dtype))
        self.register_buffer("running_var", ones(num_features, dtype=dtype))

    def channel_axis(self, x: Tensor) -> int:
        return 1

    def forward(self, x: Tensor) -> Tensor:
        if x.ndim not in self.ranks:
            wanted = " or ".join(f"{r}-D" for r in self.ranks)
            raise ShapeError(f"{type(self).__name__} takes {wanted} input, got {describe(x)}")
        channel = self.channel_axis(x)
        axes = tuple(i for i in range(x.ndim) if i != channel)
        shape = tuple(self.num_features if i == channel else 1 for i in range(x.ndim))
        if self.training:
            mean = x.mean(axes, keepdim=True)
            centered = x - mean
            var = (centered * centered).mean(axes, keepdim=True)
            with no_grad():
                m = self.momentum
                self.running_mean.assign(self.running_mean * (1 - m) + mean.reshape(-1).detach() * m)
                unbiased = var.reshape(-1).detach() * _bessel(x.numel() // x.shape[channel], var.dtype)
                self.running_var.assign(self.running_var * (1 - m) + unbiased * m)
        else:
            centered = x - self.running_mean.reshape(shape)
            var = self.running_var.reshape(shape)
        y = centered * (var + self.eps).rsqrt()
        return y * self.weight.reshape(shape) + self.bias.reshape(shape)

    def extra_repr(self) -> str:
        return f"{self.num_features}, eps={self.eps}, momentum={self.momentum}"


class BatchNorm1d(_BatchNorm):
    """Batch normalisation of [N, C] or [N, C, L] per channel C."""

    ranks = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch normalisation over (N, H, W) per channel, with running statistics for eval()."""

    ranks = (4,)

    def __init__(
        self,
        num_features: DimLike,
        eps: float = 1e-5,
        momentum: float = 0.1,
        layout: str = "NCHW",
        dtype: Any = f32,
    ):
        super().__init__(num_features, eps, momentum, dtype)
        self.layout = layout

    def channel_axis(self, x: Tensor) -> int:
        return 1 if self.layout == "NCHW" else 3


def _bessel(count: DimLike, dtype: Any) -> Tensor | float:
    """n / (n - 1) for n values, as a tensor: in a compiled step n may be a symbol, evaluated when the
    plan is bound (as a Python number it was left at 1 there). Formed in f64 and rounded once, as the
    Python float it replaces was; 1 for a single value."""
    if isinstance(count, int) and count <= 1:
        return 1.0
    n = full((), count, dtype=f64)
    return (n / (n - 1)).cast(dtype)


class LayerNorm(Module):
    """Normalise over the last dimension (or the last len(normalized_shape)), then scale and shift
    (elementwise_affine; the shift only with bias, as in PyTorch)."""

    def __init__(
        self,
        normalized_shape: DimLike,
        eps: float = 1e-5,
        elementwise_affine: bool = True,
        bias: bool = True,
        dtype: Any = f32,
    ):
        super().__init__()
        self.normalized_shape, self.eps = normalized_shape, eps
        self.weight = ones(normalized_shape, dtype=dtype, requires_grad=True) if elementwise_affine else None
        shifted = elementwise_affine and bias
        self.bias = zeros(normalized_shape, dtype=dtype, requires_grad=True) if shifted else None

    def forward(self, x: Tensor) -> Tensor:
        shape = self.normalized_shape
        return F.layer_norm(x, self.weight, self.bias, self.eps, normalized_shape=shape)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}"


class Bilinear(Module):
    """y = x1^T A x2 + b for each output: weight [out, in1, in2], bias [out], both uniform in
    +-1/sqrt(in1) (PyTorch's)."""

    def __init__(
        self, in1_features: int, in2_features: int, out_features: int, bias: bool = True, dtype: Any = f32
    ):
        super().__init__()
        self.in1_features, self.in2_features, self.out_features = in1_features, in2_features, out_features
        bound = 1 / math.sqrt(in1_features)
        self.weight = uniform((out_features, in1_features, in2_features), bound, dtype)
        self.bias = uniform((out_features,), bound, dtype) if bias else None

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        return F.bilinear(x1, x2, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (
            f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
            f"out_features={self.out_features}, bias={self.bias is not None}"
        )


class Softmax2d(Module):
    """Softmax over the channels of [N, C, H, W] (or [C, H, W]) at each position."""

    def forward(self, x: Tensor) -> Tensor:
        if x.ndim not in (3, 4):
            raise ShapeError(f"Softmax2d takes 3-D or 4-D input, got {describe(x)}")
        return F.softmax(x, dim=-3)


class GroupNorm(Module):
    """Normalise each group of num_channels / num_groups channels of [N, C, ...] (see F.group_norm),
    then scale and shift per channel (affine)."""

    def __init__(
        self, num_groups: int, num_channels: DimLike, eps: float = 1e-5, affine: bool = True, dtype: Any = f32
    ):
        super().__init__()
        if isinstance(num_channels, int) and (num_groups <= 0 or num_channels % num_groups):
            raise ValueError(f"GroupNorm: {num_channels} channels do not split into {num_groups} groups")
        self.num_groups, self.num_channels, self.eps = num_groups, num_channels, eps
        self.weight = ones(num_channels, dtype=dtype, requires_grad=True) if affine else None
        self.bias = zeros(num_channels, dtype=dtype, requires_grad=True) if affine else None

    def forward(self, x: Tensor) -> Tensor:
        return F.group_norm(x, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}"


class RMSNorm(Module):
    """x * rsqrt(mean(x^2) + eps) * weight over the last dimension (Llama's norm)."""

    def __init__(self, dim: DimLike, eps: float = 1e-6, dtype: Any = f32):
        super().__init__()
        self.dim, self.eps = dim, eps
        self.weight = ones(dim, dtype=dtype, requires_grad=True)

    def forward(self, x: Tensor) -> Tensor:
        return F.rms_norm(x, self.weight, self.eps)

    def extra_repr(self) -> str:
        return f"{self.dim}, eps={self.eps}"


class Embedding(Module):
    """Rows of a [num_embeddings, embedding_dim] table (initialised N(0, 1), as PyTorch)."""

    def __init__(
        self,
        num_embeddings: DimLike,
        embedding_dim: DimLike,
        padding_idx: int | None = None,
        dtype: Any = f32,
    ):
        super().__init__()
        self.num_embeddings, self.embedding_dim, self.padding_idx = num_embeddings, embedding_dim, padding_idx
        self.weight = normal((num_embeddings, embedding_dim), 1.0, dtype)
        if padding_idx is not None:  # PyTorch's: the padding row starts at zeros and is never trained
            with no_grad():
                self.weight[padding_idx] = 0.0

    @classmethod
    def from_pretrained(
        cls, embeddings: Any, freeze: bool = True, padding_idx: int | None = None
    ) -> Embedding:
        """An Embedding whose table is `embeddings` [num_embeddings, embedding_dim] (a copy), trained
        unless `freeze`; the padding row is kept as given."""
        table = embeddings if isinstance(embeddings, Tensor) else tensor(np.asarray(embeddings))
        if table.ndim != 2:
            raise ShapeError(f"Embedding.from_pretrained needs a 2-D table, got {shape_text(table.shape)}")
        module = cls(table.shape[0], table.shape[1], dtype=table.dtype)
        module.weight = table.detach().clone().requires_grad_(not freeze)
        module.padding_idx = padding_idx
        return module

    def forward(self, idx: Tensor) -> Tensor:
        return F.embedding(self.weight, idx, self.padding_idx)

    def extra_repr(self) -> str:
        padding = "" if self.padding_idx is None else f", padding_idx={self.padding_idx}"
        return f"{self.num_embeddings}, {self.embedding_dim}{padding}"


class Sequential(Module):
    """Layers applied in order; indexable and iterable."""

    def __init__(self, *layers: Module):
        super().__init__()
        for i, layer in enumerate(layers):
            setattr(self, str(i), layer)

    def __getitem__(self, i: int) -> Module:
        return list(self._modules.values())[i]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def append(self, module: Module) -> Sequential:
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules: Any) -> Sequential:
        for module in modules:
            self.append(module)
        return self

    def forward(self, x: Any) -> Any:
        for layer in self._modules.values():
            x = layer(x)
        return x


class ModuleDict(Module):
    """Modules by name, registered (no forward of its own), as PyTorch's ModuleDict."""

    def __init__(self, modules: Any = None):
        super().__init__()
        self.update(modules or {})

    def __getitem__(self, name: str) -> Module:
        return self._modules[name]

    def __setitem__(self, name: str, module: Module) -> None:
        self.add_module(name, module)

    def __contains__(self, name: object) -> bool:
        return name in self._modules

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def keys(self):
        return self._modules.keys()

    def values(self):
        return self._modules.values()

    def items(self):
        return self._modules.items()

    def update(self, modules: Any) -> None:
        for name, module in dict(modules).items():
            self.add_module(name, module)

    def forward(self, x: Any) -> Any:
        raise NotImplementedError("ModuleDict has no forward(); index it by name")


class ParameterList(Module):
    """Tensors trained as parameters, by position (PyTorch's ParameterList)."""

    def __init__(self, values: Any = ()):
        super().__init__()
        for value in values:
            self.append(value)

    def append(self, value: Tensor) -> ParameterList:
        setattr(self, str(len(self)), Parameter(value) if not value.requires_grad else value)
        return self

    def __getitem__(self, i: int) -> Tensor:
        return list(self._parameters.values())[i]

    def __len__(self) -> int:
        return len(self._parameters)

    def __iter__(self):
        return iter(self._parameters.values())


class Parameter:
    """PyTorch's nn.Parameter: the tensor itself (its memory shared) marked as requiring grad, which is
    what makes a module attribute a parameter here."""

    def __new__(cls, data: Tensor | None = None, requires_grad: bool = True) -> Tensor:  # type: ignore[misc]
        if data is None:
            data = zeros(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Parameter takes a tensor, got {type(data).__name__}")
        return data.detach().requires_grad_(requires_grad)


class ModuleList(Sequential):
    """A list of modules whose parameters are registered (no forward of its own); made from an
    iterable of modules, as in PyTorch, or from the modules themselves."""

    def __init__(self, *modules: Any):
        if len(modules) == 1 and not isinstance(modules[0], Module):
            modules = tuple(modules[0])
        super().__init__(*modules)

    def forward(self, x: Any) -> Any:
        raise NotImplementedError("ModuleList has no forward(); iterate over it")


def _activation(name: str, fn: Any) -> type[Module]:
    return type(name, (Module,), {"forward": lambda self, x: fn(x), "__doc__": f"{name} as a layer."})


Tanh = _activation("Tanh", F.tanh)
Sigmoid = _activation("Sigmoid", F.sigmoid)


class _Configured(Module):
    """An activation with settings: F.<fn>(x, **settings) (`inplace` among them: see F.relu)."""

    def __init__(self, **settings: Any):
        super().__init__()
        self.settings = settings

    def forward(self, x: Tensor) -> Tensor:
        return self.fn(x, **self.settings)

    def extra_repr(self) -> str:  # as PyTorch's: inplace shown only when it is set
        return ", ".join(f"{k}={v!r}" for k, v in self.settings.items() if k != "inplace" or v)


def _inplace_activation(name: str, fn: Any) -> type[Module]:
    def __init__(self: _Configured, inplace: bool = False) -> None:
        _Configured.__init__(self, inplace=inplace)

    doc = f"{name} as a layer (inplace=True: see F.relu)."
    return type(name, (_Configured,), {"fn": staticmethod(fn), "__init__": __init__, "__doc__": doc})


ReLU = _inplace_activation("ReLU", F.relu)
SiLU = _inplace_activation("SiLU", F.silu)
ReLU6 = _inplace_activation("ReLU6", F.relu6)
Mish = _inplace_activation("Mish", F.mish)
Hardsigmoid = _inplace_activation("Hardsigmoid", F.hardsigmoid)
Hardswish = _inplace_activation("Hardswish", F.hardswish)
SELU = _inplace_activation("SELU", F.selu)
Softsign = _activation("Softsign", F.softsign)
LogSigmoid = _activation("LogSigmoid", F.logsigmoid)


class CELU(_Configured):
    fn = staticmethod(F.celu)

    def __init__(self, alpha: float = 1.0, inplace: bool = False):
        super().__init__(alpha=alpha, inplace=inplace)


class GLU(_Configured):
    fn = staticmethod(F.glu)

    def __init__(self, dim: int = -1):
        super().__init__(dim=dim)


class PReLU(Module):
    """x where x > 0, else weight * x: one learned slope, or one per channel (num_parameters)."""

    def __init__(self, num_parameters: int = 1, init: float = 0.25, dtype: Any = f32):
        super().__init__()
        self.num_parameters = num_parameters
        self.weight = full((num_parameters,), init, dtype=dtype).requires_grad_(True)

    def forward(self, x: Tensor) -> Tensor:
        return F.prelu(x, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"


class LeakyReLU(_Configured):
    fn = staticmethod(F.leaky_relu)

    def __init__(self, negative_slope: float = 0.01, inplace: bool = False):
        super().__init__(negative_slope=negative_slope, inplace=inplace)


class ELU(_Configured):
    fn = staticmethod(F.elu)

    def __init__(self, alpha: float = 1.0, inplace: bool = False):
        super().__init__(alpha=alpha, inplace=inplace)


class Softplus(_Configured):
    fn = staticmethod(F.softplus)

    def __init__(self, beta: float = 1.0, threshold: float = 20.0):
        super().__init__(beta=beta, threshold=threshold)


class Hardtanh(_Configured):
    fn = staticmethod(F.hardtanh)

    def __init__(self, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False):
        super().__init__(min_val=min_val, max_val=max_val, inplace=inplace)


class GELU(Module):
    def __init__(self, approximate: str = "none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, x: Tensor) -> Tensor:
        return F.gelu(x, approximate=self.approximate)


class CrossEntropyLoss(Module):
    """Cross-entropy of logits [N, C] against integer targets [N] (see F.cross_entropy)."""

    def __init__(
        self,
        reduction: str = "mean",
        label_smoothing: float = 0.0,
        *,
        weight: Tensor | None = None,
        ignore_index: int | None = None,
    ):
        super().__init__()
        self.reduction, self.label_smoothing = reduction, label_smoothing
        self.class_weight, self.ignore_index = weight, ignore_index

    def forward(self, logits: Tensor, target: Tensor) -> Tensor:
        return F.cross_entropy(
            logits,
            target,
            reduction=self.reduction,
            label_smoothing=self.label_smoothing,
            weight=self.class_weight,
            ignore_index=self.ignore_index,
        )


class _Loss(Module):
    """A loss module: F.<name>(input, target, reduction=..., **settings)."""

    def __init__(self, reduction: str = "mean", **settings: Any):
        super().__init__()
        if reduction not in REDUCTIONS:
            raise ValueError(f"reduction must be one of {', '.join(REDUCTIONS)}, got {reduction!r}")
        self.reduction, self.settings = reduction, settings

    def forward(self, *inputs: Tensor) -> Tensor:
        return self.loss(*inputs, reduction=self.reduction, **self.settings)

    def extra_repr(self) -> str:
        return ", ".join([f"reduction={self.reduction!r}"] + [f"{k}={v!r}" for k, v in self.settings.items()])


class MSELoss(_Loss):
    """Squared differences."""

    loss = staticmethod(F.mse_loss)


class L1Loss(_Loss):
    """Absolute differences."""

    loss = staticmethod(F.l1_loss)


class SmoothL1Loss(_Loss):
    def __init__(self, reduction: str = "mean", beta: float = 1.0):
        super().__init__(reduction, beta=beta)

    loss = staticmethod(F.smooth_l1_loss)


class HuberLoss(_Loss):
    def __init__(self, reduction: str = "mean", delta: float = 1.0):
        super().__init__(reduction, delta=delta)

    loss = staticmethod(F.huber_loss)


def _loss_module(name: str, fn: Any, doc: str, **defaults: Any) -> type[_Loss]:
    """A loss module of F's `fn`, whose settings (and their defaults) are `defaults`, as PyTorch's."""

    def __init__(self: _Loss, *args: Any, reduction: str = "mean", **settings: Any) -> None:
        if len(args) > len(defaults):
            raise TypeError(f"{name} takes at most {len(defaults)} positional settings")
        unknown = set(settings) - set(defaults)
        if unknown:
            raise TypeError(f"{name} has no setting {sorted(unknown)[0]!r}; it has {', '.join(defaults)}")
        values = dict(defaults) | dict(zip(defaults, args)) | settings
        _Loss.__init__(self, reduction, **values)

    return type(name, (_Loss,), {"loss": staticmethod(fn), "__init__": __init__, "__doc__": doc})


MarginRankingLoss = _loss_module(
    "MarginRankingLoss", F.margin_ranking_loss, "See F.margin_ranking_loss.", margin=0.0
)
HingeEmbeddingLoss = _loss_module(
    "HingeEmbeddingLoss", F.hinge_embedding_loss, "See F.hinge_embedding_loss.", margin=1.0
)
SoftMarginLoss = _loss_module("SoftMarginLoss", F.soft_margin_loss, "See F.soft_margin_loss.")
CosineEmbeddingLoss = _loss_module(
    "CosineEmbeddingLoss", F.cosine_embedding_loss, "See F.cosine_embedding_loss.", margin=0.0
)
MultiMarginLoss = _loss_module(
    "MultiMarginLoss", F.multi_margin_loss, "See F.multi_margin_loss.", p=1, margin=1.0, weight=None
)
TripletMarginLoss = _loss_module(
    "TripletMarginLoss",
    F.triplet_margin_loss,
    "See F.triplet_margin_loss.",
    margin=1.0,
    p=2.0,
    eps=1e-6,
    swap=False,
)
PoissonNLLLoss = _loss_module(
    "PoissonNLLLoss", F.poisson_nll_loss, "See F.poisson_nll_loss.", log_input=True, full=False, eps=1e-8
)
GaussianNLLLoss = _loss_module(
    "GaussianNLLLoss", F.gaussian_nll_loss, "See F.gaussian_nll_loss.", full=False, eps=1e-6
)


class CTCLoss(Module):
    """The CTC loss (see F.ctc_loss): forward(log_probs, targets, input_lengths, target_lengths)."""

    def __init__(self, blank: int = 0, reduction: str = "mean", zero_infinity: bool = False):
        super().__init__()
        if reduction not in REDUCTIONS:
            raise ValueError(f"reduction must be one of {', '.join(REDUCTIONS)}, got {reduction!r}")
        self.blank, self.reduction, self.zero_infinity = blank, reduction, zero_infinity

    def forward(self, log_probs: Tensor, targets: Any, input_lengths: Any, target_lengths: Any) -> Tensor:
        settings = {"blank": self.blank, "reduction": self.reduction, "zero_infinity": self.zero_infinity}
        return F.ctc_loss(log_probs, targets, input_lengths, target_lengths, **settings)


class NLLLoss(_Loss):
    """Negative log-likelihood of log-probabilities [N, C] at integer classes [N]."""

    def __init__(self, reduction: str = "mean", ignore_index: int = -100):
        super().__init__(reduction, ignore_index=ignore_index)

    loss = staticmethod(F.nll_loss)


class BCELoss(_Loss):
    """Binary cross-entropy of probabilities."""

    loss = staticmethod(F.binary_cross_entropy)


class BCEWithLogitsLoss(_Loss):
    """Binary cross-entropy of sigmoid(logits), from the logits."""

    loss = staticmethod(F.binary_cross_entropy_with_logits)


class Identity(Module):
    def forward(self, x: Tensor) -> Tensor:
        return x


class Softmax(Module):
    def __init__(self, dim: int = -1):
        super().__init__()
        self.dim = dim

    def forward(self, x: Tensor) -> Tensor:
        return F.softmax(x, self.dim)


class LogSoftmax(Softmax):
    def forward(self, x: Tensor) -> Tensor:
        return F.log_softmax(x, self.dim)


class MultiheadAttention(Module):
    """PyTorch's multi-head attention: in_proj_weight [3E, E] (and in_proj_bias) project query, key and
    value; heads of E / num_heads; out_proj a Linear(E, E). forward(query, key, value,
    key_padding_mask=None, need_weights=True, attn_mask=None, average_attn_weights=True, is_causal=False)
    gives (output, weights): masks as PyTorch's (a bool one is True where a key may NOT be attended to, a
    float one is added); sequences first ([L, N, E]) unless batch_first; weights averaged over heads
    unless average_attn_weights=False, None without need_weights. In training, `dropout` zeroes
    attention weights (those returned too, as PyTorch's)."""

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        batch_first: bool = False,
        dtype: Any = f32,
    ):
        super().__init__()
        if not 0.0 <= dropout <= 1.0:
            raise ValueError(f"MultiheadAttention: dropout must be in [0, 1], got {dropout}")
        if embed_dim % num_heads:
            raise ValueError(f"embed_dim {embed_dim} is not a multiple of num_heads {num_heads}")
        self.embed_dim, self.num_heads, self.batch_first = embed_dim, num_heads, batch_first
        self.dropout = dropout
        bound = math.sqrt(6.0 / (embed_dim + 3 * embed_dim))  # PyTorch's xavier_uniform_ of [3E, E]
        self.in_proj_weight = uniform((3 * embed_dim, embed_dim), bound, dtype)
        self.in_proj_bias = zeros(3 * embed_dim, dtype=dtype, requires_grad=True) if bias else None
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias, dtype=dtype)
        if bias:
            self.out_proj.bias = zeros(embed_dim, dtype=dtype, requires_grad=True)

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        key_padding_mask: Tensor | None = None,
        need_weights: bool = True,
        attn_mask: Tensor | None = None,
        average_attn_weights: bool = True,
        is_causal: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        unbatched = query.ndim == 2
        if unbatched:
            query, key, value = (t.unsqueeze(1) for t in (query, key, value))
        elif self.batch_first:
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        length, batch, size = query.shape[0], query.shape[1], key.shape[0]
        heads, e = self.num_heads, self.embed_dim
        w, b = self.in_proj_weight, self.in_proj_bias
        projected = []
        for i, t in enumerate((query, key, value)):
            p = t @ w[i * e : (i + 1) * e].mT
            if b is not None:
                p = p + b[i * e : (i + 1) * e]
            rows = p.shape[0]
            projected.append(p.reshape(rows, batch * heads, e // heads).transpose(0, 1))  # [N*H, L, D]
        q, k, v = projected
        scores = (q @ k.mT) * (1.0 / math.sqrt(e // heads))  # [N*H, L, S]
        if is_causal and attn_mask is None:
            attn_mask = ops_arange(0, length).unsqueeze(-1) < ops_arange(0, size)  # True: not attended to
        if attn_mask is not None:
            if attn_mask.ndim == 3:
                attn_mask = attn_mask.reshape(batch * heads, length, size)
            scores = _masked(scores, attn_mask)
        if key_padding_mask is not None:
            padding = key_padding_mask.reshape(batch, 1, 1, size)
            scores = _masked(scores.reshape(batch, heads, length, size), padding).reshape(
                batch * heads, length, size
            )
        weights = F.softmax(scores, -1)
        if self.dropout and self.training:
            weights = F.dropout(weights, self.dropout, training=True)
        out = (weights @ v).transpose(0, 1).reshape(length, batch, e)
        out = self.out_proj(out)
        if unbatched:
            out = out.squeeze(1)
        elif self.batch_first:
            out = out.transpose(0, 1)
        if not need_weights:
            return out, None
        weights = weights.reshape(batch, heads, length, size)
        if average_attn_weights:
            weights = weights.mean(1)
        return out, weights.squeeze(0) if unbatched else weights

    def extra_repr(self) -> str:
        text = f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, batch_first={self.batch_first}"
        return text + (f", dropout={self.dropout}" if self.dropout else "")


def _masked(scores: Tensor, mask: Tensor) -> Tensor:
    """PyTorch's attention masks: a bool one is True where a key is NOT attended to; a float one adds."""
    if mask.dtype.name == "bool":
        return scores.masked_fill(mask, -math.inf)
    return scores + mask

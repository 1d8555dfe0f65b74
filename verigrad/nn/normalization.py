"""Normalisation layers, as PyTorch's: BatchNorm1d/2d and InstanceNorm1d/2d (with running statistics
for eval()), LayerNorm, GroupNorm and RMSNorm."""

from __future__ import annotations

from typing import Any

from ..autograd import no_grad
from ..dtypes import f32, f64
from ..errors import ShapeError
from ..ops import full, ones, zeros
from ..shapes import DimLike
from ..tensor import Tensor, describe
from . import functional as F
from .module import Module


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


class _InstanceNorm(Module):
    rank = 0  # the input's rank with its batch axis

    def __init__(
        self,
        num_features: DimLike,
        eps: float = 1e-5,
        momentum: float = 0.1,
        affine: bool = False,
        track_running_stats: bool = False,
        dtype: Any = f32,
    ):
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        self.weight = ones(num_features, dtype=dtype, requires_grad=True) if affine else None
        self.bias = zeros(num_features, dtype=dtype, requires_grad=True) if affine else None
        if track_running_stats:
            self.register_buffer("running_mean", zeros(num_features, dtype=dtype))
            self.register_buffer("running_var", ones(num_features, dtype=dtype))

    def forward(self, x: Tensor) -> Tensor:
        if x.ndim not in (self.rank, self.rank - 1):
            raise ShapeError(
                f"{type(self).__name__} takes {self.rank - 1}-D or {self.rank}-D input, got {describe(x)}"
            )
        unbatched = x.ndim == self.rank - 1
        if unbatched:
            x = x.unsqueeze(0)
        stats = (self.running_mean, self.running_var) if self.track_running_stats else (None, None)
        use_input_stats = self.training or not self.track_running_stats
        y = F.instance_norm(x, *stats, self.weight, self.bias, use_input_stats, self.momentum, self.eps)
        return y.squeeze(0) if unbatched else y

    def extra_repr(self) -> str:
        return (
            f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
            f"track_running_stats={self.track_running_stats}"
        )


class InstanceNorm1d(_InstanceNorm):
    """Instance normalisation of [N, C, L] (or [C, L])."""

    rank = 3


class InstanceNorm2d(_InstanceNorm):
    """Instance normalisation of [N, C, H, W] (or [C, H, W])."""

    rank = 4

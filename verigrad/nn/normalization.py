"""Normalisation layers, as PyTorch's: BatchNorm1d/2d/3d and InstanceNorm1d/2d/3d (with running
statistics for eval()), LayerNorm, GroupNorm, RMSNorm and LocalResponseNorm."""

from __future__ import annotations

import sys
import warnings
from typing import Any

from ..autograd import no_grad
from ..dtypes import f64, i64
from ..errors import ShapeError
from ..ops import ones, ones_like, zeros, zeros_like
from ..shapes import DimLike
from ..tensor import Tensor, describe
from . import functional as F
from .functional.normalization import channel_norm
from .module import Module, factory_dtype


def _norm_state(
    m: Module,
    num_features: DimLike,
    eps: float,
    momentum: float | None,
    affine: bool,
    track_running_stats: bool,
    bias: bool,
    dtype: Any,
) -> None:
    """PyTorch's _NormBase state, batch and instance norm's alike: the settings, weight (ones) and bias
    (zeros) where affine, and the running statistics where tracked (None buffers where not; instance norm
    never counts num_batches_tracked, as PyTorch's)."""
    m.num_features, m.eps, m.momentum = num_features, eps, momentum
    m.affine, m.track_running_stats = affine, track_running_stats
    m.weight = ones(num_features, dtype=dtype, requires_grad=True) if affine else None
    m.bias = zeros(num_features, dtype=dtype, requires_grad=True) if affine and bias else None
    if track_running_stats:
        m.register_buffer("running_mean", zeros(num_features, dtype=dtype))
        m.register_buffer("running_var", ones(num_features, dtype=dtype))
        m.register_buffer("num_batches_tracked", zeros((), dtype=i64))
    else:
        for name in ("running_mean", "running_var", "num_batches_tracked"):
            m.register_buffer(name, None)


class _BatchNorm(Module):
    """Batch normalisation per channel over the other axes, with running statistics for eval() (as
    PyTorch's: `momentum=None` is the cumulative average, num_batches_tracked counts the steps)."""

    ranks: tuple[int, ...] = ()
    _version = 2  # PyTorch's _NormBase's, saved in state_dict()._metadata

    def __init__(
        self,
        num_features: DimLike,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
        device: Any = None,
        dtype: Any = None,
        *,
        bias: bool = True,
    ):
        super().__init__()
        dtype = factory_dtype(type(self).__name__, device, dtype)
        if momentum is not None and not isinstance(momentum, int | float):
            raise TypeError(f"{type(self).__name__}: momentum must be a number or None, got {momentum!r}")
        _norm_state(self, num_features, eps, momentum, affine, track_running_stats, bias, dtype)

    def channel_axis(self, x: Tensor) -> int:
        return 1

    def reset_running_stats(self) -> None:
        if self.track_running_stats:
            with no_grad():
                self.running_mean.assign(zeros_like(self.running_mean))
                self.running_var.assign(ones_like(self.running_var))
                self.num_batches_tracked.assign(zeros_like(self.num_batches_tracked))

    def forward(self, x: Tensor) -> Tensor:
        if x.ndim not in self.ranks:
            wanted = " or ".join(f"{r}-D" for r in self.ranks)
            raise ShapeError(f"{type(self).__name__} takes {wanted} input, got {describe(x)}")
        factor: float | Tensor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            with no_grad():
                self.num_batches_tracked.assign(self.num_batches_tracked + 1)
            if self.momentum is None:  # the cumulative average: 1 / steps (PyTorch's float of the count)
                factor = (1.0 / self.num_batches_tracked.cast(f64)).cast(self.running_mean.dtype)
        use_batch = self.training or not self.track_running_stats
        channel = self.channel_axis(x)
        stats = (self.running_mean, self.running_var)  # None without track_running_stats
        return channel_norm(x, channel, *stats, self.weight, self.bias, use_batch, factor, self.eps)

    def extra_repr(self) -> str:
        return (
            f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
            f"bias={self.bias is not None}, track_running_stats={self.track_running_stats}"
        )


class BatchNorm1d(_BatchNorm):
    """Batch normalisation of [N, C] or [N, C, L] per channel C."""

    ranks = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch normalisation over (N, H, W) per channel, with running statistics for eval(); `layout`
    "NHWC" (verigrad's) takes the channels last."""

    ranks = (4,)

    def __init__(self, num_features: DimLike, *args: Any, layout: str = "NCHW", **kwargs: Any):
        super().__init__(num_features, *args, **kwargs)
        if layout not in ("NCHW", "NHWC"):
            raise ValueError(f"BatchNorm2d: layout must be 'NCHW' or 'NHWC', got {layout!r}")
        self.layout = layout

    def channel_axis(self, x: Tensor) -> int:
        return 1 if self.layout == "NCHW" else 3


class BatchNorm3d(_BatchNorm):
    """Batch normalisation of [N, C, D, H, W] per channel C."""

    ranks = (5,)


def _sizes(normalized_shape: Any) -> tuple:
    """A normalized_shape as a tuple (PyTorch's modules keep it so: a size n is (n,))."""
    return tuple(normalized_shape) if isinstance(normalized_shape, tuple | list) else (normalized_shape,)


class LayerNorm(Module):
    """Normalise over the last dimension (or the last len(normalized_shape)), then scale and shift
    (elementwise_affine; the shift only with bias, as in PyTorch)."""

    def __init__(
        self,
        normalized_shape: DimLike,
        eps: float = 1e-5,
        elementwise_affine: bool = True,
        bias: bool = True,
        device: Any = None,
        dtype: Any = None,
    ):
        super().__init__()
        dtype = factory_dtype("LayerNorm", device, dtype)
        shape = _sizes(normalized_shape)
        self.normalized_shape, self.eps, self.elementwise_affine = shape, eps, elementwise_affine
        self.weight = ones(shape, dtype=dtype, requires_grad=True) if elementwise_affine else None
        self.bias = zeros(shape, dtype=dtype, requires_grad=True) if elementwise_affine and bias else None

    def forward(self, x: Tensor) -> Tensor:
        shape = self.normalized_shape
        return F.layer_norm(x, self.weight, self.bias, self.eps, normalized_shape=shape)

    def extra_repr(self) -> str:
        return (
            f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}, "
            f"bias={self.bias is not None}"
        )


class GroupNorm(Module):
    """Normalise each group of num_channels / num_groups channels of [N, C, ...] (see F.group_norm),
    then scale and shift per channel (affine)."""

    def __init__(
        self,
        num_groups: int,
        num_channels: DimLike,
        eps: float = 1e-5,
        affine: bool = True,
        device: Any = None,
        dtype: Any = None,
        *,
        bias: bool = True,
    ):
        super().__init__()
        dtype = factory_dtype("GroupNorm", device, dtype)
        if isinstance(num_channels, int) and (num_groups <= 0 or num_channels % num_groups):
            raise ValueError(f"GroupNorm: {num_channels} channels do not split into {num_groups} groups")
        self.num_groups, self.num_channels, self.eps, self.affine = num_groups, num_channels, eps, affine
        self.weight = ones(num_channels, dtype=dtype, requires_grad=True) if affine else None
        self.bias = zeros(num_channels, dtype=dtype, requires_grad=True) if affine and bias else None

    def forward(self, x: Tensor) -> Tensor:
        return F.group_norm(x, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (
            f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
            f"bias={self.bias is not None}"
        )


class RMSNorm(Module):
    """x * rsqrt(mean(x^2) + eps) * weight over the last len(normalized_shape) axes (Llama's norm); eps
    None (the default) is the machine epsilon of the input's dtype, as PyTorch's."""

    def __init__(
        self,
        normalized_shape: DimLike | tuple,
        eps: float | None = None,
        elementwise_affine: bool = True,
        device: Any = None,
        dtype: Any = None,
    ):
        super().__init__()
        dtype = factory_dtype("RMSNorm", device, dtype)
        shape = _sizes(normalized_shape)
        self.normalized_shape, self.eps, self.elementwise_affine = shape, eps, elementwise_affine
        self.weight = ones(shape, dtype=dtype, requires_grad=True) if elementwise_affine else None

    def forward(self, x: Tensor) -> Tensor:
        return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class _InstanceNorm(Module):
    rank = 0  # the input's rank with its batch axis
    _version = 2  # PyTorch's _NormBase's, saved in state_dict()._metadata

    def __init__(
        self,
        num_features: DimLike,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = False,
        track_running_stats: bool = False,
        device: Any = None,
        dtype: Any = None,
        *,
        bias: bool = True,
    ):
        super().__init__()
        dtype = factory_dtype(type(self).__name__, device, dtype)
        _norm_state(self, num_features, eps, momentum, affine, track_running_stats, bias, dtype)

    def forward(self, x: Tensor) -> Tensor:
        if x.ndim not in (self.rank, self.rank - 1):
            raise ShapeError(
                f"{type(self).__name__} takes {self.rank - 1}-D or {self.rank}-D input, got {describe(x)}"
            )
        unbatched = x.ndim == self.rank - 1
        if unbatched:
            x = x.unsqueeze(0)
        if x.shape[1] != self.num_features and not self.affine:  # affine layers fail on their weights
            warnings.warn(
                f"{type(self).__name__}: input's size at dim={int(not unbatched)} does not match "
                "num_features, which is not used because affine=False",
                stacklevel=2,
            )
        stats = (self.running_mean, self.running_var) if self.track_running_stats else (None, None)
        use_input_stats = self.training or not self.track_running_stats
        momentum = 0.0 if self.momentum is None else self.momentum  # PyTorch's: None keeps the stats still
        y = F.instance_norm(x, *stats, self.weight, self.bias, use_input_stats, momentum, self.eps)
        return y.squeeze(0) if unbatched else y

    def extra_repr(self) -> str:
        return (
            f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
            f"bias={self.bias is not None}, track_running_stats={self.track_running_stats}"
        )


class InstanceNorm1d(_InstanceNorm):
    """Instance normalisation of [N, C, L] (or [C, L])."""

    rank = 3


class InstanceNorm2d(_InstanceNorm):
    """Instance normalisation of [N, C, H, W] (or [C, H, W])."""

    rank = 4


class InstanceNorm3d(_InstanceNorm):
    """Instance normalisation of [N, C, D, H, W] (or [C, D, H, W])."""

    rank = 5


class LocalResponseNorm(Module):
    """Each channel over its `size` neighbours' mean square (see F.local_response_norm)."""

    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0):
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, x: Tensor) -> Tensor:
        return F.local_response_norm(x, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self) -> str:
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"


class SyncBatchNorm(_BatchNorm):
    """PyTorch's SyncBatchNorm in one process: batch normalisation of [N, C, ...] inputs (2-D to 5-D), as
    PyTorch's computes without a process group. Across several processes its statistics would be the
    whole batch's: verigrad's does not gather them, so it raises there rather than normalise each
    process's part alone."""

    ranks = (2, 3, 4, 5)

    def __init__(
        self,
        num_features: DimLike,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
        process_group: Any = None,
        device: Any = None,
        dtype: Any = None,
    ):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype)
        self.process_group = process_group

    def forward(self, x: Tensor) -> Tensor:
        distributed = sys.modules.get(__package__.rsplit(".", 1)[0] + ".distributed")  # imported only if used
        started = self.training and distributed is not None and distributed.is_initialized()
        if started and distributed.get_world_size(self.process_group) > 1:
            raise NotImplementedError(
                "SyncBatchNorm across processes: verigrad does not gather the batch statistics; use "
                "BatchNorm per process (each normalising its own part) or one process"
            )
        return super().forward(x)

    @classmethod
    def convert_sync_batchnorm(cls, module: Module, process_group: Any = None) -> Module:
        """`module` with every BatchNorm*D layer in it replaced by a SyncBatchNorm holding the same
        parameters, buffers and mode (the module itself when it is one), as PyTorch's."""
        out = module
        if isinstance(module, _BatchNorm) and not isinstance(module, SyncBatchNorm):
            out = cls(
                module.num_features, module.eps, module.momentum, module.affine, module.track_running_stats,
                process_group,
            )  # fmt: skip
            if module.affine:
                with no_grad():
                    out.weight, out.bias = module.weight, module.bias
            out.running_mean, out.running_var = module.running_mean, module.running_var
            out.num_batches_tracked = module.num_batches_tracked
            out.training = module.training
        for name, child in module.named_children():
            out.add_module(name, cls.convert_sync_batchnorm(child, process_group))
        return out

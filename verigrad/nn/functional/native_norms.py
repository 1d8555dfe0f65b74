"""aten's normalizations that answer their statistics too: native_layer_norm, native_group_norm,
native_batch_norm, _native_batch_norm_legit and _batch_norm_with_update (the output as F's, with the
mean and the reciprocal standard deviation it normalized by)."""

from __future__ import annotations

from typing import Any

from ...dtypes import u8
from ...errors import ShapeError
from ...ops.creation import empty
from ...shapes import as_shape, shape_text
from ...tensor import Tensor, describe
from .normalization import channel_norm


def _statistics(x: Tensor, axes: tuple[int, ...], eps: float) -> tuple[Tensor, Tensor]:
    """The mean and 1 / sqrt(biased variance + eps) of x over `axes`, kept as axes of size 1."""
    mean = x.mean(axes, keepdim=True)
    centered = x - mean
    return mean, ((centered * centered).mean(axes, keepdim=True) + eps).rsqrt()


def native_layer_norm(
    input: Tensor, normalized_shape: Any, weight: Tensor | None, bias: Tensor | None, eps: float
) -> tuple[Tensor, Tensor, Tensor]:
    """(layer_norm's output, mean, rstd), the statistics [*lead, 1, ...] and without gradient (aten's)."""
    wanted = as_shape(normalized_shape)
    axes = tuple(range(input.ndim - len(wanted), input.ndim))
    if len(wanted) > input.ndim or tuple(input.shape[input.ndim - len(wanted) :]) != wanted:
        raise ShapeError(f"native_layer_norm over {shape_text(wanted)}, but the input is {describe(input)}")
    # PyTorch's formula, written out: layer_norm's op refuses a negative eps, which aten takes
    mean, rstd = _statistics(input, axes, eps)
    out = (input - mean) * rstd
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out, mean.detach(), rstd.detach()


def native_group_norm(
    input: Tensor,
    weight: Tensor | None,
    bias: Tensor | None,
    N: int,
    C: int,
    HxW: int,
    group: int,
    eps: float,
) -> tuple[Tensor, Tensor, Tensor]:
    """(group_norm's output, mean [N, group], rstd [N, group]), all differentiable (aten's)."""
    if input.numel() != N * C * HxW or (input.ndim >= 2 and input.shape[:2] != (N, C)):
        raise ShapeError(
            f"native_group_norm: the input {describe(input)} does not hold N={N}, C={C}, HxW={HxW}"
        )
    # written out, as F.group_norm's reshape cannot infer the size of an empty batch
    groups = input.reshape(N, group, C // group * HxW)
    mean, rstd = _statistics(groups, (2,), eps)
    out = ((groups - mean) * rstd).reshape(input.shape)
    per_channel = (1, C) + (1,) * (input.ndim - 2)
    if weight is not None:
        out = out * weight.reshape(per_channel)
    if bias is not None:
        out = out + bias.reshape(per_channel)
    return out, mean.reshape(N, group), rstd.reshape(N, group)


def native_batch_norm(
    input: Tensor,
    weight: Tensor | None,
    bias: Tensor | None,
    running_mean: Tensor | None,
    running_var: Tensor | None,
    training: bool,
    momentum: float,
    eps: float,
) -> tuple[Tensor, Tensor, Tensor]:
    """(batch_norm's output, save_mean [C], save_invstd [C]) without gradient, the running statistics
    moved as F.batch_norm's; outside training the two are empty (aten's)."""
    out = channel_norm(input, 1, running_mean, running_var, weight, bias, training, momentum, eps)
    if not training:
        return out, empty(0, dtype=input.dtype), empty(0, dtype=input.dtype)
    mean, invstd = _statistics(input.detach(), tuple(i for i in range(input.ndim) if i != 1), eps)
    return out, mean.reshape(-1), invstd.reshape(-1)


def _native_batch_norm_legit(input: Tensor, weight: Tensor | None, bias: Tensor | None, *args: Any) -> Any:
    """native_batch_norm, also without running statistics: (input, weight, bias, training, momentum, eps)."""
    if len(args) == 3:
        args = (None, None, *args)
    return native_batch_norm(input, weight, bias, *args)


def _batch_norm_with_update(
    input: Tensor,
    weight: Tensor | None,
    bias: Tensor | None,
    running_mean: Tensor,
    running_var: Tensor,
    momentum: float,
    eps: float,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """native_batch_norm in training, and an empty u8 reserve (aten's, for the backends that use one)."""
    out = native_batch_norm(input, weight, bias, running_mean, running_var, True, momentum, eps)
    return (*out, empty(0, dtype=u8))

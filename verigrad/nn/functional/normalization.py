"""Normalizations, as in `torch.nn.functional`: layer_norm and rms_norm (by their ops), group_norm and
instance_norm (written with ops), and normalize (x over its p-norm)."""

from __future__ import annotations

import math
from typing import Any

from ... import functions, ops
from ...autograd import no_grad
from ...errors import ShapeError
from ...shapes import Dim, as_shape, shape_text
from ...tensor import Tensor


def layer_norm(x: Tensor, *args: Any, **kwargs: Any) -> Tensor:
    """Layer normalization over the last axis, or the last len(normalized_shape) axes:
    `layer_norm(x, weight=None, bias=None, eps=1e-5, normalized_shape=None)`, or PyTorch's order
    `layer_norm(x, normalized_shape, weight, bias, eps)`; a missing weight is ones, a missing bias zeros."""
    if args and isinstance(args[0], int | Dim | tuple | list):  # PyTorch's order: the shape first
        kwargs["normalized_shape"], args = args[0], args[1:]
    return _layer_norm(x, *args, **kwargs)


def _layer_norm(
    x: Tensor,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
    normalized_shape: Any = None,
) -> Tensor:
    wanted = None if normalized_shape is None else as_shape(normalized_shape)
    axes = 1 if wanted is None else len(wanted)
    if wanted is not None and tuple(x.shape[x.ndim - axes :]) != wanted:
        raise ShapeError(
            f"layer_norm over {shape_text(wanted)}, but the input ends in "
            f"{shape_text(x.shape[x.ndim - axes :])}"
        )
    lead, tail = x.shape[: x.ndim - axes], x.shape[x.ndim - axes :]
    size = math.prod(tail, start=1)
    flat = x if axes == 1 else x.reshape(*lead, size)
    weight = ops.ones((size,), dtype=x.dtype) if weight is None else weight.reshape(size)
    bias = ops.zeros((size,), dtype=x.dtype) if bias is None else bias.reshape(size)
    out = ops.layer_norm(flat, weight, bias, eps=eps)
    return out if axes == 1 else out.reshape(*lead, *tail)


def rms_norm(x: Tensor, weight: Tensor | None = None, eps: float = 1e-6) -> Tensor:
    """x * rsqrt(mean(x^2) + eps) * weight over the last axis (a missing weight is ones)."""
    weight = ops.ones(x.shape[-1:], dtype=x.dtype) if weight is None else weight
    return ops.rms_norm(x, weight, eps=eps)


def group_norm(
    x: Tensor, num_groups: int, weight: Tensor | None = None, bias: Tensor | None = None, eps: float = 1e-5
) -> Tensor:
    """x [N, C, ...] normalised over each group of C / num_groups channels (and the rest of the axes),
    with the biased variance, then scaled and shifted per channel (PyTorch's F.group_norm)."""
    if x.ndim < 2:
        raise ShapeError(f"group_norm takes [N, C, ...], got {shape_text(x.shape)}")
    channels = x.shape[1]
    if isinstance(channels, int) and (num_groups <= 0 or channels % num_groups):
        raise ShapeError(f"group_norm: {channels} channels do not split into {num_groups} groups")
    groups = x.reshape(x.shape[0], num_groups, -1)
    centered = groups - groups.mean(-1, keepdim=True)
    var = (centered * centered).mean(-1, keepdim=True)
    y = (centered * (var + eps).rsqrt()).reshape(x.shape)
    per_channel = (1, channels) + (1,) * (x.ndim - 2)
    if weight is not None:
        y = y * weight.reshape(per_channel)
    return y if bias is None else y + bias.reshape(per_channel)


def instance_norm(
    x: Tensor,
    running_mean: Tensor | None = None,
    running_var: Tensor | None = None,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    use_input_stats: bool = True,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> Tensor:
    """x [N, C, ...] normalised per sample and channel over the rest (the biased variance), then scaled
    and shifted per channel. With running statistics and use_input_stats, they move by `momentum`
    towards the batch's mean of the instances' means and unbiased variances; without use_input_stats,
    they normalise instead (PyTorch's F.instance_norm)."""
    if x.ndim < 3:
        raise ShapeError(f"instance_norm takes [N, C, ...], got {shape_text(x.shape)}")
    channels = x.shape[1]
    per_channel = (1, channels) + (1,) * (x.ndim - 2)
    if use_input_stats:
        axes = tuple(range(2, x.ndim))
        mean = x.mean(axes, keepdim=True)
        centered = x - mean
        var = (centered * centered).mean(axes, keepdim=True)
        if running_mean is not None and running_var is not None:
            count = x.numel() // (x.shape[0] * channels)
            with no_grad():
                unbiased = var.detach() * (count / (count - 1) if count > 1 else 1.0)
                running_mean.assign(running_mean * (1 - momentum) + mean.detach().mean((0, *axes)) * momentum)
                running_var.assign(running_var * (1 - momentum) + unbiased.mean((0, *axes)) * momentum)
    else:
        if running_mean is None or running_var is None:
            raise ValueError("instance_norm without use_input_stats needs running_mean and running_var")
        centered = x - running_mean.reshape(per_channel)
        var = running_var.reshape(per_channel)
    y = centered * (var + eps).rsqrt()
    if weight is not None:
        y = y * weight.reshape(per_channel)
    return y if bias is None else y + bias.reshape(per_channel)


def normalize(x: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12) -> Tensor:
    """x / max(||x||_p, eps) along `dim` (PyTorch's F.normalize)."""
    return x / functions.clamp(x.norm(p, dim=dim, keepdim=True), min=eps)

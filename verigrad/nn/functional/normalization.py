"""Normalizations, as in `torch.nn.functional`: layer_norm and rms_norm (by their ops), batch_norm,
group_norm, instance_norm and local_response_norm (written with ops), and normalize (x over its p-norm)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ... import functions, ops
from ...autograd import no_grad
from ...dtypes import f32, f64
from ...errors import ShapeError
from ...shapes import Dim, DimLike, as_shape, shape_text
from ...tensor import Tensor, describe


def layer_norm(input: Tensor, *args: Any, **kwargs: Any) -> Tensor:
    """Layer normalization over the last axis, or the last len(normalized_shape) axes:
    `layer_norm(x, weight=None, bias=None, eps=1e-5, normalized_shape=None)`, or PyTorch's order
    `layer_norm(x, normalized_shape, weight, bias, eps)`; a missing weight is ones, a missing bias zeros."""
    if args and isinstance(args[0], int | Dim | tuple | list):  # PyTorch's order: the shape first
        kwargs["normalized_shape"], args = args[0], args[1:]
    return _layer_norm(input, *args, **kwargs)


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
    out = _rounded_once(x, lambda *a: ops.layer_norm(*a, eps=eps), flat, weight, bias)
    return out if axes == 1 else out.reshape(*lead, *tail)


def _rounded_once(x: Tensor, norm: Any, *operands: Tensor) -> Tensor:
    """norm(*operands); an f16 input's in f32, rounded to f16 once at the end, as PyTorch's CPU kernels
    compute f16 normalizations (in f16 arithmetic, squares of small values underflow)."""
    if x.dtype.name != "f16":
        return norm(*operands)
    return norm(*(o.to(f32) for o in operands)).to(x.dtype)


def rms_norm(
    input: Tensor, normalized_shape: Any, weight: Tensor | None = None, eps: float | None = None
) -> Tensor:
    """x * rsqrt(mean(x^2) + eps) * weight over the last len(normalized_shape) axes (PyTorch's order; a
    missing weight is ones, a missing eps the machine epsilon of the dtype x is computed in, as PyTorch's:
    f32's for f16 and bf16)."""
    if isinstance(normalized_shape, Tensor):
        raise TypeError(
            "rms_norm(input, normalized_shape, weight=None, eps=None): normalized_shape must be "
            f"a size or a tuple of sizes, got {describe(normalized_shape)} (pass it as weight=)"
        )
    wanted = as_shape(normalized_shape)
    axes = len(wanted)
    if not axes or tuple(input.shape[input.ndim - axes :]) != wanted or input.ndim < axes:
        raise ShapeError(f"rms_norm over {shape_text(wanted)}, but the input is {describe(input)}")
    if eps is None:
        eps = float(np.finfo(np.float32 if input.dtype.name in ("f16", "bf16") else input.dtype.np).eps)
    lead, size = input.shape[: input.ndim - axes], math.prod(wanted, start=1)
    flat = input if axes == 1 else input.reshape(*lead, size)
    weight = ops.ones((size,), dtype=input.dtype) if weight is None else weight.reshape(size)
    out = _rounded_once(input, lambda *a: ops.rms_norm(*a, eps=eps), flat, weight)
    return out if axes == 1 else out.reshape(input.shape)


def batch_norm(
    input: Tensor,
    running_mean: Tensor | None,
    running_var: Tensor | None,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    training: bool = False,
    momentum: float | Tensor = 0.1,
    eps: float = 1e-5,
) -> Tensor:
    """input [N, C, ...] normalised per channel C over the other axes (PyTorch's F.batch_norm): in
    training by the batch's mean and biased variance, the running statistics (if given) moving by
    `momentum` towards the mean and the unbiased variance; otherwise by the running statistics."""
    return channel_norm(input, 1, running_mean, running_var, weight, bias, training, momentum, eps)


def channel_norm(
    x: Tensor,
    channel: int,
    running_mean: Tensor | None,
    running_var: Tensor | None,
    weight: Tensor | None,
    bias: Tensor | None,
    training: bool,
    momentum: float | Tensor,
    eps: float,
) -> Tensor:
    """batch_norm with the channels on axis `channel` (BatchNorm2d's NHWC layout puts them last)."""
    if x.ndim == 1 and x.shape[0] == 0:  # PyTorch's: an empty vector normalises to itself
        return x * 1
    if x.ndim < 2:
        raise ShapeError(f"batch_norm takes [N, C, ...], got {describe(x)}")
    axes = tuple(i for i in range(x.ndim) if i != channel)
    shape = tuple(x.shape[channel] if i == channel else 1 for i in range(x.ndim))
    if training:
        count = x.numel() // x.shape[channel]
        if isinstance(count, int) and count <= 1:
            raise ValueError(
                f"Expected more than 1 value per channel when training, got input size {shape_text(x.shape)}"
            )
        mean = x.mean(axes, keepdim=True)
        centered = x - mean
        var = (centered * centered).mean(axes, keepdim=True)
        with no_grad():
            m = momentum
            if running_mean is not None:
                running_mean.assign(running_mean * (1 - m) + mean.reshape(-1).detach() * m)
            if running_var is not None:
                unbiased = var.reshape(-1).detach() * _bessel(count, var.dtype)
                running_var.assign(running_var * (1 - m) + unbiased * m)
    else:
        if running_mean is None or running_var is None:
            raise ValueError("batch_norm: running_mean and running_var must be given when not training")
        centered = x - running_mean.reshape(shape)
        var = running_var.reshape(shape)
    y = centered * (var + eps).rsqrt()
    if weight is not None:
        y = y * weight.reshape(shape)
    return y if bias is None else y + bias.reshape(shape)


def _bessel(count: DimLike, dtype: Any) -> Tensor | float:
    """n / (n - 1) for n values, as a tensor: in a compiled step n may be a symbol, evaluated when the
    plan is bound (as a Python number it was left at 1 there). Formed in f64 and rounded once, as the
    Python float it replaces was; 1 for a single value."""
    if isinstance(count, int) and count <= 1:
        return 1.0
    n = ops.full((), count, dtype=f64)
    return (n / (n - 1)).cast(dtype)


def group_norm(
    input: Tensor,
    num_groups: int,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
) -> Tensor:
    """x [N, C, ...] normalised over each group of C / num_groups channels (and the rest of the axes),
    with the biased variance, then scaled and shifted per channel (PyTorch's F.group_norm)."""
    if input.ndim < 2:
        raise ShapeError(f"group_norm takes [N, C, ...], got {shape_text(input.shape)}")
    channels = input.shape[1]
    if isinstance(channels, int) and (num_groups <= 0 or channels % num_groups):
        raise ShapeError(f"group_norm: {channels} channels do not split into {num_groups} groups")
    if isinstance(input.shape[0], int) and input.shape[0] == 0:  # an empty batch: -1 would not be inferred
        groups = input.reshape(0, num_groups, math.prod(input.shape[1:]) // num_groups)
    else:
        groups = input.reshape(input.shape[0], num_groups, -1)
    centered = groups - groups.mean(-1, keepdim=True)
    var = (centered * centered).mean(-1, keepdim=True)
    y = (centered * (var + eps).rsqrt()).reshape(input.shape)
    per_channel = (1, channels) + (1,) * (input.ndim - 2)
    if weight is not None:
        y = y * weight.reshape(per_channel)
    return y if bias is None else y + bias.reshape(per_channel)


def instance_norm(
    input: Tensor,
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
    if input.ndim < 3:
        raise ShapeError(f"instance_norm takes [N, C, ...], got {shape_text(input.shape)}")
    channels = input.shape[1]
    per_channel = (1, channels) + (1,) * (input.ndim - 2)
    if use_input_stats:
        axes = tuple(range(2, input.ndim))
        spatial = math.prod(input.shape[2:])
        if isinstance(spatial, int) and spatial == 1:
            raise ValueError(
                "Expected more than 1 spatial element when training, got input size "
                + shape_text(input.shape)
            )
        mean = input.mean(axes, keepdim=True)
        centered = input - mean
        var = (centered * centered).mean(axes, keepdim=True)
        if running_mean is not None and running_var is not None:
            count = input.numel() // (input.shape[0] * channels)
            with no_grad():
                unbiased = var.detach() * (count / (count - 1))
                running_mean.assign(running_mean * (1 - momentum) + mean.detach().mean((0, *axes)) * momentum)
                running_var.assign(running_var * (1 - momentum) + unbiased.mean((0, *axes)) * momentum)
    else:
        if running_mean is None or running_var is None:
            raise ValueError("instance_norm without use_input_stats needs running_mean and running_var")
        centered = input - running_mean.reshape(per_channel)
        var = running_var.reshape(per_channel)
    y = centered * (var + eps).rsqrt()
    if weight is not None:
        y = y * weight.reshape(per_channel)
    return y if bias is None else y + bias.reshape(per_channel)


def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12) -> Tensor:
    """x / max(||x||_p, eps) along `dim` (PyTorch's F.normalize)."""
    return input / functions.clamp(input.norm(p, dim=dim, keepdim=True), min=eps)


def local_response_norm(
    input: Tensor, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0
) -> Tensor:
    """input [N, C, ...] over (k + alpha / size * sum of squares over `size` neighbouring channels)^beta,
    the window zero-padded size // 2 before and (size - 1) // 2 after (PyTorch's F.local_response_norm;
    an integer input's window mean truncated, as its avg_pool's; an empty input comes back as it is)."""
    if input.ndim < 3:
        raise ShapeError(f"local_response_norm takes [N, C, ...] (3-D or more), got {describe(input)}")
    if not isinstance(size, int) or size < 1:
        raise ValueError(f"local_response_norm: size must be a positive integer, got {size!r}")
    if input.numel() == 0:
        return input
    channels = input.shape[1]
    sq = (input * input).reshape(input.shape[0], channels, -1)
    padded = ops.concat(
        [
            ops.zeros((sq.shape[0], size // 2, sq.shape[2]), dtype=sq.dtype),
            sq,
            ops.zeros((sq.shape[0], (size - 1) // 2, sq.shape[2]), dtype=sq.dtype),
        ],
        axis=1,
    )
    window = padded[:, 0:channels]
    for i in range(1, size):
        window = window + padded[:, i : i + channels]
    # PyTorch averages with avg_pool, which truncates the mean of an integer input
    mean = window // size if not input.dtype.is_float else window / size
    div = (mean.reshape(input.shape) * alpha + k) ** beta
    return input / div

"""Functions in the style of `torch.nn.functional`, each a thin wrapper over verigrad ops (the losses
but cross_entropy are in `losses.py`).

Images are NCHW unless `layout="NHWC"` is given (conv weights are then [KH, KW, C, O]). Norms take
(x, weight, bias, eps) and normalize over the last axis; embedding takes (weight, idx).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from . import functions, ops, pooling
from .autograd import is_grad_enabled, no_grad
from .ctc import ctc_loss
from .errors import ShapeError
from .losses import (
    binary_cross_entropy,
    binary_cross_entropy_with_logits,
    cosine_embedding_loss,
    gaussian_nll_loss,
    hinge_embedding_loss,
    huber_loss,
    kl_div,
    l1_loss,
    margin_ranking_loss,
    mse_loss,
    multi_margin_loss,
    nll_loss,
    pairwise_distance,
    poisson_nll_loss,
    reduce,
    smooth_l1_loss,
    soft_margin_loss,
    triplet_margin_loss,
)
from .ops.composite._common import pair
from .ops.composite.attention import scale_tensor
from .ops.composite.conv import out_hw, window_params
from .ops.creation import Generator, _seed
from .registry import OPS
from .shapes import Dim, DimLike, as_shape, shape_text
from .spatial import affine_grid, grid_sample
from .tensor import Tensor

IntPair = int | tuple[int, int]


def softmax(x: Tensor, dim: int = -1, dtype: Any = None) -> Tensor:
    """exp(x) / sum(exp(x)) along `dim`, max-subtracted so it cannot overflow; with `dtype`, x is cast
    to it first (as PyTorch's)."""
    return ops.softmax(x if dtype is None else x.cast(dtype), axis=dim)


def log_softmax(x: Tensor, dim: int = -1, dtype: Any = None) -> Tensor:
    """log(softmax(x)) along `dim`, computed without forming softmax; `dtype` as softmax's."""
    return ops.log_softmax(x if dtype is None else x.cast(dtype), axis=dim)


def cross_entropy(
    input: Tensor,
    target: Tensor,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
    weight: Tensor | None = None,
    ignore_index: int | None = None,
) -> Tensor:
    """Cross-entropy of logits [N, C] against integer classes [N]; reduction 'mean', 'sum' or 'none'.
    With label_smoothing e, PyTorch's: (1 - e) times it plus e times the mean over classes of
    -log_softmax. With `weight` [C], each sample's loss times its class's weight, and 'mean' divides by
    the weights' sum; targets equal to `ignore_index` add nothing (and count for nothing in 'mean')."""
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing}")
    if weight is not None or ignore_index is not None:
        if label_smoothing:
            raise NotImplementedError("cross_entropy: label_smoothing with weight or ignore_index")
        if weight is not None and weight.shape != input.shape[-1:]:
            classes_text = shape_text(input.shape[-1:])
            raise ShapeError(f"cross_entropy: weight must be {classes_text}, got {shape_text(weight.shape)}")
        ignored = -100 if ignore_index is None else ignore_index  # PyTorch's default
        return nll_loss(log_softmax(input, -1), target, reduction, ignored, weight)
    if label_smoothing:
        nll = cross_entropy(input, target, reduction="none")
        uniform = -ops.log_softmax(input, axis=-1).mean(axis=-1)
        loss = nll * (1.0 - label_smoothing) + uniform * label_smoothing
        return reduce(loss, reduction, "cross_entropy")
    if isinstance(target, Tensor) and isinstance(target.data, np.ndarray) and target.dtype.kind == "i":
        classes = input.shape[-1]
        values = target.data
        if values.size and isinstance(classes, int) and (values.min() < 0 or values.max() >= classes):
            bad = values[(values < 0) | (values >= classes)][0]
            raise IndexError(f"cross_entropy: target {bad} is out of range for {classes} classes")
    return ops.cross_entropy(input, target, reduction=reduction)


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """x @ weight.T + bias (PyTorch's F.linear: weight [out, in])."""
    out = x @ weight.T
    return out if bias is None else out + bias


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


def embedding(weight: Tensor, idx: Tensor, padding_idx: int | None = None) -> Tensor:
    """Rows of `weight` [V, D] at the integer indices `idx` [...], giving [..., D]; the row
    `padding_idx` gets no gradient (as PyTorch's).

    PyTorch's argument order (idx, weight) is accepted too: the integer tensor is the index.
    """
    if weight.dtype.kind == "i" and idx.dtype.kind != "i":
        weight, idx = idx, weight
    rows = ops.embedding(weight, idx)
    if padding_idx is None:
        return rows
    padding = ops.unsqueeze(idx == padding_idx % weight.shape[0], -1)  # over the lookups, not the table
    return ops.where(padding, rows.detach(), rows)


def conv2d(
    x: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: IntPair = 1,
    padding: IntPair = 0,
    dilation: IntPair = 1,
    layout: str = "NCHW",
    groups: int = 1,
) -> Tensor:
    """2-D convolution: NCHW with [O, C / groups, KH, KW] weights or NHWC with [KH, KW, C, O].
    padding="valid" is 0; "same" (stride 1) keeps H and W, as PyTorch: the extra row or column of an
    even kernel's padding goes after. With `groups` (NCHW), the channels and the filters are cut into
    that many groups, each group's filters convolving its own channels (depthwise: groups = C)."""
    if isinstance(padding, str):
        x, padding = _named_padding(x, weight, padding, stride, dilation, layout)
    window = {"stride": stride, "padding": padding, "dilation": dilation, "layout": layout}
    if groups == 1:
        out = ops.conv2d(x, weight, **window)
    else:
        out = ops.concat(
            [ops.conv2d(xg, wg, **window) for xg, wg in _grouped(x, weight, groups, layout)], axis=1
        )
    if bias is None:
        return out
    return out + (bias.reshape(bias.shape[0], 1, 1) if layout == "NCHW" else bias)


def _grouped(x: Tensor, weight: Tensor, groups: int, layout: str) -> list[tuple[Tensor, Tensor]]:
    """(channels, filters) of each group of a grouped convolution, after checking that they divide."""
    if layout != "NCHW":
        raise NotImplementedError("conv2d: groups > 1 takes NCHW images")
    channels, filters = x.shape[1], weight.shape[0]
    if not isinstance(groups, int) or groups < 1 or channels % groups or filters % groups:
        raise ShapeError(
            f"conv2d: {channels} channels and {filters} filters do not split into {groups!r} groups"
        )
    if weight.shape[1] != channels // groups:
        raise ShapeError(
            f"conv2d: weight {shape_text(weight.shape)} needs {channels // groups} input channels a group"
        )
    c, o = channels // groups, filters // groups
    return [(x[:, g * c : (g + 1) * c], weight[g * o : (g + 1) * o]) for g in range(groups)]


def conv_transpose2d(
    x: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: IntPair = 1,
    padding: IntPair = 0,
    output_padding: IntPair = 0,
    dilation: IntPair = 1,
) -> Tensor:
    """The transposed 2-D convolution of x [N, C_in, H, W] with weight [C_in, C_out, kh, kw] (PyTorch's,
    groups=1): conv2d's gradient for its input, into an image of (H - 1) stride - 2 padding +
    dilation (k - 1) + output_padding + 1 a side."""
    sh, sw = pair(stride, "stride", 1)
    ph, pw = pair(padding, "padding", 0)
    oh, ow = pair(output_padding, "output padding", 0)
    dh, dw = pair(dilation, "dilation", 1)
    if x.ndim != 4 or weight.ndim != 4:
        raise ShapeError(
            f"conv_transpose2d takes x [N, C, H, W] and weight [C_in, C_out, kh, kw], got "
            f"{shape_text(x.shape)} and {shape_text(weight.shape)}"
        )
    if oh >= max(sh, dh) or ow >= max(sw, dw):
        raise ValueError(f"conv_transpose2d: output_padding must be below stride or dilation, got {(oh, ow)}")
    kh, kw = weight.shape[2], weight.shape[3]
    size = tuple(
        (n - 1) * s - 2 * p + d * (k - 1) + o + 1
        for n, s, p, d, k, o in [(x.shape[2], sh, ph, dh, kh, oh), (x.shape[3], sw, pw, dw, kw, ow)]
    )
    window = {"stride": (sh, sw), "padding": (ph, pw), "dilation": (dh, dw)}
    out = OPS["conv2d_input_grad"](x, weight, **window, size=size)
    return out if bias is None else out + bias.reshape(bias.shape[0], 1, 1)


def _named_padding(
    x: Tensor, weight: Tensor, padding: str, stride: IntPair, dilation: IntPair, layout: str
) -> tuple[Tensor, IntPair]:
    """x and the conv2d padding for PyTorch's padding="valid" or "same" (x padded first where a side
    needs one more than the other)."""
    if padding == "valid":
        return x, 0
    if padding != "same":
        raise ValueError(f"conv2d: padding must be a size, 'valid' or 'same', got {padding!r}")
    if pair(stride, "conv2d's stride", 1) != (1, 1):
        raise ValueError("conv2d: padding='same' needs stride 1 (as in PyTorch)")
    kernel = weight.shape[2:] if layout == "NCHW" else weight.shape[:2]
    totals = [d * (k - 1) for d, k in zip(pair(dilation, "conv2d's dilation", 1), kernel)]
    if all(t % 2 == 0 for t in totals):
        return x, (totals[0] // 2, totals[1] // 2)
    sides = [(t // 2, t - t // 2) for t in totals]
    spatial = (2, 3) if layout == "NCHW" else (1, 2)
    widths = [(0, 0)] * x.ndim
    for axis, side in zip(spatial, sides):
        widths[axis] = side
    return x.pad(widths), 0


def _as_2d(fn: Any, x: Tensor, *args: Any, **kwargs: Any) -> Tensor:
    """A 1-D op of [N, C, L] as the 2-D one of [N, C, 1, L] (int sizes become (1, k), (0, p), ...)."""
    return fn(ops.unsqueeze(x, 2), *args, **kwargs).squeeze(2)


def _pair_1d(value: Any, unit: int) -> tuple[int, int] | None:
    """A 1-D size as the 2-D pair whose first size is `unit` (None stays None)."""
    if value is None:
        return None
    (n,) = (value,) if isinstance(value, int) else tuple(value)
    return (unit, n)


def conv1d(
    x: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: int = 1,
    padding: int | str = 0,
    dilation: int = 1,
) -> Tensor:
    """1-D convolution of [N, C, L] with [O, C, K] weights: the 2-D one over [N, C, 1, L]."""
    window = {
        "stride": _pair_1d(stride, 1),
        "padding": padding if isinstance(padding, str) else _pair_1d(padding, 0),
        "dilation": _pair_1d(dilation, 1),
    }
    return _as_2d(conv2d, x, ops.unsqueeze(weight, 2), bias, **window)


def max_pool1d(x: Tensor, kernel_size: int, stride: int | None = None, padding: int = 0) -> Tensor:
    return _as_2d(max_pool2d, x, _pair_1d(kernel_size, 1), _pair_1d(stride, 1), _pair_1d(padding, 0))


def avg_pool1d(x: Tensor, kernel_size: int, stride: int | None = None, padding: int = 0) -> Tensor:
    """Window means, zero padding counted in the divisor."""
    return _as_2d(avg_pool2d, x, _pair_1d(kernel_size, 1), _pair_1d(stride, 1), _pair_1d(padding, 0))


def interpolate(
    x: Tensor,
    size: IntPair | None = None,
    scale_factor: Any = None,
    mode: str = "nearest",
    align_corners: bool | None = None,
    layout: str = "NCHW",
) -> Tensor:
    """Images resized to `size` (H, W) or by `scale_factor`, as PyTorch's interpolate: "nearest" by
    whole factors (each pixel repeated), or "bilinear" to any size (each output pixel a weighted mean of
    its four nearest input pixels, at PyTorch's source coordinates for `align_corners` False or True)."""
    h_axis = 2 if layout == "NCHW" else 1
    if mode == "nearest":
        if size is not None or align_corners is not None:
            raise ValueError(
                "interpolate: mode='nearest' takes a whole scale_factor (no size, no align_corners)"
            )
        fh, fw = pair(scale_factor, "interpolate's scale_factor", 1)
        return functions.repeat_interleave(functions.repeat_interleave(x, fh, h_axis), fw, h_axis + 1)
    if mode != "bilinear":
        raise ValueError(f"interpolate: mode must be 'nearest' or 'bilinear', got {mode!r}")
    if (size is None) == (scale_factor is None):
        raise ValueError("interpolate: give one of size and scale_factor")
    factors = scale_factor if isinstance(scale_factor, tuple | list) else (scale_factor, scale_factor)
    sizes = size if isinstance(size, tuple | list) else (size, size)
    for axis, factor, wanted in zip((h_axis, h_axis + 1), factors, sizes):
        n = x.shape[axis]
        if not isinstance(n, int):
            raise ShapeError(f"interpolate: bilinear needs concrete sizes, got {n}")
        out = wanted if wanted is not None else math.floor(n * factor)
        low, high, weight = (ops.from_numpy(a) for a in _linear_taps(n, out, factor, bool(align_corners)))
        w = weight.reshape([-1 if a == axis else 1 for a in range(x.ndim)]).cast(x.dtype)
        x = ops.take(x, low, axis=axis) * (1 - w) + ops.take(x, high, axis=axis) * w
    return x


def _linear_taps(n: int, out: int, factor: float | None, align_corners: bool) -> tuple:
    """For each of `out` positions resampled from `n`: the two input positions it lies between and its
    weight toward the second, at PyTorch's source coordinates."""
    i = np.arange(out, dtype=np.float64)
    if align_corners:
        src = i * ((n - 1) / (out - 1)) if out > 1 else np.zeros(out)
    else:
        scale = 1.0 / factor if factor is not None else n / out
        src = np.maximum((i + 0.5) * scale - 0.5, 0.0)
    low = np.minimum(np.floor(src).astype(np.int64), n - 1)
    return low, np.minimum(low + 1, n - 1), src - low


def _nchw_only(layout: str, what: str) -> None:
    if layout != "NCHW":
        raise ValueError(f"{what} takes NCHW images, got layout {layout!r}")


def adaptive_avg_pool2d(x: Tensor, output_size: Any, layout: str = "NCHW") -> Tensor:
    """Means over PyTorch's adaptive windows for an output_size grid (1 x 1: the global mean, any size;
    sizes that divide the input's: equal windows, one pooling call; others: NCHW of known size)."""
    out_h, out_w = (output_size, output_size) if isinstance(output_size, int) else tuple(output_size)
    h, w = x.shape[2:4] if layout == "NCHW" else x.shape[1:3]
    if (out_h, out_w) == (1, 1):
        return x.mean((2, 3) if layout == "NCHW" else (1, 2), keepdim=True)
    if all(
        isinstance(d, int) and isinstance(o, int) and o > 0 and d % o == 0
        for d, o in ((h, out_h), (w, out_w))
    ):
        window = (h // out_h, w // out_w)
        return avg_pool2d(x, window, window, layout=layout)
    _nchw_only(layout, "adaptive_avg_pool2d to sizes that do not divide the input's")
    return pooling.adaptive_pool2d(x, (out_h, out_w), "mean")


def adaptive_max_pool2d(x: Tensor, output_size: Any, return_indices: bool = False) -> Tensor:
    """Maxima over PyTorch's adaptive windows for an output_size grid (NCHW of known size). The indices
    of the maxima (return_indices) are not given."""
    if return_indices:
        raise ValueError("adaptive_max_pool2d: return_indices is not supported (max_pool2d gives indices)")
    return pooling.adaptive_pool2d(x, output_size, "max")


def max_pool2d(
    x: Tensor,
    kernel_size: IntPair,
    stride: IntPair | None = None,
    padding: IntPair = 0,
    dilation: IntPair = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
    layout: str = "NCHW",
) -> Any:
    """Window maxima (stride defaults to the kernel size; -inf padding); gradients go to each window's
    first maximum. ceil_mode keeps a last partial window; return_indices also gives each maximum's flat
    index h W + w (NCHW), for max_unpool2d."""
    if ceil_mode or return_indices:
        _nchw_only(layout, "max_pool2d with ceil_mode or return_indices")
        return pooling.max_pool2d(x, kernel_size, stride, padding, dilation, ceil_mode, return_indices)
    window = {"kernel": kernel_size, "stride": stride, "padding": padding, "dilation": dilation}
    return ops.max_pool2d(x, **window, layout=layout)


def avg_pool2d(
    x: Tensor,
    kernel_size: IntPair,
    stride: IntPair | None = None,
    padding: IntPair = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
    layout: str = "NCHW",
) -> Tensor:
    """Window means, zero padding counted in the divisor (count_include_pad; else only the input's
    elements), or divided by divisor_override; ceil_mode keeps a last partial window (NCHW)."""
    if ceil_mode or not count_include_pad or divisor_override is not None:
        _nchw_only(layout, "avg_pool2d with ceil_mode, count_include_pad=False or divisor_override")
        return pooling.avg_pool2d(
            x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override
        )
    return ops.avg_pool2d(x, kernel=kernel_size, stride=stride, padding=padding, layout=layout)


def max_unpool2d(
    x: Tensor,
    indices: Tensor,
    kernel_size: IntPair,
    stride: IntPair | None = None,
    padding: IntPair = 0,
    output_size: Any = None,
) -> Tensor:
    """max_pool2d's values put back at their indices in zeros of the pooled-from size (NCHW)."""
    return pooling.max_unpool2d(x, indices, kernel_size, stride, padding, output_size)


def dropout(x: Tensor, p: float = 0.5, training: bool = True, generator: Generator | None = None) -> Tensor:
    """Zero elements with probability p and scale the rest by 1/(1-p); the identity when not training."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability must be in [0, 1], got {p}")
    if not training or p == 0.0:
        return x
    return ops.dropout(x, p=p, seed=_seed(generator))


def rope(x: Tensor, cos: Tensor, sin: Tensor, offset: DimLike = 0, interleaved: bool = True) -> Tensor:
    """Rotary embedding of x [..., T, D] with table rows offset..offset+T of cos/sin [Tmax, D/2]."""
    return ops.rope(x, cos, sin, offset=offset, interleaved=interleaved)


def relu(x: Tensor, inplace: bool = False) -> Tensor:
    """max(x, 0)."""
    return _inplace(x, ops.relu(x), inplace)


def gelu(x: Tensor, approximate: str = "none") -> Tensor:
    """GELU with the exact normal CDF, or its tanh approximation with approximate='tanh'."""
    if approximate not in ("none", "tanh"):
        raise ValueError(f"approximate must be 'none' or 'tanh', got {approximate!r}")
    return ops.gelu_tanh(x) if approximate == "tanh" else ops.gelu(x)


def _inplace(x: Tensor, y: Tensor, inplace: bool) -> Tensor:
    """PyTorch's `inplace=True`: y written into x, and x returned, where x takes no part in a gradient;
    else y itself (the same values; the memory is not saved)."""
    if inplace and not (x.requires_grad and is_grad_enabled()):
        return x.assign(y)
    return y


def dropout2d(x: Tensor, p: float = 0.5, training: bool = True, generator: Generator | None = None) -> Tensor:
    """Zero whole channels of [N, C, H, W] (or [C, H, W]) with probability p, scaling the rest by
    1/(1-p); the identity when not training."""
    if x.ndim not in (3, 4):
        raise ShapeError(f"dropout2d takes [N, C, H, W] or [C, H, W], got {shape_text(x.shape)}")
    if not training or p == 0.0:
        return dropout(x, p, training)  # checks p
    keep = dropout(ops.ones(*x.shape[: x.ndim - 2], 1, 1, dtype=x.dtype), p, generator=generator)
    return x * keep


def silu(x: Tensor, inplace: bool = False) -> Tensor:
    """x * sigmoid(x)."""
    return _inplace(x, ops.silu(x), inplace)


def sigmoid(x: Tensor) -> Tensor:
    """1 / (1 + exp(-x))."""
    return ops.sigmoid(x)


def leaky_relu(x: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    """x where x > 0, else negative_slope * x."""
    return _inplace(x, ops.where(x > 0, x, x * negative_slope), inplace)


def elu(x: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """x where x > 0, else alpha * (exp(x) - 1) (by expm1)."""
    return _inplace(x, ops.where(x > 0, x, ops.expm1(x) * alpha), inplace)


def softplus(x: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """log(1 + exp(beta x)) / beta, and x itself where beta x > threshold (as PyTorch)."""
    scaled = x * beta
    return ops.where(scaled > threshold, x, ops.log1p(ops.exp(scaled)) / beta)


def hardtanh(x: Tensor, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> Tensor:
    """x limited to [min_val, max_val]; the gradient passes strictly inside (as PyTorch's)."""
    return _inplace(x, ops.where(x <= min_val, min_val, ops.where(x >= max_val, max_val, x)), inplace)


def relu6(x: Tensor, inplace: bool = False) -> Tensor:
    return hardtanh(x, 0.0, 6.0, inplace)


def mish(x: Tensor, inplace: bool = False) -> Tensor:
    """x * tanh(softplus(x))."""
    return _inplace(x, x * ops.tanh(softplus(x)), inplace)


def hardsigmoid(x: Tensor, inplace: bool = False) -> Tensor:
    """relu6(x + 3) / 6: 0 below -3, 1 above 3, linear between."""
    return _inplace(x, relu6(x + 3.0) / 6.0, inplace)


def hardswish(x: Tensor, inplace: bool = False) -> Tensor:
    """x * hardsigmoid(x)."""
    return _inplace(x, x * hardsigmoid(x), inplace)


_SELU_ALPHA, _SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946


def selu(x: Tensor, inplace: bool = False) -> Tensor:
    """scale * elu(x, alpha) with the self-normalising constants (alpha 1.6733, scale 1.0507)."""
    return _inplace(x, elu(x, _SELU_ALPHA) * _SELU_SCALE, inplace)


def celu(x: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """x where x > 0, else alpha * (exp(x / alpha) - 1)."""
    if alpha == 0:
        raise ValueError("celu: alpha must not be 0")
    return _inplace(x, ops.where(x > 0, x, ops.expm1(x / alpha) * alpha), inplace)


def softsign(x: Tensor) -> Tensor:
    """x / (1 + |x|)."""
    return x / (ops.abs(x) + 1.0)


def logsigmoid(x: Tensor) -> Tensor:
    """log(sigmoid(x)) = -softplus(-x), without overflow for large |x|."""
    return ops.minimum(x, 0.0) - ops.log1p(ops.exp(-ops.abs(x)))


def glu(x: Tensor, dim: int = -1) -> Tensor:
    """a * sigmoid(b) for the halves a, b of x along `dim` (of even length)."""
    size = x.shape[dim]
    if isinstance(size, int) and size % 2:
        raise ShapeError(f"glu: dimension {dim} of {shape_text(x.shape)} has odd length {size}; it is halved")
    a, b = x.chunk(2, dim)
    return a * ops.sigmoid(b)


def prelu(x: Tensor, weight: Tensor) -> Tensor:
    """x where x > 0, else weight * x; weight has one value, or one per channel (dimension 1 of x)."""
    if weight.ndim != 1:
        raise ShapeError(f"prelu: weight must be one-dimensional, got {shape_text(weight.shape)}")
    if weight.shape[0] != 1 and x.ndim >= 2:
        weight = weight.reshape(weight.shape[0], *([1] * (x.ndim - 2)))
    return ops.where(x > 0, x, weight * x)


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


def bilinear(x1: Tensor, x2: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """y[..., o] = x1[..., i] weight[o, i, j] x2[..., j] (+ bias[o])."""
    y = functions.einsum("...i,oij,...j->...o", x1, weight, x2)
    return y if bias is None else y + bias


def normalize(x: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12) -> Tensor:
    """x / max(||x||_p, eps) along `dim` (PyTorch's F.normalize)."""
    return x / functions.clamp(x.norm(p, dim=dim, keepdim=True), min=eps)


def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """sum(x1 * x2) / (max(||x1||, eps) * max(||x2||, eps)) along `dim` (PyTorch's: each norm
    clamped)."""
    n1 = functions.clamp(x1.norm(dim=dim), min=eps)
    n2 = functions.clamp(x2.norm(dim=dim), min=eps)
    return (x1 * x2).sum(axis=dim) / (n1 * n2)


def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
) -> Tensor:
    """softmax(q k^T * scale + mask) v over the last two axes ([..., L, E], [..., S, E], [..., S, Ev]), as
    PyTorch's: a bool mask keeps where True, a float mask is added; is_causal keeps key j <= query i
    (aligned at the top left); scale defaults to 1/sqrt(E). A causal [B, H, T, D] call with no mask
    runs the attention op (its kernel); the rest is written with ops."""
    if dropout_p != 0.0:
        raise ValueError("scaled_dot_product_attention: dropout_p must be 0 (no attention dropout here)")
    if is_causal and attn_mask is not None:
        raise ValueError("scaled_dot_product_attention: give attn_mask or is_causal, not both")
    length, size = query.shape[-2], key.shape[-2]
    if is_causal and query.ndim == 4 and key.ndim == 4 and length == size and query.shape[1] == key.shape[1]:
        return ops.attention(query, key, value, scale=scale)
    scores = (query @ key.mT) * scale_tensor(scale, query.shape[-1], query.dtype)
    if is_causal:
        attn_mask = ops.unsqueeze(ops.arange(0, length), -1) >= ops.arange(0, size)
    if attn_mask is not None and attn_mask.dtype.name == "bool":
        scores = ops.where(attn_mask, scores, -math.inf)
    elif attn_mask is not None:
        scores = scores + attn_mask
    return ops.softmax(scores, axis=-1) @ value


def one_hot(target: Tensor, num_classes: int = -1) -> Tensor:
    """[..., num_classes] i64 with 1 at each integer target's class (num_classes -1: the largest + 1)."""
    if target.dtype.kind != "i":
        raise TypeError(f"one_hot takes integer classes, got {target.dtype.name}")
    if num_classes == -1:
        if not isinstance(target.data, np.ndarray):
            raise ValueError("one_hot of an abstract or traced tensor needs num_classes")
        num_classes = int(target.data.max()) + 1 if target.data.size else 0
    return (ops.unsqueeze(target, -1) == ops.arange(0, num_classes)).cast("i64")


PAD_MODES = ("constant", "reflect", "replicate", "circular")


def pad(x: Tensor, pad: Sequence[int], mode: str = "constant", value: float = 0.0) -> Tensor:
    """PyTorch's F.pad: `pad` gives (before, after) pairs from the last axis backwards, so (1, 2) pads
    the last axis and (1, 2, 3, 4) the last two (the last by 1 and 2). `mode`: "constant" (`value`),
    "reflect" (mirrored about the edge element, which is not repeated), "replicate" (the edge element
    repeated) or "circular" (wrapped around); the last three take the elements at positions a NumPy
    table computes, so their gradients add back where an element was copied."""
    if mode not in PAD_MODES:
        raise ValueError(f"pad: mode must be one of {', '.join(PAD_MODES)}, got {mode!r}")
    if len(pad) % 2 or len(pad) // 2 > x.ndim:
        raise ValueError(f"pad needs (before, after) pairs for at most {x.ndim} axes, got {tuple(pad)}")
    pairs = [(pad[i], pad[i + 1]) for i in range(0, len(pad), 2)][::-1]
    if mode == "constant":
        return x.pad([(0, 0)] * (x.ndim - len(pairs)) + pairs, value=value)
    for axis, (before, after) in zip(range(x.ndim - len(pairs), x.ndim), pairs):
        if before or after:
            x = ops.take(x, ops.from_numpy(_pad_positions(x.shape[axis], before, after, mode)), axis=axis)
    return x


def _pad_positions(size: Any, before: int, after: int, mode: str) -> np.ndarray:
    """The positions along an axis of `size` that the padded axis reads, in order."""
    if not isinstance(size, int):
        raise ShapeError(f"pad: mode {mode!r} needs concrete sizes, got {size}")
    if min(before, after) < 0:
        raise ValueError(f"pad: mode {mode!r} takes no negative padding, got {(before, after)}")
    if mode == "reflect" and max(before, after) >= size:
        raise ValueError(f"pad: reflect padding must be smaller than the size {size}, got {(before, after)}")
    if mode == "circular" and max(before, after) > size:
        raise ValueError(f"pad: circular padding must be at most the size {size}, got {(before, after)}")
    positions = np.arange(-before, size + after)
    if mode == "reflect":
        positions = np.abs(positions)
        positions = np.where(positions >= size, 2 * (size - 1) - positions, positions)
    elif mode == "replicate":
        positions = np.clip(positions, 0, size - 1)
    else:
        positions = positions % size
    return positions.astype(np.int64)


def unfold(x: Tensor, kernel_size: Any, dilation: Any = 1, padding: Any = 0, stride: Any = 1) -> Tensor:
    """Every sliding block of x [N, C, H, W] as a column: [N, C * kh * kw, L] for L blocks, each
    column in (c, kh, kw) order (PyTorch's F.unfold; im2col's columns)."""
    cols = ops.im2col(x, kernel=kernel_size, stride=stride, padding=padding, dilation=dilation)
    n, c, kh, kw, oh, ow = cols.shape
    return cols.reshape(n, c * kh * kw, oh * ow)


def fold(
    x: Tensor, output_size: Any, kernel_size: Any, dilation: Any = 1, padding: Any = 0, stride: Any = 1
) -> Tensor:
    """The inverse arrangement of unfold: columns [N, C * kh * kw, L] summed back into an image
    [N, C, H, W] of `output_size` where blocks overlap (PyTorch's F.fold; col2im)."""
    size = pair(output_size, "output size", 1)
    window = window_params(kernel_size, stride, padding, dilation)
    del window["layout"]
    (kh, kw), (oh, ow) = window["kernel"], out_hw(*size, **window)
    n, ckk, blocks = x.shape
    if blocks != oh * ow or ckk % (kh * kw):
        raise ShapeError(
            f"fold: columns {shape_text(x.shape)} do not make {kh}x{kw} blocks over {oh}x{ow} places"
        )
    return ops.col2im(x.reshape(n, ckk // (kh * kw), kh, kw, oh, ow), size=size, **window)


def pixel_shuffle(x: Tensor, upscale_factor: int) -> Tensor:
    """[..., C r^2, H, W] -> [..., C, H r, W r]: each group of r^2 channels spread over an r x r block."""
    r = upscale_factor
    *lead, c, h, w = x.shape
    if c % (r * r):
        raise ShapeError(f"pixel_shuffle: {c} channels do not split into groups of {r}^2")
    blocks = x.reshape(*lead, c // (r * r), r, r, h, w)
    k = len(lead)
    return blocks.permute(*range(k + 1), k + 3, k + 1, k + 4, k + 2).reshape(
        *lead, c // (r * r), h * r, w * r
    )


def pixel_unshuffle(x: Tensor, downscale_factor: int) -> Tensor:
    """The inverse of pixel_shuffle: [..., C, H r, W r] -> [..., C r^2, H, W]."""
    r = downscale_factor
    *lead, c, hr, wr = x.shape
    if hr % r or wr % r:
        raise ShapeError(f"pixel_unshuffle: {hr}x{wr} does not split into blocks of {r}x{r}")
    blocks = x.reshape(*lead, c, hr // r, r, wr // r, r)
    k = len(lead)
    return blocks.permute(*range(k + 1), k + 2, k + 4, k + 1, k + 3).reshape(
        *lead, c * r * r, hr // r, wr // r
    )


def tanh(x: Tensor) -> Tensor:
    """Hyperbolic tangent."""
    return ops.tanh(x)


__all__ = [
    "adaptive_avg_pool2d",
    "adaptive_max_pool2d",
    "affine_grid",
    "avg_pool1d",
    "avg_pool2d",
    "bilinear",
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "celu",
    "conv1d",
    "conv2d",
    "conv_transpose2d",
    "cosine_embedding_loss",
    "cosine_similarity",
    "cross_entropy",
    "ctc_loss",
    "dropout",
    "dropout2d",
    "elu",
    "embedding",
    "fold",
    "gaussian_nll_loss",
    "gelu",
    "glu",
    "grid_sample",
    "group_norm",
    "hardsigmoid",
    "hardswish",
    "hardtanh",
    "hinge_embedding_loss",
    "huber_loss",
    "instance_norm",
    "interpolate",
    "kl_div",
    "l1_loss",
    "layer_norm",
    "leaky_relu",
    "linear",
    "log_softmax",
    "logsigmoid",
    "margin_ranking_loss",
    "max_pool1d",
    "max_pool2d",
    "max_unpool2d",
    "mish",
    "mse_loss",
    "multi_margin_loss",
    "nll_loss",
    "normalize",
    "one_hot",
    "pad",
    "pairwise_distance",
    "pixel_shuffle",
    "pixel_unshuffle",
    "poisson_nll_loss",
    "prelu",
    "relu",
    "relu6",
    "rms_norm",
    "rope",
    "scaled_dot_product_attention",
    "selu",
    "sigmoid",
    "silu",
    "smooth_l1_loss",
    "soft_margin_loss",
    "softmax",
    "softplus",
    "softsign",
    "tanh",
    "triplet_margin_loss",
    "unfold",
]

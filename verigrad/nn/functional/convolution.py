"""Convolutions, as in `torch.nn.functional`: conv1d, conv2d (grouped, and PyTorch's padding="same"),
conv_transpose2d, and unfold/fold (im2col's columns and back). Images are NCHW unless `layout="NHWC"`
is given (conv weights are then [KH, KW, C, O])."""

from __future__ import annotations

from typing import Any

from ... import ops
from ...errors import ShapeError
from ...ops.composite._common import pair
from ...ops.composite.convolution import conv2d_input_grad, out_hw, window_params
from ...shapes import shape_text
from ...tensor import Tensor
from ._windows import IntPair, as_2d, pair_1d


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
    out = conv2d_input_grad(x, weight, **window, size=size)
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
        "stride": pair_1d(stride, 1),
        "padding": padding if isinstance(padding, str) else pair_1d(padding, 0),
        "dilation": pair_1d(dilation, 1),
    }
    return as_2d(conv2d, x, ops.unsqueeze(weight, 2), bias, **window)


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

"""Convolutions, as in `torch.nn.functional`: conv1d, conv2d, conv3d and their transposes (grouped,
dilated, and PyTorch's padding="same"/"valid"), and unfold/fold (im2col's columns and back). Images
are NCHW unless conv2d's `layout="NHWC"` is given (its weights are then [KH, KW, C, O])."""

from __future__ import annotations

from typing import Any

from ... import ops
from ...dtypes import bool_, f32
from ...errors import ShapeError
from ...ops.composite._common import pair, window_out
from ...ops.composite.convolution import conv2d_input_grad, out_hw, window_params
from ...shapes import shape_text
from ...tensor import Tensor
from ._windows import IntPair, as_2d, pair_1d, sizes_nd, unbatched
from .convolution_integer import check_dtypes, check_transposed_dtypes, conv_nd


def conv2d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: IntPair = 1,
    padding: IntPair | str = 0,
    dilation: IntPair = 1,
    groups: int = 1,
    *,
    layout: str = "NCHW",
) -> Tensor:
    """2-D convolution: NCHW with [O, C / groups, KH, KW] weights or NHWC with [KH, KW, C, O].
    padding="valid" is 0; "same" (stride 1) keeps H and W, as PyTorch: the extra row or column of an
    even kernel's padding goes after. With `groups` (NCHW), the channels and the filters are cut into
    that many groups, each group's filters convolving its own channels (depthwise: groups = C)."""
    check_dtypes(input, weight, bias, "conv2d")
    if layout == "NCHW":
        check_shapes(input, weight, bias, groups, padding, dilation, 2, "conv2d")
    if input.ndim == 3:
        return unbatched(conv2d, input, weight, bias, stride, padding, dilation, groups, layout=layout)
    if isinstance(padding, str):
        spatial = (2, 3) if layout == "NCHW" else (1, 2)
        kernel = weight.shape[2:] if layout == "NCHW" else weight.shape[:2]
        input, padding = _named_padding(input, kernel, padding, stride, dilation, spatial, "conv2d")
    window = {"stride": stride, "padding": padding, "dilation": dilation, "layout": layout}
    if not input.dtype.is_float:
        if layout != "NCHW":
            raise NotImplementedError(f"conv2d of {input.dtype.name} takes NCHW images")
        sizes = window_params(1, stride, padding, dilation)
        s, p, d = sizes["stride"], sizes["padding"], sizes["dilation"]
        out = _grouped(lambda xg, wg: conv_nd(xg, wg, s, p, d, "conv2d"), input, weight, groups, "conv2d")
    elif groups == 1:
        out = ops.conv2d(input, weight, **window)
    else:
        if layout != "NCHW":
            raise NotImplementedError("conv2d: groups > 1 takes NCHW images")
        out = _grouped(lambda xg, wg: ops.conv2d(xg, wg, **window), input, weight, groups, "conv2d")
    if bias is None:
        return out
    return out + (bias.reshape(bias.shape[0], 1, 1) if layout == "NCHW" else bias)


def check_shapes(
    x: Tensor,
    weight: Tensor,
    bias: Tensor | None,
    groups: Any,
    padding: Any,
    dilation: Any,
    nd: int,
    what: str,
    transposed: bool = False,
) -> None:
    """The shapes a convolution of `nd` spatial axes takes, checked before any work with the errors
    naming `what`, the function called (conv1d is computed as conv2d: its errors must still say conv1d).
    Weights are [O, C / groups, k...], transposed [C, O / groups, k...]."""
    axes, taps = {1: ("L", "k"), 2: ("H, W", "kh, kw"), 3: ("D, H, W", "kd, kh, kw")}[nd]
    form = f"[C_in, C_out / groups, {taps}]" if transposed else f"[O, C / groups, {taps}]"
    if x.ndim not in (nd + 1, nd + 2) or weight.ndim != nd + 2:
        raise ShapeError(
            f"{what} takes x [N, C, {axes}] (or [C, {axes}]) and weight {form}, got "
            f"{shape_text(x.shape)} and {shape_text(weight.shape)}"
        )
    if not isinstance(groups, int) or isinstance(groups, bool) or groups < 1:
        raise ValueError(f"{what}: groups must be a positive int, got {groups!r}")
    channels, spatial = x.shape[-nd - 1], x.shape[-nd:]
    if transposed:
        if weight.shape[0] != channels or (groups > 1 and channels % groups):
            raise ShapeError(
                f"{what}: the input has {channels} channels but the weight {shape_text(weight.shape)} "
                f"expects {weight.shape[0]} in {groups} group(s)"
            )
        filters = weight.shape[1] * groups
    else:
        filters = weight.shape[0]
        if groups > 1 and (channels % groups or filters % groups):
            raise ShapeError(
                f"{what}: {channels} channels and {filters} filters do not split into {groups} groups"
            )
        if weight.shape[1] * groups != channels:
            raise ShapeError(
                f"{what}: the input has {channels} channels but the weight {shape_text(weight.shape)} "
                f"expects {weight.shape[1] * groups} (groups={groups}: weight {shape_text(weight.shape)} "
                f"needs {channels // groups} input channels a group)"
            )
    if bias is not None and tuple(bias.shape) != (filters,):
        raise ShapeError(
            f"{what}: bias must be [{filters}] (one per output channel), got {shape_text(bias.shape)}"
        )
    if transposed or isinstance(padding, str):
        return
    pads = sizes_nd(padding, nd, f"{what}'s padding", 0)
    dilations = sizes_nd(dilation, nd, f"{what}'s dilation", 1)
    for n, p, d, k in zip(spatial, pads, dilations, weight.shape[2:]):
        if isinstance(n, int) and isinstance(k, int) and n + 2 * p < d * (k - 1) + 1:
            raise ShapeError(
                f"{what}: the kernel {shape_text(weight.shape[2:])} (dilation {dilations}) is larger than "
                f"the padded input {shape_text(tuple(m + 2 * q for m, q in zip(spatial, pads)))}"
            )


def _grouped(
    conv: Any, x: Tensor, weight: Tensor, groups: int, what: str, transposed: bool = False
) -> Tensor:
    """A grouped convolution: the channels and the filters cut into `groups`, each group's filters
    convolving its own channels, their outputs concatenated (weights [O, C / groups, ...], or
    [C, O / groups, ...] transposed)."""
    channels, filters = x.shape[1], weight.shape[0]
    if not isinstance(groups, int) or isinstance(groups, bool) or groups < 1:
        raise ValueError(f"{what}: groups must be a positive int, got {groups!r}")
    if transposed and filters != channels:
        raise ShapeError(f"{what}: weight {shape_text(weight.shape)} needs {channels} input channels")
    if channels % groups or filters % groups:
        raise ShapeError(
            f"{what}: {channels} channels and {filters} filters do not split into {groups} groups"
        )
    if not transposed and weight.shape[1] != channels // groups:
        raise ShapeError(
            f"{what}: weight {shape_text(weight.shape)} needs {channels // groups} input channels a group"
        )
    if groups == 1:
        return conv(x, weight)
    c, o = channels // groups, filters // groups
    parts = [conv(x[:, g * c : (g + 1) * c], weight[g * o : (g + 1) * o]) for g in range(groups)]
    return ops.concat(parts, axis=1)


def conv_transpose2d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: IntPair = 1,
    padding: IntPair = 0,
    output_padding: IntPair = 0,
    groups: int = 1,
    dilation: IntPair = 1,
) -> Tensor:
    """The transposed 2-D convolution of x [N, C_in, H, W] with weight [C_in, C_out / groups, kh, kw]
    (PyTorch's): conv2d's gradient for its input, into an image of (H - 1) stride - 2 padding +
    dilation (k - 1) + output_padding + 1 a side; with `groups`, each group of input channels makes its
    own C_out / groups output channels."""
    check_transposed_dtypes(input, weight, bias, "conv_transpose2d")
    check_shapes(input, weight, bias, groups, 0, dilation, 2, "conv_transpose2d", transposed=True)
    if input.ndim == 3:
        return unbatched(
            conv_transpose2d, input, weight, bias, stride, padding, output_padding, groups, dilation
        )
    sh, sw = pair(stride, "stride", 1)
    ph, pw = pair(padding, "padding", 0)
    oh, ow = pair(output_padding, "output padding", 0)
    dh, dw = pair(dilation, "dilation", 1)
    if input.ndim != 4 or weight.ndim != 4:
        raise ShapeError(
            f"conv_transpose2d takes x [N, C, H, W] and weight [C_in, C_out / groups, kh, kw], got "
            f"{shape_text(input.shape)} and {shape_text(weight.shape)}"
        )
    if oh >= max(sh, dh) or ow >= max(sw, dw):
        raise ValueError(f"conv_transpose2d: output_padding must be below stride or dilation, got {(oh, ow)}")
    kh, kw = weight.shape[2], weight.shape[3]
    size = tuple(
        (n - 1) * s - 2 * p + d * (k - 1) + o + 1
        for n, s, p, d, k, o in [(input.shape[2], sh, ph, dh, kh, oh), (input.shape[3], sw, pw, dw, kw, ow)]
    )
    if any(isinstance(n, int) and n <= 0 for n in size):
        raise ShapeError(f"conv_transpose2d: the output size {size} is not positive")
    window = {"stride": (sh, sw), "padding": (ph, pw), "dilation": (dh, dw)}
    # an output_padding of at least the stride (allowed below the dilation) makes room for more windows
    # than x has: they read zeros
    reach = out_hw(*size, (kh, kw), **window)
    extra = [r - n for r, n in zip(reach, input.shape[2:])]
    if any(isinstance(e, int) and e > 0 for e in extra):
        input = input.pad([(0, 0), (0, 0), (0, extra[0]), (0, extra[1])])

    if not input.dtype.is_float and input.dtype.name != "i64":
        raise TypeError(
            f"conv_transpose2d of {input.dtype.name}: PyTorch has a kernel for float and i64 only"
        )

    def one(xg: Tensor, wg: Tensor) -> Tensor:
        if not xg.dtype.is_float:
            return _conv_transpose2d_exact(xg, wg, (sh, sw), (ph, pw), (dh, dw), size)
        return conv2d_input_grad(xg, wg, **window, size=size)

    out = _grouped(one, input, weight, groups, "conv_transpose2d", transposed=True)
    # PyTorch adds the bias into the result's dtype (an f64 bias to f32 images: added in f64, rounded once)
    return out if bias is None else (out + bias.reshape(bias.shape[0], 1, 1)).cast(out.dtype)


def _conv_transpose2d_exact(
    x: Tensor, weight: Tensor, stride: tuple, padding: tuple, dilation: tuple, size: tuple
) -> Tensor:
    """An i64 conv_transpose2d as PyTorch's integer kernel: products and sums in i64, wrapping (exact in any
    order). Each tap's sum over the input channels is one product [N, H, W, C_in] @ [C_in, C_out], spread
    at the stride, shifted by the tap's dilated offset and added; the result cut to `size` past padding."""
    h, w = x.shape[2], x.shape[3]
    kh, kw = weight.shape[2], weight.shape[3]
    reach = [(n - 1) * stride[i] + dilation[i] * (k - 1) + 1 for i, (n, k) in enumerate(((h, kh), (w, kw)))]
    canvas = [max(padding[i] + size[i], reach[i]) for i in range(2)]
    rows = x.permute(0, 2, 3, 1)  # [N, H, W, C_in]
    total = None
    for i in range(kh):
        for j in range(kw):
            tap = _spread(_spread(rows @ weight[:, :, i, j], 1, stride[0]), 2, stride[1])
            top, left = i * dilation[0], j * dilation[1]
            below, right = canvas[0] - top - tap.shape[1], canvas[1] - left - tap.shape[2]
            tap = tap.pad([(0, 0), (top, below), (left, right), (0, 0)])
            total = tap if total is None else total + tap
    out = total[:, padding[0] : padding[0] + size[0], padding[1] : padding[1] + size[1]]
    return out.permute(0, 3, 1, 2)


def _spread(t: Tensor, axis: int, stride: int) -> Tensor:
    """t with stride - 1 zeros after each entry along `axis` (none after the last)."""
    if stride == 1:
        return t
    n = t.shape[axis]
    spread = ops.stack([t] + [t * 0] * (stride - 1), axis + 1)
    spread = spread.reshape(*t.shape[:axis], n * stride, *t.shape[axis + 1 :])
    return spread[(slice(None),) * axis + (slice(0, (n - 1) * stride + 1),)]


def conv_transpose1d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: int = 1,
    padding: int = 0,
    output_padding: int = 0,
    groups: int = 1,
    dilation: int = 1,
) -> Tensor:
    """The transposed 1-D convolution of [N, C_in, L] with [C_in, C_out / groups, K]: the 2-D one over
    [N, C_in, 1, L]."""
    check_transposed_dtypes(input, weight, bias, "conv_transpose1d")
    check_shapes(input, weight, bias, groups, 0, dilation, 1, "conv_transpose1d", transposed=True)
    if input.ndim == 2:
        return unbatched(
            conv_transpose1d, input, weight, bias, stride, padding, output_padding, groups, dilation
        )
    window = [pair_1d(v, u) for v, u in ((stride, 1), (padding, 0), (output_padding, 0))]
    out = conv_transpose2d(
        ops.unsqueeze(input, 2), ops.unsqueeze(weight, 2), bias, *window, groups, pair_1d(dilation, 1)
    )
    return out.squeeze(2)


def _named_padding(
    x: Tensor, kernel: Any, padding: str, stride: Any, dilation: Any, spatial: tuple, what: str
) -> tuple[Tensor, Any]:
    """x and the padding for PyTorch's padding="valid" or "same" over the `spatial` axes (x padded first
    where a side needs one more than the other)."""
    n = len(spatial)
    if padding == "valid":
        return x, 0
    if padding != "same":
        raise ValueError(f"{what}: padding must be a size, 'valid' or 'same', got {padding!r}")
    if sizes_nd(stride, n, f"{what}'s stride", 1) != (1,) * n:
        raise ValueError(f"{what}: padding='same' needs stride 1 (as in PyTorch)")
    totals = [d * (k - 1) for d, k in zip(sizes_nd(dilation, n, f"{what}'s dilation", 1), kernel)]
    if all(t % 2 == 0 for t in totals):
        return x, tuple(t // 2 for t in totals)
    widths = [(0, 0)] * x.ndim
    for axis, t in zip(spatial, totals):
        widths[axis] = (t // 2, t - t // 2)
    return x.pad(widths), 0


def conv1d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: int = 1,
    padding: int | str = 0,
    dilation: int = 1,
    groups: int = 1,
) -> Tensor:
    """1-D convolution of [N, C, L] with [O, C / groups, K] weights: the 2-D one over [N, C, 1, L]."""
    check_dtypes(input, weight, bias, "conv1d")
    check_shapes(input, weight, bias, groups, padding, dilation, 1, "conv1d")
    if input.ndim == 2:
        return unbatched(conv1d, input, weight, bias, stride, padding, dilation, groups)
    window = {
        "stride": pair_1d(stride, 1),
        "padding": padding if isinstance(padding, str) else pair_1d(padding, 0),
        "dilation": pair_1d(dilation, 1),
        "groups": groups,
    }
    return as_2d(conv2d, input, ops.unsqueeze(weight, 2), bias, **window)


def conv3d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
) -> Tensor:
    """3-D convolution of [N, C, D, H, W] with [O, C / groups, KD, KH, KW] weights (PyTorch's, padding
    "same" and "valid" too): for each depth tap kd, the 2-D convolution of the depth slices it reads
    (all output depths as one batch) with weight[:, :, kd], summed over kd."""
    check_dtypes(input, weight, bias, "conv3d")
    check_shapes(input, weight, bias, groups, padding, dilation, 3, "conv3d")
    if input.ndim == 4:
        return unbatched(conv3d, input, weight, bias, stride, padding, dilation, groups)
    if input.ndim != 5 or weight.ndim != 5:
        raise ShapeError(
            f"conv3d takes x [N, C, D, H, W] and weight [O, C / groups, KD, KH, KW], got "
            f"{shape_text(input.shape)} and {shape_text(weight.shape)}"
        )
    if isinstance(padding, str):
        input, padding = _named_padding(
            input, weight.shape[2:], padding, stride, dilation, (2, 3, 4), "conv3d"
        )
    s = sizes_nd(stride, 3, "conv3d's stride", 1)
    p = sizes_nd(padding, 3, "conv3d's padding", 0)
    d = sizes_nd(dilation, 3, "conv3d's dilation", 1)
    if input.dtype.is_float:
        out = _grouped(lambda xg, wg: _conv3d(xg, wg, s, p, d), input, weight, groups, "conv3d")
    else:
        out = _grouped(lambda xg, wg: conv_nd(xg, wg, s, p, d, "conv3d"), input, weight, groups, "conv3d")
    return out if bias is None else out + bias.reshape(bias.shape[0], 1, 1, 1)


def _conv3d(x: Tensor, weight: Tensor, stride: tuple, padding: tuple, dilation: tuple) -> Tensor:
    n, c, depth = x.shape[:3]
    o, kd = weight.shape[0], weight.shape[2]
    out_depth = window_out(depth, kd, stride[0], padding[0], dilation[0], "depth")
    x = x.pad([(0, 0), (0, 0), (padding[0], padding[0]), (0, 0), (0, 0)]) if padding[0] else x
    window = {"stride": stride[1:], "padding": padding[1:], "dilation": dilation[1:]}
    total = None
    for k in range(kd):
        start = k * dilation[0]
        slices = x[:, :, start : start + stride[0] * (out_depth - 1) + 1 : stride[0]]  # [N, C, Do, H, W]
        flat = slices.permute(0, 2, 1, 3, 4).reshape(n * out_depth, c, *x.shape[3:])
        part = ops.conv2d(flat, weight[:, :, k], **window)
        total = part if total is None else total + part
    return total.reshape(n, out_depth, o, *total.shape[2:]).permute(0, 2, 1, 3, 4)


def conv_transpose3d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: Any = 1,
    padding: Any = 0,
    output_padding: Any = 0,
    groups: int = 1,
    dilation: Any = 1,
) -> Tensor:
    """The transposed 3-D convolution of [N, C_in, D, H, W] with [C_in, C_out / groups, KD, KH, KW]
    (conv3d's adjoint): for each depth tap kd, the transposed 2-D convolution of every input depth slice
    with weight[:, :, kd], spread at stride along the output depth from kd dilation on, summed, and cut
    to (D - 1) stride - 2 padding + dilation (KD - 1) + output_padding + 1."""
    check_transposed_dtypes(input, weight, bias, "conv_transpose3d")
    check_shapes(input, weight, bias, groups, 0, dilation, 3, "conv_transpose3d", transposed=True)
    if input.ndim == 4:
        return unbatched(
            conv_transpose3d, input, weight, bias, stride, padding, output_padding, groups, dilation
        )
    if input.ndim != 5 or weight.ndim != 5:
        raise ShapeError(
            f"conv_transpose3d takes x [N, C, D, H, W] and weight [C_in, C_out / groups, KD, KH, KW], got "
            f"{shape_text(input.shape)} and {shape_text(weight.shape)}"
        )
    s = sizes_nd(stride, 3, "conv_transpose3d's stride", 1)
    p = sizes_nd(padding, 3, "conv_transpose3d's padding", 0)
    op = sizes_nd(output_padding, 3, "conv_transpose3d's output_padding", 0)
    d = sizes_nd(dilation, 3, "conv_transpose3d's dilation", 1)
    if any(o >= max(si, di) for o, si, di in zip(op, s, d)):
        raise ValueError(f"conv_transpose3d: output_padding must be below stride or dilation, got {op}")
    out = _grouped(
        lambda xg, wg: _conv_transpose3d(xg, wg, s, p, op, d),
        input,
        weight,
        groups,
        "conv_transpose3d",
        transposed=True,
    )
    return out if bias is None else out + bias.reshape(bias.shape[0], 1, 1, 1)


def _conv_transpose3d(
    x: Tensor, weight: Tensor, stride: tuple, padding: tuple, output_padding: tuple, dilation: tuple
) -> Tensor:
    n, c, depth = x.shape[:3]
    kd = weight.shape[2]
    full = (depth - 1) * stride[0] + dilation[0] * (kd - 1) + 1 + output_padding[0]
    out_depth = full - 2 * padding[0]
    flat = x.permute(0, 2, 1, 3, 4).reshape(n * depth, c, *x.shape[3:])
    total = None
    for k in range(kd):
        part = conv_transpose2d(
            flat, weight[:, :, k], None, stride[1:], padding[1:], output_padding[1:], 1, dilation[1:]
        )
        part = part.reshape(n, depth, *part.shape[1:])  # [N, D, C_out, Ho, Wo]
        if stride[0] > 1:  # stride - 1 zero slices after each
            part = ops.stack([part] + [part * 0] * (stride[0] - 1), 2).reshape(
                n, depth * stride[0], *part.shape[2:]
            )
            part = part[:, : (depth - 1) * stride[0] + 1]
        start = k * dilation[0]
        part = part.pad([(0, 0), (start, full - start - part.shape[1]), (0, 0), (0, 0), (0, 0)])
        total = part if total is None else total + part
    return total[:, padding[0] : padding[0] + out_depth].permute(0, 2, 1, 3, 4)


def unfold(input: Tensor, kernel_size: Any, dilation: Any = 1, padding: Any = 0, stride: Any = 1) -> Tensor:
    """Every sliding block of x [N, C, H, W] as a column: [N, C * kh * kw, L] for L blocks, each
    column in (c, kh, kw) order (PyTorch's F.unfold; im2col's columns). A bool image too (as PyTorch's:
    its blocks are copied, exactly, through f32)."""
    if input.ndim == 3:  # PyTorch's unbatched image [C, H, W] gives [C * kh * kw, L]
        return unfold(input.unsqueeze(0), kernel_size, dilation, padding, stride).squeeze(0)
    if input.dtype.name == "bool":
        return unfold(input.cast("f32"), kernel_size, dilation, padding, stride).cast("bool")
    cols = ops.im2col(input, kernel=kernel_size, stride=stride, padding=padding, dilation=dilation)
    n, c, kh, kw, oh, ow = cols.shape
    return cols.reshape(n, c * kh * kw, oh * ow)


def fold(
    input: Tensor, output_size: Any, kernel_size: Any, dilation: Any = 1, padding: Any = 0, stride: Any = 1
) -> Tensor:
    """The inverse arrangement of unfold: columns [N, C * kh * kw, L] summed back into an image
    [N, C, H, W] of `output_size` where blocks overlap (PyTorch's F.fold; col2im); unbatched columns
    [C * kh * kw, L] give [C, H, W]."""
    if input.ndim == 2:
        return fold(input.unsqueeze(0), output_size, kernel_size, dilation, padding, stride).squeeze(0)
    size = pair(output_size, "output size", 1)
    window = window_params(kernel_size, stride, padding, dilation)
    del window["layout"]
    (kh, kw), (oh, ow) = window["kernel"], out_hw(*size, **window)
    n, ckk, blocks = input.shape
    if blocks != oh * ow or ckk % (kh * kw):
        raise ShapeError(
            f"fold: columns {shape_text(input.shape)} do not make {kh}x{kw} blocks over {oh}x{ow} places"
        )
    cols = input.reshape(n, ckk // (kh * kw), kh, kw, oh, ow)
    if (
        input.dtype is bool_
    ):  # PyTorch adds bool blocks in bool: a place is True where any block is (exact in f32)
        return ops.col2im(cols.cast(f32), size=size, **window) > 0
    return ops.col2im(cols, size=size, **window)

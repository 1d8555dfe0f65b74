"""PyTorch's pooling options beyond the pooling ops' own windows, written with ops (so they differentiate):
`ceil_mode` (a last window that may run past the input), `count_include_pad` and `divisor_override` for
average pooling, and max unpooling. NCHW; `pooling.py` calls these only when an option asks for them.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ... import ops
from ...errors import ShapeError
from ...ops.composite._common import out_size, pair
from ...ops.index import place
from ...shapes import shape_text
from ...tensor import Tensor
from ._windows import sizes_nd


def _concrete(x: Tensor, what: str) -> tuple[int, int]:
    if x.ndim != 4 or not (isinstance(x.shape[2], int) and isinstance(x.shape[3], int)):
        raise ShapeError(f"{what} takes [N, C, H, W] of known H and W, got {shape_text(x.shape)}")
    return x.shape[2], x.shape[3]


# per axis: (input length, output length, kernel, stride, padding, dilation)
Geometry = list[tuple[int, int, int, int, int, int]]


def _padded(x: Tensor, geometry: Geometry, value: float) -> Tensor:
    """x padded by each window's padding, and on the right by what the last window needs beyond it."""
    extra = [max(0, (o - 1) * s + d * (k - 1) + 1 - (n + 2 * p)) for n, o, k, s, p, d in geometry]
    (_, _, _, _, ph, _), (_, _, _, _, pw, _) = geometry
    widths = [(0, 0), (0, 0), (ph, ph + extra[0]), (pw, pw + extra[1])]
    return x.pad(widths, value=value) if any(a or b for a, b in widths) else x


def _geometry(
    x: Tensor, kernel: Any, stride: Any, padding: Any, dilation: Any, ceil_mode: bool, what: str
) -> Geometry:
    h, w = _concrete(x, what)
    k = pair(kernel, "kernel_size", 1)
    s = pair(stride if stride is not None else kernel, "stride", 1)
    p, d = pair(padding, "padding", 0), pair(dilation, "dilation", 1)
    if any(2 * p[i] > k[i] for i in range(2)):
        raise ValueError(f"{what}: padding {p} is more than half the window {k}")
    return [
        (n, out_size(n, k[i], s[i], p[i], d[i], ceil_mode), k[i], s[i], p[i], d[i])
        for i, n in enumerate((h, w))
    ]


def avg_pool2d(
    x: Tensor,
    kernel: Any,
    stride: Any,
    padding: Any,
    ceil_mode: bool,
    count_include_pad: bool,
    divisor_override: int | None,
) -> Tensor:
    """Window means with PyTorch's divisors: the window clipped to the padded input (count_include_pad)
    or to the input itself, or `divisor_override`."""
    geometry = _geometry(x, kernel, stride, padding, 1, ceil_mode, "avg_pool2d")
    (h, oh, kh, sh, ph, _), (w, ow, kw, sw, pw, _) = geometry
    padded = _padded(x, geometry, 0.0)
    sums = ops.avg_pool2d(padded, kernel=(kh, kw), stride=(sh, sw), padding=0)[:, :, :oh, :ow] * (kh * kw)
    if divisor_override is not None:
        return sums / checked_divisor(divisor_override, "avg_pool2d")

    rows = window_counts(h, oh, kh, sh, ph, count_include_pad)
    divisor = np.outer(rows, window_counts(w, ow, kw, sw, pw, count_include_pad)).astype(np.float64)
    return sums / ops.tensor(divisor).cast(x.dtype)


def checked_divisor(divisor_override: Any, what: str) -> int:
    """divisor_override, which must be a non-zero int (PyTorch's: a negative one divides too)."""
    if not isinstance(divisor_override, int) or isinstance(divisor_override, bool) or divisor_override == 0:
        raise ValueError(f"{what}: divisor_override must be a non-zero integer, got {divisor_override!r}")
    return divisor_override


def window_counts(n: int, out: int, k: int, s: int, p: int, count_include_pad: bool) -> np.ndarray:
    """PyTorch's average-pool divisor along one axis: each window clipped to the padded input
    (count_include_pad) or to the input itself."""
    start = np.arange(out) * s - p
    end = np.minimum(start + k, n + p)
    return end - start if count_include_pad else np.minimum(end, n) - np.maximum(start, 0)


def _unpool_size(what: str, nd: int, default: tuple, stride: tuple, output_size: Any) -> tuple:
    """`output_size` (nd sizes, or nd + 2 with N and C) checked as PyTorch's: each strictly within a
    stride of the default size."""
    sizes = tuple(output_size)
    if len(sizes) == nd + 2:
        sizes = sizes[2:]
    if len(sizes) != nd:
        raise ValueError(f"{what}: output_size must give {nd} or {nd + 2} sizes, got {output_size!r}")
    for d, (size, near, step) in enumerate(zip(sizes, default, stride)):
        if isinstance(near, int) and not near - step < size < near + step:
            raise ValueError(
                f'{what}: invalid output_size "{output_size}" (dim {d} must be between {near - step} and '
                f"{near + step})"
            )
    return sizes


def max_unpool(
    x: Tensor, indices: Tensor, nd: int, kernel: Any, stride: Any, padding: Any, output_size: Any = None
) -> Tensor:
    """The inverse of max pooling with indices over `nd` spatial axes: zeros of the unpooled size
    ((n - 1) stride - 2 padding + kernel a side, or `output_size`), each value written at its flat
    index (h W + w in 2-D)."""
    what = f"max_unpool{nd}d"
    if x.ndim != nd + 2:
        raise ShapeError(f"{what} takes [N, C, {nd} spatial sizes], got {shape_text(x.shape)}")
    k = sizes_nd(kernel, nd, f"{what}'s kernel_size", 1)
    s = k if stride is None else sizes_nd(stride, nd, f"{what}'s stride", 1)
    p = sizes_nd(padding, nd, f"{what}'s padding", 0)
    sizes = tuple((n - 1) * s[i] - 2 * p[i] + k[i] for i, n in enumerate(x.shape[2:]))
    if output_size is not None:
        sizes = _unpool_size(what, nd, sizes, s, output_size)
    if tuple(indices.shape) != tuple(x.shape):
        raise ShapeError(
            f"{what}: indices {shape_text(indices.shape)} and input {shape_text(x.shape)} differ"
        )
    n, c = x.shape[0], x.shape[1]
    # overlapping windows may name one position twice, with the same value: written once; each window
    # gets its position's gradient, as PyTorch's
    flat = place(x.reshape(n, c, -1), indices.reshape(n, c, -1), axis=2, size=math.prod(sizes))
    return flat.reshape(n, c, *sizes)

"""Pooling over windows of any number of spatial axes, written with gathers so it differentiates and
takes any dtype: a NumPy table names, for each output position, the input positions of its window; the
input's spatial axes flattened are gathered by it into [N, C, O, K] (O outputs, K window slots).

A slot outside the input reads, for a maximum, the window's first element inside it (so the first
maximum in window order is an element of the input, as PyTorch's index is, even where every element is
-inf, and integers need no sentinel), and for a sum a zero appended to the input. A window holding NaN
gives its last NaN, as PyTorch's kernels do. Used for 3-D pooling,
adaptive pooling, integer max pooling and `area` interpolation; the 2-D float windows keep their ops.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ... import ops
from ...errors import ShapeError
from ...shapes import shape_text
from ...tensor import Tensor
from ._windows import unbatched

# per axis: for each output position, the input positions of its window (-1 outside the input)
AxisTable = np.ndarray


def regular_axis(size: int, out: int, kernel: int, stride: int, padding: int, dilation: int) -> AxisTable:
    """The window positions of a sliding window: start o s - p, then every `dilation`, `kernel` of them."""
    positions = np.add.outer(np.arange(out) * stride - padding, np.arange(kernel) * dilation)
    return np.where((positions >= 0) & (positions < size), positions, -1)


def adaptive_axis(size: int, out: int) -> AxisTable:
    """PyTorch's adaptive windows [floor(i n / out), ceil((i + 1) n / out)), padded with -1 to the longest."""
    if out == 0:  # PyTorch's empty output
        return np.zeros((0, 1), dtype=np.int64)
    starts = np.arange(out) * size // out
    ends = -(-(np.arange(out) + 1) * size // out)
    positions = starts[:, None] + np.arange(int((ends - starts).max()))
    return np.where(positions < ends[:, None], positions, -1)


def _flat_table(axes: Sequence[AxisTable], sizes: Sequence[int]) -> np.ndarray:
    """The axes' tables as one [O, K] table of flat positions (row-major over the outputs and over the
    window slots), -1 where any axis is outside."""
    n = len(axes)
    flat = np.zeros([1] * (2 * n), dtype=np.int64)
    outside = np.zeros([1] * (2 * n), dtype=bool)
    stride = 1
    for i in reversed(range(n)):
        shape = [1] * (2 * n)
        shape[i], shape[n + i] = axes[i].shape
        table = axes[i].reshape(shape)
        flat, outside, stride = flat + table * stride, outside | (table < 0), stride * sizes[i]
    out, slots = int(np.prod([a.shape[0] for a in axes])), int(np.prod([a.shape[1] for a in axes]))
    return np.where(outside, -1, flat).reshape(out, slots)


def check_input(x: Tensor, n: int, what: str) -> None:
    """x must be [N, C, *spatial] or [C, *spatial] with n spatial axes of known sizes."""
    if x.ndim not in (n + 1, n + 2) or not all(isinstance(d, int) for d in x.shape[-n:]):
        raise ShapeError(
            f"{what} takes [N, C, *{n} spatial sizes] or [C, *{n} spatial sizes] of known sizes, got "
            f"{shape_text(x.shape)}"
        )


def _windows(x: Tensor, table: np.ndarray) -> Tensor:
    """x [N, C, *spatial] gathered by a flat table [O, K]: [N, C, O, K]."""
    n, c = x.shape[0], x.shape[1]
    return ops.take(x.reshape(n, c, math.prod(x.shape[2:], start=1)), ops.from_numpy(table), axis=2)


def max_pool(x: Tensor, axes: Sequence[AxisTable], what: str, return_indices: bool) -> Any:
    """Each window's maximum, [N, C, *outs] (the gradient to its first maximum), and with return_indices
    the flat index of that maximum in the input's spatial axes (PyTorch's)."""
    check_input(x, len(axes), what)
    if x.ndim == len(axes) + 1:
        return unbatched(max_pool, x, axes, what, return_indices)
    table = _flat_table(axes, x.shape[2:])
    first_inside = table[np.arange(len(table)), (table >= 0).argmax(1)]
    if (first_inside < 0).any():
        raise ShapeError(f"{what}: a window lies wholly in the padding")
    inside = table >= 0
    table = np.where(inside, table, first_inside[:, None])
    windows = _windows(x, table)
    first = windows.argmax(axis=3, keepdim=True)  # [N, C, O, 1]
    if x.dtype.is_float:  # a window holding NaN: its last NaN inside the input, as PyTorch's
        slots = ops.from_numpy(np.where(inside, np.arange(table.shape[1]), -1))
        last_nan = ops.where(windows.isnan(), slots, -1).amax(axis=3, keepdim=True)
        first = ops.where(last_nan >= 0, last_nan, first)
    outs = tuple(a.shape[0] for a in axes)
    n, c = x.shape[0], x.shape[1]
    values = ops.gather(windows, first, axis=3).reshape(n, c, *outs)
    if not return_indices:
        return values
    positions = ops.from_numpy(table).expand(n, c, *table.shape)
    return values, ops.gather(positions, first, axis=3).reshape(n, c, *outs)


def sum_pool(x: Tensor, axes: Sequence[AxisTable], what: str) -> Tensor:
    """Each window's sum over the input's elements in it, [N, C, *outs]."""
    check_input(x, len(axes), what)
    if x.ndim == len(axes) + 1:
        return unbatched(sum_pool, x, axes, what)
    n, c = x.shape[0], x.shape[1]
    # added in window order, one element after another, as PyTorch's kernels add (a running sum)
    return ops.cumsum(zero_padded_windows(x, axes), axis=3)[..., -1].reshape(
        n, c, *(a.shape[0] for a in axes)
    )


def zero_padded_windows(x: Tensor, axes: Sequence[AxisTable]) -> Tensor:
    """x [N, C, *spatial] gathered by the axes' windows into [N, C, O, K] (O outputs, K window slots, each
    row-major over the axes), a slot outside the input reading zero."""
    n, c = x.shape[0], x.shape[1]
    table = _flat_table(axes, x.shape[2:])
    flat = ops.concat(
        [x.reshape(n, c, math.prod(x.shape[2:], start=1)), ops.zeros(n, c, 1, dtype=x.dtype)], axis=2
    )
    return ops.take(flat, ops.from_numpy(np.where(table >= 0, table, flat.shape[2] - 1)), axis=2)


def adaptive_counts(axes: Sequence[AxisTable]) -> np.ndarray:
    """The number of input elements in each adaptive window, shaped as the outputs."""
    counts = np.ones([1] * len(axes), dtype=np.float64)
    for i, table in enumerate(axes):
        shape = [1] * len(axes)
        shape[i] = table.shape[0]
        counts = counts * (table >= 0).sum(1).reshape(shape)
    return counts

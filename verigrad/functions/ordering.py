"""Functions of the stable sort (NaN above every number): sort and topk, the order statistics kthvalue,
median and nanmedian, the running extremes cummax and cummin (each with the indices it came from, as
PyTorch's (values, indices)), and unique / unique_consecutive (eager only)."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from .. import modes
from ..dtypes import i64
from ..ops.binary import ne, sub, where
from ..ops.creation import from_numpy, full
from ..ops.index import argsort, gather
from ..ops.reduce import sum
from ..ops.scan import running_extreme_index
from ..ops.shaping import getitem, squeeze
from ..shapes import normalize_axis
from ..tensor import Tensor
from .pointwise import isnan, values_of
from .rearrange import concrete_size
from .statistics import pick


class SortResult(NamedTuple):
    """PyTorch's (values, indices) of sort and topk."""

    values: Tensor
    indices: Tensor


def sort(x: Tensor, axis: int = -1, descending: bool = False, *, dim: int | None = None) -> SortResult:
    """x sorted along `axis` (stably; NaN above every number), with the indices it came from."""
    order = argsort(x, axis=pick(axis, dim), descending=descending)
    return SortResult(gather(x, order, axis=pick(axis, dim)), order)


def topk(
    x: Tensor, k: int, axis: int = -1, largest: bool = True, sorted: bool = True, *, dim: int | None = None
) -> SortResult:
    """The k largest (or smallest) entries along `axis`, in order, with their indices (ties: the
    earlier index first)."""
    axis = normalize_axis(pick(axis, dim), x.ndim)
    size = concrete_size(x, axis, "topk")
    if not isinstance(k, int) or not 0 <= k <= size:
        raise ValueError(f"topk needs 0 <= k <= {size}, got {k}")
    order = argsort(x, axis=axis, descending=largest)
    first = getitem(order, (slice(None),) * axis + (slice(0, k),))
    return SortResult(gather(x, first, axis=axis), first)


def _pick_at(x: Tensor, axis: int, position: Tensor, keepdim: bool) -> SortResult:
    """The entry at `position` (one per row, keepdim-shaped, i64) of x sorted along `axis`."""
    order = argsort(x, axis=axis)
    index = gather(order, position, axis=axis)
    values = gather(x, index, axis=axis)
    if not keepdim:
        values, index = squeeze(values, axis), squeeze(index, axis)
    return SortResult(values, index)


def _flat_or(x: Tensor, dim: Any) -> tuple[Tensor, int]:
    return (x.reshape(-1), 0) if dim is None else (x, normalize_axis(dim, x.ndim))


def _median(x: Tensor, dim: Any, keepdim: bool, skip_nan: bool) -> Any:
    x_, axis = _flat_or(x, dim)
    size = concrete_size(x_, axis, "median")
    if size == 0:
        raise ValueError("median of an empty dimension")
    nans = sum(isnan(x_), axis=axis, keepdim=True)  # i64
    if skip_nan:  # the lower median of the numbers; all NaN: a NaN
        numbers = sub(size, nans)
        position = where(ne(numbers, 0), ((numbers - 1) / 2).floor().cast(i64), 0)
    else:  # PyTorch's: NaN (the first) where the row has one
        position = where(ne(nans, 0), sub(size, nans), (size - 1) // 2).cast(i64)
    found = _pick_at(x_, axis, position, keepdim or dim is None)
    return found.values.reshape(()) if dim is None else found


def kthvalue(x: Tensor, k: int, dim: int = -1, keepdim: bool = False) -> SortResult:
    """The k-th smallest entry along `dim` (k from 1), with its index (ties: the earlier index)."""
    axis = normalize_axis(dim, x.ndim)
    size = concrete_size(x, axis, "kthvalue")
    if not isinstance(k, int) or not 1 <= k <= size:
        raise ValueError(f"kthvalue needs 1 <= k <= {size}, got {k}")
    shape = tuple(1 if a == axis else s for a, s in enumerate(x.shape))
    return _pick_at(x, axis, full(shape, k - 1, dtype=i64), keepdim)


def median(x: Tensor, dim: Any = None, keepdim: bool = False) -> Any:
    """The lower median along `dim` with its index (NaN where the row has one, as PyTorch's); with no
    dim, of all elements (the value alone)."""
    return _median(x, dim, keepdim, skip_nan=False)


def nanmedian(x: Tensor, dim: Any = None, keepdim: bool = False) -> Any:
    """median ignoring NaN (NaN only where a row is all NaN)."""
    return _median(x, dim, keepdim, skip_nan=True)


def _running_extreme(x: Tensor, dim: int, largest: bool) -> SortResult:
    if x.ndim == 0:
        found = _running_extreme(x.reshape(1), 0, largest)
        return SortResult(found.values.reshape(()), found.indices.reshape(()))
    axis = normalize_axis(dim, x.ndim)
    index = running_extreme_index(x, axis=axis, largest=largest)
    return SortResult(gather(x, index, axis=axis), index)


def cummax(x: Tensor, dim: int) -> SortResult:
    """The running maximum along `dim` and where it is (a later equal value, and NaN, take over)."""
    return _running_extreme(x, dim, True)


def cummin(x: Tensor, dim: int) -> SortResult:
    """The running minimum along `dim` and where it is (as cummax)."""
    return _running_extreme(x, dim, False)


def unique(
    x: Tensor, sorted: bool = True, return_inverse: bool = False, return_counts: bool = False, dim: Any = None
) -> Any:
    """The distinct values of x in increasing order (PyTorch's, which sorts them on the CPU whatever
    `sorted` says), with the index of each element's value (`return_inverse`, shaped as x) and each
    value's count; with `dim`, the distinct slices along it, in lexicographic order (the inverse then
    one index per slice). Its size depends on the values: it runs eagerly, not in traces or `check`."""
    modes.eager_only("unique")
    axis = None if dim is None else normalize_axis(dim, x.ndim)
    found = np.unique(values_of(x, "unique"), return_inverse=True, return_counts=True, axis=axis)
    values, inverse, counts = found
    out = [from_numpy(np.ascontiguousarray(values))]
    if return_inverse:
        shape = x.shape if axis is None else (x.shape[axis],)
        out.append(from_numpy(inverse.reshape(shape).astype(np.int64)))
    if return_counts:
        out.append(from_numpy(counts.astype(np.int64)))
    return out[0] if len(out) == 1 else tuple(out)


def unique_consecutive(
    x: Tensor, return_inverse: bool = False, return_counts: bool = False, dim: Any = None
) -> Any:
    """x with each run of equal consecutive elements (or slices along `dim`) kept once, with each
    element's run (`return_inverse`) and each run's length: eager only."""
    modes.eager_only("unique_consecutive")
    values = values_of(x, "unique_consecutive")
    axis = None if dim is None else normalize_axis(dim, x.ndim)
    rows = (
        values.reshape(-1, 1)
        if axis is None
        else np.moveaxis(values, axis, 0).reshape(values.shape[axis], -1)
    )
    starts = np.ones(rows.shape[0], dtype=bool)
    starts[1:] = (rows[1:] != rows[:-1]).any(axis=1)
    kept = rows[starts]
    kept = (
        kept.reshape(-1)
        if axis is None
        else np.moveaxis(kept.reshape(-1, *np.delete(values.shape, axis)), 0, axis)
    )
    out = [from_numpy(np.ascontiguousarray(kept))]
    if return_inverse:
        inverse = np.cumsum(starts) - 1
        out.append(from_numpy(inverse.reshape(values.shape if axis is None else -1).astype(np.int64)))
    if return_counts:
        out.append(from_numpy(np.diff(np.append(np.flatnonzero(starts), rows.shape[0])).astype(np.int64)))
    return out[0] if len(out) == 1 else tuple(out)

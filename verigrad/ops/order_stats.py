"""Order statistics along an axis, from the stable sort (NaN above every number): kthvalue, median and
nanmedian; and the running extremes cummax and cummin. Each comes with the index it came from (PyTorch's
(values, indices)), and differentiates in the values, through the gather that picks them."""

from __future__ import annotations

from typing import Any

from ..dtypes import i64
from ..registry import FUNCS
from ..shapes import normalize_axis
from ..tensor import Tensor
from .binary import ne, sub, where
from .creation import full
from .derived import SortResult, _concrete_size, isnan
from .index import argsort, gather
from .reduce import sum
from .scan import running_extreme_index
from .shaping import squeeze


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


def kthvalue(x: Tensor, k: int, dim: int = -1, keepdim: bool = False) -> SortResult:
    """The k-th smallest entry along `dim` (k from 1), with its index (ties: the earlier index)."""
    axis = normalize_axis(dim, x.ndim)
    size = _concrete_size(x, axis, "kthvalue")
    if not isinstance(k, int) or not 1 <= k <= size:
        raise ValueError(f"kthvalue needs 1 <= k <= {size}, got {k}")
    shape = tuple(1 if a == axis else s for a, s in enumerate(x.shape))
    return _pick_at(x, axis, full(shape, k - 1, dtype=i64), keepdim)


def _median(x: Tensor, dim: Any, keepdim: bool, skip_nan: bool) -> Any:
    x_, axis = _flat_or(x, dim)
    size = _concrete_size(x_, axis, "median")
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


FUNCS.update(cummax=cummax, cummin=cummin, kthvalue=kthvalue, median=median, nanmedian=nanmedian)

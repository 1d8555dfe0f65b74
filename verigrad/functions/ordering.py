"""Functions of the stable sort (NaN above every number): sort and topk, the order statistics kthvalue,
median, nanmedian and mode, PyTorch's max and min along a dim, the running extremes cummax and cummin
(each with the indices it came from, as PyTorch's named tuple (values, indices)), aminmax, and unique /
unique_consecutive (eager only)."""

from __future__ import annotations

import functools
import numbers
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from .. import modes
from ..dtypes import bool_, i64
from ..errors import AxisError, DTypeError
from ..ops.binary import eq, maximum, minimum, mul, ne, sub, where
from ..ops.creation import arange, from_numpy, full
from ..ops.index import argsort, gather
from ..ops.reduce import argmax, max_of_all, min_of_all, sum
from ..ops.scan import running_extreme_index
from ..ops.shaping import getitem, squeeze, unsqueeze
from ..shapes import normalize_axis, plain_int
from ..tensor import Tensor, describe
from .pointwise import isfinite, isnan, values_of
from .rearrange import concrete_size
from .statistics import amax, amin, argmin, pick


class SortResult(NamedTuple):
    """PyTorch's named tuple (values, indices) of max, min, sort, topk, kthvalue, median, mode, cummax..."""

    values: Tensor
    indices: Tensor


class MinMax(NamedTuple):
    """PyTorch's named tuple (min, max) of aminmax."""

    min: Tensor
    max: Tensor


def _scalar_as_vector(find: Callable[..., Any]) -> Callable[..., Any]:
    """`find(x, dim, ...)` for a 0-d x too, as PyTorch's: dim 0 or -1 reads it as a 1-element vector,
    and any other dim is out of range."""

    @functools.wraps(find)
    def along(x: Tensor, dim: Any, *args: Any, **kwargs: Any) -> Any:
        if x.ndim or dim is None:
            return find(x, dim, *args, **kwargs)
        if dim not in (0, -1):
            raise AxisError(f"dim {dim} is out of range for the 0-d {describe(x)} (it takes dim 0 or -1)")
        found = find(x.reshape(1), 0, *args, **kwargs)
        return type(found)(*(t.reshape(()) for t in found))

    return along


def _entries_at(x: Tensor, index: Tensor, axis: int, keepdim: bool) -> SortResult:
    """x's entries at `index` (one per row along `axis`, keepdim-shaped) with the index: the gradient
    goes to those entries alone."""
    values = gather(x, index, axis=axis)
    if not keepdim:
        values, index = squeeze(values, axis), squeeze(index, axis)
    return SortResult(values, index)


@_scalar_as_vector
def _extreme_along(x: Tensor, dim: int, keepdim: bool, largest: bool) -> SortResult:
    """The first largest (or smallest) entry along `dim` and its index; NaN counts as the extreme, as
    PyTorch's. The gradient goes to that one entry, as PyTorch's max(dim)."""
    axis = normalize_axis(dim, x.ndim)
    keys = x.cast(i64) if x.dtype is bool_ else x  # argmax refuses bool, as PyTorch's; max(dim) takes it
    index = (argmax if largest else argmin)(keys, axis=axis, keepdim=True)
    return _entries_at(x, index, axis, keepdim)


def _extreme(x: Tensor, dim: Any, keepdim: bool, largest: bool, what: str) -> Any:
    if isinstance(dim, Tensor):
        return (maximum if largest else minimum)(x, dim)
    if dim is None:
        return (max_of_all if largest else min_of_all)(x)
    if not isinstance(dim, numbers.Integral) or isinstance(dim, bool):
        raise TypeError(f"{what} takes one dim (an int), got {dim!r}; a{what} takes several")
    return _extreme_along(x, int(dim), keepdim, largest)


def max(x: Tensor, dim: Any = None, keepdim: bool = False, *, axis: Any = None) -> Any:
    """PyTorch's max: of all elements, a tensor; along one `dim`, the named tuple (values, indices), the
    index of the first largest (NaN counts as largest); given a tensor, the element-wise maximum."""
    return _extreme(x, pick(axis, dim), keepdim, True, "max")


def min(x: Tensor, dim: Any = None, keepdim: bool = False, *, axis: Any = None) -> Any:
    """PyTorch's min: as `max`, of the smallest."""
    return _extreme(x, pick(axis, dim), keepdim, False, "min")


def aminmax(x: Tensor, *, dim: int | None = None, keepdim: bool = False) -> MinMax:
    """PyTorch's aminmax: the named tuple (min, max) of amin and amax over `dim` (all when None)."""
    return MinMax(amin(x, dim, keepdim), amax(x, dim, keepdim))


@_scalar_as_vector
def _sorted(x: Tensor, axis: int, descending: bool) -> SortResult:
    order = argsort(x, axis=axis, descending=descending)
    return SortResult(gather(x, order, axis=axis), order)


def sort(
    x: Tensor, axis: int = -1, descending: bool = False, *, dim: int | None = None, stable: bool = False
) -> SortResult:
    """x sorted along `axis` (stably, whatever `stable` says: ties keep their order; NaN above every
    number), with the indices it came from."""
    return _sorted(x, pick(axis, dim), descending)


def topk(
    x: Tensor, k: int, axis: int = -1, largest: bool = True, sorted: bool = True, *, dim: int | None = None
) -> SortResult:
    """The k largest (or smallest) entries along `axis`, in order, with their indices (ties: the
    earlier index first)."""
    _no_bools(x, "topk")
    return _top(x, pick(axis, dim), k, largest)


@_scalar_as_vector
def _top(x: Tensor, axis: int, k: int, largest: bool) -> SortResult:
    axis = normalize_axis(axis, x.ndim)
    size = concrete_size(x, axis, "topk")
    k = plain_int(k)
    if not isinstance(k, int) or not 0 <= k <= size:
        raise ValueError(f"topk needs 0 <= k <= {size}, got {k}")
    order = argsort(x, axis=axis, descending=largest)
    first = getitem(order, (slice(None),) * axis + (slice(0, k),))
    return SortResult(gather(x, first, axis=axis), first)


def _pick_at(x: Tensor, axis: int, position: Tensor, keepdim: bool) -> SortResult:
    """The entry at `position` (one per row, keepdim-shaped, i64) of x sorted along `axis`."""
    order = argsort(x, axis=axis)
    index = gather(order, position, axis=axis)
    return _entries_at(x, index, axis, keepdim)


def _flat_or(x: Tensor, dim: Any) -> tuple[Tensor, int]:
    return (x.reshape(-1), 0) if dim is None else (x, normalize_axis(dim, x.ndim))


def _no_bools(x: Tensor, what: str) -> None:
    """PyTorch's CPU kernels of `what` have no bool case."""
    if x.dtype is bool_:
        raise DTypeError(f"{what} of a bool tensor is not supported (as PyTorch); cast it to a number dtype")


@_scalar_as_vector
def _median(x: Tensor, dim: Any, keepdim: bool, skip_nan: bool) -> Any:
    _no_bools(x, "nanmedian" if skip_nan else "median")
    x_, axis = _flat_or(x, dim)
    size = concrete_size(x_, axis, "median")
    if size == 0 and dim is None and x.dtype.is_float:
        return full((), float("nan"), dtype=x.dtype)  # PyTorch's median of no elements
    if size == 0:
        raise ValueError("median of an empty dimension")
    nans = sum(isnan(x_), axis=axis, keepdim=True)  # i64
    if skip_nan:  # the lower median of the numbers; all NaN: a NaN
        numbers = sub(size, nans)
        position = where(ne(numbers, 0), ((numbers - 1) / 2).floor().cast(i64), 0)
    else:  # PyTorch's: NaN (the first) where the row has one
        position = where(ne(nans, 0), sub(size, nans), (size - 1) // 2).cast(i64)
    found = _pick_at(x_, axis, position, keepdim or dim is None)
    if dim is not None:
        return found
    value = found.values.reshape(())
    return _shared_among_ties(x_, value) if x.requires_grad and x.dtype.is_float else value


def _shared_among_ties(x: Tensor, value: Tensor) -> Tensor:
    """`value` (the median of all of the 1-D x), its gradient shared evenly among the entries equal to it
    (among the NaNs where it is NaN), as PyTorch's median() and nanmedian() of every element (the
    median along a dim gives it to the index returned)."""
    known = value.detach()
    ties = where(isnan(known), isnan(x), eq(x, known))
    share = sum(where(ties, x, 0.0)) / sum(ties)  # the value (up to rounding), with each tie's 1 / count
    exact = sub(known, sub(share.detach(), share))  # known's bits (a -0.0 too); share's gradient
    return where(isfinite(known), exact, share)  # inf or NaN: share is the value


def kthvalue(x: Tensor, k: int, dim: int = -1, keepdim: bool = False) -> SortResult:
    """The k-th smallest entry along `dim` (k from 1), with its index (ties: the earlier index)."""
    _no_bools(x, "kthvalue")
    return _kth(x, dim, k, keepdim)


@_scalar_as_vector
def _kth(x: Tensor, dim: int, k: int, keepdim: bool) -> SortResult:
    axis = normalize_axis(dim, x.ndim)
    size = concrete_size(x, axis, "kthvalue")
    k = plain_int(k)
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


@_scalar_as_vector
def _running_extreme(x: Tensor, dim: int, largest: bool) -> SortResult:
    axis = normalize_axis(dim, x.ndim)
    index = running_extreme_index(x, axis=axis, largest=largest)
    return SortResult(gather(x, index, axis=axis), index)


def cummax(x: Tensor, dim: int) -> SortResult:
    """The running maximum along `dim` and where it is (a later equal value, and NaN, take over)."""
    return _running_extreme(x, dim, True)


def cummin(x: Tensor, dim: int) -> SortResult:
    """The running minimum along `dim` and where it is (as cummax)."""
    return _running_extreme(x, dim, False)


@_scalar_as_vector
def _mode(x: Tensor, dim: int, keepdim: bool) -> SortResult:
    axis = normalize_axis(dim, x.ndim)
    size = x.shape[axis]
    if isinstance(size, int) and size == 0:
        raise ValueError("mode of an empty dimension")
    # counts[..., i, ...]: how many entries along the axis equal entry i (an n x n comparison)
    counts = sum(eq(unsqueeze(x, axis + 1), unsqueeze(x, axis)), axis=axis + 1)
    frequent = eq(counts, amax(counts, axis, keepdim=True))
    value = amin(where(frequent, x, amax(x, axis, keepdim=True)), axis, keepdim=True)
    positions = arange(1, size + 1).reshape(*([1] * axis), size, *([1] * (x.ndim - axis - 1)))
    index = argmax(mul(eq(x, value), positions), axis=axis, keepdim=True)  # its last occurrence
    return _entries_at(x, index, axis, keepdim)


def mode(x: Tensor, dim: int = -1, keepdim: bool = False) -> SortResult:
    """PyTorch's mode: the most frequent value along `dim` (the smallest of those equally frequent) and
    the index of its last occurrence, as the named tuple (values, indices). A NaN is refused when it runs
    eagerly (PyTorch's answer there follows its sort's internals; a trace cannot see the values)."""
    if modes.current().name == "eager" and x.dtype.is_float and np.isnan(values_of(x, "mode")).any():
        raise ValueError("mode of a tensor holding NaN is not PyTorch's here; replace the NaN first")
    return _mode(x, dim, keepdim)


def _unique_axis(name: str, x: Tensor, dim: Any) -> int | None:
    """dim as an axis; an empty x's only zero-sized axis must be that one (PyTorch refuses the rest)."""
    axis = None if dim is None else normalize_axis(dim, x.ndim)
    zero = [i for i, d in enumerate(x.shape) if d == 0]
    if axis is not None and zero:
        if len(zero) > 1:
            raise RuntimeError(
                f"{name}: {describe(x)} has more than one zero-sized axis, so unique cannot be applied"
            )
        if zero != [axis]:
            raise RuntimeError(f"{name}: axis {zero[0]} of {describe(x)} is empty and not dim={dim}")
    return axis


def _in_dtype_of(x: Tensor, values: np.ndarray) -> Tensor:
    """Values read from x back in x's dtype (a bf16 tensor's are read as f32: exact both ways)."""
    out = from_numpy(np.ascontiguousarray(values))
    return out if out.dtype is x.dtype else out.cast(x.dtype)


def unique(
    x: Tensor, sorted: bool = True, return_inverse: bool = False, return_counts: bool = False, dim: Any = None
) -> Any:
    """The distinct values of x in increasing order (PyTorch's, which sorts them on the CPU whatever
    `sorted` says; each NaN distinct, last), with the index of each element's value (`return_inverse`,
    shaped as x) and each value's count; with `dim`, the distinct slices along it, in lexicographic
    order (the inverse then one index per slice). Its size depends on the values: it runs eagerly, not
    in traces or `check`."""
    modes.eager_only("unique")
    axis = _unique_axis("unique", x, dim)
    # each NaN is a value of its own, as in PyTorch (NumPy's default merges them)
    found = np.unique(
        values_of(x, "unique"), return_inverse=True, return_counts=True, axis=axis, equal_nan=False
    )
    values, inverse, counts = found
    out = [_in_dtype_of(x, values)]
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
    axis = _unique_axis("unique_consecutive", x, dim)
    rest = () if axis is None else tuple(np.delete(values.shape, axis))
    # explicit sizes: -1 cannot be inferred where an axis is 0
    rows = (
        values.reshape(-1, 1)
        if axis is None
        else np.moveaxis(values, axis, 0).reshape(values.shape[axis], int(np.prod(rest)))
    )
    starts = np.ones(rows.shape[0], dtype=bool)
    starts[1:] = (rows[1:] != rows[:-1]).any(axis=1)
    kept = rows[starts]
    kept = kept.reshape(-1) if axis is None else np.moveaxis(kept.reshape(kept.shape[0], *rest), 0, axis)
    out = [_in_dtype_of(x, kept)]
    if return_inverse:
        inverse = np.cumsum(starts) - 1
        out.append(from_numpy(inverse.reshape(values.shape if axis is None else -1).astype(np.int64)))
    if return_counts:
        out.append(from_numpy(np.diff(np.append(np.flatnonzero(starts), rows.shape[0])).astype(np.int64)))
    return out[0] if len(out) == 1 else tuple(out)

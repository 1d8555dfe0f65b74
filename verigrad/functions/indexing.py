"""Reading and writing by position, written with the ops: index_select / index_add / index_fill /
index_copy, scatter / scatter_add, `x[key] = value` and index_put, take_along_dim, masked_select /
masked_scatter, nonzero / argwhere and the one-argument where (eager only), bucketize."""

from __future__ import annotations

import builtins
import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import modes
from ..dtypes import bf16, bool_, f32, i32, i64
from ..errors import AxisError, DTypeError, ShapeError
from ..ops.binary import eq, gt, lt, result_type, where
from ..ops.checks import checked
from ..ops.creation import arange, from_numpy, full, tensor
from ..ops.data_in import check_number
from ..ops.index import gather as gather_along
from ..ops.index import searchsorted as searchsorted_op
from ..ops.index import take, take_grad
from ..ops.movement import broadcast_to, reshape
from ..ops.scatter_reduce import scatter_reduce, spread
from ..ops.shaping import assign, getitem, legacy_tuple
from ..ops.shaping import setitem as basic_setitem
from ..ops.special import signbit
from ..shapes import broadcast, normalize_axis, shape_text
from ..tensor import Tensor, describe
from .pointwise import check_numbers, in_dtype, isfinite, same_dtype, values_of
from .rearrange import broadcast_tensors


def _in_range(index: Tensor, size: Any, what: str) -> Tensor:
    """The positions, each checked to be in [0, size) (PyTorch's index_select, index_add, index_copy,
    gather and scatter take no negative positions): `check_index`, which raises IndexError before any
    work eagerly, and in a compiled plan on every run."""
    return checked(index, size, what)


def index_select(x: Tensor, axis: int, index: Tensor) -> Tensor:
    """The entries of x at the integer `index` (0-d or 1-D) along `axis`; of a 0-d x, its one entry."""
    if index.ndim > 1:
        raise ShapeError(f"index_select needs a 0-d or 1-D index, got {shape_text(index.shape)}")
    if x.ndim == 0:
        normalize_axis(axis, 0)
        if index.numel() != 1:
            raise ShapeError(f"index_select of a 0-d tensor takes one index, got {describe(index)}")
        index = _in_range(index, 1, "index_select")
        return take(x.reshape(1), index.reshape(1), axis=0).reshape(())
    index = _in_range(index, x.shape[normalize_axis(axis, x.ndim)], "index_select")
    return take(x, index.reshape(-1), axis=axis)


def _scalar_as_vector(fn: Callable[..., Tensor]) -> Callable[..., Tensor]:
    """`fn(x, dim, ...)` for a 0-d x too, as PyTorch's: dim 0 or -1, and x and the 0-d tensors among
    the arguments read as vectors of one."""

    @functools.wraps(fn)
    def along(x: Tensor, dim: int, *args: Any, **kwargs: Any) -> Tensor:
        if not isinstance(x, Tensor) or x.ndim:
            return fn(x, dim, *args, **kwargs)
        normalize_axis(dim, 0)

        def vector(a: Any) -> Any:
            return a.reshape(1) if isinstance(a, Tensor) and a.ndim == 0 else a

        found = fn(x.reshape(1), 0, *map(vector, args), **{k: vector(v) for k, v in kwargs.items()})
        return found.reshape(())

    return along


@_scalar_as_vector
def index_add(x: Tensor, dim: int, index: Tensor, source: Tensor, alpha: Any = 1) -> Tensor:
    """x with source's slices (times alpha) added at the positions `index` names along `dim`; repeated
    positions add up (PyTorch's index_add)."""
    axis = normalize_axis(dim, x.ndim)
    if index.ndim != 1 or index.dtype.kind != "i":
        raise ShapeError(f"index_add needs a vector of integer positions, got {describe(index)}")
    same_dtype(x, source, "index_add")
    index = _in_range(index, x.shape[axis], "index_add")
    alpha = in_dtype(alpha, x.dtype)  # PyTorch's: a float alpha truncated for an integer x
    added = source if alpha == 1 else source * alpha
    return _added(x, added, lambda values: take_grad(values, index, axis=axis, size=x.shape[axis]))


def _may_hold_negative_zero(t: Tensor) -> bool:
    """Whether t is a float tensor that holds a -0.0, or may (in a trace, whose values are not known)."""
    if not t.dtype.is_float:
        return False
    if modes.current().name != "eager":
        return True
    values = values_of(t, "scatter")
    return bool((np.signbit(values) & (values == 0)).any())


def _added(x: Tensor, values: Tensor, put: Callable[[Tensor], Tensor]) -> Tensor:
    """x + put(values), where put spreads values into zeros of x's shape. PyTorch adds each value into x,
    so a -0.0 of x stays where only -0.0 values (or none) land; put's sums begin at +0.0 and would make it
    +0.0: there x - (total.detach() - total), -0.0 in value with total's gradient."""
    total = put(values)
    if not _may_hold_negative_zero(x):
        return x + total
    negative_zero = signbit(values) & eq(values, 0)
    lone = signbit(x) & eq(x, 0) & eq(put(where(negative_zero, 0.0, 1.0)), 0)
    return where(lone, x - (total.detach() - total), x + total)


_INDEX_REDUCTIONS = ("prod", "mean", "amax", "amin")


def index_reduce(
    x: Tensor, dim: int, index: Tensor, source: Tensor, reduce: str, *, include_self: bool = True
) -> Tensor:
    """x with source's slices reduced ('prod', 'mean', 'amax', 'amin') into the positions `index` names
    along `dim`, x's own values among them with include_self (PyTorch's index_reduce: scatter_reduce with
    the index spread over each slice)."""
    if reduce not in _INDEX_REDUCTIONS:
        raise ValueError(f"index_reduce: reduce must be one of {_INDEX_REDUCTIONS}, got {reduce!r}")
    axis = normalize_axis(dim, max(x.ndim, 1))
    if index.ndim > 1 or index.dtype.kind != "i":
        raise ShapeError(f"index_reduce needs a vector of integer positions, got {describe(index)}")
    if x.ndim == 0:
        one = index_reduce(
            x.reshape(1), 0, index.reshape(-1), source.reshape(-1), reduce, include_self=include_self
        )
        return one.reshape(())
    index = index.reshape(-1)
    want = (*x.shape[:axis], index.shape[0], *x.shape[axis + 1 :])
    if tuple(source.shape) != want:
        raise ShapeError(f"index_reduce: source must have shape {want}, got {describe(source)}")
    spread_index = index.reshape(*([1] * axis), -1, *([1] * (x.ndim - axis - 1))).expand(*want)
    return scatter_reduce(x, axis, spread_index, source, reduce, include_self=include_self)


@_scalar_as_vector
def index_fill(x: Tensor, dim: int, index: Any, value: Any) -> Tensor:
    """x with the slices at `index` (a vector of positions) along `dim` set to `value`."""
    axis = normalize_axis(dim, x.ndim)
    positions = index if isinstance(index, Tensor) else from_numpy(np.asarray(index, dtype=np.int64))
    if positions.ndim > 1 or positions.dtype.kind != "i":
        raise ValueError(f"index_fill takes a vector of integer positions, got {describe(positions)}")
    positions = checked(positions.reshape(-1), x.shape[axis], f"dimension {axis}", what="item")
    hit = gt(take_grad(full(tuple(positions.shape), 1.0), positions, axis=0, size=x.shape[axis]), 0)
    if not isinstance(value, Tensor):  # a number is x's dtype first (2.7 into a u8 tensor writes 2)
        value = full((), value, dtype=x.dtype)
    return where(hit.reshape(*([1] * axis), -1, *([1] * (x.ndim - axis - 1))), value, x)


def _scatter_index(x: Tensor, dim: int, index: Tensor, src: Any, what: str) -> tuple[int, Tensor]:
    """The axis of a scatter into x and the index checked (`_in_range`), after checking PyTorch's rules:
    an integer index of x's rank, no larger than src in any dimension, nor than x but along the axis."""
    axis = normalize_axis(dim, x.ndim)
    if not isinstance(index, Tensor) or index.dtype.kind != "i":
        raise DTypeError(f"{what} needs an integer index tensor, got {describe(index)}")
    shapes = [("the input", x.shape, axis)] + ([("src", src.shape, None)] if isinstance(src, Tensor) else [])
    for name, shape, skip in shapes:
        fits = len(shape) == index.ndim and builtins.all(
            d == skip or not (isinstance(i, int) and isinstance(n, int) and i > n)
            for d, (i, n) in enumerate(zip(index.shape, shape))
        )
        if not fits:
            along = f" but along dim {axis}" if skip is not None else ""
            raise ShapeError(
                f"{what}: the index {shape_text(index.shape)} must have the rank of {name} "
                f"{shape_text(shape)} and be no larger{along}"
            )
    return axis, _in_range(index, x.shape[axis], what)


@_scalar_as_vector
def scatter_add(x: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:
    """x with each src[..., j, ...] added at the position index[..., j, ...] names along `dim` (PyTorch's
    scatter_add; repeated positions add up)."""
    axis, index = _scatter_index(x, dim, index, src, "scatter_add")
    if not isinstance(src, Tensor):
        raise TypeError(f"scatter_add adds a tensor src, got {type(src).__name__}")
    same_dtype(x, src, "scatter_add", "src")
    return _added(x, src, lambda values: spread(values, index, axis, tuple(x.shape)))


def _reach(index: Tensor, axis: int) -> tuple[slice, ...]:
    """The part of an input-shaped tensor gather may read with `index` (index-sized but along axis)."""
    return tuple(slice(None) if d == axis else slice(0, n) for d, n in enumerate(index.shape))


def _last_writes(x: Tensor, index: Tensor, axis: int) -> Tensor:
    """Where each entry of `index` is the last along `axis` to name its position (bool, index-shaped):
    the one PyTorch's scatter on the CPU leaves written there."""
    count = index.shape[axis]
    along = arange(count).reshape(*([1] * axis), count, *([1] * (index.ndim - axis - 1)))
    order = along.broadcast_to(tuple(index.shape))
    last = scatter_reduce(full(tuple(x.shape), -1, dtype=i64), axis, index, order, "amax")
    return eq(gather_along(getitem(last, _reach(index, axis)), index, axis=axis), order)


def _written(src: Tensor, last: Tensor) -> Tensor:
    """src where it is the last write, else 0 in value; each src keeps a gradient (PyTorch's: the
    output's gradient at the position it names, written or not)."""
    if not src.dtype.is_float:
        return where(last, src, False if src.dtype is bool_ else 0)
    fixed = src.detach()
    return where(last, src, where(isfinite(fixed), src - fixed, 0))


@_scalar_as_vector
def scatter(
    x: Tensor, dim: int, index: Tensor, src: Any = None, *, value: Any = None, reduce: Any = None
) -> Tensor:
    """x with src[..., j, ...] (or the number `value`) written at the position index[..., j, ...] names
    along `dim` (PyTorch's scatter). Where the index repeats a position, the last value along `dim`
    written there stays, as PyTorch's on the CPU (every src gets the gradient at its position); use
    scatter_add to add into x. reduce="add" or "multiply" reduces into x instead (PyTorch's older form
    of scatter_reduce)."""
    if (src is None) == (value is None):
        raise TypeError("scatter takes one of src (a tensor or a number) and value")
    src = value if src is None else src
    same_dtype(x, src, "scatter", "src")
    axis, index = _scatter_index(x, dim, index, src, "scatter")
    if reduce is not None:
        kinds = {"add": "sum", "multiply": "prod"}
        if reduce not in kinds:
            raise ValueError(f"scatter: reduce must be 'add' or 'multiply', got {reduce!r}")
        values = src if isinstance(src, Tensor) else full(tuple(index.shape), src, dtype=x.dtype)
        return scatter_reduce(x, axis, index, values, kinds[reduce])
    shape = tuple(x.shape)
    hit = gt(spread(full(tuple(index.shape), 1.0), index, axis, shape), 0)  # the positions written
    if not isinstance(src, Tensor):  # a number is x's dtype first (2.5 into an i64 tensor writes 2)
        return where(hit, full((), src, dtype=x.dtype), x)
    used = getitem(src, tuple(slice(0, n) for n in index.shape))  # PyTorch reads src as far as index
    last = _last_writes(x, index, axis)
    if not _may_hold_negative_zero(used):
        return where(hit, spread(_written(used, last), index, axis, shape), x)
    return where(hit, _spread_signed(_written(used, last), used, last, index, axis, shape), x)


def _spread_signed(
    written: Tensor, used: Tensor, last: Tensor, index: Tensor, axis: int, shape: tuple
) -> Tensor:
    """spread(written, ...) with a -0.0 written last kept -0.0 (spread adds into +0.0, which makes it +0.0):
    what lands where one does is negated going in and the sum negated coming out (the gradient twice)."""
    negative_zero = last & eq(used, 0) & signbit(used)
    flipped = gt(spread(where(negative_zero, 1.0, 0.0), index, axis, shape), 0)
    lands = gather_along(getitem(flipped.cast(i64), _reach(index, axis)), index, axis=axis) > 0
    minus, plus = full((), -1.0, dtype=written.dtype), full((), 1.0, dtype=written.dtype)
    return spread(written * where(lands, minus, plus), index, axis, shape) * where(flipped, minus, plus)


def masked_select(x: Tensor, mask: Tensor) -> Tensor:
    """The elements of x where the bool mask (broadcast with x) holds, in order, as a vector (eager
    only: its size depends on the mask; PyTorch refuses a mask of another dtype)."""
    if not isinstance(mask, Tensor) or mask.dtype is not bool_:
        got = describe(mask) if isinstance(mask, Tensor) else type(mask).__name__
        raise DTypeError(f"masked_select: expected a bool tensor for mask, got {got}")
    x, mask = broadcast_tensors(x, mask)
    return getitem(x.reshape(-1), mask.reshape(-1))


def nonzero(x: Tensor, as_tuple: bool = False) -> Any:
    """The positions of x's non-zero elements: [n, ndim] i64, or one vector per axis with as_tuple.
    How many depends on the values: eager only."""
    modes.eager_only("nonzero")
    values = values_of(x, "nonzero")
    found = np.nonzero(values.reshape(1) if values.ndim == 0 else values)  # a 0-d tensor is one of one
    if as_tuple:
        return tuple(from_numpy(np.ascontiguousarray(i, dtype=np.int64)) for i in found)
    positions = np.stack(found, axis=-1)[:, : x.ndim]  # of a 0-d tensor: [n, 0], as PyTorch's
    return from_numpy(np.ascontiguousarray(positions, dtype=np.int64))


def argwhere(x: Tensor) -> Tensor:
    """The positions of x's non-zero elements, [n, ndim] i64 (nonzero's): eager only."""
    return nonzero(x)


_ABSENT = object()


def where_or_positions(condition: Any, x: Any = _ABSENT, y: Any = _ABSENT) -> Any:
    """`verigrad.where`: x where `condition` holds, else y (the where op); with the condition alone, the
    positions where it holds, one vector per axis (PyTorch's one-argument where: nonzero(as_tuple=True),
    eager only)."""
    if x is _ABSENT and y is _ABSENT:
        return nonzero(condition, as_tuple=True)
    if x is _ABSENT or y is _ABSENT:
        raise TypeError("where takes a condition alone, or a condition and the two values to choose from")
    check_numbers("where", x, y)
    return where(condition, x, y)


def searchsorted(
    sorted_sequence: Tensor,
    input: Any,
    *,
    out_int32: bool = False,
    right: bool = False,
    side: str | None = None,
    sorter: Tensor | None = None,
) -> Tensor:
    """PyTorch's searchsorted: where each value of `input` (a tensor or a number) goes in the sorted
    sequence (or each row of sorted rows), the first such place, or the last with `right` or
    `side="right"`; `sorter` the positions that sort an unsorted sequence; i64, or i32 with
    `out_int32`."""
    if side is not None:
        if side not in ("left", "right"):
            raise ValueError(f"torch.searchsorted(): side can only be 'left' or 'right' but got {side!r}")
        if right and side == "left":
            raise RuntimeError("torch.searchsorted(): side and right can't be set to opposites, got side of "
                               "left while right was True")  # fmt: skip
        right = side == "right"
    if sorter is not None:
        if not isinstance(sorter, Tensor) or sorter.dtype is not i64 or sorter.shape != sorted_sequence.shape:
            raise TypeError(
                "torch.searchsorted(): sorter must be an i64 tensor of the sorted sequence's shape"
            )
        sorted_sequence = take_along_dim(sorted_sequence, sorter, -1)
    scalar = not isinstance(input, Tensor)
    # both compared in PyTorch's result type (a u8 sequence and -2 look for 254, an i64 one and 2.5 for 2.5)
    dtype = result_type(sorted_sequence, input)
    if dtype is bool_:
        raise DTypeError("searchsorted: bool is not supported (as PyTorch); cast to an integer")
    values = tensor(input, dtype=dtype) if scalar else input
    if values.dtype is not dtype:
        values = values.cast(dtype)
    if sorted_sequence.dtype is not dtype:
        sorted_sequence = sorted_sequence.cast(dtype)
    found = searchsorted_op(sorted_sequence, values.reshape(1) if scalar else values, right=right)
    if scalar:
        found = found.reshape(())
    return found.cast(i32) if out_int32 else found


def bucketize(input: Any, boundaries: Tensor, *, out_int32: bool = False, right: bool = False) -> Tensor:
    """The bucket of each value among the sorted `boundaries` (PyTorch's): searchsorted(boundaries,
    input, right=right), i32 with `out_int32`."""
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


# writing through an index: x[key] = value, index_put -------------------------------------------
def _positions_of(x: Tensor, key: Any) -> Tensor:
    """The flat position in x of each element x[key] reads (x[key]'s shape, i64): the same rules, the
    same checks."""
    return getitem(arange(x.numel(), dtype=i64).reshape(tuple(x.shape)), key)


def _put(x: Tensor, key: Any, values: Any, accumulate: bool, what: str) -> Tensor:
    """x with `values` (broadcast to x[key]'s shape) written at the elements x[key] reads, or added there
    with `accumulate` (repeated positions add up); written, a repeated position keeps its last value, as
    PyTorch's on the CPU, and every value gets the gradient at its position."""
    if isinstance(values, Tensor) and values.dtype is not x.dtype:
        raise RuntimeError(
            f"{what}: the values must have the dtype of the tensor written into, as PyTorch's: got "
            f"{describe(values)} for {describe(x)}; cast them first"
        )
    if x.dtype is bf16 and not accumulate:  # bf16 holds no arithmetic: written through f32, exactly
        lifted = values.cast(f32) if isinstance(values, Tensor) else values
        return _put(x.cast(f32), key, lifted, False, what).cast(bf16)
    positions = _positions_of(x, key)
    values = values if isinstance(values, Tensor) else full((), values, dtype=x.dtype)
    try:
        fits = broadcast(tuple(values.shape), tuple(positions.shape)) == tuple(positions.shape)
    except ShapeError:
        fits = False
    if not fits:
        raise ShapeError(
            f"{what}: values of shape {shape_text(values.shape)} cannot be broadcast to the indexing "
            f"result of shape {shape_text(positions.shape)}"
        )
    values = broadcast_to(values, shape=tuple(positions.shape)).reshape(-1)
    positions, flat = positions.reshape(-1), reshape(x, shape=(-1,))
    if accumulate:
        return (flat + take_grad(values, positions, axis=0, size=flat.shape[0])).reshape(tuple(x.shape))
    return scatter(flat, 0, positions, values).reshape(tuple(x.shape))


def _writes_where(x: Tensor, key: Any, value: Any) -> bool:
    """`x[mask] = v` that `where(mask, v, x)` writes (compiles too): a mask of x's shape, one value."""
    if not (isinstance(key, Tensor) and key.dtype is bool_ and tuple(key.shape) == tuple(x.shape)):
        return False
    if x.dtype is bf16:  # where refuses bf16: `_put` writes it through f32
        return False
    return not isinstance(value, Tensor) or builtins.all(d == 1 for d in value.shape)


def _basic(k: Any) -> bool:
    """An int or a slice (a Python bool is PyTorch's 0-d bool index, not an int)."""
    return isinstance(k, int | np.integer | slice) and not isinstance(k, bool | np.bool_)


def setitem(x: Tensor, key: Any, value: Any) -> None:
    """`x[key] = value` by PyTorch's rules (value broadcast to x[key]'s shape): basic indices write into
    the view; integer arrays and bool masks write their elements, a repeated position its last value."""
    check_number(value, x.dtype, "setitem")
    key = legacy_tuple(key)
    if _writes_where(x, key, value):
        basic_setitem(x, key, value.reshape(()) if isinstance(value, Tensor) else value)
        return
    items = key if isinstance(key, tuple) else (key,)
    if builtins.all(k is None or k is Ellipsis or _basic(k) for k in items):
        basic_setitem(x, key, value)
        return
    assign(x, _put(x, key, value, False, "setitem"))


def _index_tuple(indices: Any, what: str) -> tuple:
    if not isinstance(indices, tuple | list) or not builtins.all(
        k is None or isinstance(k, Tensor) for k in indices
    ):
        raise TypeError(f"{what} takes a tuple of index tensors (or None), got {indices!r}")
    return tuple(slice(None) if k is None else k for k in indices)


def index_put(x: Tensor, indices: Any, values: Any, accumulate: bool = False) -> Tensor:
    """x with `values` put at x[indices] (a tuple of integer or bool tensors): a repeated position keeps
    its last value, or with `accumulate` they all add up (PyTorch's index_put)."""
    return _put(x, _index_tuple(indices, "index_put"), values, bool(accumulate), "index_put")


def index_put_(x: Tensor, indices: Any, values: Any, accumulate: bool = False) -> Tensor:
    """index_put written into x."""
    return assign(x, index_put(x, indices, values, accumulate))


@_scalar_as_vector
def index_copy(x: Tensor, dim: int, index: Tensor, source: Tensor) -> Tensor:
    """x with its slices at `index` (a vector of positions) along `dim` replaced by source's, in order
    (PyTorch's index_copy; a repeated position keeps its last)."""
    axis = normalize_axis(dim, x.ndim)
    if not isinstance(index, Tensor) or index.ndim > 1 or index.dtype.kind != "i":
        raise ShapeError(f"index_copy needs a vector of integer positions, got {describe(index)}")
    index = _in_range(index.reshape(-1), x.shape[axis], "index_copy")
    want = (*x.shape[:axis], index.shape[0], *x.shape[axis + 1 :])
    if not isinstance(source, Tensor) or tuple(source.shape) != tuple(want):
        got = describe(source)
        raise ShapeError(
            f"index_copy: source must be {shape_text(want)} for {describe(x)} along {axis}, got {got}"
        )
    return _put(x, (slice(None),) * axis + (index,), source, False, "index_copy")


def masked_scatter(x: Tensor, mask: Tensor, source: Tensor) -> Tensor:
    """x with source's first elements (in order) written where the bool mask holds, x and the mask broadcast
    together (PyTorch's masked_scatter: a mask larger than x makes a larger result; the in-place method
    refuses that): eager only, as how many depends on the mask."""
    if not isinstance(mask, Tensor) or mask.dtype is not bool_:
        raise DTypeError(f"masked_scatter needs a bool mask, got {describe(mask)}")
    shape = broadcast(tuple(x.shape), tuple(mask.shape))
    x, mask = broadcast_to(x, shape=shape), broadcast_to(mask, shape=shape)
    count = int(values_of(mask, "masked_scatter").sum())
    if source.numel() < count:
        raise ValueError(
            f"masked_scatter: the mask holds at {count} positions but source {describe(source)} has fewer"
        )
    return _put(x, mask, source.reshape(-1)[:count], False, "masked_scatter")


def take_along_dim(x: Tensor, indices: Tensor, dim: int | None = None) -> Tensor:
    """x's entries at `indices` along `dim` (PyTorch's take_along_dim: gather with x and indices
    broadcast but along `dim`); without dim, of the flattened x at the flattened indices."""
    if not isinstance(indices, Tensor) or indices.dtype.kind != "i":
        raise DTypeError(f"take_along_dim needs an integer index tensor, got {describe(indices)}")
    if dim is None:
        flat = x.reshape(-1)
        return gather_along(flat, _positions(indices.reshape(-1), flat.shape[0], "flattened input"), axis=0)
    if x.ndim == 0:
        raise AxisError(f"take_along_dim: dim {dim} of a 0-d tensor (PyTorch's: it has no dimensions)")
    axis = normalize_axis(dim, x.ndim)
    if indices.ndim != x.ndim:
        raise ShapeError(
            f"take_along_dim: indices {describe(indices)} must have as many dimensions as {describe(x)}"
        )
    try:  # PyTorch's: each broadcast with the other, but along `axis`, where each keeps its own size
        sized = list(x.shape)
        sized[axis] = indices.shape[axis]
        indices = broadcast_to(indices, shape=broadcast(tuple(sized), tuple(indices.shape)))
        sized = list(indices.shape)
        sized[axis] = x.shape[axis]
        x = broadcast_to(x, shape=broadcast(tuple(sized), tuple(x.shape)))
    except ShapeError:
        raise ShapeError(
            f"take_along_dim: {describe(x)} and indices {describe(indices)} must broadcast but along {axis}"
        ) from None
    return gather_along(x, _positions(indices, x.shape[axis], f"dimension {axis}"), axis=axis)


def _positions(indices: Tensor, size: Any, part: str) -> Tensor:
    """take_along_dim's positions in [0, size): each in [-size, size) (checked as the user gave it, so the
    error names that value), a negative one counted from the end once, as PyTorch's."""
    indices = checked(indices, size, f"take_along_dim's {part}", what="item")
    return where(lt(indices, 0), indices + size, indices)


def gather(input: Tensor, dim: int, index: Tensor, *, sparse_grad: bool = False) -> Tensor:
    """PyTorch's gather: out[..., j, ...] = input[..., index[..., j, ...], ...] along `dim`."""
    if sparse_grad:
        raise ValueError("gather: sparse_grad=True is not supported (verigrad has no sparse tensors)")
    if isinstance(input, Tensor) and isinstance(index, Tensor):
        if _is_empty(index):  # PyTorch checks neither the index's dtype nor its shape then
            normalize_axis(dim, max(input.ndim, 1))
            return input.reshape(-1)[:0].reshape(index.shape)
        if input.ndim == 0:  # PyTorch's: a 0-d input is a vector of one, its index 0-d or a vector
            normalize_axis(dim, 1)
            if index.ndim > 1:
                raise ShapeError(f"gather of a 0-d input takes a 0-d or 1-D index, got {describe(index)}")
            flat = gather_along(input.reshape(1), _in_range(index.reshape(-1), 1, "gather"), axis=0)
            return flat.reshape(index.shape)
        axis = normalize_axis(dim, input.ndim)
        index = _in_range(index, input.shape[axis], "gather")
        input = _cut_to(input, index, axis)
    return gather_along(input, index, axis=dim)


def _cut_to(input: Tensor, index: Tensor, axis: int) -> Tensor:
    """input's leading part along the other axes where the index is shorter there (PyTorch's gather takes
    index.size(d) <= input.size(d) for d != dim, reading the first ones)."""
    if index.ndim != input.ndim:
        return input
    key = tuple(
        slice(0, i) if d != axis and isinstance(i, int) and isinstance(n, int) and i < n else slice(None)
        for d, (i, n) in enumerate(zip(index.shape, input.shape))
    )
    return input if all(k == slice(None) for k in key) else input[key]


def _is_empty(x: Tensor) -> bool:
    """Whether x has no elements for every value of its symbols (a concrete size 0 along some axis)."""
    return any(isinstance(n, int) and n == 0 for n in x.shape)

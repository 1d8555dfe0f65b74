"""Functions built on the movement ops: indexing, transpose, expand, (un)squeeze, flatten, stack,
and in-place assignment (`assign`, `setitem`). They add no op of their own except `stack` (a composite)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import modes
from ..dtypes import bool_, i64, promote
from ..errors import DTypeError, ShapeError
from ..shapes import Dim, broadcast, normalize_axes, normalize_axis, shape_text
from ..tensor import Tensor, describe
from ._op import Op, Sample, lift
from ._samples import uniform
from .binary import sub, where
from .creation import arange, full, full_op
from .index import take, take_grad
from .movement import broadcast_to, cast, concat, permute, reshape, slice_, unslice


def _axis(x: Tensor, axis: int, ndim: int, fn: str) -> int:
    """`normalize_axis`, with a refusal that names the function, the operand and the user's line."""
    try:
        return normalize_axis(axis, ndim)
    except ShapeError as e:
        raise e.locate(fn, (describe(x),)) from None


def transpose(x: Tensor, a: int = -2, b: int = -1) -> Tensor:
    """Axes a and b swapped: a view with swapped strides."""
    axes = list(range(x.ndim))
    a, b = _axis(x, a, x.ndim, "transpose"), _axis(x, b, x.ndim, "transpose")
    axes[a], axes[b] = axes[b], axes[a]
    return permute(x, axes=tuple(axes))


def expand(x: Tensor, shape: tuple) -> Tensor:
    """PyTorch's expand: -1 keeps a size; new leading dimensions may be added."""
    lead = len(shape) - x.ndim
    if lead < 0:
        reason = f"expand to {shape_text(shape)} has fewer dimensions than {shape_text(x.shape)}"
        raise ShapeError(reason).locate("expand", (describe(x),))
    if any(isinstance(d, int) and d == -1 for d in shape[:lead]):
        reason = f"-1 keeps a size, so a new leading dimension cannot be -1: {shape_text(shape)}"
        raise ShapeError(reason).locate("expand", (describe(x),))
    full = tuple(x.shape[i - lead] if isinstance(d, int) and d == -1 else d for i, d in enumerate(shape))
    return broadcast_to(x, shape=full)


def unsqueeze(x: Tensor, axis: int) -> Tensor:
    """x with a dimension of size 1 inserted at `axis`."""
    axis = _axis(x, axis, x.ndim + 1, "unsqueeze")
    return reshape(x, shape=(*x.shape[:axis], 1, *x.shape[axis:]))


def squeeze(x: Tensor, axis: int | None = None) -> Tensor:
    """x without its dimensions of size 1 (only `axis`, if given and of size 1)."""
    if axis is None:
        return reshape(x, shape=tuple(d for d in x.shape if d != 1))
    axis = _axis(x, axis, x.ndim, "squeeze")
    if x.shape[axis] != 1:
        return x
    return reshape(x, shape=x.shape[:axis] + x.shape[axis + 1 :])


def flatten(x: Tensor, start: int = 0, end: int = -1) -> Tensor:
    """x with dimensions start..end merged into one."""
    if x.ndim == 0:
        return reshape(x, shape=(1,))
    start, end = _axis(x, start, x.ndim, "flatten"), _axis(x, end, x.ndim, "flatten")
    size: Any = 1
    for d in x.shape[start : end + 1]:
        size = size * d
    return reshape(x, shape=(*x.shape[:start], size, *x.shape[end + 1 :]))


def _stack_decompose(*xs: Tensor, axis: int) -> Tensor:
    return concat(*(unsqueeze(x, axis) for x in xs), axis=axis)


def _stack_shape(*shapes: tuple, axis: int) -> tuple:
    for s in shapes[1:]:
        if s != shapes[0]:
            raise ShapeError(f"stack needs equal shapes: {shape_text(shapes[0])} vs {shape_text(s)}")
    return (*shapes[0][:axis], len(shapes), *shapes[0][axis:])


stack = Op(
    "stack",
    shape=_stack_shape,
    dtype=lambda *dtypes, axis: promote(*dtypes),  # as concat: f16 with bf16 gives f32
    params=lambda *xs, axis=0, dim=None: {
        "axis": normalize_axis(axis if dim is None else dim, xs[0].ndim + 1)
    },
    positional=("axis",),
    variadic=True,
    decompose=_stack_decompose,
    samples=lambda rng: [
        Sample((uniform(rng, (2, 3)), uniform(rng, (2, 3))), {"axis": 1}),
        Sample((uniform(rng, (3,)),) * 3, {"axis": 0}),
    ],
    torch=lambda t, *xs, axis: t.stack(xs, dim=axis),
    doc="Tensors of one shape joined along a new axis.",
)


# indexing --------------------------------------------------------------------------------------
def getitem(x: Tensor, key: Any) -> Tensor:
    """Basic indexing (ints, slices, None, ...) as views; one integer array indexes with `take`; a bool
    mask over the leading axes selects the elements (rows) where it holds, eagerly."""
    if isinstance(key, Tensor) and key.dtype is bool_:
        return _masked_rows(x, key)
    out, view = _select(x, key)
    if view and out is not x:
        modes.current().made_view(out, x, key)
    return out


def _masked_rows(x: Tensor, mask: Tensor) -> Tensor:
    """x[mask] for a bool mask shaped as x's leading axes: the selected elements (or rows) in order, as
    a take of x's rows (so it differentiates). How many depends on the values: eager only."""
    modes.eager_only("x[mask]", "in compiled code use where(mask, x, other) or x[mask] = value")
    _mask_fits(x, mask, "getitem")
    rows = reshape(x, shape=(-1, *x.shape[mask.ndim :]))
    positions = np.flatnonzero(mask.numpy())
    return take(rows, lift([positions.astype(np.int64)])[0], axis=0)


def _selected_values(target: Tensor, mask: Tensor, value: Tensor) -> bool:
    """Whether `value` gives one row per element the mask holds (x[mask]'s shape) rather than values
    that broadcast over x."""
    try:
        broadcast(value.shape, target.shape)
        return False
    except ShapeError:
        return value.ndim == target.ndim - mask.ndim + 1


def _mask_fits(x: Tensor, mask: Tensor, op: str) -> None:
    if tuple(x.shape[: mask.ndim]) != tuple(mask.shape):
        reason = f"a bool mask indexes the leading axes: {shape_text(mask.shape)} for {shape_text(x.shape)}"
        raise ShapeError(reason).locate(op, (describe(x), describe(mask)))


def _scattered(target: Tensor, mask: Tensor, rows: Tensor) -> Tensor:
    """The rows of x[mask] put back at the mask's places (zeros elsewhere), shaped as target."""
    modes.eager_only("x[mask]", "in compiled code use where(mask, x, other) or x[mask] = value")
    _mask_fits(target, mask, "setitem")
    found = np.flatnonzero(mask.numpy()).astype(np.int64)
    selected = (len(found), *target.shape[mask.ndim :])  # x[mask]'s shape
    if tuple(rows.shape) != selected:
        raise ShapeError(f"cannot assign {shape_text(rows.shape)} to x[mask] of {shape_text(selected)}")
    positions = lift([found])[0]
    size = math.prod(target.shape[: mask.ndim])
    return reshape(take_grad(rows, positions, axis=0, size=size), shape=target.shape)


def _select(x: Tensor, key: Any) -> tuple[Tensor, bool]:
    """x[key] as ops, and whether it is a view (basic indices; an integer array selects a copy):
    getitem without telling the mode that a view was made."""
    index, layout, arrays = _parse_key(x, key)
    out = x
    if any(s != slice(None) for s in index):
        out = slice_(out, index=tuple(index))
    for axis, array in arrays:
        out = take(out, array, axis=axis)
    shape: list = []
    for kind, d in layout:
        if kind == "keep":
            shape.append(out.shape[d + _shift(arrays, d)])
        elif kind == "new":
            shape.append(1)
        elif kind == "array":
            shape.extend(arrays[0][1].shape)
    return (out if tuple(shape) == out.shape else reshape(out, shape=tuple(shape))), not arrays


def _parse_key(x: Tensor, key: Any) -> tuple[list, list, list]:
    """An index key as a slice per axis of x, the layout of the result (each entry "keep" an axis,
    "drop" it (an int), "new" (None) or "array"), and the (axis, integer tensor) of an array index."""
    items = list(key) if isinstance(key, tuple) else [key]
    consumed = sum(1 for k in items if k is not None and k is not Ellipsis)
    if sum(1 for k in items if k is Ellipsis) > 1:  # `is`: `in` would call Tensor.__eq__
        raise IndexError("an index can only have a single ellipsis")
    if consumed > x.ndim:
        raise IndexError(f"too many indices: {consumed} for a tensor of {x.ndim} dimensions")
    ellipses = [i for i, k in enumerate(items) if k is Ellipsis]
    if ellipses:
        at = ellipses[0]
        items[at : at + 1] = [slice(None)] * (x.ndim - consumed)
    else:
        items += [slice(None)] * (x.ndim - consumed)

    index, layout, dim, arrays = [], [], 0, []
    for k in items:
        if k is None:
            layout.append(("new", None))
            continue
        size = x.shape[dim]
        if isinstance(k, slice):
            index.append(k)
            layout.append(("keep", dim))
        elif isinstance(k, int | np.integer) and not isinstance(k, bool):
            i = _check_int(int(k), size, dim)
            index.append(slice(i, i + 1))
            layout.append(("drop", dim))
        else:
            array = k if isinstance(k, Tensor) else lift([np.asarray(k)])[0]
            if array.dtype.kind != "i":
                reason = f"cannot index with {array.dtype.name} values (only integer arrays)"
                raise DTypeError(reason).locate("getitem", (describe(x), describe(array)))
            index.append(slice(None))
            layout.append(("array", dim))
            arrays.append((dim, array))
        dim += 1
    if len(arrays) > 1:
        raise IndexError("indexing with more than one integer array is not supported; use take")
    return index, layout, arrays


def _shift(arrays: list, d: int) -> int:
    """How far axis d moved right because an earlier axis became the index array's dimensions."""
    return sum(a.ndim - 1 for axis, a in arrays if axis < d)


def _check_int(i: int, size: Any, dim: int) -> Any:
    if isinstance(size, Dim):
        return size + i if i < 0 else i
    if not -size <= i < size:
        raise IndexError(f"index {i} is out of range for dimension {dim} of size {size}")
    return i % size


# in place --------------------------------------------------------------------------------------
def assign(target: Tensor, value: Any) -> Tensor:
    """Write `value` (broadcast and cast to target's shape and dtype) into `target`."""
    (value,) = lift([value]) if not isinstance(value, Tensor) else (value,)
    try:
        fits = broadcast(target.shape, value.shape) == target.shape
    except ShapeError:
        fits = False
    if not fits:
        raise ShapeError(f"cannot assign {shape_text(value.shape)} to {shape_text(target.shape)}")
    if value.shape != target.shape:
        value = broadcast_to(value, shape=target.shape)
    if value.dtype is not target.dtype:
        value = cast(value, dtype=target.dtype)
    mode = modes.current()
    mode.assign(target, value)
    through = mode.view_base(target)
    if through is not None:  # a view made in a trace: its base gets the write too, as it would eagerly
        setitem(through[0], through[1], target)  # (which refreshes the views of the base, this one too)
    else:
        _refresh_views(mode, target)
    return target


def _refresh_views(mode: modes.Mode, base: Tensor) -> None:
    """The views made of `base` in a trace take its new values, as views of its memory do eagerly."""
    for view, key in mode.views_of(base):
        mode.assign(view, _select(base, key)[0])
        _refresh_views(mode, view)


def setitem(target: Tensor, key: Any, value: Any) -> None:
    """`target[key] = value`: with a bool tensor key, value is written where the key holds (broadcast to
    target's shape); with basic indices (ints, slices, None, ...), into the part they select. Eagerly
    that is a write into the view; traced, the same values as a new value of the whole tensor (a view
    made in a trace is a value of its own, which a write would leave the tensor without; a write into
    such a view, `v = x[k]; v += 1`, writes x too)."""
    if isinstance(key, Tensor) and key.dtype is bool_:
        if isinstance(value, Tensor) and _selected_values(target, key, value):
            value = _scattered(target, key, value)  # x[mask] = x[mask] * 2: the selected ones, in order
        assign(target, where(key, value, target))
        return
    index, _, arrays = _parse_key(target, key)
    if arrays:
        raise IndexError(
            "assignment through integer-array indices is not supported (they select a copy); "
            "use a bool mask, basic indices and slices, or index_select and concat"
        )
    view = _select(target, key)[0]
    if modes.current().name == "eager":
        assign(view, value)
        return
    part = slice_.canonical_params(target.spec, tuple(index))["index"]
    sliced_shape = slice_.shape_rule(target.shape, part)
    (value,) = lift([value]) if not isinstance(value, Tensor) else (value,)
    value = broadcast_to(cast(value, dtype=target.dtype), shape=view.shape)
    placed = unslice(reshape(value, shape=sliced_shape), shape=target.shape, index=part)
    region = unslice(full_op(shape=sliced_shape, dtype=bool_, value=True), shape=target.shape, index=part)
    assign(target, where(region, placed, target))


def flip(x: Tensor, dims: int | Sequence[int]) -> Tensor:
    """x reversed along each axis of `dims` (a copy, as in PyTorch)."""
    for axis in normalize_axes(dims, x.ndim):
        last = full((), x.shape[axis] - 1, dtype=i64)  # a size that may be a symbol, bound at run time
        x = take(x, sub(last, arange(0, x.shape[axis])), axis=axis)
    return x

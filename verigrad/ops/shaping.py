"""Functions built on the movement ops: indexing, transpose, expand, (un)squeeze, flatten, stack,
and in-place assignment (`assign`, `setitem`). They add no op of their own except `stack` (a composite)."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import modes
from ..dtypes import bool_, i64, promote
from ..errors import IndexDTypeError, ShapeError
from ..shapes import Dim, broadcast, normalize_axes, normalize_axis, plain_int, shape_text
from ..tensor import Tensor, describe
from ._op import Op, Sample, lift
from ._samples import uniform
from .binary import add, lt, mul, sub, where
from .checks import checked
from .creation import arange, full, full_op
from .data_in import check_number
from .index import take
from .movement import broadcast_to, cast, concat, permute, reshape, slice_, unslice


def _axis(x: Tensor, axis: int, ndim: int, fn: str) -> int:
    """`normalize_axis`, with a refusal that names the function, the operand and the user's line."""
    try:
        return normalize_axis(axis, ndim)
    except ShapeError as e:
        raise e.locate(fn, (describe(x),)) from None


def transpose(x: Tensor, a: int = -2, b: int = -1) -> Tensor:
    """Axes a and b swapped: a view with swapped strides."""
    n = x.ndim
    if type(a) is int and type(b) is int and -n <= a < n and -n <= b < n:  # the common case, as below
        axes = list(range(n))
        axes[a % n], axes[b % n] = axes[b % n], axes[a % n]
        return permute(x, axes=tuple(axes))
    axes = list(range(x.ndim))
    a, b = _axis(x, a, x.ndim, "transpose"), _axis(x, b, x.ndim, "transpose")
    if x.ndim:  # a 0-d tensor takes 0 and -1 and stays as it is
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


def squeeze(x: Tensor, axis: int | Sequence[int] | None = None, *, dim: Any = None) -> Tensor:
    """x without its axes of size 1: all of them, or those among `axis` (PyTorch's `dim`: an int or a
    sequence of them; a 0-d tensor takes 0 and -1 and stays as it is)."""
    axis = plain_int(dim if dim is not None else axis)
    if axis is None:
        return reshape(x, shape=tuple(d for d in x.shape if d != 1))
    axes = [_axis(x, a, x.ndim, "squeeze") for a in ((axis,) if isinstance(axis, int) else axis)]
    if len(set(axes)) != len(axes):
        raise ShapeError(f"dims {tuple(axis)} name an axis twice").locate("squeeze", (describe(x),))
    shape = tuple(d for i, d in enumerate(x.shape) if not (i in axes and d == 1))
    return x if shape == tuple(x.shape) else reshape(x, shape=shape)


def flatten(x: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    """The axes start_dim..end_dim (inclusive) merged into one, as PyTorch's; a 0-d tensor gives [1]."""
    if x.ndim == 0:
        _axis(x, start_dim, 0, "flatten"), _axis(x, end_dim, 0, "flatten")
        return reshape(x, shape=(1,))
    start, end = _axis(x, start_dim, x.ndim, "flatten"), _axis(x, end_dim, x.ndim, "flatten")
    if start > end:
        reason = f"start_dim {start_dim} comes after end_dim {end_dim}"
        raise ShapeError(reason).locate("flatten", (describe(x),))
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
    """x[key] by PyTorch's rules: ints, slices, None and ... select a view; integer tensors or lists and
    bool masks (their positions, eagerly) index by broadcasting together, the result taking their
    shape where they stand together or in front where slices or None part them."""
    key = legacy_tuple(key)
    out, view = _select(x, key)
    if view and out is not x:
        modes.current().made_view(out, x, key)
    return out


def legacy_tuple(key: Any) -> Any:
    """PyTorch's (and old NumPy's) reading of a list key: x[[[0, 1], [1, 0]]] is x[[0, 1], [1, 0]] when the
    list (of fewer than 32 items) holds a sequence, a tensor, a slice, ... or None, with PyTorch's warning."""
    if type(key) is not list or len(key) >= 32:
        return key
    for k in key:
        if k is None or k is Ellipsis or isinstance(k, Tensor | list | tuple | np.ndarray | slice):
            warnings.warn(
                "Using a non-tuple sequence for multidimensional indexing is deprecated; use x[tuple(seq)] "
                "instead of x[seq] (read as a tuple, as PyTorch 2.13 reads it)",
                UserWarning,
                stacklevel=3,
            )
            return tuple(key)
    return key


def _select(x: Tensor, key: Any) -> tuple[Tensor, bool]:
    """x[key] as ops, and whether it is a view (basic indices only): getitem without telling the mode
    that a view was made."""
    index = _slices(x, key)
    if index is not None:  # slices only: what _parse_key gives for them, without its work
        return slice_(x, index=index), True  # a new view even of whole slices, as PyTorch's x[:]
    index, layout, arrays = _parse_key(x, key)
    out = x
    if any(s != slice(None) for s in index):
        out = slice_(out, index=tuple(index))
    shape = tuple(1 if d is None else out.shape[d] for d in layout)
    if shape != tuple(out.shape) or out is x:  # x[...] too: a new view, not x itself, as PyTorch's
        out = reshape(out, shape=shape)
    if not arrays:
        return out, True
    return _take_arrays(out, arrays), False


_ALL = slice(None)


def _slices(x: Tensor, key: Any) -> tuple | None:
    """A key of slices only (one, or a tuple of at most x.ndim) as a slice per axis of x, the axes it
    leaves taken whole; None for any other key (ints, None, ..., tensors: `_parse_key`)."""
    if type(key) is slice:
        key = (key,)
    elif type(key) is not tuple or not all(type(k) is slice for k in key):
        return None
    pad = x.ndim - len(key)
    return None if pad < 0 else key + (_ALL,) * pad


def _take_arrays(y: Tensor, arrays: list[tuple[int, Tensor]]) -> Tensor:
    """y indexed at axes `at` by the integer tensors (broadcast together): the axes merged into one and
    indexed by the linear position, so that one `take` reads them all and its gradient adds up at
    repeated positions. Apart (not adjacent), the indexed axes go in front, as NumPy's and PyTorch's."""
    at = [a for a, _ in arrays]
    try:
        indexed = broadcast(*(tuple(i.shape) for _, i in arrays))
    except ShapeError:
        shapes = ", ".join(shape_text(i.shape) for _, i in arrays)
        reason = f"shape mismatch: indexing tensors could not be broadcast together: {shapes}"
        raise IndexError(reason) from None
    linear: Any = None
    size: Any = 1
    for a, i in arrays:
        n = full((), y.shape[a], dtype=i64) if isinstance(y.shape[a], Dim) else y.shape[a]
        if not isinstance(i.payload, np.ndarray) or (i.payload < 0).any():
            i = where(lt(i, 0), add(i, n), i)  # -1 is the last
        linear = i if linear is None else add(mul(linear, n), i)
        size = size * y.shape[a]
    if tuple(linear.shape) != tuple(indexed):
        linear = broadcast_to(linear, shape=indexed)
    if at != list(range(at[0], at[0] + len(at))):
        rest = [d for d in range(y.ndim) if d not in at]
        y, at = permute(y, axes=(*at, *rest)), list(range(len(at)))
    merged = reshape(y, shape=(*y.shape[: at[0]], size, *y.shape[at[-1] + 1 :]))
    return take(merged, linear, axis=at[0])


def _parse_key(x: Tensor, key: Any) -> tuple[list, list, list]:
    """An index key as a slice per axis of x (an int: its one position), the layout of the result
    after those slices (an axis of the sliced x, or None for a new axis of size 1; an int's axis is
    dropped), and the (layout position, integer tensor) of each array index, bounds checked."""
    items = list(key) if isinstance(key, tuple) else [key]
    items = [_as_index(k, x) for k in items]
    consumed = sum(_consumes(k) for k in items)
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

    index: list = []
    layout: list = []
    arrays: list = []
    dim = 0
    for k in items:
        if k is None:
            layout.append(None)
        elif isinstance(k, slice):
            index.append(k)
            layout.append(dim)
            dim += 1
        elif isinstance(k, int):
            i = _check_int(k, x.shape[dim], dim)
            index.append(slice(i, i + 1))
            dim += 1
        elif k.dtype is bool_ and k.ndim == 0:  # PyTorch's: a new axis, kept (True) or emptied (False)
            layout.append(None)
            kept = np.zeros(1 if _mask_values(k, x).item() else 0, dtype=np.int64)
            arrays.append((len(layout) - 1, lift([kept])[0]))
        elif k.dtype is bool_:
            for j, found in enumerate(np.nonzero(_mask_values(k, x, dim))):
                index.append(slice(None))
                layout.append(dim + j)
                arrays.append((len(layout) - 1, lift([found.astype(np.int64)])[0]))
            dim += k.ndim
        else:
            k = _check_array(k, x, dim)
            index.append(slice(None))
            layout.append(dim)
            arrays.append((len(layout) - 1, k))
            dim += 1
    return index, layout, arrays


def _as_index(k: Any, x: Tensor) -> Any:
    """One item of a key as None, ..., a slice, an int or a tensor (a list or an array made one; a
    Python bool a 0-d bool tensor, and a 0-d integer tensor an int, as PyTorch's)."""
    if isinstance(k, Tensor) and k.ndim == 0 and k.dtype.kind == "i" and isinstance(k.payload, np.ndarray):
        return int(k.item())  # PyTorch's: a 0-d integer tensor selects as an int does
    if k is None or k is Ellipsis or isinstance(k, slice | Tensor):
        return k
    if isinstance(k, bool | np.bool_):
        return lift([np.array(bool(k))])[0]
    if isinstance(k, int | np.integer):
        return int(k)
    if isinstance(k, list | tuple | range | np.ndarray):
        array = np.asarray(k)
        if array.size == 0 and array.dtype.kind == "f":  # x[[]]: an empty list of positions
            array = array.astype(np.int64)
        return lift([array])[0]
    reason = f"cannot index with {type(k).__name__} {k!r} (ints, slices, None, ..., integer or bool tensors)"
    raise IndexDTypeError(reason).locate("getitem", (describe(x), repr(k)))


def _consumes(k: Any) -> int:
    """How many of x's axes an index item reads."""
    if k is None or k is Ellipsis:
        return 0
    if isinstance(k, Tensor) and k.dtype is bool_:
        return k.ndim
    return 1


def _mask_values(mask: Tensor, x: Tensor, dim: int = 0) -> np.ndarray:
    """A bool mask's values, after checking that it matches x's axes from `dim` on. Which positions it
    names depends on the values: eager only."""
    modes.eager_only("x[mask]", "in compiled code use where(mask, x, other)")
    span = tuple(x.shape[dim : dim + mask.ndim])
    if tuple(mask.shape) != span:
        raise IndexError(
            f"the shape of the mask {shape_text(mask.shape)} does not match the shape of the indexed "
            f"tensor {shape_text(x.shape)} at dimension {dim}"
        )
    return mask.numpy()


def _check_array(k: Tensor, x: Tensor, dim: int) -> Tensor:
    """An integer index tensor, its dtype checked and each position in [-size, size) (`checked`: eagerly
    before any work, and in a compiled plan on every run; a negative one counted from the end)."""
    if k.dtype.kind != "i":
        reason = f"cannot index with {k.dtype.name} values (only integer or bool tensors)"
        raise IndexDTypeError(reason).locate("getitem", (describe(x), describe(k)))
    return checked(k, x.shape[dim], f"dimension {dim}", what="item")


def _check_int(i: int, size: Any, dim: int) -> Any:
    if isinstance(size, Dim):
        return size + i if i < 0 else i
    if not -size <= i < size:
        raise IndexError(f"index {i} is out of range for dimension {dim} of size {size}")
    return i % size


# in place --------------------------------------------------------------------------------------
def assign(target: Tensor, value: Any) -> Tensor:
    """Write `value` (broadcast and cast to target's shape and dtype) into `target`."""
    if not isinstance(value, Tensor):  # a Python number takes the target's dtype, as an operand would
        check_number(value, target.dtype, "assign")
        value = lift([value])[0] if target.dtype.name == "bf16" else lift([target, value])[1]
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
    """`target[key] = value` for basic indices (ints, slices, None, ...), or a bool mask of target's
    shape with a value that broadcasts to target (written where the mask holds): eagerly a write into
    the view; traced, the same values as a new value of the whole tensor (a view made in a trace is a
    value of its own, which a write would leave the tensor without; a write into such a view,
    `v = x[k]; v += 1`, writes x too). Other keys are `functions.indexing.setitem`'s."""
    if isinstance(key, Tensor) and key.dtype is bool_:
        assign(target, where(key, value, target))
        return
    index, _, arrays = _parse_key(target, key)
    if arrays:
        raise IndexError("shaping.setitem writes through basic indices; integer arrays are index_put's")
    view = _select(target, key)[0]
    if modes.current().name == "eager" and (target._node is not None or not _recorded(target, value)):
        assign(view, value)  # (a view of a tensor with history: recorded as a write through a view)
        return
    part = slice_.canonical_params(target.spec, tuple(index))["index"]
    sliced_shape = slice_.shape_rule(target.shape, part)
    if not isinstance(value, Tensor):  # a Python number takes the target's dtype, as an operand would
        check_number(value, target.dtype, "assign")
        value = lift([value])[0] if target.dtype.name == "bf16" else lift([target, value])[1]
    value = broadcast_to(cast(value, dtype=target.dtype), shape=view.shape)
    placed = unslice(reshape(value, shape=sliced_shape), shape=target.shape, index=part)
    region = unslice(full_op(shape=sliced_shape, dtype=bool_, value=True), shape=target.shape, index=part)
    assign(target, where(region, placed, target))


def _recorded(target: Tensor, value: Any) -> bool:
    """Whether writing `value` into `target` is recorded for autograd: into a tensor without history, the
    write is then one of the whole tensor (a view of it could not give it one)."""
    wants = target.requires_grad or (isinstance(value, Tensor) and value.requires_grad)
    return wants and modes.LOCAL.grad[-1]


def flip(x: Tensor, dims: int | Sequence[int]) -> Tensor:
    """x reversed along each axis of `dims` (a copy, as in PyTorch)."""
    for axis in normalize_axes(dims, x.ndim):
        last = full((), x.shape[axis] - 1, dtype=i64)  # a size that may be a symbol, bound at run time
        x = take(x, sub(last, arange(0, x.shape[axis])), axis=axis)
    return x

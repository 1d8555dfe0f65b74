"""Movement ops: reshape, permute, broadcast_to, contiguous, slice, pad, concat, cast.

permute and broadcast_to are views (permuted strides, zero strides); reshape is a view when the
layout allows. `slice` is basic slicing with positive steps; its VJP is `unslice`, which places a
gradient back into zeros of the original shape.
"""

from __future__ import annotations

import operator

import numpy as np

from ..dtypes import DType, as_dtype, bf16, from_numpy_dtype, promote
from ..errors import ShapeError
from ..shapes import Dim, Spec, broadcast, normalize_axis, reshape_shape, shape_text
from ._op import Op, Sample, never_warns, unbroadcast
from ._samples import uniform


def _any_dtype(x: DType, *rest: DType, **_) -> DType:
    return x


# reshape / permute / broadcast_to / contiguous -------------------------------------------------
def _reshape_canon(x: Spec, shape) -> dict:
    sizes = tuple(int(d) if isinstance(d, np.integer) else d for d in shape)  # NumPy's, as PyTorch takes
    return {"shape": reshape_shape(x.shape, sizes)}


reshape = Op(
    "reshape",
    shape=lambda x, shape: shape,
    dtype=_any_dtype,
    params=_reshape_canon,
    positional=("shape",),
    reference=never_warns(lambda x, shape: np.reshape(x, shape)),
    vjp=lambda g, out, x, shape: (reshape(g, shape=tuple(x.shape)),),
    samples=lambda rng: [
        Sample((uniform(rng, s),), {"shape": t})
        for s, t in [
            ((2, 6), (3, 4)),
            ((2, 6), (-1, 3)),
            ((4,), (2, 1, 2)),
            ((0, 3), (3, 0)),
            ((1,), ()),
        ]
    ],
    torch=lambda t, x, shape: x.reshape(shape),
    fast=lambda out, dtypes, shape: lambda x: x.reshape(shape),  # what np.reshape calls
    doc="The same elements in a new shape; one size may be -1 (inferred only when it divides exactly).",
)


def _permute_canon(x: Spec, axes=None, dims=None) -> dict:
    axes = tuple(normalize_axis(a, x.ndim) for a in (dims if axes is None else axes))  # PyTorch's dims=
    if sorted(axes) != list(range(x.ndim)):
        raise ShapeError(f"axes {axes} are not a permutation of {x.ndim} dimensions")
    return {"axes": axes}


def _inverse(axes: tuple[int, ...]) -> tuple[int, ...]:
    """The permutation that undoes `axes` (np.argsort of a permutation, without NumPy's call)."""
    return tuple(sorted(range(len(axes)), key=axes.__getitem__))


permute = Op(
    "permute",
    shape=lambda x, axes: tuple(x[a] for a in axes),
    dtype=_any_dtype,
    params=_permute_canon,
    positional=("axes",),
    reference=never_warns(lambda x, axes: np.transpose(x, axes)),
    vjp=lambda g, out, x, axes: (permute(g, axes=_inverse(axes)),),
    samples=lambda rng: [
        Sample((uniform(rng, s),), {"axes": a})
        for s, a in [((2, 3), (1, 0)), ((2, 3, 4), (2, 0, 1)), ((0, 3), (1, 0)), ((), ())]
    ],
    torch=lambda t, x, axes: x.permute(axes),
    fast=lambda out, dtypes, axes: lambda x: x.transpose(axes),  # what np.transpose calls
    doc="Axes reordered: a view with permuted strides (no copy).",
)


def _broadcast_to_shape(x: tuple, shape: tuple) -> tuple:
    if broadcast(x, shape) != shape:
        raise ShapeError(f"{shape_text(x)} cannot be broadcast to {shape_text(shape)}")
    return shape


broadcast_to = Op(
    "broadcast_to",
    shape=_broadcast_to_shape,
    dtype=_any_dtype,
    params=lambda x, shape: {"shape": tuple(shape)},
    reference=never_warns(lambda x, shape: np.broadcast_to(x, shape)),
    vjp=lambda g, out, x, shape: (unbroadcast(g, x.shape),),
    samples=lambda rng: [
        Sample((uniform(rng, s),), {"shape": t})
        for s, t in [((3, 1), (3, 4)), ((4,), (2, 4)), ((), (2, 3)), ((1, 1), (0, 5))]
    ],
    torch=lambda t, x, shape: x.broadcast_to(shape),
    exact=True,
    doc="A view with zero strides on the broadcast dimensions.",
)


contiguous = Op(
    "contiguous",
    shape=lambda x: x,
    dtype=_any_dtype,
    # not ascontiguousarray: it makes 0-d into 1-d
    reference=never_warns(lambda x: np.asarray(x, order="C")),
    vjp=lambda g, out, x: (g,),
    samples=lambda rng: [Sample((uniform(rng, (3, 4)).T,)), Sample((uniform(rng, (2, 3)),))],
    torch=lambda t, x: x.contiguous(),
    doc="The same values in row-major order (a copy only when the input is a strided view).",
)


# cast ------------------------------------------------------------------------------------------
def _cast_reference(x: np.ndarray, dtype: DType) -> np.ndarray:
    if x.dtype == np.uint16 and dtype is not bf16:  # from bf16 bits
        x = (x.astype(np.uint32) << 16).view(np.float32)
    if dtype is bf16:
        if x.dtype == np.uint16:
            return x
        bits = x.astype(np.float32).view(np.uint32)
        rounded = bits + 0x7FFF + ((bits >> 16) & 1)  # round to nearest, ties to even
        rounded = np.where(np.isnan(x.astype(np.float32)), bits | 0x400000, rounded)
        return (rounded >> 16).astype(np.uint16)
    return x.astype(dtype.np)


def _cast_fast(out: DType, dtypes: tuple[DType, ...], dtype: DType):
    """_cast_reference when neither side is bf16: a plain astype."""
    if dtype is bf16 or dtypes[0] is bf16:
        return None
    storage = dtype.np
    return lambda x: x.astype(storage)


def _cast_vjp(g, out, x, dtype):
    return (g.cast(x.dtype) if x.dtype.is_float else None,)


cast = Op(
    "cast",
    shape=lambda x, dtype: x,
    dtype=lambda x, dtype: dtype,
    params=lambda x, dtype: {"dtype": as_dtype(dtype)},
    positional=("dtype",),
    reference=_cast_reference,
    vjp=_cast_vjp,
    samples=lambda rng: [Sample((uniform(rng, (3, 4)),), {"dtype": d}) for d in ("f32", "f64")],
    torch=lambda t, x, dtype: x.to({"f32": t.float32, "f64": t.float64}[dtype.name]),
    fast=_cast_fast,
    doc="Values converted to `dtype` (bf16: round to nearest even; float to int truncates).",
)


# slicing ---------------------------------------------------------------------------------------
def _slice_canon(x: Spec, index) -> dict:
    """Per-axis (start, stop, step) with starts and stops resolved against the (symbolic) sizes."""
    if len(index) > x.ndim:
        raise ShapeError(f"{len(index)} indices for {x.ndim} dimensions")
    out = []
    for size, item in zip(x.shape, tuple(index) + (slice(None),) * (x.ndim - len(index))):
        sl = item if isinstance(item, slice) else slice(*item)
        step = 1 if sl.step is None else sl.step
        if not isinstance(step, int) or step <= 0:
            raise ShapeError(f"slice steps must be positive integers, got {step}")
        if isinstance(size, int) and not isinstance(sl.start, Dim) and not isinstance(sl.stop, Dim):
            start, stop, _ = slice(sl.start, sl.stop, step).indices(size)
            stop = max(stop, start)
        else:
            if _empty_whatever_the_size(sl.start, sl.stop):
                sl = slice(0, 0)
            start = _resolve(sl.start, size, 0)
            stop = _resolve(sl.stop, size, size)
        out.append((start, stop, step))
    return {"index": tuple(out)}


def _empty_whatever_the_size(start, stop) -> bool:
    """Whether start:stop selects nothing on an axis of any size: both given as integers of one sign (both
    counted from the front or both from the back) with stop at or before start (x[2:1], x[-1:-3])."""
    ints = isinstance(start, int) and isinstance(stop, int)
    return ints and (start >= 0) == (stop >= 0) and stop <= start


def _resolve(value, size, default):
    if value is None:
        return default
    return size + value if isinstance(value, int) and value < 0 else value


def _slice_shape(x: tuple, index: tuple) -> tuple:
    return tuple((stop - start + step - 1) // step for start, stop, step in index)


def _as_slices(index: tuple) -> tuple:
    return tuple(slice(a, b, s) for a, b, s in index)


def _unslice_reference(g: np.ndarray, shape: tuple, index: tuple) -> np.ndarray:
    out = np.zeros(shape, dtype=g.dtype)
    out[_as_slices(index)] = g
    return out


slice_ = Op(
    "slice",
    shape=_slice_shape,
    dtype=_any_dtype,
    params=_slice_canon,
    # `or ...`: x[()] of a 0-d array is a NumPy scalar (a copy), x[...] a view
    reference=never_warns(lambda x, index: x[_as_slices(index) or ...]),
    fast=lambda out, dtypes, index: operator.itemgetter(_as_slices(index) or ...),  # x[slices], built once
    vjp=lambda g, out, x, index: (unslice(g, shape=x.shape, index=index),),
    samples=lambda rng: [
        Sample((uniform(rng, s),), {"index": i})
        for s, i in [
            ((5, 4), (slice(1, 4), slice(None, None, 2))),
            ((6,), (slice(-4, None),)),
            ((3, 4), (slice(2, 1),)),
            ((2, 3, 4), (slice(None), slice(1, 2))),
        ]
    ],
    torch=lambda t, x, index: x[_as_slices(index)],
    exact=True,
    doc="Basic slicing: a view of x[start:stop:step, ...] with positive steps.",
)

unslice = Op(
    "unslice",
    shape=lambda g, shape, index: tuple(shape),
    dtype=_any_dtype,
    reference=_unslice_reference,
    vjp=lambda g2, out, g, shape, index: (slice_(g2, index=index),),
    samples=lambda rng: [Sample((uniform(rng, (3, 2)),), {"shape": (5, 4), "index": ((1, 4, 1), (0, 4, 2))})],
    exact=True,
    doc="Zeros of `shape` with g written at the positions slice `index` selects (slice's VJP).",
)


# pad / concat ----------------------------------------------------------------------------------
def _pad_canon(x: Spec, widths, value: float = 0.0) -> dict:
    widths = tuple((int(a), int(b)) for a, b in widths)
    if len(widths) > x.ndim:
        raise ShapeError(f"{len(widths)} pad widths for {x.ndim} dimensions")
    if any(a < 0 or b < 0 for a, b in widths):
        raise ShapeError(f"pad widths must not be negative, got {widths}")
    widths = ((0, 0),) * (x.ndim - len(widths)) + widths
    return {"widths": widths, "value": float(value)}


def _pad_reference(x: np.ndarray, widths: tuple, value: float) -> np.ndarray:
    if not x.ndim:
        return x.copy()  # nothing to pad (and NumPy refuses a 0-d array)
    if x.dtype == np.uint16:  # bf16 bits: pad with the bits of the value in bf16
        value = _cast_reference(np.array(value, np.float32), bf16)
    return np.pad(x, widths, constant_values=value)


def _pad_vjp(g, out, x, widths, value):
    index = tuple((a, a + d, 1) for (a, _), d in zip(widths, x.shape))
    return (slice_(g, index=index),)


pad = Op(
    "pad",
    shape=lambda x, widths, value: tuple(d + a + b for d, (a, b) in zip(x, widths)),
    dtype=_any_dtype,
    params=_pad_canon,
    positional=("widths", "value"),
    reference=_pad_reference,
    vjp=_pad_vjp,
    samples=lambda rng: [
        Sample((uniform(rng, (2, 3)),), {"widths": ((1, 0), (2, 1)), "value": 0.0}),
        Sample((uniform(rng, (1, 2, 3)),), {"widths": ((1, 1), (0, 2)), "value": -1.5}),
    ],
    torch=lambda t, x, widths, value: t.nn.functional.pad(
        x, [w for pair in reversed(widths) for w in pair], value=value
    ),
    exact=True,
    doc="Constant padding; `widths` is (before, after) per trailing axis, NumPy's order.",
)


def _concat_canon(*xs: Spec, axis: int = 0, dim: int | None = None) -> dict:
    if not xs:
        raise ShapeError("concat needs at least one tensor")
    return {"axis": normalize_axis(axis if dim is None else dim, xs[0].ndim)}  # dim: PyTorch's name


def _concat_shape(*shapes: tuple, axis: int) -> tuple:
    first = shapes[0]
    for s in shapes[1:]:
        if len(s) != len(first) or any(a != b for i, (a, b) in enumerate(zip(first, s)) if i != axis):
            raise ShapeError(
                f"all shapes must agree except on axis {axis}: {shape_text(first)} vs {shape_text(s)}"
            )
    total = 0
    for s in shapes:
        total = total + s[axis]
    return (*first[:axis], total, *first[axis + 1 :])


def _concat_vjp(g, out, *xs, axis):
    grads, start = [], 0
    for x in xs:
        index = tuple(
            (start, start + x.shape[axis], 1) if i == axis else (0, d, 1) for i, d in enumerate(g.shape)
        )
        grads.append(slice_(g, index=index))
        start = start + x.shape[axis]
    return tuple(grads)


def _concat_dtype(*dtypes: DType, axis: int) -> DType:
    return promote(*dtypes)


def _concat_reference(*xs: np.ndarray, axis: int) -> np.ndarray:
    """Each part converted to the promoted dtype as `cast` does (uint16 arrays hold bf16 bits)."""
    dtypes = [bf16 if x.dtype == np.uint16 else from_numpy_dtype(x.dtype) for x in xs]
    out = promote(*dtypes)
    return np.concatenate([_cast_reference(x, out) if d is not out else x for x, d in zip(xs, dtypes)], axis)


concat = Op(
    "concat",
    shape=_concat_shape,
    dtype=_concat_dtype,
    params=_concat_canon,
    positional=("axis",),
    variadic=True,
    reference=_concat_reference,
    vjp=_concat_vjp,
    samples=lambda rng: [
        Sample((uniform(rng, (2, 3)), uniform(rng, (4, 3))), {"axis": 0}),
        Sample((uniform(rng, (2, 1)), uniform(rng, (2, 0)), uniform(rng, (2, 2))), {"axis": -1}),
    ],
    torch=lambda t, *xs, axis: t.cat(xs, dim=axis),
    exact=True,
    doc="Tensors joined along an existing axis.",
)

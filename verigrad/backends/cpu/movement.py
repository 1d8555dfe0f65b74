"""Movement kernels: `contiguous` copies a strided view of rank at most 5 and item size 1, 2, 4 or 8 (any
strides: negative, zero) byte for byte into a new C-contiguous array, chunked over the flattened output;
a C-contiguous input is returned itself, as the reference does. `broadcast_to` makes the reference's view
(zero strides on the broadcast dimensions, read-only) of a C-contiguous array from strides remembered
per layout, without NumPy's argument checks (a sum's gradient is broadcast so on every backward). Both
registered for every dtype. `take_grad` (an embedding's gradient) adds g's slices into zeros at the
positions idx names in C (the threads split the columns), in the order of idx as the reference's np.add.at
adds them (the same bits;
np.add.at took about 0.4 ms for the eager GPT's 128 rows of 64), f32 and f64. `unslice` (slice's VJP: an
attention output's gradient, its log-sum-exp column zero) writes each row of its result once, zeros and g's
values, the threads splitting the rows (NumPy's zeros then assignment: two serial passes), for every dtype
of those item sizes. `write_rows` copies a batched decode step's new keys and values into their cache rows,
every layer's in one C call (`Backend.write_rows`)."""

from __future__ import annotations

import ctypes
import math
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from ...ops import REGISTRY
from ...ops._op import never_warns, silenced
from . import _ffi
from ._ffi import Library

MOVEMENT = ("contiguous", "broadcast_to", "take_grad", "unslice")
COPY_ITEMSIZES = (1, 2, 4, 8)

_COPY_ARGS = [ctypes.c_void_p] * 3 + [ctypes.c_int64, ctypes.c_int64, ctypes.c_int]
_COPY_OUTER_ARGS = [ctypes.c_void_p] * 3 + [ctypes.c_int64] * 4 + [ctypes.c_int]
_WRITE_ROWS_ARGS = [ctypes.c_int64] + [ctypes.c_void_p] * 5
_state: dict[str, Any] = {"write_rows": None, "lib": None, "stores": None}


def _contiguous(fn: Any, outer_fn: Any, reference: Callable, backend: Any, ptr: Callable) -> Callable:
    chunk, reference = _ffi.min_chunk, silenced(reference)

    def kernel(x: np.ndarray) -> np.ndarray:
        if type(x) is not np.ndarray:
            return reference(x)
        if x.flags.c_contiguous:
            return x
        if x.ndim > 5 or x.itemsize not in COPY_ITEMSIZES or x.dtype.hasobject:
            return reference(x)
        out = np.empty(x.shape, x.dtype)
        if out.size == 0:
            return out
        if x.ndim == 5:  # x[0]'s copy, for each index of the first axis (split over the threads as one)
            dims = _ffi.copy_dims(x[0])
            outer_fn(ptr(x), ptr(out), dims, x.shape[0], x.strides[0], x.itemsize, chunk(), backend.threads)
        else:
            fn(ptr(x), ptr(out), _ffi.copy_dims(x), x.itemsize, chunk(), backend.threads)
        return out

    return never_warns(kernel)


_BROADCAST: dict[tuple, tuple[int, ...]] = {}


def _broadcast_to(reference: Callable) -> Callable:
    reference = silenced(reference)

    def kernel(x: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
        if type(x) is not np.ndarray or x.dtype.hasobject:
            return reference(x, shape)
        key = (x.shape, x.strides, shape)
        strides = _BROADCAST.get(key)
        if strides is None or not x.flags.c_contiguous:  # the reference's view: its checks and its strides
            view = reference(x, shape)  # (a view of a strided x: NumPy's, made in C by vg_eager next time)
            _ffi.remember(_BROADCAST, key, view.strides)
            return view
        out = np.ndarray(shape, x.dtype, x, 0, strides)
        out.flags.writeable = False
        return out

    # eager_fast.c's `broadcast_view` makes the view itself from the strides remembered here
    kernel.eager_c = (_ffi.DIRECT_BROADCAST, _BROADCAST)
    return never_warns(kernel)


_TAKE_GRAD_ARGS = [ctypes.c_void_p] * 3 + [ctypes.c_int64] * 5 + [ctypes.c_int]


def _take_grad(fn: Any, dtype: np.dtype, reference: Callable, backend: Any, ptr: Callable) -> Callable:
    reference = silenced(reference)

    def kernel(g: np.ndarray, idx: np.ndarray, axis: int, size: int) -> np.ndarray:
        if (
            type(g) is not np.ndarray
            or type(idx) is not np.ndarray
            or g.dtype != dtype
            or idx.dtype != np.int64
            or not (g.flags.c_contiguous and g.flags.aligned and idx.flags.c_contiguous and idx.flags.aligned)
            or not 0 <= axis <= g.ndim - idx.ndim
            or g.shape[axis : axis + idx.ndim] != idx.shape
        ):
            return reference(g, idx, axis, size)
        shape = (*g.shape[:axis], size, *g.shape[axis + idx.ndim :])
        out = np.empty(shape, dtype)
        outer, inner = math.prod(g.shape[:axis]), math.prod(g.shape[axis + idx.ndim :])
        if fn(ptr(g), ptr(idx), ptr(out), outer, idx.size, size, inner, _ffi.min_chunk(), backend.threads):
            return reference(g, idx, axis, size)  # an index out of range: the reference's error
        return out

    return never_warns(kernel)


_UNSLICE_ARGS = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64] + [ctypes.c_void_p] * 5
_UNSLICE_ARGS += [ctypes.c_int64, ctypes.c_int64, ctypes.c_int]
UNSLICE_RANK = 8  # movement.c's
_UNSLICE: dict[tuple, tuple | None] = {}  # per layout: vg_unslice's arrays, or None (the reference's case)


def _unslice_arrays(g: np.ndarray, shape: tuple[int, ...], index: tuple) -> tuple | None:
    """vg_unslice's per-axis arrays (shape, start, step, count, g's byte strides) for g and the slice, or
    None where the reference takes the call: a rank or item size the C does not take, or a g not shaped
    as the slice selects (the reference's error)."""
    rank = len(shape)
    if (
        not 1 <= rank <= UNSLICE_RANK
        or g.ndim != rank
        or g.itemsize not in COPY_ITEMSIZES
        or g.dtype.hasobject
    ):
        return None
    axes = [*index, *((0, n, 1) for n in shape[len(index) :])]
    # g's sizes the slice's counts of positions within out (NumPy's assignment clips the stops)
    if any(
        a < 0 or b < 1 or c != len(range(a, min(e, n), b)) for (a, e, b), n, c in zip(axes, shape, g.shape)
    ):
        return None
    ints = ctypes.c_int64 * rank
    columns = (shape, [a[0] for a in axes], [a[2] for a in axes], g.shape, g.strides)
    return (rank, *(ints(*column) for column in columns))


def _unslice(fn: Any, reference: Callable, backend: Any, ptr: Callable) -> Callable:
    reference = silenced(reference)

    def kernel(g: np.ndarray, shape: tuple[int, ...], index: tuple) -> np.ndarray:
        if type(g) is not np.ndarray:
            return reference(g, shape, index)
        key = (g.dtype, g.shape, g.strides, tuple(shape), index)
        arrays = _UNSLICE.get(key, False)
        if arrays is False:
            arrays = _ffi.remember(_UNSLICE, key, _unslice_arrays(g, shape, index))
        if arrays is None:
            return reference(g, shape, index)
        out = np.empty(shape, g.dtype)
        fn(ptr(g), ptr(out), *arrays, g.itemsize, _ffi.min_chunk(), backend.threads)
        return out

    return never_warns(kernel)


def register(backend: Any, lib: Library) -> None:
    # the references of reshape and permute are np.reshape and np.transpose, which call x.reshape(shape)
    # and x.transpose(axes), slice's x[slices], concat's np.concatenate (of arrays of one dtype, which it
    # does not convert): vg_eager makes those calls itself (_ffi.DIRECT_RESHAPE, ...)
    # (a reshape that copies and a concatenation copy through vg_copy and vg_join, the threads splitting
    # the bytes, where NumPy copies on the caller alone)
    pool = (backend, _ffi.min_chunk)
    REGISTRY["reshape"].reference.eager_c = (_ffi.DIRECT_RESHAPE, lib.address("vg_copy"), *pool)
    REGISTRY["permute"].reference.eager_c = (_ffi.DIRECT_PERMUTE,)
    REGISTRY["slice"].reference.eager_c = (_ffi.DIRECT_SLICE,)
    REGISTRY["concat"].reference.eager_c = (_ffi.DIRECT_CONCAT, lib.address("vg_join"), *pool)
    backend.register("broadcast_to", _broadcast_to(REGISTRY["broadcast_to"].reference))
    _state["write_rows"], _state["lib"] = lib.fn("vg_write_rows", _WRITE_ROWS_ARGS), lib
    for name, dtype in _ffi.DTYPES.items():
        fn = lib.fn(f"vg_take_grad_{name}", _TAKE_GRAD_ARGS, ctypes.c_int)
        backend.register(
            "take_grad", _take_grad(fn, dtype, REGISTRY["take_grad"].reference, backend, lib.ptr), name
        )
    backend.register(
        "unslice",
        _unslice(lib.fn("vg_unslice", _UNSLICE_ARGS), REGISTRY["unslice"].reference, backend, lib.ptr),
    )
    backend.register(
        "contiguous",
        _contiguous(
            lib.fn("vg_copy", _COPY_ARGS),
            lib.fn("vg_copy_outer", _COPY_OUTER_ARGS),
            REGISTRY["contiguous"].reference,
            backend,
            lib.ptr,
        ),
    )


def _store_addresses(stores: list[np.ndarray]) -> Any:
    """(the stores' data addresses, their common layout) where they are writeable arrays of one shape [B, H,
    A, D], strides and dtype with rows of D contiguous, else None; remembered for the same arrays (a
    cache's, step after step: weak references, so that a cache that grows frees its old arrays)."""
    seen = _state["stores"]  # one tuple, replaced whole: a thread reads a consistent one
    if seen is not None and len(seen[0]) == len(stores) and all(r() is a for r, a in zip(seen[0], stores)):
        return seen[1:]
    store = stores[0]
    layout = (store.shape, store.strides, store.dtype)
    if (
        any(type(a) is not np.ndarray for a in stores)
        or store.ndim != 4
        or store.strides[3] != store.itemsize
    ):
        return None
    if any((a.shape, a.strides, a.dtype) != layout or not a.flags.writeable for a in stores):
        return None
    addresses = np.fromiter(map(_state["lib"].data, stores), np.int64, len(stores))
    _state["stores"] = ([weakref.ref(a) for a in stores], addresses, layout)
    return addresses, layout


def write_rows(stores: list[np.ndarray], news: list[np.ndarray], at: np.ndarray) -> bool:
    """stores[p][b, :, at[b]] = news[p][b] for every pair p and row b in one C call (movement.c's
    vg_write_rows), where the stores [B', H, A, D] share a shape, strides and dtype with rows of D contiguous,
    the news [B, H, D] are of their dtype (any strides, rows of D contiguous) and 0 <= at < A; False (nothing
    written) else."""
    fn, lib = _state["write_rows"], _state["lib"]
    if fn is None or not stores or len(news) != len(stores) or type(at) is not np.ndarray:
        return False
    found = _store_addresses(stores)
    if found is None:
        return False
    addresses, ((_, heads, positions, width), strides, dtype) = found
    rows, item = len(at), dtype.itemsize
    steps = []
    for n in news:
        if type(n) is not np.ndarray or n.shape != (rows, heads, width) or n.dtype != dtype:
            return False
        if width > 1 and n.strides[2] != item:
            return False
        steps += n.strides[:2]
    if at.dtype != np.int64 or at.ndim != 1 or rows > stores[0].shape[0]:
        return False
    if rows and (at.min() < 0 or at.max() >= positions):
        return False
    at = np.ascontiguousarray(at)
    geo = np.array([rows, heads, width * item, *strides[:3]], np.int64)
    news_at = np.fromiter(map(lib.data, news), np.int64, len(news))
    fn(
        len(stores),
        lib.ptr(addresses),
        lib.ptr(news_at),
        lib.ptr(np.array(steps, np.int64)),
        lib.ptr(geo),
        lib.ptr(at),
    )
    return True

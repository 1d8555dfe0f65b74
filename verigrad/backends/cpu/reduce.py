"""Reduction kernels: sum, mean, max and min over any set of axes, and argmax over one axis or all, of a
C-contiguous array; one thread per block of output elements, but for a sum, mean, max or min with fewer
outputs than threads (a whole array's), which the threads split inside the outputs (reduce.c).

All five give the reference's bits: reduce.c follows the order NumPy's add.reduce takes for a C-contiguous
array (pairwise sums of the contiguous runs when the last axis is reduced, element after element
otherwise; for f32 the runs are cut at the 8192-element cast buffer, `np.getbufsize()`), and NumPy's
maximum/minimum/argmax rules for NaN and signed zeros. Where bits depend on the order NumPy's SIMD paths
take (a NaN result of sum or mean, its sign; a NaN or zero result of max or min, which NaN or zero), the
kernel says so and the reference runs. So does any other case (a view, an empty array or axis, no axis of
size > 1 reduced, another dtype).
"""

from __future__ import annotations

import ctypes
import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ...ops import REGISTRY, argmax
from ...ops._op import never_warns, silenced
from ..kernel_table import EXACT
from . import _ffi
from ._ffi import DTYPES, Library

REDUCE = ("sum", "mean", "max", "min", "argmax")

_RMAX = 8  # groups of each kind reduce.c takes


class _Desc(ctypes.Structure):
    """reduce.c's `vg_red`: the array's groups of merged axes (see reduce.c)."""

    _fields_ = [
        *[(name, ctypes.c_int64) for name in ("nk", "nr", "inner", "inner_reduced", "block", "count")],
        *[(name, ctypes.c_int64 * _RMAX) for name in ("ks", "kst", "rs", "rst")],
    ]


_ARGS = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int]
_ARGMAX_ARGS = [ctypes.c_void_p, ctypes.c_void_p, *[ctypes.c_int64] * 4, ctypes.c_int]


def groups(shape: tuple[int, ...], axes: tuple[int, ...]) -> list[tuple[int, bool]]:
    """The shape without its size-1 axes, neighbours of one kind merged: [(size, reduced)]."""
    out: list[tuple[int, bool]] = []
    for i, n in enumerate(shape):
        if n == 1:
            continue
        reduced = i in axes
        if out and out[-1][1] == reduced:
            out[-1] = (out[-1][0] * n, reduced)
        else:
            out.append((n, reduced))
    return out


@functools.lru_cache(maxsize=512)
def describe(shape: tuple[int, ...], axes: tuple[int, ...], block: int, mean: bool) -> _Desc | None:
    """reduce.c's description of reducing a C-contiguous array of `shape` over `axes`; None when there
    is nothing to reduce (no axis of size > 1) or too many groups."""
    found = groups(shape, axes)
    if not any(reduced for _, reduced in found):
        return None
    *outer, (inner, inner_reduced) = found
    kept = [(n, math.prod(s for s, _ in found[i + 1 :])) for i, (n, r) in enumerate(outer) if not r]
    red = [(n, math.prod(s for s, _ in found[i + 1 :])) for i, (n, r) in enumerate(outer) if r]
    if len(kept) > _RMAX or len(red) > _RMAX:
        return None
    count = math.prod(shape[a] for a in axes) if mean else 0
    d = _Desc(len(kept), len(red), inner, int(inner_reduced), block, count)
    for i, (n, stride) in enumerate(kept):
        d.ks[i], d.kst[i] = n, stride
    for i, (n, stride) in enumerate(red):
        d.rs[i], d.rst[i] = n, stride
    return d


# eager_fast.c's FAST_REDUCE: a reduction's calling convention (after _ffi's DIRECT_ kinds and rows.py's)
DIRECT_REDUCE = 8


def _reduce(
    name: str, fn: Any, dtype: np.dtype, reference: Callable, backend: Any, lib: Library, address: int
) -> Callable:
    chunk, reference, ptr, ref = _ffi.min_chunk, silenced(reference), lib.ptr, lib.ref
    # NumPy sums an f32 run through its cast buffer: pairwise within each buffer, in order across
    cast = dtype == np.float32 and name in ("sum", "mean")
    mean = name == "mean"
    block = _ffi.block_size(cast)

    # (shape, axes, keepdim, block) -> (the description and the result's shape), or
    # None where the kernel does not take it
    calls: dict[tuple, tuple[Any, tuple] | None] = {}

    def call(shape: tuple, axis: tuple, keepdim: bool, block: int) -> tuple[Any, tuple] | None:
        if not all(-len(shape) <= a < len(shape) for a in axis):
            return None  # the reference says what is wrong
        axis = tuple(a % len(shape) for a in axis)
        d = describe(shape, axis, block, mean)
        if d is None:
            return None
        if keepdim:
            out = tuple(1 if i in axis else n for i, n in enumerate(shape))
        else:
            out = tuple(n for i, n in enumerate(shape) if i not in axis)
        return d, out

    def kernel(x: np.ndarray, axis: tuple, keepdim: bool) -> np.ndarray:
        if (
            type(x) is not np.ndarray
            or x.dtype != dtype
            or x.size == 0
            or not (x.flags.c_contiguous and x.flags.aligned)
        ):
            return reference(x, axis, keepdim)
        key = (x.shape, axis, keepdim, block())
        try:
            found = calls[key]
        except KeyError:
            found = _ffi.remember(calls, key, call(x.shape, tuple(axis), keepdim, key[3]))
        except TypeError:  # axes given as a list
            found = call(x.shape, tuple(axis), keepdim, key[3])
        if found is None:
            return reference(x, axis, keepdim)
        d, shape = found
        out = np.empty(shape, dtype)
        if fn(ptr(x), ptr(out), ref(d), chunk(), backend.threads):
            # a signed zero the C sum cannot tell: the reference's, an array as on every other input (a
            # compiled plan checks a kernel's result type on its first run only)
            return np.asarray(reference(x, axis, keepdim))
        return out

    def described(shape: tuple, axis: tuple, keepdim: bool, block: int) -> tuple[Any, tuple] | None:
        return _ffi.remember(calls, (shape, axis, keepdim, block), call(shape, axis, keepdim, block))

    # eager_fast.c's `reduce_call` makes the call above itself where `calls` holds the layout's description;
    # a sum (0) or mean (1) also of a 0-d array, and of an F-contiguous one over every axis, as the
    # reference computes them (`described` describes the reversed view there)
    sum_kind = {"sum": 0, "mean": 1}.get(name)
    kernel.eager_c = (DIRECT_REDUCE, address, calls, dtype.num, backend, chunk, block, sum_kind, described)
    return never_warns(kernel)


def _argmax(fns: dict, reference: Callable, backend: Any, ptr: Callable) -> Callable:
    """argmax of an f32 or f64 array (`fns` by dtype); registered for its i64 result."""
    chunk, reference = _ffi.min_chunk, silenced(reference)

    def kernel(x: np.ndarray, axis: int | None, keepdim: bool) -> np.ndarray:
        fn = fns.get(x.dtype) if type(x) is np.ndarray else None
        if fn is None or x.size == 0 or not (x.flags.c_contiguous and x.flags.aligned):
            return reference(x, axis, keepdim)
        if axis is not None and not -x.ndim <= axis < x.ndim:
            return reference(x, axis, keepdim)  # which says what is wrong
        if axis is None:
            outer, n, inner = 1, x.size, 1
            shape = (1,) * x.ndim if keepdim else ()
        else:
            axis %= x.ndim
            outer, n, inner = math.prod(x.shape[:axis]), x.shape[axis], math.prod(x.shape[axis + 1 :])
            shape = x.shape[:axis] + ((1,) if keepdim else ()) + x.shape[axis + 1 :]
        out = np.empty(shape, np.int64)
        fn(ptr(x), ptr(out), outer, n, inner, max(1, chunk() // n), backend.threads)
        return out

    return never_warns(kernel)


def register(backend: Any, lib: Library) -> None:
    for dtype_name, dtype in DTYPES.items():
        for name in REDUCE[:-1]:
            c_name = f"vg_{'sum' if name == 'mean' else name}_{dtype_name}"
            fn = lib.fn(c_name, _ARGS, ctypes.c_int)
            kernel = _reduce(name, fn, dtype, REGISTRY[name].reference, backend, lib, lib.address(c_name))
            # sums, a division and selections: nothing a native build's contraction changes
            backend.register(name, kernel, dtype_name, EXACT, native=EXACT)
    # the op's dtype is its result's, i64, for every input dtype
    fns = {dtype: lib.fn(f"vg_argmax_{name}", _ARGMAX_ARGS) for name, dtype in DTYPES.items()}
    backend.register("argmax", _argmax(fns, argmax.reference, backend, lib.ptr), "i64")

"""The rope kernel (rope.c): rotary embedding of x [..., T, D] by rows of cos/sin tables [Tmax, D/2], f32 and
f64, each product and sum rounded as the op's decomposition rounds them, so the reference's bits.

x's leading axes must merge into one (a view whose rows are evenly strided, its last axis contiguous);
other aligned layouts of rank 4 at most are copied (movement.py's contiguous) and rotated in place; other
ranks, other dtypes, unaligned arrays and per-row tables run the reference. The kernel writes into `out=`
where given, which may be x itself (rope.c reads each pair before it writes it). The table rows offset ..
offset+T are checked before any work, whatever the caller checked.
"""

from __future__ import annotations

import ctypes
import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from ...dtypes import as_dtype
from ...errors import ShapeError
from ...ops import contiguous, rope
from ...shapes import shape_text
from ..kernel_table import EXACT
from ..reference import composite_reference
from . import _ffi
from ._ffi import DTYPES, Library

ROPE = ("rope",)
_ARGS = [ctypes.c_void_p] * 5 + [ctypes.c_int64, ctypes.c_int]
# movement.py copies views up to this rank in C; a copy in NumPy would not be on a replay's tape, whose
# rotation in place would then rotate the recorded copy again
COPY_RANK = 4
_NAMES = {dtype: name for name, dtype in DTYPES.items()}
_UNSEEN = object()


def rows_of(shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int) -> tuple[int, int, int] | None:
    """(rows, row stride, position stride) in elements for x [..., T, D] whose leading axes merge into
    one evenly strided axis and whose last axis is contiguous; None otherwise."""
    if len(shape) < 2 or (shape[-1] > 1 and strides[-1] != itemsize) or any(s % itemsize for s in strides):
        return None
    n, step = 1, 0
    for size, stride in reversed(list(zip(shape[:-2], strides[:-2]))):
        if size == 1:
            continue
        if n > 1 and stride != step * n:
            return None
        step, n = (stride if n == 1 else step), n * size
    return n, step // itemsize, strides[-2] // itemsize


def first_row(x: Any, cos: Any, sin: Any, offset: Any) -> int:
    """The offset as an int (it may be a 0-d integer array or tensor), once table rows offset .. offset+T
    are known to exist; a ShapeError before any work otherwise."""
    try:
        first = operator.index(offset)
    except TypeError:
        raise _shape_error(f"offset must be a non-negative int, got {offset!r}", x, cos, sin) from None
    if first < 0:
        raise _shape_error(f"offset must be a non-negative int, got {first}", x, cos, sin)
    xs, cs, ss = (getattr(a, "shape", ()) for a in (x, cos, sin))
    if len(xs) >= 2 and len(cs) == len(ss) == 2 and first + xs[-2] > min(cs[0], ss[0]):
        end, rows = first + xs[-2], min(cs[0], ss[0])
        reason = f"positions {first}..{end - 1} need {end} table rows, but the tables have {rows}"
        raise _shape_error(reason, x, cos, sin)
    return first


def _shape_error(reason: str, *arrays: Any) -> ShapeError:
    """The error as the op would raise it: the operands written as `f32[2, 5, 8]`, the user's line."""
    names = []
    for a in arrays:
        dtype = getattr(a, "dtype", None)
        names.append(f"{_NAMES.get(dtype, dtype)}{shape_text(np.shape(a))}")
    return ShapeError(reason).locate("rope", tuple(names))


def _aliases_safely(out: np.ndarray, x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> bool:
    """Whether rope.c may write `out` (C-contiguous, x's shape) while it reads x, cos and sin: apart from
    them all, or x itself (the same first element and, x being C-contiguous, the same layout)."""
    if np.may_share_memory(out, cos) or np.may_share_memory(out, sin):
        return False
    if out is x or not np.may_share_memory(out, x):
        return True
    return x.flags.c_contiguous and out.ctypes.data == x.ctypes.data


def _kernel(
    fn: Any, dtype: np.dtype, backend: Any, ptr: Callable, reference: Callable, copy: Any
) -> Callable:
    layouts: dict[tuple, Any] = {}

    def layout(x: Any, cos: Any, sin: Any, offset: int, interleaved: bool) -> Any:
        """The g argument of rope.c for arrays of these shapes, strides and dtypes; None where the tables
        suit it but x's layout does not; False where it takes none of them."""
        arrays = (x, cos, sin)
        if any(not isinstance(a, np.ndarray) or a.dtype != dtype for a in arrays) or not (
            cos.flags.c_contiguous and sin.flags.c_contiguous and cos.shape == sin.shape and cos.ndim == 2
        ):  # per-row tables [..., T, D/2] (a batch at different positions) run the reference
            return False
        found = rows_of(x.shape, x.strides, x.itemsize)
        if found is None:
            return None
        n, sn, st = found
        return np.array([n, x.shape[-2], x.shape[-1], sn, st, offset, int(interleaved)], np.int64)

    def run(x: np.ndarray, cos: np.ndarray, sin: np.ndarray, out: np.ndarray, g: np.ndarray) -> np.ndarray:
        if out.size:
            min_rows = max(1, _ffi.min_chunk() // x.shape[-1])
            fn(ptr(x), ptr(cos), ptr(sin), ptr(out), ptr(g), min_rows, backend.threads)
        return out

    def kernel(
        x: np.ndarray,
        cos: np.ndarray,
        sin: np.ndarray,
        offset: Any = 0,
        interleaved: bool = True,
        out: np.ndarray | None = None,
    ) -> np.ndarray:
        """rope of x in a new array, or written into `out` (x's shape and dtype, C-contiguous; it may be
        x itself, rotated in place)."""
        offset = first_row(x, cos, sin, offset)
        try:  # the checks once per layout (a NumPy scalar's shape () is no layout's)
            key = (x.shape, x.strides, x.dtype, cos.shape, cos.strides, cos.dtype)
            key = (key, sin.shape, sin.strides, sin.dtype, offset, interleaved)
        except AttributeError:  # not an array
            return _ffi.into(reference(x, cos, sin, offset=offset, interleaved=interleaved), out)
        found = layouts.get(key, _UNSEEN)
        if found is _UNSEEN:
            found = _ffi.remember(layouts, key, layout(x, cos, sin, offset, interleaved))
        if found is False or not (cos.flags.aligned and sin.flags.aligned):
            return _ffi.into(reference(x, cos, sin, offset=offset, interleaved=interleaved), out)
        if out is None:
            if found is not None and x.flags.aligned:
                return run(x, cos, sin, np.empty(x.shape, dtype), found)
            if copy is not None and x.ndim <= COPY_RANK and x.flags.aligned and not x.flags.c_contiguous:
                fresh = copy(x)  # a new contiguous array of the backend's own: rotated in place
                return kernel(fresh, cos, sin, offset, interleaved, out=fresh)
        elif (
            found is not None
            and x.flags.aligned
            and _ffi.writable(out, x.shape, dtype)
            and _aliases_safely(out, x, cos, sin)
        ):
            return run(x, cos, sin, out, found)
        return _ffi.into(reference(x, cos, sin, offset=offset, interleaved=interleaved), out)

    kernel.takes_out = True  # type: ignore[attr-defined]
    return kernel


def register(backend: Any, lib: Library) -> None:
    reference = composite_reference(rope)
    for dtype_name, dtype in DTYPES.items():
        fn = lib.fn(f"vg_rope_{dtype_name}", _ARGS)
        copy = backend.native(contiguous, as_dtype(dtype_name))  # movement registers it first
        backend.register("rope", _kernel(fn, dtype, backend, lib.ptr, reference, copy), dtype_name, EXACT)

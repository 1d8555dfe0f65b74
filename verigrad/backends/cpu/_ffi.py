"""What every kernel family of the cpu backend shares: the thread chunk size, NumPy's buffer size, typed
access to the library's functions, and the collapsed layout of broadcast operands."""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import numpy as np

from ..threads import CountSetting
from .data_pointer import data_reader

DTYPES = {"f32": np.dtype(np.float32), "f64": np.dtype(np.float64)}
DEFAULT_MIN_CHUNK = 16384
RANK = 4  # the rank of the layouts `collapse` gives (the C loops' nest)
LAYOUTS_KEPT = 256  # a kernel's remembered layouts, at most (a program has a few; a sweep of sizes many)
MIN_CHUNK = CountSetting("VERIGRAD_MIN_CHUNK", lambda: DEFAULT_MIN_CHUNK)
min_chunk = MIN_CHUNK.get  # the fewest elements a thread is given, read at every call


def set_min_chunk(n: int | None = None) -> None:
    """Give each thread at least `n` elements from now on (None: `VERIGRAD_MIN_CHUNK` again, else
    16384)."""
    MIN_CHUNK.set(n, "min_chunk")


try:  # NumPy's error state (bufsize included), a new object each time it is set
    from numpy._core._ufunc_config import _extobj_contextvar
except ImportError:  # another NumPy layout: ask np.getbufsize every time
    _extobj_contextvar = None
_bufsize_seen: list[tuple[Any, int]] = [(None, 0)]


def bufsize() -> int:
    """np.getbufsize() (NumPy's cast buffer, where its f32 sums cut their runs), read once per NumPy
    error state: np.getbufsize builds a dict each call, and a training step asks several times."""
    if _extobj_contextvar is None:
        return np.getbufsize()
    state = _extobj_contextvar.get()
    seen = _bufsize_seen[0]
    if seen[0] is not state:
        seen = _bufsize_seen[0] = (state, np.getbufsize())
    return seen[1]


NO_BLOCK = 1 << 62  # the block of a sum NumPy takes whole (f64: no cast buffer)


def block_size(cast: bool) -> Callable[[], int]:
    """The block a sum's pairwise runs are cut at, as a function of no arguments: NumPy's cast buffer
    (`bufsize`) for a sum through it (f32), else NO_BLOCK. Itself, not a closure over it: vg_eager calls
    it on every call, and a function of C (the int's own method) costs no Python frame there."""
    return bufsize if cast else NO_BLOCK.__index__


class Library:
    """The loaded shared library: `fn(name, argtypes)` gives a typed function; `data` reads an array's
    data pointer; `ptr(array)` is what a pointer argument of `fn`'s functions takes: the array itself
    where vg_call passes arrays (fastcall.py), else its data pointer; `ref(structure)` the same for a
    ctypes structure (else its address). Objects, not addresses, wherever vg_call takes them: a compiled
    plan's replay (ir/replay.py) holds the objects its recorded calls point into, and moves the pointers
    into a run's arguments, neither of which it can do for an address made in Python."""

    def __init__(self, cdll: ctypes.CDLL) -> None:
        # imported with the library, not with verigrad (it reads sysconfig, the build's subprocess)
        from . import fastcall

        self.cdll = cdll
        self.data = data_reader()
        self._function = fastcall.function
        arrays = fastcall.passes_arrays()
        self.ptr: Callable[[np.ndarray], Any] = _itself if arrays else self.data
        self.ref: Callable[[Any], Any] = _itself if arrays else ctypes.addressof

    def fn(self, name: str, argtypes: list, restype: Any = None) -> Any:
        """The function `name` with these argument and result types, called through vg_call where it
        can be (fastcall.py), else through ctypes."""
        f = getattr(self.cdll, name)
        f.argtypes = argtypes
        f.restype = restype
        fast = self._function(f, argtypes, restype)
        if fast is f and self.ptr is _itself:  # a signature vg_call does not take: pointers for ctypes
            data = self.data
            return lambda *args: f(*[data(a) if type(a) is np.ndarray else a for a in args])
        return fast

    def address(self, name: str) -> int:
        """The address of the library's function `name` (for vg_eager's direct calls, see `direct`)."""
        return ctypes.cast(getattr(self.cdll, name), ctypes.c_void_p).value or 0


# the calling conventions vg_eager calls a kernel's C function by (eager_fast.c's `direct`), and the NumPy
# calls it makes for a view op's reference (x.reshape(shape), x.transpose(axes), x[slices]) and for
# concat's (np.concatenate of arrays of one dtype)
DIRECT_UNARY, DIRECT_BINARY, DIRECT_RESHAPE, DIRECT_PERMUTE, DIRECT_SLICE, DIRECT_CONCAT = 1, 2, 3, 4, 5, 6
DIRECT_BROADCAST = 10  # broadcast_to's view, of strides movement.py has seen (after rows, reduce, matmul)


def direct(kernel: Any, kind: int, fn: int, fn_bc: int, dtype: np.dtype, backend: Any) -> Any:
    """Mark `kernel` (a Python wrapper) as calling the C function at address `fn` (`fn_bc` on a 0-d
    operand) in calling convention `kind`, with `backend.threads` and `min_chunk()`, for eager calls in C
    (eager.py's Plan reads `eager_c`); the kernel itself."""
    kernel.eager_c = (kind, fn, fn_bc, dtype.num, backend, min_chunk)
    return kernel


def _itself(a: np.ndarray) -> np.ndarray:
    return a


def collapse(shape: tuple[int, ...], arrays: tuple[np.ndarray, ...]) -> list[int] | None:
    """The dims argument for an output of `shape` (C-contiguous) read from `arrays` broadcast to it:
    adjacent dimensions merged where every input's strides allow, padded in front to RANK, then each
    input's element strides (0 on broadcast dimensions). None above RANK, or for a stride that is not a
    whole number of elements."""
    rank = len(shape)
    strides = []
    for a in arrays:
        item, pad = a.itemsize, rank - a.ndim
        row = [0] * pad
        for size, step in zip(a.shape, a.strides):
            if step % item:
                return None
            row.append(0 if size == 1 else step // item)
        strides.append(row)
    dims: list[int] = []
    merged: list[list[int]] = [[] for _ in arrays]
    for d, size in enumerate(shape):
        if size == 1:
            continue
        if dims and all(m[-1] == s[d] * size for m, s in zip(merged, strides)):
            dims[-1] *= size
            for m, s in zip(merged, strides):
                m[-1] = s[d]
        else:
            dims.append(size)
            for m, s in zip(merged, strides):
                m.append(s[d])
    if len(dims) > RANK:
        return None
    pad = RANK - len(dims)
    out = [1] * pad + dims
    for m in merged:
        out += [0] * pad + m
    return out


def copy_dims(x: np.ndarray) -> Any:
    """vg_copy's dims argument for a view `x` of rank at most 4: its shape then its byte strides, padded in
    front to rank 4."""
    pad = 4 - x.ndim
    return (ctypes.c_int64 * 8)(*([1] * pad), *x.shape, *([0] * pad), *x.strides)


def writable(a: Any, shape: tuple, dtype: np.dtype) -> bool:
    """Whether a kernel may write a result of `shape` and `dtype` into `a` as it is: a C-contiguous,
    aligned, writeable ndarray of them."""
    return (
        type(a) is np.ndarray
        and a.shape == shape
        and a.dtype == dtype
        and a.flags.c_contiguous
        and a.flags.aligned
        and a.flags.writeable
    )


def into(result: Any, out: Any) -> Any:
    """A kernel's `result` copied into the `out=` it was given (None: `result` as it is); several
    results, each into its own (a tuple of arrays and Nones)."""
    if out is None:
        return result
    if isinstance(out, tuple):
        return tuple([into(r, o) for r, o in zip(result, out)])
    np.copyto(out, result)
    return out


def remember(cache: dict, key: Any, value: Any) -> Any:
    """`value` stored under `key` in a kernel's cache of layouts (emptied once it holds LAYOUTS_KEPT),
    and returned."""
    if len(cache) >= LAYOUTS_KEPT:
        cache.clear()
    cache[key] = value
    return value


def layout_cached(reference: Callable, layout: Callable[[tuple], Any], run: Callable[..., Any]) -> Callable:
    """A kernel of arrays (and keyword parameters) that asks `layout(arrays)` once per layout (shapes,
    strides, dtypes: False where the C function does not take them) and gives `run(found, arrays, **params)`;
    the reference's result where an operand is not an ndarray or not aligned, the layout is refused, or
    `run` gives None. The key holds the dtypes themselves: a byte-swapped array has its dtype's number."""
    layouts: dict[tuple, Any] = {}

    def kernel(*arrays: Any, **params: Any) -> Any:
        if any(type(a) is not np.ndarray for a in arrays):
            return reference(*arrays, **params)
        key = tuple([(a.shape, a.strides, a.dtype) for a in arrays])
        found = layouts.get(key)
        if found is None:
            found = remember(layouts, key, layout(arrays))
        if found is not False and all([a.flags.aligned for a in arrays]):
            out = run(found, arrays, **params)
            if out is not None:
                return out
        return reference(*arrays, **params)

    return kernel

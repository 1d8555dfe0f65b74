"""The "cpu" backend: element-wise, last-axis reduction and strided-copy kernels in C, built on first use
and run on a thread pool.

The C sources of this package are compiled by the system C compiler the first time a kernel is looked up
(see `build`); with no compiler, or a failed build, one line says so and every op runs its reference.
Unary kernels take contiguous arrays of the output's dtype. Binary kernels take two operands of the
output's dtype, of one shape and contiguous, or of shapes that broadcast (rank at most 4, any element
strides: the output is walked in row-major order, broadcast dimensions read with stride 0). sum, max and
min reduce the last axis of a C-contiguous array with a non-empty last axis, one thread per output row.
contiguous (registered for every dtype) copies a strided view of rank at most 4 and item size 1, 2, 4 or
8 (any strides: negative, zero) byte for byte into a new C-contiguous array, chunked over the flattened
output; a C-contiguous input is returned itself, as the reference does.
Anything else (another dtype, rank, axis or layout) runs the op's reference inside the kernel, so results
are always right.

Threads: `verigrad.set_threads(n)` (read at every call) splits [0, n) into at most n contiguous chunks of
at least `min_chunk()` elements (reductions: of whole rows holding at least that many elements); every
thread count gives the same bits.

Exactness against the references (measured by tests/test_cpu_backend.py): relu, relu_deriv, neg, abs,
sqrt, sigmoid_deriv, tanh_deriv, add, sub, mul, div, maximum, minimum (same-shape and broadcast), max,
min and contiguous give the reference's bits. sum gives them too: it reproduces NumPy's pairwise
summation in double (blocks of 8 accumulators, halves above 128 elements) and, for f32, the 8192-element
cast buffer (`np.getbufsize()`) whose pairwise sums NumPy adds in order. The transcendentals (exp, log,
tanh, sin, cos, sigmoid) use the C library and are within `ULP_BOUNDS` ulps of NumPy's routines (a NaN
may have another sign bit). silu and silu_deriv have C kernels but are not registered: their products and
cancellations turn an ulp of exp into many ulps of the result.
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from .._registry import Backend, add_backend
from ..reference import reference as _reference  # registered first: the reference stays the default
from . import build as _build

UNARY_EXACT = ("relu", "relu_deriv", "neg", "abs", "sqrt", "sigmoid_deriv", "tanh_deriv")
UNARY_LIBM = ("exp", "log", "tanh", "sin", "cos", "sigmoid")
BINARY = ("add", "sub", "mul", "div", "maximum", "minimum")
REDUCE = ("sum", "max", "min")
COPY = ("contiguous",)  # registered for every dtype: the kernel checks the item size
COPY_ITEMSIZES = (1, 2, 4, 8)
DTYPES = {"f32": np.dtype(np.float32), "f64": np.dtype(np.float64)}

# The largest difference in ulps from the reference, per (op, dtype), that the tests allow; the exact
# ops are 0. See the test file for the values measured.
ULP_BOUNDS: dict[tuple[str, str], int] = {(op, d): 4 for op in UNARY_LIBM for d in DTYPES}

DEFAULT_MIN_CHUNK = 16384
_min_chunk = [int(os.environ.get("VERIGRAD_MIN_CHUNK", DEFAULT_MIN_CHUNK))]


def min_chunk() -> int:
    """The fewest elements a thread is given."""
    return _min_chunk[0]


def set_min_chunk(n: int | None = None) -> None:
    """Give each thread at least `n` elements (None: the default, 16384)."""
    if n is not None and n < 1:
        raise ValueError(f"min_chunk must be at least 1, got {n}")
    _min_chunk[0] = DEFAULT_MIN_CHUNK if n is None else int(n)


_UNARY_ARGS = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int]
_BINARY_ARGS = [ctypes.c_void_p, *_UNARY_ARGS]
_BC_ARGS = [ctypes.c_void_p] * 4 + [ctypes.c_int64, ctypes.c_int]
_EXTREME_ARGS = [ctypes.c_void_p, ctypes.c_void_p, *[ctypes.c_int64] * 3, ctypes.c_int]
_SUM_ARGS = [ctypes.c_void_p, ctypes.c_void_p, *[ctypes.c_int64] * 4, ctypes.c_int]
_COPY_ARGS = [ctypes.c_void_p] * 3 + [ctypes.c_int64, ctypes.c_int64, ctypes.c_int]


def _data_offset() -> int | None:
    """Where an ndarray object keeps its data pointer (NumPy's stable object layout), found by probing;
    reading it there costs a tenth of `__array_interface__`. None when the probe is not conclusive."""
    probes = [np.empty(n, np.float32) for n in (3, 5, 7)]
    for offset in range(8, 129, 8):
        if all(ctypes.c_void_p.from_address(id(a) + offset).value == _interface_data(a) for a in probes):
            return offset
    return None


def _interface_data(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def _data_reader() -> Callable[[np.ndarray], int]:
    offset = _data_offset()
    if offset is None:
        return _interface_data
    at = ctypes.c_void_p.from_address
    return lambda a: at(id(a) + offset).value or 0


_data = _interface_data  # replaced by the faster reader when the library loads


def _unary(fn: Any, dtype: np.dtype, reference: Callable, backend: Backend) -> Callable:
    def kernel(x: np.ndarray) -> np.ndarray:
        if type(x) is not np.ndarray or x.dtype != dtype or not (x.flags.c_contiguous and x.flags.aligned):
            return reference(x)
        out = np.empty(x.shape, dtype)
        fn(
            _data(x),
            _data(out),
            x.size,
            _min_chunk[0],
            backend.threads,
        )
        return out

    return kernel


def _broadcast_dims(a: np.ndarray, b: np.ndarray) -> tuple[tuple[int, ...], Any] | None:
    """The output shape and the `dims` argument of a broadcast kernel (the output's shape padded to rank
    4, then each operand's element strides after broadcasting); None when the shapes do not broadcast,
    the rank is over 4, or a stride is not a whole number of elements."""
    try:
        shape = np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        return None
    if len(shape) > 4:
        return None
    pad = 4 - len(shape)
    dims = [1] * pad + list(shape)
    for x in (a, b):
        item = x.itemsize
        strides = [0] * (4 - x.ndim)
        for size, step in zip(x.shape, x.strides):
            if step % item:
                return None
            strides.append(0 if size == 1 else step // item)
        dims += strides
    return shape, (ctypes.c_int64 * 12)(*dims)


def _binary(fn: Any, fn_bc: Any, dtype: np.dtype, reference: Callable, backend: Backend) -> Callable:
    def kernel(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if (
            type(a) is not np.ndarray
            or type(b) is not np.ndarray
            or a.dtype != dtype
            or b.dtype != dtype
            or not (a.flags.aligned and b.flags.aligned)
        ):
            return reference(a, b)
        if a.shape == b.shape and a.flags.c_contiguous and b.flags.c_contiguous:
            out = np.empty(a.shape, dtype)
            fn(_data(a), _data(b), _data(out), a.size, _min_chunk[0], backend.threads)
            return out
        found = _broadcast_dims(a, b)
        if found is None:
            return reference(a, b)
        shape, dims = found
        out = np.empty(shape, dtype)
        fn_bc(_data(a), _data(b), _data(out), dims, _min_chunk[0], backend.threads)
        return out

    return kernel


def _reduce(name: str, fn: Any, dtype: np.dtype, reference: Callable, backend: Backend) -> Callable:
    """sum/max/min over the last axis of a C-contiguous array with a non-empty last axis; the reference
    for every other case."""

    def kernel(x: np.ndarray, axis: tuple, keepdim: bool) -> np.ndarray:
        if (
            type(x) is not np.ndarray
            or x.dtype != dtype
            or x.ndim == 0
            or tuple(axis) != (x.ndim - 1,)
            or x.shape[-1] == 0
            or not (x.flags.c_contiguous and x.flags.aligned)
        ):
            return reference(x, axis, keepdim)
        cols = x.shape[-1]
        out = np.empty(x.shape[:-1] + ((1,) if keepdim else ()), dtype)
        min_rows = max(1, _min_chunk[0] // cols)
        if name == "sum":
            # NumPy sums an f32 row through its cast buffer: pairwise within each buffer, in order across
            block = np.getbufsize() if dtype == np.float32 else 0
            fn(_data(x), _data(out), x.size // cols, cols, block, min_rows, backend.threads)
        else:
            fn(_data(x), _data(out), x.size // cols, cols, min_rows, backend.threads)
        return out

    return kernel


def _contiguous(fn: Any, reference: Callable, backend: Backend) -> Callable:
    """A strided view of rank <= 4 and item size 1, 2, 4 or 8 (any strides, any alignment) copied into a
    new C-contiguous array, byte for byte. A C-contiguous input is returned itself, as the reference does;
    anything else (another type, rank or item size, object dtypes) runs the reference."""

    def kernel(x: np.ndarray) -> np.ndarray:
        if type(x) is not np.ndarray:
            return reference(x)
        if x.flags.c_contiguous:
            return x
        if x.ndim > 4 or x.itemsize not in COPY_ITEMSIZES or x.dtype.hasobject:
            return reference(x)
        out = np.empty(x.shape, x.dtype)
        if out.size == 0:
            return out
        pad = 4 - x.ndim
        dims = (ctypes.c_int64 * 8)(*([1] * pad), *x.shape, *([0] * pad), *x.strides)
        fn(_data(x), _data(out), dims, x.itemsize, _min_chunk[0], backend.threads)
        return out

    return kernel


class CpuBackend(Backend):
    """Registers its kernels the first time one is looked up (building the library if need be)."""

    def __init__(self) -> None:
        super().__init__(
            "cpu",
            "C element-wise, last-axis reduction and strided-copy kernels on a thread pool; the reference for"
            " the rest",
        )
        self._loaded = False
        self._info: dict[str, Any] = {}
        self.library: ctypes.CDLL | None = None

    def load(self) -> bool:
        """Build or load the library and register the kernels; False (and one line) when it cannot."""
        if self._loaded:
            return self.library is not None
        self._loaded = True
        try:
            lib, info = _build.build()
        except _build.BuildError as e:
            self._info = {"available": False, "error": str(e)}
            print(f"verigrad: cpu backend unavailable, using the reference: {e}", file=sys.stderr)
            return False
        from ...registry import OPS

        global _data
        _data = _data_reader()

        def function(name: str, argtypes: list) -> Any:
            fn = getattr(lib, name)
            fn.argtypes = argtypes
            fn.restype = None
            return fn

        for dtype_name, dtype in DTYPES.items():
            for name in UNARY_EXACT + UNARY_LIBM:
                fn = function(f"vg_{name}_{dtype_name}", _UNARY_ARGS)
                self.register(name, _unary(fn, dtype, OPS[name].reference, self), dtype_name)
            for name in BINARY:
                fn = function(f"vg_{name}_{dtype_name}", _BINARY_ARGS)
                fn_bc = function(f"vg_{name}_bc_{dtype_name}", _BC_ARGS)
                self.register(name, _binary(fn, fn_bc, dtype, OPS[name].reference, self), dtype_name)
            for name in REDUCE:
                fn = function(f"vg_{name}_{dtype_name}", _SUM_ARGS if name == "sum" else _EXTREME_ARGS)
                self.register(name, _reduce(name, fn, dtype, OPS[name].reference, self), dtype_name)
        for name in COPY:
            self.register(name, _contiguous(function("vg_copy", _COPY_ARGS), OPS[name].reference, self))
        lib.vg_pool_size.restype = ctypes.c_int
        self.library = lib
        self._info = {"available": True, **info}
        return True

    def native(self, op: Any, dtype: Any) -> Any:
        if not self._loaded:
            self.load()
        return super().native(op, dtype)

    def report(self) -> dict[str, list[str]]:
        self.load()
        return super().report()

    def kernels(self) -> list[tuple[str, str]]:
        """The (op, dtype) pairs with a C kernel."""
        self.load()
        return sorted((op, str(dtype)) for op, dtype in self._kernels)


cpu = add_backend(CpuBackend())


def available() -> bool:
    """Whether the C library was built (or found) and loaded."""
    return cpu.load()


def build_info() -> dict[str, Any]:
    """Which build is loaded: compiler, version, flags, path, native, cached (or built now), build seconds;
    or {"available": False, "error": ...}."""
    cpu.load()
    return dict(cpu._info)


def pool_size() -> int:
    """The number of pool threads started so far (0 before any multi-threaded call)."""
    return int(cpu.library.vg_pool_size()) if cpu.load() and cpu.library is not None else 0

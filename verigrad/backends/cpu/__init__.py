"""The "cpu" backend: element-wise kernels in C, built on first use and run on a thread pool.

The C sources of this package are compiled by the system C compiler the first time a kernel is looked up
(see `build`); with no compiler, or a failed build, one line says so and every op runs its reference.
Each kernel takes contiguous arrays of the output's dtype and shape; anything else (another dtype,
strides, broadcasting) runs the op's reference inside the kernel, so results are always right.

Threads: `verigrad.set_threads(n)` (read at every call) splits [0, n) into at most n contiguous chunks of
at least `min_chunk()` elements; every thread count gives the same bits.

Exactness against the references (measured by tests/test_cpu_backend.py): relu, relu_deriv, neg, abs,
sqrt, sigmoid_deriv, tanh_deriv, add, sub, mul, div, maximum, minimum give the reference's bits. The
transcendentals (exp, log, tanh, sin, cos, sigmoid) use the C library and are within `ULP_BOUNDS` ulps
of NumPy's routines (a NaN may have another sign bit). silu and silu_deriv have C kernels but are not
registered: their products and cancellations turn an ulp of exp into many ulps of the result.
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


def _binary(fn: Any, dtype: np.dtype, reference: Callable, backend: Backend) -> Callable:
    def kernel(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if (
            type(a) is not np.ndarray
            or type(b) is not np.ndarray
            or a.dtype != dtype
            or b.dtype != dtype
            or a.shape != b.shape
            or not (a.flags.c_contiguous and a.flags.aligned)
            or not (b.flags.c_contiguous and b.flags.aligned)
        ):
            return reference(a, b)
        out = np.empty(a.shape, dtype)
        fn(
            _data(a),
            _data(b),
            _data(out),
            a.size,
            _min_chunk[0],
            backend.threads,
        )
        return out

    return kernel


class CpuBackend(Backend):
    """Registers its kernels the first time one is looked up (building the library if need be)."""

    def __init__(self) -> None:
        super().__init__("cpu", "C element-wise kernels on a thread pool; the reference for the rest")
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

        for dtype_name, dtype in DTYPES.items():
            for names, argtypes, wrap in (
                (UNARY_EXACT + UNARY_LIBM, _UNARY_ARGS, _unary),
                (BINARY, _BINARY_ARGS, _binary),
            ):
                for name in names:
                    fn = getattr(lib, f"vg_{name}_{dtype_name}")
                    fn.argtypes = argtypes
                    fn.restype = None
                    self.register(name, wrap(fn, dtype, OPS[name].reference, self), dtype_name)
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

"""Pooling kernels (pooling.c, pooling_tiled.c): max_pool2d, avg_pool2d and max_pool2d_grad, NCHW and
NHWC, any stride, padding and dilation, inputs read through their strides (a transposed or broadcast
view is not copied first).

All give the reference's bits: the maxima copy and compare; max_pool2d_grad adds each image element's
contributions in the reference's order (kernel offset by kernel offset, in double from 0, rounded once);
avg_pool2d adds each window in kernel order in double, as NumPy's reduction over axes that are not the
innermost does. Where the window axes are the innermost ones (NCHW with a 1x1 output, NHWC with one
channel), NumPy's inner loops sum pairwise and take SIMD maxima (which break 0/-0 ties in their own
order): the pools then run their decompositions on the references. Threads split rows of the output (or
of the image, for the sums into it).

The pools first try pooling_tiled.c's kernels, for windows that tile the image (stride == kernel, no padding
or dilation, the innermost axis contiguous: the common 2x2 pool): one pass over the data on SIMD vectors,
the same bits; they decline every other case, which pooling.c's kernels take.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import numpy as np

from ...ops import REGISTRY, im2col
from ...ops.composite.convolution import out_hw
from ..kernel_table import EXACT
from . import _ffi
from ._ffi import DTYPES, Library
from .window import TAIL, elements, geometry, logical, usable

POOL = ("max_pool2d", "avg_pool2d", "max_pool2d_grad")

_P = ctypes.c_void_p


def _pooled_shape(n: int, c: int, ho: int, wo: int, layout: str) -> tuple:
    return (n, c, ho, wo) if layout == "NCHW" else (n, ho, wo, c)


class _Pools:
    """The wrappers of one dtype's C functions: pooling_tiled.c's, then pooling.c's for the cases they
    decline."""

    def __init__(self, lib: Library, name: str, dtype: np.dtype, backend: Any) -> None:
        self.dtype, self.backend, self.ptr = dtype, backend, lib.ptr
        self._layouts: dict[tuple, tuple[Any, tuple]] = {}
        self.c_max = lib.fn(f"vg_max_pool_{name}", [_P, _P, _P, *TAIL])
        self.c_avg = lib.fn(f"vg_avg_pool_{name}", [_P, _P, _P, *TAIL])
        self.c_max_grad = lib.fn(f"vg_max_pool_grad_{name}", [_P, _P, _P, _P, *TAIL], restype=ctypes.c_int)
        # pooling_tiled.c's: 0 when the windows do not tile the image (pooling.c's kernel then runs)
        self.c_tile_max = lib.fn(f"vg_tile_max_pool_{name}", [_P, _P, _P, *TAIL], restype=ctypes.c_int)
        self.c_tile_avg = lib.fn(f"vg_tile_avg_pool_{name}", [_P, _P, _P, *TAIL], restype=ctypes.c_int)
        self.c_tile_max_grad = lib.fn(
            f"vg_tile_max_pool_grad_{name}", [_P, _P, _P, _P, *TAIL], restype=ctypes.c_int
        )

    def _tail(self) -> tuple[int, int]:
        return _ffi.min_chunk(), self.backend.threads

    def windowgeometry(self, x, g, kernel, stride, padding, dilation, layout) -> tuple[Any, tuple]:
        """(window.h's geometry, the pooled shape) for a pool of x (and its output gradient g, or None),
        made once per shapes, strides and params (a training step pools the same layouts every step)."""
        key = (x.shape, x.strides, None if g is None else (g.shape, g.strides), kernel, stride, padding)
        key = (key, dilation, layout)
        found = self._layouts.get(key)
        if found is None:
            extra = () if g is None else logical(elements(g), layout)
            geo, (n, c, ho, wo) = geometry(
                x.shape, layout, kernel, stride, padding, dilation, logical(elements(x), layout), extra
            )
            found = _ffi.remember(self._layouts, key, (geo, _pooled_shape(n, c, ho, wo, layout)))
        return found

    def pool(self, fns: tuple[Any, Any], x, kernel, stride, padding, dilation, layout) -> np.ndarray:
        """`fns`: pooling_tiled.c's kernel, and pooling.c's for the cases it declines."""
        x = usable(x)
        geo, shape = self.windowgeometry(x, None, kernel, stride, padding, dilation, layout)
        out = np.empty(shape, self.dtype)
        if out.size:
            args = (self.ptr(x), self.ptr(out), geo, *self._tail())
            if not fns[0](*args):
                fns[1](*args)
        return out

    def max_pool_grad(self, g, x, kernel, stride, padding, dilation, layout) -> np.ndarray:
        g, x = usable(g), usable(x)
        geo, _ = self.windowgeometry(x, g, kernel, stride, padding, dilation, layout)
        out = np.empty(x.shape, self.dtype)
        if out.size:
            args = (self.ptr(x), self.ptr(g), self.ptr(out), geo, *self._tail())
            if not self.c_tile_max_grad(*args) and self.c_max_grad(*args):
                raise MemoryError("max_pool2d_grad: cannot allocate the windows' maximum offsets")
        return out


def _innermost_windows(x: np.ndarray, kernel, stride, padding, dilation, layout: str) -> bool:
    """Whether the window axes of x's columns are the innermost ones: NumPy then reduces them with its
    inner-loop code (pairwise sums; SIMD maxima, which break 0/-0 ties in another order)."""
    if layout == "NHWC":
        return x.shape[3] == 1
    ho, wo = out_hw(x.shape[2], x.shape[3], kernel, stride, padding, dilation)
    return ho * wo == 1


def _pool(k: _Pools, fns: tuple[Any, Any], reduce: str, pad_value: float) -> Callable:
    """A pooling kernel: the C ones (`fns`, see `_Pools.pool`), or the decomposition on the references
    (im2col, then `reduce` over the window axes) where the window axes are the innermost."""
    columns, reduction = im2col.reference, REGISTRY[reduce].reference

    innermost: dict[tuple, bool] = {}

    def pool2d(x, kernel, stride, padding, dilation, layout) -> np.ndarray:
        key = (x.shape, kernel, stride, padding, dilation, layout)
        found = innermost.get(key)
        if found is None:
            found = _ffi.remember(
                innermost, key, _innermost_windows(x, kernel, stride, padding, dilation, layout)
            )
        if found:
            window = {"kernel": kernel, "stride": stride, "padding": padding, "dilation": dilation}
            cols = columns(x, **window, layout=layout, pad_value=pad_value)
            return reduction(cols, axis=(2, 3) if layout == "NCHW" else (3, 4), keepdim=False)
        return k.pool(fns, x, kernel, stride, padding, dilation, layout)

    return pool2d


def register(backend: Any, lib: Library) -> None:
    """The kernels copy, select, and sum in double then divide: no product feeds an addition, so a
    native build's contraction changes nothing and they state the reference's bits there too."""
    for name, dtype in DTYPES.items():
        k = _Pools(lib, name, dtype, backend)
        kernels = {
            "max_pool2d": _pool(k, (k.c_tile_max, k.c_max), "max", -np.inf),
            "avg_pool2d": _pool(k, (k.c_tile_avg, k.c_avg), "mean", 0.0),
            "max_pool2d_grad": k.max_pool_grad,
        }
        for op, kernel in kernels.items():
            backend.register(op, kernel, name, EXACT, native=EXACT)

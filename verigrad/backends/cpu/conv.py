"""Sliding-window kernels (conv.c): im2col, col2im, max_pool2d, avg_pool2d and max_pool2d_grad, NCHW and
NHWC, any stride, padding and dilation, inputs read through their strides (a transposed or broadcast
view is not copied first).

All give the reference's bits: im2col and the pooling maxima copy and compare; col2im and
max_pool2d_grad add each image element's contributions in the reference's order (kernel offset by kernel
offset, in double from 0, rounded once); avg_pool2d adds each window in kernel order in double, as NumPy's
reduction over axes that are not the innermost does. Where the window axes are the innermost ones (NCHW
with a 1x1 output, NHWC with one channel), NumPy's inner loops sum pairwise and take SIMD maxima (which
break 0/-0 ties in their own order): the pools then run their decompositions on the references.
Threads split rows of the output (or of the image, for the sums into it).

The pools first try pooling.c's kernels, for windows that tile the image (stride == kernel, no padding or
dilation, the innermost axis contiguous: the common 2x2 pool): one pass over the data on SIMD vectors,
the same bits; they decline every other case, which conv.c's kernels take.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import numpy as np

from ...ops import REGISTRY, im2col
from ...ops.composite.conv import cols_shape, out_hw
from ..kernel_table import EXACT
from . import _ffi
from ._ffi import DTYPES, Library

WINDOW = ("im2col", "col2im", "max_pool2d", "avg_pool2d", "max_pool2d_grad")

_GEO = ctypes.c_int64 * 25  # conv.c's G_LEN
_P = ctypes.c_void_p
_TAIL = [ctypes.c_int64, ctypes.c_int]  # min_chunk, threads


def _elements(a: np.ndarray) -> list[int]:
    """The strides of `a` in elements (0 along a size-1 axis)."""
    return [0 if n == 1 else s // a.itemsize for n, s in zip(a.shape, a.strides)]


def _usable(a: np.ndarray) -> np.ndarray:
    """`a` itself when it is aligned with whole-element strides, else a contiguous copy. (Its dtype is
    the kernel's: every window op's result has its operands' dtype.)"""
    if a.flags.carray:  # C-contiguous and aligned: whole-element strides (the usual case, checked first)
        return a
    if not a.flags.aligned or any(s % a.itemsize for s in a.strides):
        a = np.ascontiguousarray(a)
    return a


def _logical(strides: list[int], layout: str) -> list[int]:
    """Image strides in the order (n, c, h, w)."""
    return strides if layout == "NCHW" else [strides[0], strides[3], strides[1], strides[2]]


def _geometry(x_shape: tuple, layout: str, kernel, stride, padding, dilation, x_strides, y_strides=()):
    n, c, h, w = x_shape if layout == "NCHW" else (x_shape[0], x_shape[3], x_shape[1], x_shape[2])
    ho, wo = out_hw(h, w, kernel, stride, padding, dilation)
    values = [n, c, h, w, *kernel, *stride, *padding, *dilation, ho, wo, int(layout == "NHWC")]
    values += [*x_strides, *y_strides]
    return _GEO(*values), (n, c, ho, wo)


def _pooled_shape(n: int, c: int, ho: int, wo: int, layout: str) -> tuple:
    return (n, c, ho, wo) if layout == "NCHW" else (n, ho, wo, c)


class _Kernels:
    """The wrappers of one dtype's C functions."""

    def __init__(self, lib: Library, name: str, dtype: np.dtype, backend: Any) -> None:
        self.dtype, self.backend, self.ptr = dtype, backend, lib.ptr
        self._layouts: dict[tuple, tuple[Any, tuple]] = {}
        self.c_im2col = lib.fn(f"vg_im2col_{name}", [_P, _P, _P, ctypes.c_double, *_TAIL])
        self.c_col2im = lib.fn(f"vg_col2im_{name}", [_P, _P, _P, *_TAIL])
        self.c_max = lib.fn(f"vg_max_pool_{name}", [_P, _P, _P, *_TAIL])
        self.c_avg = lib.fn(f"vg_avg_pool_{name}", [_P, _P, _P, *_TAIL])
        self.c_max_grad = lib.fn(f"vg_max_pool_grad_{name}", [_P, _P, _P, _P, *_TAIL], restype=ctypes.c_int)
        # pooling.c's: 0 when the windows do not tile the image (conv.c's kernel then runs)
        self.c_tile_max = lib.fn(f"vg_tile_max_pool_{name}", [_P, _P, _P, *_TAIL], restype=ctypes.c_int)
        self.c_tile_avg = lib.fn(f"vg_tile_avg_pool_{name}", [_P, _P, _P, *_TAIL], restype=ctypes.c_int)
        self.c_tile_max_grad = lib.fn(
            f"vg_tile_max_pool_grad_{name}", [_P, _P, _P, _P, *_TAIL], restype=ctypes.c_int
        )

    def _tail(self) -> tuple[int, int]:
        return _ffi.min_chunk(), self.backend.threads

    def im2col(self, x, kernel, stride, padding, dilation, layout, pad_value) -> np.ndarray:
        x = _usable(x)
        geo, (n, c, ho, wo) = _geometry(
            x.shape, layout, kernel, stride, padding, dilation, _logical(_elements(x), layout)
        )
        out = np.empty(cols_shape(n, c, ho, wo, kernel, layout), self.dtype)
        if out.size:
            self.c_im2col(self.ptr(x), self.ptr(out), geo, pad_value, *self._tail())
        return out

    def col2im(self, cols, kernel, stride, padding, dilation, layout, size) -> np.ndarray:
        cols = _usable(cols)
        n, c = (cols.shape[0], cols.shape[1]) if layout == "NCHW" else (cols.shape[0], cols.shape[5])
        shape = (n, c, *size) if layout == "NCHW" else (n, *size, c)
        geo, _ = _geometry(shape, layout, kernel, stride, padding, dilation, [0] * 4, _elements(cols))
        out = np.empty(shape, self.dtype)
        if out.size:
            if cols.size:
                self.c_col2im(self.ptr(cols), self.ptr(out), geo, *self._tail())
            else:
                out.fill(0)
        return out

    def window_geometry(self, x, g, kernel, stride, padding, dilation, layout) -> tuple[Any, tuple]:
        """(conv.c's geometry, the pooled shape) for a pool of x (and its output gradient g, or None),
        made once per shapes, strides and params (a training step pools the same layouts every step)."""
        key = (x.shape, x.strides, None if g is None else (g.shape, g.strides), kernel, stride, padding)
        key = (key, dilation, layout)
        found = self._layouts.get(key)
        if found is None:
            extra = () if g is None else _logical(_elements(g), layout)
            geo, (n, c, ho, wo) = _geometry(
                x.shape, layout, kernel, stride, padding, dilation, _logical(_elements(x), layout), extra
            )
            found = _ffi.remember(self._layouts, key, (geo, _pooled_shape(n, c, ho, wo, layout)))
        return found

    def pool(self, fns: tuple[Any, Any], x, kernel, stride, padding, dilation, layout) -> np.ndarray:
        """`fns`: pooling.c's kernel, and conv.c's for the cases it declines."""
        x = _usable(x)
        geo, shape = self.window_geometry(x, None, kernel, stride, padding, dilation, layout)
        out = np.empty(shape, self.dtype)
        if out.size:
            args = (self.ptr(x), self.ptr(out), geo, *self._tail())
            if not fns[0](*args):
                fns[1](*args)
        return out

    def max_pool_grad(self, g, x, kernel, stride, padding, dilation, layout) -> np.ndarray:
        g, x = _usable(g), _usable(x)
        geo, _ = self.window_geometry(x, g, kernel, stride, padding, dilation, layout)
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


def _pool(k: _Kernels, fns: tuple[Any, Any], reduce: str, pad_value: float) -> Callable:
    """A pooling kernel: the C ones (`fns`, see `_Kernels.pool`), or the decomposition on the references
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
        k = _Kernels(lib, name, dtype, backend)
        kernels = {
            "im2col": k.im2col,
            "col2im": k.col2im,
            "max_pool2d": _pool(k, (k.c_tile_max, k.c_max), "max", -np.inf),
            "avg_pool2d": _pool(k, (k.c_tile_avg, k.c_avg), "mean", 0.0),
            "max_pool2d_grad": k.max_pool_grad,
        }
        for op, kernel in kernels.items():
            backend.register(op, kernel, name, EXACT, native=EXACT)

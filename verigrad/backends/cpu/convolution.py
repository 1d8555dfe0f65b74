"""Convolution kernels: conv2d, conv2d_input_grad and conv2d_weight_grad in f32 and f64 (convolution.c,
convolution_implicit.c), NCHW with OIHW weights and NHWC with HWIO weights, any stride, padding and
dilation; and the columns they are products of, im2col and col2im (convolution_im2col.c), which give the
reference's bits
(im2col copies; col2im adds each image element's contributions in the reference's order, kernel offset
by kernel offset, in double from 0, rounded once), inputs read through their strides.

The columns of a block of images go to a thread's scratch buffer and one single-threaded OpenBLAS GEMM
per block computes its part (no transposed copy of the whole batch); the input gradient's columns are
added back in double and rounded once, and the weight gradient's partial sums over the blocks are added
in block order in double. One-channel images (NCHW, stride and dilation 1) take direct loops over
vectors of output columns for conv2d and, on rows of at least two vectors, the weight gradient (a GEMM
of depth KH*KW wastes most of its time on packing). On a CPU with AVX2 and FMA, f32 NCHW convolutions
of stride 1 (at least six output channels, rows of 4 or of at least 8 pixels) take an implicit GEMM
instead: no columns in memory, each element one FMA chain over its taps in order; their input gradient
is the convolution of the output gradient with the flipped kernel on the same path, and their weight
gradient a block's FMA chains over its pixels (`implicit_path`).
Blocks depend on the shape alone, so every thread count gives the same bits; the stated exactness does
not change in exact mode (the kernels then give the reference's bits, which the statement covers).

How close to the reference (for f32 a double sum rounded once, for f64 NumPy's dgemm): each element
is a sum of `depth` products (conv2d: C*KH*KW; the input gradient: at most O*KH*KW, as KH*KW sums of O
rounded once more; the weight gradient: N*Ho*Wo), computed as OpenBLAS sums them, so the bound is the
fast matmul path's (`matmul.EXACTNESS`, for operands of magnitude at most `matmul.UNIT` and depth at
most `matmul.K_STATED`); `error_bound` gives it per element. A result holding an infinity or a NaN (an
f32 partial sum may overflow where the reference's does not) is computed again by the reference, and
so is every call in exact mode (`matmul.set_exact`, `VERIGRAD_EXACT_GEMM=1`), and every call the C path
does not take (mixed dtypes, empty operands, no BLAS): those give the reference's bits, computed with
NumPy's BLAS on one thread (on several it splits a product otherwise, and the bits would change with
the thread count).
"""

from __future__ import annotations

import ctypes
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ...ops import REGISTRY
from ...ops.composite._common import spatial
from ...ops.composite.convolution import cols_shape, out_hw, weight_dims
from .. import blas
from ..kernel_table import EXACT
from ..reference import composite_reference
from . import _ffi, matmul
from ._ffi import DTYPES, Library
from .window import TAIL, elements, geometry, logical, usable

COLUMNS = ("im2col", "col2im")
CONVOLUTION = ("conv2d", "conv2d_input_grad", "conv2d_weight_grad")

_GEO = ctypes.c_int64 * 16  # convolution.h's G_LEN
_P = ctypes.c_void_p
_ARGS = [_P, ctypes.c_int, _P, _P, _P, _P, ctypes.c_int]  # gemm, its integer width, 3 arrays, geo, threads


def _geometry(n, c, h, w, o, kernel, stride, padding, dilation, layout: str) -> tuple[Any, int, int]:
    """convolution.h's geometry array, and the output's height and width."""
    ho, wo = out_hw(h, w, kernel, stride, padding, dilation)
    return _GEO(n, c, h, w, o, *kernel, *stride, *padding, *dilation, ho, wo, int(layout == "NHWC")), ho, wo


class _Columns:
    """im2col and col2im of one dtype (convolution_im2col.c)."""

    def __init__(self, lib: Library, name: str, dtype: np.dtype, backend: Any) -> None:
        self.dtype, self.backend, self.ptr = dtype, backend, lib.ptr
        self.c_im2col = lib.fn(f"vg_im2col_{name}", [_P, _P, _P, ctypes.c_double, *TAIL])
        self.c_col2im = lib.fn(f"vg_col2im_{name}", [_P, _P, _P, *TAIL])

    def _tail(self) -> tuple[int, int]:
        return _ffi.min_chunk(), self.backend.threads

    def im2col(self, x, kernel, stride, padding, dilation, layout, pad_value) -> np.ndarray:
        x = usable(x)
        geo, (n, c, ho, wo) = geometry(
            x.shape, layout, kernel, stride, padding, dilation, logical(elements(x), layout)
        )
        out = np.empty(cols_shape(n, c, ho, wo, kernel, layout), self.dtype)
        if out.size:
            self.c_im2col(self.ptr(x), self.ptr(out), geo, pad_value, *self._tail())
        return out

    def col2im(self, cols, kernel, stride, padding, dilation, layout, size) -> np.ndarray:
        cols = usable(cols)
        n, c = (cols.shape[0], cols.shape[1]) if layout == "NCHW" else (cols.shape[0], cols.shape[5])
        shape = (n, c, *size) if layout == "NCHW" else (n, *size, c)
        geo, _ = geometry(shape, layout, kernel, stride, padding, dilation, [0] * 4, elements(cols))
        out = np.empty(shape, self.dtype)
        if out.size:
            if cols.size:
                self.c_col2im(self.ptr(cols), self.ptr(out), geo, *self._tail())
            else:
                out.fill(0)
        return out


class _Convolutions:
    """One dtype's C functions, with the reference for the calls they do not take."""

    def __init__(self, lib: Library, name: str, dtype: np.dtype, backend: Any, gemm: tuple[int, int]) -> None:
        self.dtype, self.backend, self.ptr, self.gemm = dtype, backend, lib.ptr, gemm
        self.c_forward = lib.fn(f"vg_conv2d_{name}", _ARGS, restype=ctypes.c_int)
        self.c_input = lib.fn(f"vg_conv2d_input_grad_{name}", _ARGS, restype=ctypes.c_int)
        self.c_weight = lib.fn(f"vg_conv2d_weight_grad_{name}", _ARGS, restype=ctypes.c_int)
        self.reference = {op: matmul.single_threaded(composite_reference(REGISTRY[op])) for op in CONVOLUTION}
        self._setups: dict[tuple, tuple[Any, tuple]] = {}

    def _ours(self, a: Any, b: Any) -> bool:
        """Whether the C path takes these operands (the fast path on, one dtype: the kernel's)."""
        return (
            type(a) is np.ndarray
            and type(b) is np.ndarray
            and a.dtype == self.dtype
            and b.dtype == self.dtype
            and not matmul.exact_default()
        )

    def _run(self, fn: Any, a: np.ndarray, b: np.ndarray, shape: tuple, geo: Any) -> np.ndarray | None:
        """The C call into a new array, or None where it gave an infinity or a NaN, or the result is
        empty (the reference's zeros)."""
        if not math.prod(shape):
            return None
        a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
        out = np.empty(shape, self.dtype)
        ptr = self.ptr
        done = fn(*self.gemm, ptr(a), ptr(b), ptr(out), geo, self.backend.threads)
        return out if done else None

    def _setup(self, key: tuple, make: Callable[[], tuple[Any, tuple]]) -> tuple[Any, tuple]:
        """The geometry array and the result's shape for a call's shapes and params, made once."""
        found = self._setups.get(key)
        if found is None:
            found = _ffi.remember(self._setups, key, make())
        return found

    def conv2d(self, x, w, stride, padding, dilation, layout) -> np.ndarray:
        if self._ours(x, w) and x.size and w.size:

            def make() -> tuple[Any, tuple]:
                n, c, h, wd = spatial(x.shape, layout)
                o, _, kh, kw = weight_dims(w.shape, layout)
                geo, ho, wo = _geometry(n, c, h, wd, o, (kh, kw), stride, padding, dilation, layout)
                return geo, (n, o, ho, wo) if layout == "NCHW" else (n, ho, wo, o)

            geo, shape = self._setup(("f", x.shape, w.shape, stride, padding, dilation, layout), make)
            out = self._run(self.c_forward, x, w, shape, geo)
            if out is not None:
                return out
        return self.reference["conv2d"](
            x, w, stride=stride, padding=padding, dilation=dilation, layout=layout
        )

    def input_grad(self, g, w, stride, padding, dilation, layout, size) -> np.ndarray:
        if self._ours(g, w) and g.size and w.size:

            def make() -> tuple[Any, tuple]:
                n = g.shape[0]
                o, c, kh, kw = weight_dims(w.shape, layout)
                geo, _, _ = _geometry(n, c, *size, o, (kh, kw), stride, padding, dilation, layout)
                return geo, (n, c, *size) if layout == "NCHW" else (n, *size, c)

            geo, shape = self._setup(("i", g.shape, w.shape, stride, padding, dilation, layout, size), make)
            out = self._run(self.c_input, g, w, shape, geo)
            if out is not None:
                return out
        params = {"stride": stride, "padding": padding, "dilation": dilation, "layout": layout}
        return self.reference["conv2d_input_grad"](g, w, **params, size=size)

    def weight_grad(self, g, x, kernel, stride, padding, dilation, layout) -> np.ndarray:
        if self._ours(g, x) and g.size and x.size:

            def make() -> tuple[Any, tuple]:
                n, c, h, wd = spatial(x.shape, layout)
                o = g.shape[1] if layout == "NCHW" else g.shape[3]
                geo, _, _ = _geometry(n, c, h, wd, o, kernel, stride, padding, dilation, layout)
                return geo, (o, c, *kernel) if layout == "NCHW" else (*kernel, c, o)

            key = ("w", g.shape, x.shape, kernel, stride, padding, dilation, layout)
            geo, shape = self._setup(key, make)
            out = self._run(self.c_weight, g, x, shape, geo)
            if out is not None:
                return out
        params = {"stride": stride, "padding": padding, "dilation": dilation, "layout": layout}
        return self.reference["conv2d_weight_grad"](g, x, kernel=kernel, **params)


def implicit_path(lib: Library) -> bool:
    """Whether f32 stride-1 NCHW convolutions of several channels take the implicit-GEMM path here
    (convolution_implicit.c: the CPU has AVX2 and FMA)."""
    return bool(lib.fn("vg_conv_implicit", [], restype=ctypes.c_int)())


def verification_samples(op: str, rng: np.random.Generator) -> list[Any]:
    """The convolution ops' inputs for the verification suite that reach the implicit path (its samples
    have 3 output channels, too few): f32 NCHW, stride 1, rows of 10 pixels (channels in the lanes on
    AVX-512, for 16 channels or more) and of 4 (two rows a vector)."""
    from ...ops._op import Sample
    from ...ops._samples import uniform

    params = {"stride": 1, "padding": 1, "dilation": 1, "layout": "NCHW"}
    if op == "conv2d":
        return [
            Sample((uniform(rng, (2, 6, 10, 10)), uniform(rng, (20, 6, 3, 3))), params),
            Sample((uniform(rng, (2, 6, 4, 4)), uniform(rng, (8, 6, 3, 3))), params),
        ]
    g = uniform(rng, (2, 8, 10, 10))
    if op == "conv2d_input_grad":  # a convolution with 16 output channels
        return [Sample((g, uniform(rng, (8, 16, 3, 3))), {**params, "size": (10, 10)})]
    if op == "conv2d_weight_grad":
        return [Sample((g, uniform(rng, (2, 6, 10, 10))), {**params, "kernel": (3, 3)})]
    return []


def error_bound(op: str, *arrays: np.ndarray, **params: Any) -> np.ndarray:
    """The largest |kernel - reference| per element of `op` on these operands, in double: the fast
    matmul path's bound (depth + 2) u s + u |reference|, with s the op on the operands' magnitudes and
    depth its number of products per element (see the module docstring)."""
    dtype = arrays[0].dtype
    reference = composite_reference(REGISTRY[op])
    s = reference(*(np.abs(a.astype(np.float64)) for a in arrays), **params)
    ref = np.abs(reference(*(a.astype(np.float64) for a in arrays), **params))
    layout = params["layout"]
    if op == "conv2d":
        o, c, kh, kw = weight_dims(arrays[1].shape, layout)
        depth = c * kh * kw
    elif op == "conv2d_input_grad":
        o, c, kh, kw = weight_dims(arrays[1].shape, layout)
        depth = o * kh * kw + kh * kw  # KH*KW GEMM results, each rounded, added and rounded once more
    else:
        n, ho, wo = (arrays[0].shape[i] for i in ((0, 2, 3) if layout == "NCHW" else (0, 1, 2)))
        depth = n * ho * wo
    u = matmul.unit_roundoff(dtype)
    return (depth + 2) * u * s + u * ref


def register(backend: Any, lib: Library) -> None:
    """im2col copies and col2im sums in double: no product feeds an addition, so a native build's
    contraction changes nothing and they state the reference's bits there too."""
    for name, dtype in DTYPES.items():
        k = _Columns(lib, name, dtype, backend)
        backend.register("im2col", k.im2col, name, EXACT, native=EXACT)
        backend.register("col2im", k.col2im, name, EXACT, native=EXACT)
    for name, dtype in DTYPES.items():
        found = blas.cblas(("s" if name == "f32" else "d") + "gemm")
        if found is None:
            continue  # no BLAS here: the ops run their decompositions on the other kernels
        gemm = (ctypes.cast(found[0], ctypes.c_void_p).value, int(found[1]))
        k = _Convolutions(lib, name, dtype, backend, gemm)
        exactness = matmul.EXACTNESS[(name, False)]
        kernels: dict[str, Callable] = {
            "conv2d": k.conv2d,
            "conv2d_input_grad": k.input_grad,
            "conv2d_weight_grad": k.weight_grad,
        }
        for op, kernel in kernels.items():
            backend.register(op, kernel, name, exactness)

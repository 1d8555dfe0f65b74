"""Row kernels (rows.c): softmax and log_softmax over the last axis, cross_entropy and its gradient
(and both from one pass over each row: cross_entropy_step, whose losses cross_entropy_total reduces),
layer_norm and rms_norm and their input and weight gradients; each row (each column of a weight
gradient) by one thread.

Each repeats its op's decomposition step by step with the same roundings (sums in NumPy's order, in
double, rounded to the dtype), so the norms and their gradients give the reference's bits. softmax,
log_softmax, cross_entropy and its gradient call elementwise.c's exp and the C library's log: exact
where those are (NumPy's f64 loops are the C library's on this machine), within the bounds `exactness`
derives otherwise. Any other case (softmax over another axis, operands of mixed dtypes, empty arrays)
runs the op's decomposition on the references (`decomposition`), so results are always the reference's.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import numpy as np

from ...dtypes import as_dtype, from_numpy_dtype
from ...ops import contiguous, cross_entropy, exp, layer_norm, log, log_softmax, mean, rms_norm, softmax
from ...ops import sum as reduce_sum
from ...ops._op import never_warns, silenced
from ...ops.checks import out_of_range
from ...ops.composite.losses import cross_entropy_grad, cross_entropy_step, cross_entropy_total
from ...ops.composite.normalization import (
    layer_norm_grad,
    layer_norm_weight_grad,
    rms_norm_grad,
    rms_norm_weight_grad,
)
from ..kernel_table import EXACT, Exactness, tolerance, ulp
from ..reference import composite_reference
from . import _ffi
from ._ffi import DTYPES, Library

ROWS = (
    "softmax",
    "log_softmax",
    "cross_entropy",
    "cross_entropy_grad",
    "cross_entropy_step",
    "cross_entropy_total",
    "layer_norm",
    "rms_norm",
    "layer_norm_grad",
    "rms_norm_grad",
    "layer_norm_weight_grad",
    "rms_norm_weight_grad",
)


# How far from the reference each kernel may be. The norms and their gradients: the same bits. The others
# call elementwise.c's exp (and log) kernels: where elementwise.py, registered first, states those exact,
# they are exact too; otherwise, with exp and log within 4 ulps: softmax divides e by the sum of the e's (4
# ulps from e, 4 from the sum, 1 from the division); log_softmax and cross_entropy subtract log(sum(e)) from
# a number of the same sign, and log turns the sum's relative error into an absolute one (d log s = ds / s),
# so their bound is relative plus absolute, at 8 epsilons each; cross_entropy_grad subtracts 1 from
# softmax's target entry, which turns its 9 ulps of a number up to 1 into an absolute error of 9 epsilons
# times |g|: 32 epsilons hold for |g| <= 3 (a mean or summed loss's gradient is 1).
CALLS_EXP = ("softmax", "log_softmax", "cross_entropy", "cross_entropy_grad", "cross_entropy_step")


def exactness(name: str, dtype_name: str, backend: Any) -> Exactness:
    """What the kernel of `name` states for `dtype_name` on `backend` (see above)."""
    libm = [exp, log]
    if name not in CALLS_EXP or all(
        backend.native(op, as_dtype(dtype_name)) is not None
        and backend.exactness(op.name, dtype_name).is_exact  # elementwise.c's, which these kernels call
        for op in libm
    ):
        return EXACT
    eps = float(np.finfo(DTYPES[dtype_name]).eps)
    if name == "softmax":
        return ulp(9)
    grad = name in ("cross_entropy_grad", "cross_entropy_step")  # the step's losses: within the gradient's
    return tolerance(32 * eps, 32 * eps) if grad else tolerance(8 * eps, 8 * eps)


_P, _I, _T = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int
DIRECT_ROWS = 7  # eager_fast.c's FAST_ROWS: softmax's calling convention (after _ffi's DIRECT_ kinds)
_SOFTMAX_ARGS = [_P, _P, _I, _I, _I, _T, _I, _T]
_XENT_ARGS = [_P, _P, _P, _I, _I, _I, _T, _I, _I, _T]
_XENT_TOTAL_ARGS = [_P, _P, _I, _I, _T, _T, _I, _P]
_XENT_GRAD_ARGS = [_P, _P, _P, _I, _P, _I, _I, _I, _T, _T, _I, _I, _T]
_TARGET = np.dtype(np.int64)
_LAYER_NORM_ARGS = [_P, _P, _P, _P, _I, _I, ctypes.c_double, _I, _I, _T]
_RMS_NORM_ARGS = [_P, _P, _P, _I, _I, ctypes.c_double, _I, _I, _T]
_NORM_GRAD_ARGS = [_P, _P, _P, _P, _I, _I, ctypes.c_double, _T, _I, _I, _T]
_WEIGHT_GRAD_ARGS = [_P, _P, _P, _P, _I, _I, ctypes.c_double, _T, _I, _I, _T]


def _rows_of(x: np.ndarray, dtype: np.dtype, copy: Callable = np.ascontiguousarray) -> np.ndarray | None:
    """`x` as C-contiguous rows of `dtype` (a view copied by `copy`), or None if it is not of that dtype
    or has no elements."""
    if type(x) is not np.ndarray or x.dtype != dtype or x.size == 0:
        return None
    return x if x.flags.c_contiguous and x.flags.aligned else copy(x)


class _Rows:
    """What every row kernel of one dtype needs: the library, the backend (for its threads), the pointer
    argument maker (`Library.ptr`) and the summation block."""

    def __init__(self, lib: Library, dtype_name: str, backend: Any) -> None:
        self.lib, self.dtype, self.backend, self.ptr = lib, DTYPES[dtype_name], backend, lib.ptr
        self.suffix = dtype_name

    @property
    def block(self) -> int:
        """NumPy sums an f32 row through its cast buffer (8192 elements): pairwise within each."""
        return _ffi.block_size(self.suffix == "f32")()

    def fn(self, name: str, args: list, restype: Any = None) -> Any:
        return self.lib.fn(f"vg_{name}_{self.suffix}", args, restype)

    def rows_of(self, x: np.ndarray) -> np.ndarray | None:
        """`_rows_of` with a view copied by the backend's `contiguous` kernel: a C copy, which a compiled
        plan's replay makes again (a copy made in Python would be repeated as it was)."""
        if type(x) is np.ndarray and x.flags.c_contiguous and x.flags.aligned:
            return _rows_of(x, self.dtype)
        copy = self.backend.native(contiguous, as_dtype(self.suffix)) or np.ascontiguousarray
        return _rows_of(x, self.dtype, copy)

    def min_rows(self, n: int) -> int:
        return max(1, _ffi.min_chunk() // n)


def _softmax(k: _Rows, log: bool, fallback: Callable) -> Callable:
    fn = k.fn("softmax", _SOFTMAX_ARGS)

    def kernel(x: np.ndarray, axis: int, out: np.ndarray | None = None) -> np.ndarray:
        """softmax (log_softmax) of `x` along `axis`, into `out` when given (which may be `x`)."""
        rows = k.rows_of(x)
        if rows is None or axis != x.ndim - 1 or (out is not None and not out.flags.c_contiguous):
            result = fallback(x, axis=axis)
            if out is None:
                return result
            out[...] = result
            return out
        if out is None:
            out = np.empty(x.shape, k.dtype)
        n = x.shape[-1]
        fn(k.ptr(rows), k.ptr(out), x.size // n, n, k.block, int(log), k.min_rows(n), k.backend.threads)
        return out

    # eager_fast.c's `rows_call` makes the call above itself where x is already C-contiguous rows
    address = k.lib.address(f"vg_softmax_{k.suffix}")
    block = _ffi.block_size(k.suffix == "f32")
    kernel.eager_c = (DIRECT_ROWS, address, int(log), k.dtype.num, k.backend, _ffi.min_chunk, block)
    return kernel


def _targets(target: Any) -> np.ndarray | None:
    """The class targets as the C kernels read them (C-contiguous i64), or None (the reference then: a
    copy made here would be a value a compiled plan's replay repeats)."""
    if type(target) is not np.ndarray or target.dtype != _TARGET or not target.flags.c_contiguous:
        return None
    return target


def _cross_entropy_total(k: _Rows, fallback: Callable) -> Callable:
    """cross_entropy_total's kernel, which cross_entropy's reduces its rows' losses with: the losses reduced
    as the reference reduces them (NumPy's pairwise sum in double, rounded once; a mean over the rows kept,
    in the dtype), in C; a NaN's bits depend on NumPy's order: its own kernels then (C says so, so that a
    replay of the call stops there too), the result an array as on any other input."""
    total = k.fn("xent_total", _XENT_TOTAL_ARGS, ctypes.c_int)
    dtype = from_numpy_dtype(k.dtype)
    reduce = {
        op.name: silenced(op.fast(dtype, (dtype,), axis=(0,), keepdim=False)) for op in (reduce_sum, mean)
    }

    def kernel(
        nll: np.ndarray, target: np.ndarray, reduction: str, ignore_index: int | None = None
    ) -> np.ndarray:
        losses, targets = k.rows_of(nll), _targets(target)
        if losses is None or targets is None:
            return fallback(nll, target, reduction=reduction, ignore_index=ignore_index)
        if reduction == "none":
            return losses
        out = np.empty((), k.dtype)
        mean_, ignoring, ignore = reduction == "mean", ignore_index is not None, ignore_index or 0
        if not total(
            k.ptr(losses), k.ptr(targets), losses.shape[0], k.block, int(mean_), ignoring, ignore, k.ptr(out)
        ):
            return out
        if not (mean_ and ignoring):
            return np.asarray(reduce[reduction](losses))
        with np.errstate(all="ignore"):  # all rows ignored: 0 / 0, NaN as the reference's
            return np.asarray(reduce["sum"](losses) / k.dtype.type(np.count_nonzero(targets != ignore)))

    return kernel


def _cross_entropy(k: _Rows, fallback: Callable, total: Callable) -> Callable:
    """cross_entropy's kernel: the rows' losses, reduced by `total` (cross_entropy_total's kernel)."""
    fn = k.fn("xent", _XENT_ARGS, ctypes.c_int)

    def kernel(
        logits: np.ndarray, target: np.ndarray, reduction: str, ignore_index: int | None = None
    ) -> np.ndarray:
        rows, targets = k.rows_of(logits), _targets(target)
        if rows is None or targets is None:
            return fallback(logits, target, reduction=reduction, ignore_index=ignore_index)
        n, c = logits.shape
        ignoring, ignore = ignore_index is not None, ignore_index or 0
        nll = np.empty(n, k.dtype)
        args = (n, c, k.block, ignoring, ignore, k.min_rows(c), k.backend.threads)
        if fn(k.ptr(rows), k.ptr(targets), k.ptr(nll), *args):
            raise out_of_range(target, c, "cross_entropy", "target", ignore_index)
        return total(nll, targets, reduction, ignore_index)

    return kernel


def _cross_entropy_grad(k: _Rows, fallback: Callable, losses: bool = False) -> Callable:
    """cross_entropy_grad's kernel; with `losses`, cross_entropy_step's: the gradient flattened, then the
    rows' losses, from one pass over each row."""
    fn = k.fn("xent_step" if losses else "xent_grad", _XENT_GRAD_ARGS, ctypes.c_int)

    def kernel(
        logits: np.ndarray,
        target: np.ndarray,
        g: np.ndarray,
        reduction: str,
        ignore_index: int | None = None,
    ) -> np.ndarray:
        rows, scale, targets = k.rows_of(logits), k.rows_of(np.asarray(g)), _targets(target)
        if rows is None or scale is None or targets is None or not logits.shape[0]:  # no rows: no mean
            return fallback(logits, target, g, reduction=reduction, ignore_index=ignore_index)
        n, c = logits.shape
        out = np.empty(n * c + n if losses else (n, c), k.dtype)
        step, mean_ = int(reduction == "none"), int(reduction == "mean")  # C divides g by the count
        args = (n, c, k.block, mean_, ignore_index is not None, ignore_index or 0, k.min_rows(c))
        if fn(k.ptr(rows), k.ptr(targets), k.ptr(scale), step, k.ptr(out), *args, k.backend.threads):
            raise out_of_range(target, c, "cross_entropy", "target", ignore_index)
        return out

    return kernel


def _layer_norm(k: _Rows, fallback: Callable) -> Callable:
    fn = k.fn("layer_norm", _LAYER_NORM_ARGS)

    def kernel(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
        rows, w, b = k.rows_of(x), k.rows_of(weight), k.rows_of(bias)
        if rows is None or w is None or b is None:
            return fallback(x, weight, bias, eps=eps)
        out, n = np.empty(x.shape, k.dtype), x.shape[-1]
        args = (x.size // n, n, eps, k.block, k.min_rows(n), k.backend.threads)
        fn(k.ptr(rows), k.ptr(w), k.ptr(b), k.ptr(out), *args)
        return out

    return kernel


def _rms_norm(k: _Rows, fallback: Callable) -> Callable:
    fn = k.fn("rms_norm", _RMS_NORM_ARGS)

    def kernel(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
        rows, w = k.rows_of(x), k.rows_of(weight)
        if rows is None or w is None:
            return fallback(x, weight, eps=eps)
        out, n = np.empty(x.shape, k.dtype), x.shape[-1]
        args = (x.size // n, n, eps, k.block, k.min_rows(n), k.backend.threads)
        fn(k.ptr(rows), k.ptr(w), k.ptr(out), *args)
        return out

    return kernel


def _norm_grad(k: _Rows, center: bool, fallback: Callable) -> Callable:
    fn = k.fn("norm_grad", _NORM_GRAD_ARGS)

    def kernel(g: np.ndarray, x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
        rows, grad, w = k.rows_of(x), k.rows_of(g), k.rows_of(weight)
        if rows is None or grad is None or w is None:
            return fallback(g, x, weight, eps=eps)
        out, n = np.empty(x.shape, k.dtype), x.shape[-1]
        args = (x.size // n, n, eps, int(center), k.block, k.min_rows(n), k.backend.threads)
        fn(k.ptr(grad), k.ptr(rows), k.ptr(w), k.ptr(out), *args)
        return out

    return kernel


def _weight_grad(k: _Rows, center: bool, fallback: Callable) -> Callable:
    fn = k.fn("norm_weight_grad", _WEIGHT_GRAD_ARGS, ctypes.c_int)

    def kernel(g: np.ndarray, x: np.ndarray, eps: float) -> np.ndarray:
        rows, grad = k.rows_of(x), k.rows_of(g)
        # one column: the reference's sum over the leading axes runs along contiguous memory, where NumPy
        # sums pairwise, not row after row as the kernel does (and as NumPy does for 2 columns or more)
        if rows is None or grad is None or x.ndim < 2 or x.shape[-1] == 1:
            return fallback(g, x, eps=eps)
        n = x.shape[-1]
        out = np.empty(n, k.dtype)
        # a zero or NaN column sum: which zero or NaN depends on NumPy's order, the reference's then
        if fn(
            k.ptr(grad),
            k.ptr(rows),
            k.ptr(out),
            None,
            x.size // n,
            n,
            eps,
            int(center),
            k.block,
            k.min_rows(n),
            k.backend.threads,
        ):
            return fallback(g, x, eps=eps)
        return out

    return kernel


def register(backend: Any, lib: Library) -> None:
    for dtype_name in DTYPES:
        k = _Rows(lib, dtype_name, backend)
        total = _cross_entropy_total(k, composite_reference(cross_entropy_total))
        kernels = {
            "softmax": _softmax(k, False, composite_reference(softmax)),
            "log_softmax": _softmax(k, True, composite_reference(log_softmax)),
            "cross_entropy": _cross_entropy(k, composite_reference(cross_entropy), total),
            "cross_entropy_grad": _cross_entropy_grad(k, composite_reference(cross_entropy_grad)),
            "cross_entropy_step": _cross_entropy_grad(k, composite_reference(cross_entropy_step), True),
            "cross_entropy_total": total,
            "layer_norm": _layer_norm(k, composite_reference(layer_norm)),
            "rms_norm": _rms_norm(k, composite_reference(rms_norm)),
            "layer_norm_grad": _norm_grad(k, True, composite_reference(layer_norm_grad)),
            "rms_norm_grad": _norm_grad(k, False, composite_reference(rms_norm_grad)),
            "layer_norm_weight_grad": _weight_grad(k, True, composite_reference(layer_norm_weight_grad)),
            "rms_norm_weight_grad": _weight_grad(k, False, composite_reference(rms_norm_weight_grad)),
        }
        for name, kernel in kernels.items():  # the fallbacks silence NumPy themselves
            backend.register(name, never_warns(kernel), dtype_name, exactness(name, dtype_name, backend))

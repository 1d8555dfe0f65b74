"""cached_attention (attention.c) on f32 arrays of any strides: the decode step's attention over a window
of the KV cache (a view: no copy) and the new tokens. attention_lse and attention_grad (the training
step's causal attention with its log-sum-exp, and its gradients, flash-attention style: no [T, S] matrix)
likewise, on f32 arrays of any strides.

Like the reference it computes the scores, softmax and weighted sums in f64 and rounds once; only the
order and rounding of its sums (fused multiply-adds where the CPU has them) and its exp (a few ulps of
f64) differ from the reference's, so each result is within an f32 rounding of the reference's:
|c - ref| <= 2^-23 |ref| + atol, atol bounding the f64 sums' error for |q|, |k|, |v| <= `UNIT`, head dims
up to `D_STATED` and windows up to `W_STATED` positions (scale <= 1). attention's forward is held to the
same bound; its gradients, whose f64 sums chain more products, to `GRAD_EXACTNESS`. cached_attention
also takes a window in f16 (an f16 KV cache), widened exactly to f32 in the kernel: the same bound against
the reference on the same f16 window. Other dtypes run the reference.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from ...ops import attention_grad, attention_lse, cached_attention
from ..kernel_table import tolerance
from . import _ffi, matmul
from ._ffi import Library

ATTENTION = ("cached_attention", "attention_lse", "attention_grad")
UNIT, D_STATED, W_STATED = 2.0, 256, 8192
# a score errs by <= D 2^-53 D UNIT^2, which moves each weight p by twice that relatively (exp, then the
# normalization); the weighted sum of <= W values (sum p = 1) adds <= W 2^-53 UNIT
ATTENTION_EXACTNESS = tolerance(2.0**-23, 4 * (D_STATED**2 * UNIT**2 + W_STATED * UNIT) * 2.0**-53)

# a gradient: ds = p (g.v - delta) errs by <= p 4 D^3 UNIT^4 2^-53 (the score's error moves p = exp(s - lse)
# relatively by 2 D^2 UNIT^2 2^-53, times |g.v - delta| <= 2 D UNIT^2, plus the dot products' own; the
# forward's output and lse are the backward's operands, its reference reads the same); dq sums them (sum
# p = 1) times |k| <= UNIT, dk and dv over <= W queries (sum p <= W): twice W 4 D^3 UNIT^5 2^-53 covers
# each, for head dims up to D_GRAD and W_GRAD positions (a worst case: the samples meet f32's rounding)
D_GRAD, W_GRAD = 64, 1024
GRAD_EXACTNESS = tolerance(2.0**-23, 8 * W_GRAD * D_GRAD**3 * UNIT**5 * 2.0**-53)
_FLASH_ARGS = [ctypes.c_void_p, ctypes.c_int] + [ctypes.c_void_p, ctypes.c_void_p] * 5
_FLASH_ARGS += [ctypes.c_double, ctypes.c_void_p, ctypes.c_int]
_ARGS = [ctypes.c_void_p] + [ctypes.c_void_p, ctypes.c_void_p] * 6 + [ctypes.c_double, ctypes.c_void_p]
_ARGS += [ctypes.c_int]


def register(backend: Any, lib: Library) -> None:
    from ...ops.composite.attention import resolve_scale

    f32, f16 = np.dtype(np.float32), np.dtype(np.float16)  # an f16 window: an f16 KV cache
    fns = {
        f32: lib.fn("vg_cached_attention_f32", _ARGS, restype=ctypes.c_int),
        f16: lib.fn("vg_cached_attention_f16kv", _ARGS, restype=ctypes.c_int),
    }
    reference, data, ptr = matmul.single_threaded(cached_attention.reference), lib.data, lib.ptr

    def layout(arrays: tuple) -> Any:
        """(the C function, the sizes-and-strides array, the addresses of each array's strides in it, the
        output shape) for arrays of these shapes, strides and dtypes; False where no C function takes
        them (another dtype, a partial element). The window (past_kt, past_v) may be f16, both."""
        q, k, v, past_kt, past_v, bias = arrays
        window = past_kt.dtype  # the native byte order alone: a dtype, not its type
        if any(a.dtype != np.float32 for a in (q, k, v, bias)) or window not in fns or past_v.dtype != window:
            return False
        # the bias's batch stride: 0 for one mask [T, W+T] shared by the batch
        sizes = [a.itemsize for a in arrays[:5] for _ in range(4)] + [4] * 3
        strides = [s for a in arrays[:5] for s in a.strides] + [0] * (3 - bias.ndim) + list(bias.strides)
        if any(s % n for s, n in zip(strides, sizes)):  # not whole elements
            return False
        (b, h, t, d), dv, w = q.shape, v.shape[3], past_v.shape[2]
        # sizes, then each array's element strides (4 each, the bias's 3)
        ints = np.array([b, h, k.shape[1], t, d, dv, w, *[s // n for s, n in zip(strides, sizes)]], np.int64)
        at = data(ints)
        return fns[window], ints, [at + 8 * (7 + 4 * i) for i in range(6)], (b, h, t, dv)

    def run(found: Any, arrays: tuple, scale: float | None = None) -> np.ndarray:
        (fn, ints, s, shape), (q, k, v, past_kt, past_v, bias) = found, arrays
        out = np.empty(shape, np.float32)
        if out.size and fn(
            ptr(ints), ptr(q), s[0], ptr(k), s[1], ptr(v), s[2], ptr(past_kt), s[3], ptr(past_v), s[4],
            ptr(bias), s[5], float(resolve_scale(scale, q.shape[3])), ptr(out), backend.threads,
        ):  # fmt: skip
            raise MemoryError(f"cached_attention: out of memory for a window of {past_v.shape[2]} positions")
        return out

    kernel = _ffi.layout_cached(reference, layout, run)
    backend.register("cached_attention", kernel, "f32", ATTENTION_EXACTNESS)
    register_flash(backend, lib)


def register_flash(backend: Any, lib: Library) -> None:
    """attention (its output and log-sum-exp) and attention_grad (from the forward's result: no forward
    pass) on f32 arrays of whole-element strides (attention_flash.c; else the reference, and where an input
    holds an infinity or a NaN: the reference's 0 * inf at hidden positions spreads it)."""
    from ...ops.composite.attention import resolve_scale

    fn = lib.fn("vg_flash_attention_f32", _FLASH_ARGS, restype=ctypes.c_int)
    forward = matmul.single_threaded(attention_lse.reference)
    grad = matmul.single_threaded(attention_grad.reference)
    ptr = lib.ptr

    def call(which: int, q: np.ndarray, k: np.ndarray, v: np.ndarray, scale, g=None, o=None) -> Any:
        """The C function's result (g and o, the forward's result, for the gradients), or None where it
        does not take these arrays."""
        arrays = (q, k, v) if g is None else (q, k, v, g, o)
        if any(not isinstance(a, np.ndarray) or a.dtype != np.float32 or not a.flags.aligned for a in arrays):
            return None
        if any(s % 4 for a in arrays for s in a.strides):
            return None
        (b, h, t, d), (kv, s, dv) = q.shape, (k.shape[1], k.shape[2], v.shape[3])
        shape = (b, h, t, dv + 1) if which == 0 else (b, kv, h // kv * t * d + s * (d + dv))
        out = np.empty(shape, np.float32)
        if not out.size:
            return out
        sizes = np.array([b, h, kv, t, s, d, dv], np.int64)
        strides = [np.array(a.strides, np.int64) // 4 for a in (q, k, v, *(arrays[3:] or (q, q)))]
        gp, op = (None, None) if g is None else (ptr(g), ptr(o))
        done = fn(
            ptr(sizes), which, ptr(q), ptr(strides[0]), ptr(k), ptr(strides[1]), ptr(v), ptr(strides[2]),
            gp, ptr(strides[3]), op, ptr(strides[4]), float(resolve_scale(scale, d)), ptr(out),
            backend.threads,
        )  # fmt: skip
        if done < 0:
            raise MemoryError(f"attention: out of memory for {s} positions of head size {d}")
        return None if done else out  # 1: an infinity or a NaN, which the reference spreads

    def attention_kernel(q, k, v, scale: float | None) -> np.ndarray:
        out = call(0, q, k, v, scale)
        return forward(q, k, v, scale=scale) if out is None else out

    def grad_kernel(g, q, k, v, o, scale: float | None) -> np.ndarray:
        out = call(1, q, k, v, scale, g, o)
        return grad(g, q, k, v, o, scale=scale) if out is None else out

    backend.register("attention_lse", attention_kernel, "f32", ATTENTION_EXACTNESS)
    backend.register("attention_grad", grad_kernel, "f32", GRAD_EXACTNESS)

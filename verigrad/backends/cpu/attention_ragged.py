"""ragged_attention and ragged_attention_q8 (attention.c, attention_q8.c): several sequences' runs of new
tokens over their rows of a KV cache in one call, each token computed as cached_attention's kernels compute
it on its sequence alone (the same bits: `ATTENTION_EXACTNESS` against the reference).

q, the new keys and values are f32 of whole-element strides; the windows f32 or f16 (keys transposed) of
whole-element strides, or q8_0 blocks whose rows are contiguous; runs i64 [S, 4], contiguous, read by the C
function at each call (a replayed plan's runs are the run's own). Other dtypes and layouts run the reference.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from ...ops import ragged_attention, ragged_attention_q8
from . import _ffi, matmul
from ._ffi import Library
from .attention import ATTENTION_EXACTNESS

ATTENTION_RAGGED = ("ragged_attention", "ragged_attention_q8")
_ARGS = [ctypes.c_void_p] + [ctypes.c_void_p, ctypes.c_void_p] * 5 + [ctypes.c_void_p, ctypes.c_int]
_ARGS += [ctypes.c_double, ctypes.c_void_p, ctypes.c_int]
_ARGS_Q8 = [ctypes.c_void_p] * 7 + [ctypes.c_double, ctypes.c_void_p, ctypes.c_int]
_WINDOWS = {np.dtype(np.float32): 0, np.dtype(np.float16): 1}


def _floats(*arrays: np.ndarray) -> list[int] | None:
    """The arrays' strides in elements of 4 bytes, or None where one is not f32 or not whole elements."""
    if any(a.dtype != np.float32 for a in arrays) or any(s % 4 for a in arrays for s in a.strides):
        return None
    return [s // 4 for a in arrays for s in a.strides]


def _runs_ok(runs: Any) -> bool:
    return type(runs) is np.ndarray and runs.dtype == np.int64 and runs.flags.c_contiguous


def register(backend: Any, lib: Library) -> None:
    from ...ops.composite.attention import resolve_scale

    floats_fn = lib.fn("vg_ragged_attention", _ARGS, restype=ctypes.c_int)
    q8_fn = lib.fn("vg_ragged_attention_q8", _ARGS_Q8, restype=ctypes.c_int)
    ptr, data = lib.ptr, lib.data

    def layout(arrays: tuple) -> Any:
        """(sizes-and-strides array, the addresses of each array's strides in it, f16 flag); False where the
        C function does not take these arrays."""
        q, k, v, past_kt, past_v, runs = arrays
        new = _floats(q, k, v)
        window = _WINDOWS.get(past_kt.dtype)
        if new is None or window is None or past_v.dtype != past_kt.dtype or not _runs_ok(runs):
            return False
        past = [s // past_kt.itemsize for a in (past_kt, past_v) for s in a.strides]
        if any(s % past_kt.itemsize for a in (past_kt, past_v) for s in a.strides):
            return False
        (r, _, _, w), (_, h, n, d), dv = past_kt.shape, q.shape, v.shape[3]
        ints = np.array([r, h, k.shape[1], n, d, dv, w, runs.shape[0], *new, *past], np.int64)
        at = data(ints)
        return ints, [at + 8 * (8 + 4 * i) for i in range(5)], window

    def layout_q8(arrays: tuple) -> Any:
        q, k, v, past_k, past_v, runs = arrays
        new = _floats(q, k, v)
        if new is None or past_k.dtype != np.uint8 or past_v.dtype != np.uint8 or not _runs_ok(runs):
            return False
        if past_k.strides[3] != 1 or past_v.strides[3] != 1:
            return False
        (r, _, w, _), (_, h, n, d), dv = past_k.shape, q.shape, v.shape[3]
        sizes = [r, h, k.shape[1], n, d, dv, w, runs.shape[0]]
        return np.array([*sizes, *new, *past_k.strides[:3], *past_v.strides[:3]], np.int64)

    def kernel_for(op: Any, find: Any, call: Any) -> Any:
        def run(found: Any, arrays: tuple, scale: float | None = None) -> np.ndarray | None:
            q, v = arrays[0], arrays[2]
            out = np.empty((*q.shape[:3], v.shape[3]), np.float32)
            done = call(
                found, arrays, float(resolve_scale(scale, q.shape[3])), out
            )  # (empty: checks the runs)
            if done == -2:  # the reference says how the runs are wrong
                return None
            if done:
                raise MemoryError(f"{op.name}: out of memory for a {arrays[4].shape[2]}-position window")
            return out

        return _ffi.layout_cached(matmul.single_threaded(op.reference), find, run)

    def call_floats(found: Any, arrays: tuple, scale: float, out: np.ndarray) -> int:
        (ints, s, f16), (q, k, v, past_kt, past_v, runs) = found, arrays
        return floats_fn(
            ptr(ints), ptr(q), s[0], ptr(k), s[1], ptr(v), s[2], ptr(past_kt), s[3], ptr(past_v), s[4],
            ptr(runs), f16, scale, ptr(out), backend.threads,
        )  # fmt: skip

    def call_q8(ints: np.ndarray, arrays: tuple, scale: float, out: np.ndarray) -> int:
        q, k, v, past_k, past_v, runs = arrays
        return q8_fn(
            ptr(ints), ptr(q), ptr(k), ptr(v), ptr(past_k), ptr(past_v), ptr(runs), scale, ptr(out),
            backend.threads,
        )  # fmt: skip

    backend.register(
        "ragged_attention", kernel_for(ragged_attention, layout, call_floats), "f32", ATTENTION_EXACTNESS
    )
    backend.register(
        "ragged_attention_q8", kernel_for(ragged_attention_q8, layout_q8, call_q8), "f32", ATTENTION_EXACTNESS
    )

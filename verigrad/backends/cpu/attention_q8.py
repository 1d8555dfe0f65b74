"""cached_attention_q8 (attention_q8.c): the decode step's attention over a q8_0 KV cache's window, the
blocks de-quantized in registers (no f32 window in memory).

q, the new keys and values and the bias are f32 of any whole-element strides; the window's keys and values
u8 [B, KV, W, D / 32 * 34] of any strides whose rows are contiguous (views of the cache). Each stored number
is exact in double, so the kernel computes what cached_attention's f32 kernel computes on the de-quantized
window, in double, rounded once: it states the same bound (`ATTENTION_EXACTNESS`, attention.py) against the
reference. Other dtypes and layouts run the reference.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from ...ops import cached_attention_q8
from . import _ffi, matmul
from ._ffi import Library
from .attention import ATTENTION_EXACTNESS

ATTENTION_Q8 = ("cached_attention_q8",)
_ARGS = [ctypes.c_void_p] * 7 + [ctypes.c_double, ctypes.c_void_p, ctypes.c_int]


def plain_only(lib: Library, flag: int) -> int:
    """In the loaded library `lib`: 1 runs the C kernel's plain loops alone, 0 its vector loops where the
    CPU has them, -1 only asks; returns the setting before the call (the tests compare the paths' bits)."""
    fn = lib.cdll.vg_attention_q8_plain
    fn.argtypes, fn.restype = [ctypes.c_int], ctypes.c_int
    return int(fn(flag))


def register(backend: Any, lib: Library) -> None:
    from ...ops.composite.attention import resolve_scale

    fn = lib.fn("vg_cached_attention_q8", _ARGS, restype=ctypes.c_int)
    reference, ptr = matmul.single_threaded(cached_attention_q8.reference), lib.ptr

    def layout(arrays: tuple) -> Any:
        """(the sizes-and-strides array, the output shape), or False where the C function does not take
        these arrays."""
        q, k, v, past_k, past_v, bias = arrays
        if any(a.dtype != np.float32 for a in (q, k, v, bias)) or past_k.dtype != np.uint8:
            return False
        if past_v.dtype != np.uint8 or past_k.strides[3] != 1 or past_v.strides[3] != 1:
            return False
        floats = [s for a in (q, k, v) for s in a.strides] + [0] * (3 - bias.ndim) + list(bias.strides)
        if any(s % 4 for s in floats):
            return False
        (b, h, t, d), dv, w = q.shape, v.shape[3], past_k.shape[2]
        strides = [s // 4 for s in floats[:12]] + list(past_k.strides[:3]) + list(past_v.strides[:3])
        ints = np.array([b, h, k.shape[1], t, d, dv, w, *strides, *[s // 4 for s in floats[12:]]], np.int64)
        return ints, (b, h, t, dv)

    def run(found: Any, arrays: tuple, scale: float | None = None) -> np.ndarray:
        (ints, shape), (q, k, v, past_k, past_v, bias) = found, arrays
        out = np.empty(shape, np.float32)
        if out.size and fn(
            ptr(ints), ptr(q), ptr(k), ptr(v), ptr(past_k), ptr(past_v), ptr(bias),
            float(resolve_scale(scale, q.shape[3])), ptr(out), backend.threads,
        ):  # fmt: skip
            raise MemoryError(f"cached_attention_q8: out of memory for a {past_k.shape[2]}-position window")
        return out

    kernel = _ffi.layout_cached(reference, layout, run)
    backend.register("cached_attention_q8", kernel, "f32", ATTENTION_EXACTNESS)

"""Quantized products, from the blocks: qmatmul_q8 (quant.c) on q8_0, q4_0, q4_1, q5_0, q5_1 and iq4_nl
weights (AVX2 paths for each; AVX-512 VNNI ones, quant_vnni.c, for each) and, in quant_k8.c, on q4_k, q5_k,
q6_k, q2_k, q3_k and iq4_xs weights (activations quantized as llama.cpp's q8_K; AVX2, AVX-512 and VNNI
paths), and qmatmul and qembedding on every block format of ops/quant.py (QTYPES; quant.h holds the codes):
quant_f32.c (with quant_f32_k.c's kernels of the 256-value formats) de-quantizes rows and runs decode steps,
quant_f32_tiles.c several activation rows.

- qmatmul_q8 gives the reference's bits: the activations are quantized as `quantize_q8` does, block dots
  are exact integers, and the f64 terms are added in the reference's order (EXACT).
- qmatmul gives the reference's bits (EXACT): the f32 products of x and the f32-dequantized weight in 32
  partial sums of fused multiply-adds, folded in a fixed tree (ops/quant.py `lane_dot`).

- rms_norm_qmatmul_q8 runs rms_norm's kernel (rows.c: the reference's bits) and then qmatmul_q8's in one
  call, so it gives its decomposition's bits (EXACT where rms_norm's kernel is: f32).
- qmatmul_q8_group and rms_norm_qmatmul_q8_group (up to GROUP_PARTS weights) make the norm and the 8-bit
  activations once (per block scheme) and run each part's qmatmul_q8 on them, into its columns: each part's
  bits (EXACT, as the ops they stand for).

Threads take bands of at least `MIN_BAND_BYTES` of weight rows (qmatmul: of weight bytes times activation
rows); the bits do not depend on the thread count.
The AVX2 paths (taken when the CPU has AVX2 and F16C), the AVX-512 ones and the VNNI ones give the portable
paths' bits; `path` chooses one and `simd(False)` turns them off, for tests (`q8_path` and `f32_kernels` say
which code a level runs). Other dtypes or layouts run the reference.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import numpy as np

from ...ops import REGISTRY, dequantize_op, qembedding
from ...ops.quant import (
    FORMATS,
    Q8_32_QTYPES,
    Q8_QTYPES,
    Q8K_QTYPES,
    qmatmul_q8_group,
    rms_norm_qmatmul_q8,
    rms_norm_qmatmul_q8_group,
)
from ..kernel_table import EXACT
from ..reference import composite_reference
from . import _ffi, matmul
from ._ffi import Library

QTYPES = {  # quant.h's format codes
    "q8_0": 0,
    "q4_0": 1,
    "q4_1": 2,
    "q4_k": 3,
    "q6_k": 4,
    "q5_k": 5,
    "q5_0": 6,
    "q5_1": 7,
    "q2_k": 8,
    "q3_k": 9,
    "iq4_nl": 10,
    "iq4_xs": 11,
}
QUANT = ("qmatmul", "qmatmul_q8", "rms_norm_qmatmul_q8", "qmatmul_q8_group", "rms_norm_qmatmul_q8_group")
QUANT += ("qembedding", "dequantize")
# op -> {C function: formats it takes}
_FUNCTIONS = {
    "qmatmul": {"vg_qmatmul_f32": tuple(QTYPES)},
    "qmatmul_q8": {"vg_qmatmul_q8": Q8_32_QTYPES, "vg_qmatmul_k8": Q8K_QTYPES},
}
_NORMED = {"vg_rms_norm_qmatmul_q8": Q8_32_QTYPES, "vg_rms_norm_qmatmul_k8": Q8K_QTYPES}
MIN_BAND_BYTES = 65536  # the fewest weight bytes a thread is given (a dispatch costs microseconds)

_ARGS = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64]
_ARGS += [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int]


def _contiguous(a: np.ndarray) -> np.ndarray:
    return a if a.flags.c_contiguous else np.ascontiguousarray(a)


def _product(
    fn: Any, name: str, code: int, x: np.ndarray, w: np.ndarray, backend: Any, ptr: Callable, *extra: Any
) -> np.ndarray:
    """f32[..., n]: the C product of x [..., k] (f32) and the quantized w [n, row bytes] (contiguous
    copies of views), `extra` the arguments after the common ones; MemoryError naming the op `name`."""
    x, w = _contiguous(x), _contiguous(w)
    k, (n, row_bytes) = x.shape[-1], w.shape
    t = x.size // k if k else 0
    out = np.empty((*x.shape[:-1], n), np.float32)
    if t and n:
        # qmatmul's tiles of several activation rows do t rows' products per weight row read: a band of
        # MIN_BAND_BYTES of work (SmolLM2's 192 x 576 k and v projections split at t >= 2, one band before)
        work = row_bytes * (t if name == "qmatmul" else 1)
        min_rows = MIN_BAND_BYTES // work + 1 if row_bytes else n
        if fn(code, ptr(w), n, k, ptr(x), t, ptr(out), min_rows, backend.threads, *extra):
            raise MemoryError(f"{name}: out of memory for x of shape {x.shape}")
    return out


def _by_format(lib: Library, functions: dict[str, tuple[str, ...]], args: list) -> dict[str, tuple[Any, int]]:
    """qtype -> (the C function that takes it, its format code)."""
    out = {}
    for symbol, qtypes in functions.items():
        fn = lib.fn(symbol, args, restype=ctypes.c_int)
        out |= {q: (fn, QTYPES[q]) for q in qtypes}
    return out


def _kernel(fns: dict[str, tuple[Any, int]], reference: Callable, backend: Any, ptr: Callable) -> Callable:
    def kernel(x: np.ndarray, w: np.ndarray, qtype: str) -> np.ndarray:
        fn_code = fns.get(qtype)
        if fn_code is None or x.dtype != np.float32 or w.dtype != np.uint8 or w.ndim != 2:
            return reference(x, w, qtype)
        return _product(fn_code[0], "qmatmul", fn_code[1], x, w, backend, ptr)

    return kernel


def _normed_kernel(
    fns: dict[str, tuple[Any, int]], reference: Callable, backend: Any, ptr: Callable
) -> Callable:
    """rms_norm_qmatmul_q8 on f32 x and norm weight (made C-contiguous); other dtypes: the reference."""

    def kernel(x: np.ndarray, weight: np.ndarray, w: np.ndarray, qtype: str, eps: float) -> np.ndarray:
        fn_code = fns.get(qtype)
        if fn_code is None or x.dtype != np.float32 or weight.dtype != np.float32 or w.dtype != np.uint8:
            return reference(x, weight, w, qtype=qtype, eps=eps)
        fn, code = fn_code
        # NumPy's f32 sums go through its cast buffer (as rows.py says): its size is the norm's block
        weight = _contiguous(weight)  # held here while the C function reads it
        extra = (ptr(weight), float(eps), _ffi.bufsize())
        return _product(fn, "rms_norm_qmatmul_q8", code, x, w, backend, ptr, *extra)

    return kernel


GROUP_PARTS = 4  # vg_qmatmul_q8_group's weights at most (one pointer argument each)


def _group_kernel(fn: Any, reference: Callable, backend: Any, ptr: Callable, normed: bool) -> Callable:
    """(rms_norm_)qmatmul_q8_group on f32 x (and norm weight) and u8 weights of the formats qmatmul_q8 takes,
    GROUP_PARTS a call; others: the reference."""

    def kernel(x: np.ndarray, *args: np.ndarray, qtypes: tuple[str, ...], eps: float = 0.0) -> np.ndarray:
        weight, ws = (args[0], args[1:]) if normed else (None, args)
        if len(ws) > GROUP_PARTS:  # GROUP_PARTS at a time: x quantized once per call
            lead, params = args[:1] if normed else (), {"eps": eps} if normed else {}
            chunks = range(0, len(ws), GROUP_PARTS)
            parts = [
                kernel(x, *lead, *ws[i : i + GROUP_PARTS], qtypes=qtypes[i : i + GROUP_PARTS], **params)
                for i in chunks
            ]
            return np.concatenate(parts, axis=-1)
        usable = x.dtype == np.float32 and all(q in Q8_QTYPES for q in qtypes)
        usable = usable and all(w.dtype == np.uint8 and w.ndim == 2 for w in ws)
        if not usable or (normed and weight.dtype != np.float32):
            return reference(x, *args, qtypes=qtypes, **({"eps": eps} if normed else {}))
        x, ws = _contiguous(x), [_contiguous(w) for w in ws]
        k = x.shape[-1]
        t = x.size // k if k else 0
        widths = [w.shape[0] for w in ws]
        out = np.empty((*x.shape[:-1], sum(widths)), np.float32)
        if t and out.size:
            # each part's bands as qmatmul_q8's own
            spec = [
                (QTYPES[q], n, MIN_BAND_BYTES // w.shape[1] + 1 if w.shape[1] else n)
                for q, n, w in zip(qtypes, widths, ws)
            ]
            spec_array = np.array(spec, np.int64)  # held here while the C function reads it
            pointers = [ptr(w) for w in ws] + [None] * (GROUP_PARTS - len(ws))
            if normed:
                weight = _contiguous(weight)
                extra = (ptr(weight), float(eps), _ffi.bufsize())
            else:
                extra = (None, 0.0, 0)
            if fn(ptr(spec_array), len(ws), *pointers, k, ptr(x), t, ptr(out), backend.threads, *extra):
                raise MemoryError(f"qmatmul_q8_group: out of memory for x of shape {x.shape}")
        return out

    return kernel


def _embedding(fn: Any, reference: Callable, backend: Any, ptr: Callable) -> Callable:
    """qembedding: the rows of a quantized table at integer ids, dequantized in C to the reference's
    values; an id out of range (or another layout) runs the reference, which names it."""
    from ...ops.quant import FORMATS

    def kernel(ids: np.ndarray, w: np.ndarray, qtype: str, out: np.ndarray | None = None) -> np.ndarray:
        code = QTYPES.get(qtype)
        if code is None or type(ids) is not np.ndarray or ids.dtype.kind not in "iu" or w.dtype != np.uint8:
            return _ffi.into(reference(ids, w, qtype), out)
        fmt = FORMATS[qtype]
        (vocab, row_bytes), flat = w.shape, np.ascontiguousarray(ids, np.int64).reshape(-1)
        k = row_bytes // fmt.nbytes * fmt.block
        if not w.flags.c_contiguous:
            w = np.ascontiguousarray(w)
        shape = (*ids.shape, k)
        given = out is not None and _ffi.writable(out, shape, np.dtype(np.float32))
        dst = out if given else np.empty(shape, np.float32)
        if flat.size and k:
            min_rows = max(1, _ffi.min_chunk() // k)
            if fn(
                code, ptr(w), vocab, row_bytes, k, ptr(flat), flat.size, ptr(dst), min_rows, backend.threads
            ):
                return reference(ids, w, qtype)  # an id out of range: its IndexError
        return dst if given else _ffi.into(dst, out)

    return kernel


def _dequantize(embedding: Callable, reference: Callable) -> Callable:
    """dequantize through qembedding's kernel (the same bits): the rows of w [..., row bytes] are looked up
    at their own positions in the buffer w views (no copy of a strided window whose rows are whole, as a
    key/value cache's window over its positions is); other layouts are made contiguous first."""

    def kernel(w: np.ndarray, qtype: str) -> np.ndarray:
        if qtype not in QTYPES or w.dtype != np.uint8 or w.ndim == 0 or w.size == 0:
            return reference(w, qtype=qtype)
        row = w.shape[-1]
        strides = w.strides[:-1]
        if w.strides[-1] != 1 or any(s < 0 or s % row for s in strides):
            w = np.ascontiguousarray(w)
            strides = w.strides[:-1]
        ids = np.zeros((), np.int64)
        for size, stride in zip(w.shape[:-1], strides):
            ids = ids[..., None] + np.arange(size, dtype=np.int64) * (stride // row)
        span = int(ids.max()) + 1  # the rows from the first one w's buffer holds up to its last
        table = np.lib.stride_tricks.as_strided(w, (span, row), (row, 1), writeable=False)
        return embedding(ids, table, qtype)

    return kernel


_state: dict[str, Any] = {
    "simd": None, "q8_path": None, "f32_kernels": None, "embedding": None, "amx": None, "dequant_gemm": None,
    "ptr": None, "backend": None,
}  # fmt: skip


def dequantize_into(w: np.ndarray, qtype: str, out: np.ndarray) -> np.ndarray:
    """dequantize's values (its kernel's bits) of the blocks w [rows, row bytes] written into `out`
    (f32 [rows, values], C-contiguous: a caller's reused buffer, no fresh memory paged in); returns out."""
    embedding = _state["embedding"]
    if embedding is None:
        raise RuntimeError("dequantize_into: the CPU backend's library is not loaded")
    return embedding(np.arange(w.shape[0], dtype=np.int64), w, qtype, out)


def dequantized_matmul(a: np.ndarray, w: np.ndarray, qtype: str, transposed: bool) -> np.ndarray | None:
    """a [..., k] @ dequantize(w).T (transposed: w's rows along k) or @ dequantize(w) (w's rows along n),
    as the fast matmul path computes it on the f32 weight, by its packed GEMM with w's panels de-quantized
    from the blocks (matmul_dequant.c): the same bits, with no f32 copy of w made. None where that
    path would not take the product as one packed GEMM (the exact path, a batch whose rows are not one run,
    a shape the packed GEMM leaves to other kernels) or the result holds an infinity or a NaN: the caller
    multiplies its own way."""
    fn = _state["dequant_gemm"]
    if fn is None or qtype not in QTYPES or a.dtype != np.float32 or a.ndim < 2 or matmul.exact_default():
        return None
    if a.ndim > 2 and not matmul.rows_fold(a):  # matmul's batch of products, not one
        return None
    m, k = int(np.prod(a.shape[:-1])), a.shape[-1]
    flat = a.reshape(m, k)
    if flat.strides[1] != 4 or flat.strides[0] < 4 * k or flat.strides[0] % 4 or not flat.flags.aligned:
        # rows of unit stride, apart: another layout copied (the packed GEMM's bits do not depend on it)
        flat = np.ascontiguousarray(flat)
    if w.ndim != 2 or w.dtype != np.uint8 or not w.flags.c_contiguous:
        return None
    fmt = FORMATS[qtype]
    values = w.shape[1] // fmt.nbytes * fmt.block
    n = w.shape[0] if transposed else values
    if (values if transposed else w.shape[0]) != k:
        return None
    c = np.empty((m, n), np.float32)
    ptr, threads = _state["ptr"], _state["backend"].threads
    done = fn(
        QTYPES[qtype],
        int(transposed),
        ptr(w),
        w.shape[1],
        ptr(flat),
        flat.strides[0] // 4,
        ptr(c),
        m,
        n,
        k,
        threads,
    )
    return c.reshape(*a.shape[:-1], n) if done == 1 else None


PATHS = ("scalar", "avx2", "avx512", "vnni")  # vg_quant_simd's levels ("vnni": AVX-512 with VNNI)


def path(name: str | None = None) -> str:
    """The vector path the quantized kernels take ("vnni", "avx512", "avx2" or "scalar": the same bits
    each; "vnni" is "avx512" with the VNNI integer dots of qmatmul_q8: quant_vnni.c's, quant_k8.c's);
    `name` first chooses it (the fastest the machine has at most that one)."""
    fn = _state["simd"]
    if fn is None:
        raise RuntimeError("the cpu backend's quantized kernels are not loaded")
    if name is not None and name not in PATHS:
        raise ValueError(f"unknown vector path {name!r}: one of {', '.join(PATHS)}")
    return PATHS[fn(-1 if name is None else PATHS.index(name))]


def q8_path(qtype: str, tokens: int) -> str:
    """The code qmatmul_q8's kernel runs now for `qtype` weights and `tokens` activation rows (one of PATHS:
    a level's own code, or a lower one's where the level has none for it, e.g. AVX2's on "avx512" for the
    32-value formats; or "amx", quant_amx.c's tiles, which "vnni" takes where allowed)."""
    if _state["q8_path"] is None:
        raise RuntimeError("the cpu backend's quantized kernels are not loaded")
    return (*PATHS, "amx")[_state["q8_path"](QTYPES[qtype], tokens)]


def amx(flag: bool | None = None) -> bool:
    """Allow (True) or forbid (False) qmatmul_q8's AMX tiles on the "vnni" path (q8_0 weights on 5 or more
    activation rows: the same bits), or leave them (None); whether this machine and its OS let them be taken
    and they are allowed now."""
    if _state["amx"] is None:
        raise RuntimeError("the cpu backend's quantized kernels are not loaded")
    return bool(_state["amx"](-1 if flag is None else int(flag)))


def f32_kernels(qtype: str, name: str) -> tuple[str, ...]:
    """The jobs of qmatmul's (and qembedding's) f32 kernel with code of their own for `qtype` weights on the
    vector path `name` ("avx2" or "avx512"): "decode" (one activation row, each block de-quantized in
    registers) and "rows" (weight rows de-quantized); a job without runs a lower level's code."""
    if _state["f32_kernels"] is None:
        raise RuntimeError("the cpu backend's quantized kernels are not loaded")
    if qtype not in QTYPES:
        raise ValueError(f"f32_kernels: unknown qtype {qtype!r}: one of {', '.join(QTYPES)}")
    if name not in ("avx2", "avx512"):
        raise ValueError(f"f32_kernels: name must be 'avx2' or 'avx512', not {name!r}")
    bits = _state["f32_kernels"](QTYPES[qtype], PATHS.index(name))
    return tuple(job for bit, job in enumerate(("decode", "rows")) if bits >> bit & 1)


def simd(flag: bool | None = None) -> bool:
    """Allow (True: the fastest the machine has) or forbid (False) the vector paths, or leave them (None);
    whether one is taken now."""
    return path(None if flag is None else PATHS[-1] if flag else "scalar") != "scalar"


def register(backend: Any, lib: Library) -> None:
    _state["simd"] = lib.fn("vg_quant_simd", [ctypes.c_int], restype=ctypes.c_int)
    _state["q8_path"] = lib.fn("vg_quant_q8_path", [ctypes.c_int, ctypes.c_int64], restype=ctypes.c_int)
    _state["f32_kernels"] = lib.fn("vg_quant_f32_kernels", [ctypes.c_int, ctypes.c_int], restype=ctypes.c_int)
    _state["amx"] = lib.fn("vg_q8_amx", [ctypes.c_int], restype=ctypes.c_int)
    for name, functions in _FUNCTIONS.items():
        fns = _by_format(lib, functions, _ARGS)
        kernel = _kernel(fns, matmul.single_threaded(REGISTRY[name].reference), backend, lib.ptr)
        backend.register(name, kernel, "f32", EXACT)
    fns = _by_format(lib, _NORMED, [*_ARGS, ctypes.c_void_p, ctypes.c_double, ctypes.c_int64])
    reference = matmul.single_threaded(composite_reference(rms_norm_qmatmul_q8))
    backend.register("rms_norm_qmatmul_q8", _normed_kernel(fns, reference, backend, lib.ptr), "f32", EXACT)
    p, i64 = ctypes.c_void_p, ctypes.c_int64
    args = [p, i64, *[p] * GROUP_PARTS, i64, p, i64, p, ctypes.c_int, p, ctypes.c_double, i64]
    fn = lib.fn("vg_qmatmul_q8_group", args, restype=ctypes.c_int)
    for op, normed in ((qmatmul_q8_group, False), (rms_norm_qmatmul_q8_group, True)):
        reference = op.reference or composite_reference(op)
        kernel = _group_kernel(fn, matmul.single_threaded(reference), backend, lib.ptr, normed)
        backend.register(op.name, kernel, "f32", EXACT)
    fn = lib.fn("vg_qembedding", [ctypes.c_int, p, i64, i64, i64, p, i64, p, i64, ctypes.c_int], i64)
    embedding = _embedding(fn, qembedding.reference, backend, lib.ptr)
    _state["embedding"] = embedding
    args = [ctypes.c_int, ctypes.c_int, p, i64, p, i64, p, i64, i64, i64, ctypes.c_int]
    _state["dequant_gemm"] = lib.fn("vg_dequant_gemm", args, restype=ctypes.c_int)
    _state["ptr"], _state["backend"] = lib.ptr, backend
    backend.register("qembedding", embedding, "f32", EXACT)
    backend.register("dequantize", _dequantize(embedding, dequantize_op.reference), "f32", EXACT)

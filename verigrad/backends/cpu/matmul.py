"""Matrix products on the cpu backend: GEMM (batched, strided, broadcast), GEMV, dot and axpy in f32 and f64,
on two paths.

- The fast path calls the CBLAS functions of the OpenBLAS that NumPy ships (`blas.cblas`). matmul.c cuts c
  into tiles that depend on the shape alone (and on whether OpenBLAS's kernels for the CPU include its
  small-matrix ones, which read a and b in place: then a tile is as many whole rows as one of them
  takes; for f32 products of at least 1024 rows with k or n at most 512, tiles of whole rows, where
  OpenBLAS packs b once a call) and runs one OpenBLAS call per tile on verigrad's pool, with
  OpenBLAS set to one thread meanwhile (its count is process-wide): OpenBLAS's own split over its
  threads moves tile edges, which changes an element's bits; this way the thread count does not. A
  small product is one tile; a c of one row or column is computed by GEMV (GEMM would pack the whole
  matrix first); a c of one tile with a long k (>= 4096) is split along k instead, into blocks whose
  depth depends on the shape alone, one OpenBLAS call each, summed in block order in double and
  rounded once. Views BLAS can take (a unit stride on one axis: transposed, offset) are passed as they
  are (OpenBLAS packs each layout its own way, so their bits may differ from a contiguous copy's),
  others are copied first; but a transposed b with a plain a, in a product OpenBLAS's small-matrix
  kernels take (from 32 rows), is copied plain in C (they refuse that layout; the bits are the plain
  product's). A product that gives an infinity or a NaN (an f32 partial sum may overflow
  where the reference's double one does not) is computed again on the exact path. On AVX-512, f32
  products (c = alpha a b, or c + a b) of at least 32 rows and 2^21 multiply-adds skip OpenBLAS for
  matmul_packed.c's packed GEMM, in every layout (b packed into k-major panels, 6 x 64 register tiles):
  each element of c is one f32 FMA chain in increasing k, whatever the blocking and the thread count;
  of the other shapes, those where they measured faster take matmul_avx512.c's kernels: c = a b^T with
  both read along k (an nn.Linear's x @ W^T) as dot products, c = a b with few rows and a long k as
  outer products; the shape alone decides how each element is computed, so again the thread count does
  not change the bits.
- `matmul` (which the registered kernel calls) prepares the C call's arguments once per dtype, shape,
  strides and path, so a call on a layout seen before is one allocation and one foreign call (a few
  microseconds over NumPy's matmul).
- The exact path (matmul.c): each element is summed in double in increasing k (a product, then a sum), by
  one thread, and rounded once: the reference's rounding rule in a fixed order, the same bits for every
  thread count and layout. Blocked, with an AVX2 micro-kernel where the CPU has it (the portable
  kernel's bits).

`exact=None` (every function) takes the setting: `set_exact(True)`, `with exact_mode():`, or the
environment variable `VERIGRAD_EXACT_GEMM=1` (the process's), or `with exact_held():` (the thread's, as
PyTorch's thread-local modes: a server's engine thread). The matmul kernel registered for the cpu backend
follows the process's setting and states the chosen path's exactness (`EXACTNESS`). As in the reference
BLAS, c is not read when beta == 0, and a and b do not affect c when alpha == 0 or k == 0.

How close each path is to the op's reference (f32: a double sum rounded once; f64: NumPy's dgemm), for
s = sum_k |a[i,k]| |b[k,j]| (`abs_product`) and u the unit roundoff (2^-24 f32, 2^-53 f64):
- fast: |c - ref| <= (k + 2) u s + u |ref| (a sum of k products in f32, plus the reference's rounding);
  OpenBLAS sums with fused multiply-adds, and its error measured on the verification suite's cases and
  on unit normal products up to k = 3136 is at most 3.5 u s (GEMM and GEMV tiles alike; split along k,
  each block's error is within its own bound and their double sum adds at most u |ref|).
- exact, f32: |c - ref| <= 2u |ref| + 2k 2^-53 s (two double sums of exact products, each rounded once
  to f32): 0 or 1 ulp but where cancellation leaves |ref| below about k 2^-29 s. Bit for bit equal to
  `reference_exact`, and to the reference on every case of the verification suite.
- exact, f64: |c - ref| <= 2k u s (two sums of k terms in other orders).
`error_bound(a, b, exact)` gives these bounds per element. `EXACTNESS` states them in the registry's
rtol/atol form for operands of magnitude at most UNIT and k at most K_STATED (so s <= K_STATED UNIT^2),
the fast path's with FAST_MARGIN u s in place of (k + 2) u s (the measured 3.5, doubled).
"""

from __future__ import annotations

import contextlib
import contextvars
import ctypes
import functools
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from ... import settings
from ...ops import matmul as matmul_op
from ...ops._op import never_warns, silenced
from .. import blas
from ..active import lookup
from ..kernel_table import Exactness, tolerance
from . import _ffi
from ._ffi import DTYPES, Library
from .build import UNIT_ROUNDOFF

MATMUL = ("matmul",)
UNIT, K_STATED = 3.0, 1024  # the operands' magnitude and the depth the rtol/atol statements hold for
FAST_MARGIN = 8.0

_setting = [settings.env_flag("VERIGRAD_EXACT_GEMM", False)]
# True in a thread inside `exact_held` (a context variable: each thread has its own, and vg_eager reads it
# in C at the cost of a cached lookup)
_held = contextvars.ContextVar("verigrad_exact_held", default=False)
_state: dict[str, Any] = {"lib": None, "backend": None, "kernels": {}, "gemm": {}, "gemv": {}, "fast": None}


def unit_roundoff(dtype: np.dtype) -> float:
    """The unit roundoff of a float dtype (f32 or f64)."""
    return UNIT_ROUNDOFF["f32" if dtype == np.float32 else "f64"]


def _exactness(dtype: np.dtype, exact: bool) -> Exactness:
    """The rtol/atol form of the bounds above for |a|, |b| <= UNIT and k <= K_STATED."""
    u, s = unit_roundoff(dtype), K_STATED * UNIT**2
    if not exact:
        return tolerance(FAST_MARGIN * u, FAST_MARGIN * u * s)
    if dtype == np.float32:
        return tolerance(2 * u, 2 * K_STATED * 2.0**-53 * s)
    return tolerance(0.0, 2 * K_STATED * u * s)


EXACTNESS: dict[tuple[str, bool], Exactness] = {
    (name, exact): _exactness(dtype, exact) for name, dtype in DTYPES.items() for exact in (False, True)
}


# ---------------------------------------------------------------- the setting


def exact_default() -> bool:
    """Whether calls with `exact=None`, and the registered matmul kernel, take the exact path in this
    thread."""
    fast = _state["fast"]
    if fast is None:
        fast = _state["fast"] = fast_available()
    return _setting[0] or not fast or _held.get()


def set_exact(flag: bool | None) -> None:
    """Take the exact path by default (True), the fast one (False), or what the environment says (None),
    in every thread; the registered matmul kernel's stated exactness follows."""
    _setting[0] = settings.env_flag("VERIGRAD_EXACT_GEMM", False) if flag is None else bool(flag)
    backend = _state["backend"]
    if backend is not None:
        _register_matmul(backend)


@contextlib.contextmanager
def exact_mode(flag: bool = True) -> Iterator[None]:
    """Take the exact path (or, with False, the fast one) by default inside the block, in every thread."""
    before = _setting[0]
    set_exact(flag)
    try:
        yield
    finally:
        set_exact(before)


@contextlib.contextmanager
def exact_held() -> Iterator[None]:
    """The exact path by default in this thread while the block runs (other threads keep theirs). A
    server's engine holds it, so that a product's row has the same bits however many rows the step has
    (the fast path's OpenBLAS tiles depend on the shape), while a training loop or eager code in another
    thread of the process keeps the fast path."""
    token = _held.set(True)
    try:
        yield
    finally:
        _held.reset(token)


# ---------------------------------------------------------------- the libraries


def _lib() -> Any:
    """The loaded C functions (building the library if need be); RuntimeError when it cannot be built."""
    if _state["lib"] is None:
        backend = lookup("cpu")  # which owns the build: its load registers these functions
        error = None if backend.load() else backend._info.get("error")
        if error is not None:
            raise RuntimeError(f"the cpu backend's C library is unavailable: {error}")
    return _state["lib"]


def _blas(name: str) -> tuple[Any, bool] | None:
    found = blas.cblas(name)
    if found is None:
        return None
    fn, int64 = found
    i = ctypes.c_int64 if int64 else ctypes.c_int32
    real = ctypes.c_float if name[0] == "s" else ctypes.c_double
    p = ctypes.c_void_p
    fn.argtypes = {
        "dot": [i, p, i, p, i],
        "axpy": [i, real, p, i, p, i],
        "gemm": None,  # called from C
        "gemv": None,
    }[name[1:]]
    fn.restype = real if name[1:] == "dot" else None
    return fn, int64


def fast_available() -> bool:
    """Whether NumPy's BLAS offers the fast path here (else every call takes the exact path)."""
    return blas.cblas("sgemm") is not None and blas.cblas("dgemm") is not None


class _Functions:
    """The C functions of matmul.c, typed."""

    def __init__(self, lib: Library) -> None:
        f64, p, c_int = ctypes.c_double, ctypes.c_void_p, ctypes.c_int
        i64 = ctypes.c_int64
        self.data, self.ptr, self.ref = lib.data, lib.ptr, lib.ref
        self.blas_threads = lib.fn("vg_gemm_blas_threads", [p, p])
        self.blas_small_kernels = lib.fn("vg_gemm_blas_small_kernels", [i64])
        self.blas_transposed_wide = lib.fn("vg_gemm_blas_transposed_wide", [c_int])
        self.dot_products = lib.fn("vg_gemm_dot_products", [c_int])
        self.outer_products = lib.fn("vg_gemm_outer_products", [c_int])
        self.packed_products = lib.fn("vg_gemm_packed_products", [c_int])
        self.packed_available = lib.fn("vg_gemm_packed_available", [], restype=c_int)
        self.fewer_tiles = lib.fn("vg_gemm_fewer_tiles", [c_int])
        self.blas_tile = lib.fn("vg_gemm_blas_tile", [c_int, i64, i64, i64, i64, c_int, c_int, p])
        self.outer_rows = lib.fn("vg_gemm_outer_rows", [i64], restype=i64)
        self.blas_single_begin = lib.fn("vg_blas_single_begin", [])
        self.blas_single_end = lib.fn("vg_blas_single_end", [])
        self.portable_only = lib.fn("vg_gemm_portable_only", [c_int])
        self.gemm = lib.fn("vg_gemm", [p, p, p, p, c_int], restype=c_int)  # _GemmArgs, a, b, c, threads
        self.gemv, self.dot, self.axpy = {}, {}, {}
        for name in DTYPES:
            self.gemv[name] = lib.fn(
                f"vg_gemv_exact_{name}", [i64, i64, f64, p, i64, i64, p, i64, f64, p, i64, c_int]
            )
            self.dot[name] = lib.fn(f"vg_dot_exact_{name}", [i64, p, i64, p, i64], restype=f64)
            self.axpy[name] = lib.fn(f"vg_axpy_exact_{name}", [i64, f64, p, i64, p, i64, i64, c_int])


class _GemmArgs(ctypes.Structure):
    """matmul.c's vg_gemm_args: a product's path and layout, all a call needs besides the data pointers."""

    _fields_ = [
        ("f64", ctypes.c_int64),
        ("exact", ctypes.c_int64),
        ("int64", ctypes.c_int64),
        ("fn", ctypes.c_void_p),
        ("gemv", ctypes.c_void_p),
        *((name, ctypes.c_int64) for name in ("batch", "m", "n", "k", "rsa", "csa", "rsb", "csb")),
        ("rsc", ctypes.c_int64),
        ("csc", ctypes.c_int64),
        ("offs", ctypes.c_void_p),
        ("alpha", ctypes.c_double),
        ("beta", ctypes.c_double),
    ]


# ---------------------------------------------------------------- operands


def _dtype_name(*arrays: np.ndarray) -> str:
    for x in arrays:
        if not isinstance(x, np.ndarray):
            raise TypeError(f"expected NumPy arrays, got {type(x).__name__}")
    dtypes = {x.dtype for x in arrays}
    if len(dtypes) != 1 or arrays[0].dtype not in DTYPES.values():
        raise TypeError(f"expected f32 or f64 operands of one dtype, got {', '.join(map(str, dtypes))}")
    return "f32" if arrays[0].dtype == np.float32 else "f64"


def _prefix(name: str) -> str:
    return "s" if name == "f32" else "d"


def _threads() -> int:
    return _state["backend"].threads if _state["backend"] is not None else 1


def _aligned(x: np.ndarray) -> bool:
    return x.flags.aligned and not any(s % x.itemsize for s in x.strides)


def _usable(x: np.ndarray) -> np.ndarray:
    """`x` itself when its strides are whole elements and it is aligned, else a C-contiguous copy."""
    return x if _aligned(x) else x.copy(order="C")  # (ascontiguousarray keeps a contiguous x unaligned)


def _steps(x: np.ndarray) -> list[int]:
    item = x.itemsize
    return [s // item for s in x.strides]


def _merge_rows(x: np.ndarray) -> np.ndarray | None:
    """x[..., r, c] as a 2-D view [... * r, c] without a copy, or None."""
    view = x.reshape(int(np.prod(x.shape[:-1])), x.shape[-1])
    return view if view.size == 0 or np.may_share_memory(view, x) else None


_NO_BATCH = np.zeros(3, np.int64)


def _offsets(batch: tuple[int, ...], arrays: tuple[np.ndarray, ...]) -> np.ndarray:
    """Per batch item, each operand's element offset (broadcast dimensions have offset step 0)."""
    if not batch:
        return _NO_BATCH
    columns = []
    for x in arrays:
        nb = x.ndim - 2
        steps = [0] * (len(batch) - nb) + [0 if n == 1 else s for n, s in zip(x.shape[:nb], _steps(x)[:nb])]
        off = np.zeros(batch, np.int64)
        for axis, (n, step) in enumerate(zip(batch, steps)):
            if step:
                shape = [1] * len(batch)
                shape[axis] = n
                off = off + (np.arange(n, dtype=np.int64) * step).reshape(shape)
        columns.append(off.reshape(-1))
    return np.ascontiguousarray(np.stack(columns, axis=1)).reshape(-1)


# ---------------------------------------------------------------- GEMM


def _gemm_args(
    a: np.ndarray, b: np.ndarray, c: np.ndarray, alpha: float, beta: float, exact: bool
) -> _GemmArgs:
    """vg_gemm's arguments for c[..., m, n] = alpha * a[..., m, k] @ b[..., k, n] + beta * c (batch
    dimensions broadcast to c's; strides in whole elements), holding the offsets array they point into.
    They depend on the shapes and strides alone, not on the data pointers."""
    if a.ndim > 2 and b.ndim == 2 and a.shape[:-2] == c.shape[:-2]:
        a2, c2 = _merge_rows(a), _merge_rows(c)  # one product of all the rows when b is shared
        if a2 is not None and c2 is not None:
            a, c = a2, c2
    name = "f32" if c.dtype == np.float32 else "f64"
    fn, gemv = _state["gemm"].get(name), _state["gemv"].get(name)
    offs = _offsets(c.shape[:-2], (a, b, c))
    args = _GemmArgs(
        name == "f64", exact or fn is None, fn[1] if fn else 0, fn[0] if fn else None, gemv, offs.size // 3,
        a.shape[-2], b.shape[-1], a.shape[-1], *_steps(a)[-2:], *_steps(b)[-2:], *_steps(c)[-2:],
        offs.ctypes.data, alpha, beta,
    )  # fmt: skip
    args.offsets = offs  # alive as long as the structure that points into it
    return args


# what matmul.c's vg_gemm returns besides 1 (done): the operand to give in another layout
_BLAS_A, _BLAS_B, _BLAS_C = -1, -2, -3


def _gemm_into(
    a: np.ndarray, b: np.ndarray, c: np.ndarray, alpha: float, beta: float, exact: bool
) -> tuple[np.ndarray, np.ndarray]:
    """c[..., m, n] = alpha * a[..., m, k] @ b[..., k, n] + beta * c, batch dimensions broadcast to c's;
    operands of one checked dtype, any layout: those the path cannot take are copied first (on the fast
    path, BLAS takes a unit stride on one axis: transposed and offset views as they are; OpenBLAS packs
    each layout its own way, so their bits may differ from a contiguous copy's). Returns the operands as
    computed (a row-major copy where one was made)."""
    fns = _state["lib"] or _lib()
    if c.size == 0:
        return a, b
    a, b = _usable(a), _usable(b)
    work = c if _aligned(c) else None
    while True:
        if work is None:  # BLAS writes a row-major c; another c receives the result of one
            work = c.copy(order="C") if beta else np.empty(c.shape, c.dtype)
        args = _gemm_args(a, b, work, alpha, beta, exact)
        done = fns.gemm(fns.ref(args), fns.ptr(a), fns.ptr(b), fns.ptr(work), _threads())
        if done == 1:
            break
        if done == _BLAS_A:
            a = a.copy(order="C")
        elif done == _BLAS_B:
            b = b.copy(order="C")
        else:
            work = None
    if work is not c:
        c[...] = work
    return a, b


class _Product:
    """a @ b for one dtype, path and layout of the operands (2-D or batched): vg_gemm's arguments
    prepared once, so that a call is one allocation and one foreign call. A layout BLAS cannot take (a
    broadcast gradient's zero strides) is learnt on the first call, which copies that operand row-major
    as `_gemm_into` does: later calls copy it and make one foreign call with arguments prepared for the
    copy. An operand whose data is not aligned goes through `_gemm_into`."""

    __slots__ = ("args", "args_ref", "copied", "direct", "dtype", "exact", "ptr", "run", "shape")

    def __init__(self, a: np.ndarray, b: np.ndarray, shape: tuple[int, ...], exact: bool) -> None:
        fns = _state["lib"] or _lib()
        self.shape, self.dtype, self.exact, self.run, self.ptr = shape, a.dtype, exact, fns.gemm, fns.ptr
        self.args: _GemmArgs | None = None
        # which operands every call copies row-major first (the layout's answer), and the arguments then
        self.copied: tuple[bool, bool, _GemmArgs, Any] | None = None
        # how vg_eager calls vg_gemm itself (see DIRECT_MATMUL): the arguments' address and c's shape
        self.direct: tuple[int, tuple[int, ...]] | None = None
        c = np.empty(shape, a.dtype)  # the layout of every call's c (not touched: no page is written)
        if c.size and _aligned(a) and _aligned(b):
            self.args = _gemm_args(a, b, c, 1.0, 0.0, exact)
            self.args_ref = fns.ref(self.args)
            self.direct = (ctypes.addressof(self.args), shape)

    def __call__(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        c = np.empty(self.shape, self.dtype)
        if self.args is None:
            if c.size:
                _gemm_into(a, b, c, 1.0, 0.0, self.exact)
            return c
        ptr, copied = self.ptr, self.copied
        if copied is not None:
            copy_a, copy_b, _, args_ref = copied
            a2, b2 = a.copy(order="C") if copy_a else a, b.copy(order="C") if copy_b else b
            if self.run(args_ref, ptr(a2), ptr(b2), ptr(c), _threads()) != 1:
                _gemm_into(a, b, c, 1.0, 0.0, self.exact)
            return c
        done = self.run(self.args_ref, ptr(a), ptr(b), ptr(c), _threads())
        if done == 1:
            return c
        a2, b2 = _gemm_into(a, b, c, 1.0, 0.0, self.exact)
        if done in (_BLAS_A, _BLAS_B) and a.flags.aligned and b.flags.aligned:  # the layout, not the data
            args = _gemm_args(a2, b2, c, 1.0, 0.0, self.exact)
            self.copied = (a2 is not a, b2 is not b, args, _state["lib"].ref(args))
            self.direct = None  # every call copies first: Python's to make
        return c


class _Folded:
    """a @ b for a batch a times one matrix b whose batch and rows are one run of rows: one product of
    a.reshape(-1, k) and b (`flat`), reshaped to `shape`. vg_eager calls it as `flat`'s vg_gemm call
    (`direct`: its address, c's shape `shape`) while `flat` takes the layout as it is."""

    __slots__ = ("direct", "flat", "k", "shape")

    def __init__(self, flat: _Product, k: int, shape: tuple[int, ...]) -> None:
        self.flat, self.k, self.shape = flat, k, shape
        self.direct = None if flat.direct is None else (flat.direct[0], shape)

    def __call__(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        c = self.flat(a.reshape(-1, self.k), b).reshape(self.shape)
        if self.flat.direct is None:
            self.direct = None  # `flat` copies an operand first
        return c


def single_threaded(reference: Callable) -> Callable:
    """`reference` (run inside a kernel, for what the kernel does not take) with NumPy's BLAS on one
    thread: on several, BLAS splits a product otherwise, and the kernel's bits would change with the
    thread count."""

    @functools.wraps(reference)
    def run(*args: Any, **params: Any) -> Any:
        with one_blas_thread():
            return reference(*args, **params)

    return run


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """OpenBLAS on one thread inside (verigrad's pool runs the tiles: OpenBLAS's own split of a product
    over its threads changes the bits with the thread count); such sections may overlap, in several
    Python threads: matmul.c counts them, and the last to end puts OpenBLAS's thread count back."""
    lib = _state["lib"]
    if lib is None:  # no library: no kernel that needs it runs
        yield
        return
    lib.blas_single_begin()
    try:
        yield
    finally:
        lib.blas_single_end()


def _check_c(c: np.ndarray, shape: tuple[int, ...], *operands: np.ndarray) -> None:
    if c.shape != shape:
        raise ValueError(f"c has shape {c.shape}; the product has shape {shape}")
    if not c.flags.writeable:
        raise ValueError("c is read-only: it receives the result")
    if any(np.may_share_memory(c, x) for x in operands):
        raise ValueError("c overlaps an operand: BLAS writes c while it reads a and b")


def _batch_shape(a: np.ndarray, b: np.ndarray) -> tuple[int, ...]:
    try:
        return np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) if a.ndim > 2 or b.ndim > 2 else ()
    except ValueError:
        raise ValueError(f"gemm: the batch dimensions of {a.shape} and {b.shape} do not broadcast") from None


def gemm(
    a: np.ndarray,
    b: np.ndarray,
    c: np.ndarray | None = None,
    *,
    alpha: float = 1.0,
    beta: float = 0.0,
    exact: bool | None = None,
) -> np.ndarray:
    """alpha * a @ b + beta * c for a[..., m, k] and b[..., k, n] (batch dimensions broadcast), written
    into `c` (updated in place and returned) or a new array; c is not read when beta == 0."""
    _dtype_name(a, b, *(() if c is None else (c,)))
    if a.ndim < 2 or b.ndim < 2:
        raise ValueError(f"gemm takes matrices (or batches of them); got shapes {a.shape} and {b.shape}")
    if a.shape[-1] != b.shape[-2]:
        raise ValueError(
            f"gemm: a {a.shape} @ b {b.shape}: inner sizes {a.shape[-1]} and {b.shape[-2]} differ"
        )
    shape = (*_batch_shape(a, b), a.shape[-2], b.shape[-1])
    if c is None:
        c, beta = np.empty(shape, a.dtype), 0.0
    else:
        _check_c(c, shape, a, b)
    _gemm_into(a, b, c, float(alpha), float(beta), exact_default() if exact is None else bool(exact))
    return c


# matmul's plans, by (a.shape, a.strides, b.shape, b.strides, a.dtype, b.dtype, exact)
_plans: dict[tuple, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {}
_PLANS_KEPT = 1024


def matmul(a: np.ndarray, b: np.ndarray, *, exact: bool | None = None) -> np.ndarray:
    """a @ b with NumPy's semantics (batch dimensions broadcast, 1-D operands are vectors)."""
    flag = exact_default() if exact is None else bool(exact)
    try:
        key = (a.shape, a.strides, b.shape, b.strides, a.dtype, b.dtype, flag)
        plan = _plans[key]
    except (AttributeError, KeyError):
        plan = _matmul_plan(a, b, flag)
        if len(_plans) >= _PLANS_KEPT:
            _plans.clear()
        _plans[key] = plan
    return plan(a, b)


def _matmul_plan(a: np.ndarray, b: np.ndarray, exact: bool) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """How matmul computes a @ b for operands of this dtype, shape and layout (checked here, once)."""
    _dtype_name(a, b)
    _lib()
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError("matmul: scalar operands are not matrices")
    if a.ndim == 1 and b.ndim == 1:
        return lambda a, b: dot(a, b, exact=exact)
    if b.ndim == 1 and a.ndim == 2:
        return lambda a, b: gemv(a, b, exact=exact)
    if a.ndim == 1 and b.ndim == 2:
        return lambda a, b: gemv(b.T, a, exact=exact)
    if a.ndim == 1 or b.ndim == 1:

        def vectors(a: np.ndarray, b: np.ndarray) -> np.ndarray:
            out = gemm(a[None, :] if a.ndim == 1 else a, b[:, None] if b.ndim == 1 else b, exact=exact)
            return out[..., 0, :] if a.ndim == 1 else out[..., 0]

        return vectors
    if a.shape[-1] != b.shape[-2]:
        raise ValueError(
            f"matmul: a {a.shape} @ b {b.shape}: inner sizes {a.shape[-1]} and {b.shape[-2]} differ"
        )
    batch = _batch_shape(a, b)
    if b.ndim == 2 and a.ndim > 2 and a.size and rows_fold(a):
        # a batch times one matrix (a Linear's x @ W.T): one product of all the batch's rows, where each
        # batch item's product packed b again
        k, shape = a.shape[-1], (*a.shape[:-1], b.shape[-1])
        return _Folded(_Product(a.reshape(-1, k), b, (a.size // k, b.shape[-1]), exact), k, shape)
    return _Product(a, b, (*batch, a.shape[-2], b.shape[-1]), exact)


def rows_fold(a: np.ndarray) -> bool:
    """Whether a's batch dimensions and rows are one run of rows (a.reshape(-1, k) is a view)."""
    return all(a.strides[i] == a.shape[i + 1] * a.strides[i + 1] for i in range(a.ndim - 2))


# ---------------------------------------------------------------- GEMV, dot, axpy


def _vector_steps(x: np.ndarray) -> tuple[np.ndarray, int]:
    x = _usable(x)
    return x, _steps(x)[0]


def gemv(
    a: np.ndarray,
    x: np.ndarray,
    y: np.ndarray | None = None,
    *,
    alpha: float = 1.0,
    beta: float = 0.0,
    exact: bool | None = None,
) -> np.ndarray:
    """alpha * a @ x + beta * y for a[m, k] and x[k], into `y` (in place) or a new array; y is not read
    when beta == 0. The fast path is a GEMM with one column (OpenBLAS passes it to its GEMV)."""
    name = _dtype_name(a, x, *(() if y is None else (y,)))
    if a.ndim != 2 or x.ndim != 1 or a.shape[1] != x.shape[0]:
        raise ValueError(f"gemv takes a[m, k] and x[k]; got shapes {a.shape} and {x.shape}")
    m, k = a.shape
    if y is None:
        y, beta = np.empty(m, a.dtype), 0.0
    else:
        _check_c(y, (m,), a, x)
    exact = exact_default() if exact is None else bool(exact)
    if not exact:
        _gemm_into(a, x[:, None], y[:, None], float(alpha), float(beta), False)
        return y
    fns = _state["lib"] or _lib()
    a, (x, incx), (work, incy) = _usable(a), _vector_steps(x), _vector_steps(y)
    ptr = fns.ptr
    fns.gemv[name](
        m, k, float(alpha), ptr(a), *_steps(a), ptr(x), incx, float(beta), ptr(work), incy, _threads()
    )
    if work is not y:
        y[...] = work
    return y


def dot(x: np.ndarray, y: np.ndarray, *, exact: bool | None = None) -> np.ndarray:
    """sum_k x[k] y[k] as a 0-d array of the operands' dtype (one thread: a single element); the exact
    path sums in double in increasing k."""
    name = _dtype_name(x, y)
    if x.ndim != 1 or y.shape != x.shape:
        raise ValueError(f"dot takes two vectors of one length; got shapes {x.shape} and {y.shape}")
    exact = exact_default() if exact is None else bool(exact)
    fns = _lib()
    (x, incx), (y, incy) = _vector_steps(x), _vector_steps(y)
    found = None if exact else _blas(_prefix(name) + "dot")
    if found is not None and min(incx, incy) > 0:
        with one_blas_thread():
            value = found[0](x.size, fns.data(x), incx, fns.data(y), incy)
        if np.isfinite(value):
            return np.array(value, x.dtype)
    total = fns.dot[name](x.size, fns.data(x), incx, fns.data(y), incy)
    with np.errstate(over="ignore"):  # a double sum beyond f32's range is inf, as the reference's
        return np.array(total, x.dtype)


def axpy(alpha: float, x: np.ndarray, y: np.ndarray, *, exact: bool | None = None) -> np.ndarray:
    """y = alpha * x + y in place (y untouched when alpha == 0); returns y. The exact path computes in
    double and rounds once."""
    name = _dtype_name(x, y)
    if x.ndim != 1 or y.shape != x.shape:
        raise ValueError(f"axpy takes two vectors of one length; got shapes {x.shape} and {y.shape}")
    _check_c(y, x.shape, x)
    exact = exact_default() if exact is None else bool(exact)
    fns = _lib()
    (x, incx), (work, incy) = _vector_steps(x), _vector_steps(y)
    found = None if exact else _blas(_prefix(name) + "axpy")
    if found is not None and min(incx, incy) > 0:
        with one_blas_thread():
            found[0](x.size, alpha, fns.data(x), incx, fns.data(work), incy)
    else:
        fns.axpy[name](
            x.size, float(alpha), fns.ptr(x), incx, fns.ptr(work), incy, _ffi.min_chunk(), _threads()
        )
    if work is not y:
        y[...] = work
    return y


# ---------------------------------------------------------------- error bounds and the reference order


def abs_product(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """sum_k |a[i,k]| |b[k,j]| in double (matmul's batch and vector semantics)."""
    return np.matmul(np.abs(a.astype(np.float64)), np.abs(b.astype(np.float64)))


def error_bound(a: np.ndarray, b: np.ndarray, exact: bool) -> np.ndarray:
    """The largest |path - reference| per element of a @ b (see the module docstring), in double."""
    k, u = a.shape[-1], unit_roundoff(a.dtype)
    s, ref = abs_product(a, b), np.abs(np.matmul(a.astype(np.float64), b.astype(np.float64)))
    if exact and a.dtype == np.float64:
        return 2 * k * u * s
    if exact:
        return 2 * u * ref + 2 * k * 2.0**-53 * s
    return (k + 2) * u * s + u * ref


def verification_samples(rng: np.random.Generator) -> list[Any]:
    """matmul's inputs for the verification suite that reach the fast path's own kernels and tile rules (its
    samples are smaller), each with partial blocks and a partial last step in k: an nn.Linear's x @ W^T
    (the dot products), few rows with a long k (the outer products), and 1030 rows (tiles of whole rows;
    a weight gradient's two tiles are left to the tests: the exact path's reference over a long k of a
    wide c took 14 s more here)."""
    from ...ops._op import Sample
    from ...ops._samples import uniform

    return [
        Sample((uniform(rng, (33, 161)), uniform(rng, (47, 161)).T)),
        Sample((uniform(rng, (7, 2050)), uniform(rng, (2050, 20)))),
        Sample((uniform(rng, (1030, 130)), uniform(rng, (130, 130)))),
    ]


def reference_exact(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """What the exact path computes, in NumPy: a @ b summed in double in increasing k (a product, then a
    sum), rounded once; vectors as matmul takes them (one vectorized step per k; for the tests and the
    verification of the exact mode)."""
    a2 = a.astype(np.float64)[None, :] if a.ndim == 1 else a.astype(np.float64)
    b2 = b.astype(np.float64)[:, None] if b.ndim == 1 else b.astype(np.float64)
    acc = np.zeros(np.broadcast_shapes((*a2.shape[:-1], 1), (*b2.shape[:-2], 1, b2.shape[-1])))
    for k in range(a2.shape[-1]):
        acc = acc + a2[..., k : k + 1] * b2[..., k : k + 1, :]
    if a.ndim == 1:
        acc = acc[..., 0, :]
    if b.ndim == 1:
        acc = acc[..., 0]
    return acc.astype(np.result_type(a, b))


# ---------------------------------------------------------------- registration


def _matmul_kernel(dtype: np.dtype, reference: Callable) -> Callable:
    reference = silenced(reference)

    def kernel(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if type(a) is not np.ndarray or type(b) is not np.ndarray or a.dtype != dtype or b.dtype != dtype:
            return reference(a, b)
        plan = _plans.get((a.shape, a.strides, b.shape, b.strides, dtype, dtype, exact_default()))
        if plan is not None:
            return plan(a, b)
        if a.ndim == 0 or b.ndim == 0:
            return reference(a, b)
        return matmul(a, b)

    return never_warns(kernel)


# eager_fast.c's FAST_MATMUL: the matmul kernel's calling convention (after _ffi's, rows.py's and
# reduce.py's DIRECT_ kinds). eager_c = (DIRECT_MATMUL, vg_gemm's address, _plans, the dtype's number,
# the backend, exact_default, (_setting, _state, _held): what exact_default reads, read so in C): vg_eager
# looks a plan up in _plans under the kernel's key and, where it has a `direct` (address, shape), calls
# vg_gemm(address, a, b, c, backend.threads) on a new c of that shape: the call the plan makes; anything
# else is the kernel's (a plan made there the first time).
DIRECT_MATMUL = 9


def _register_matmul(backend: Any) -> None:
    exact = exact_default()
    for name, kernel in _state["kernels"].items():
        backend.register("matmul", kernel, name, EXACTNESS[(name, exact)])


def register(backend: Any, lib: Library) -> None:
    _state["lib"] = _Functions(lib)
    threads = blas.thread_functions()
    if threads is not None:  # matmul.c runs OpenBLAS on one thread while its tiles run on the pool
        _state["lib"].blas_threads(*(ctypes.cast(f, ctypes.c_void_p) for f in threads))
    _state["lib"].blas_small_kernels(blas.small_kernel_work())  # matmul.c's tiles suit them
    _state["lib"].blas_transposed_wide(int(blas.transposes_wide()))
    for name in DTYPES:  # the cblas_?gemm pointer and integer width, for matmul.c's tiles
        found, gemv = _blas(_prefix(name) + "gemm"), _blas(_prefix(name) + "gemv")
        if found is not None:
            _state["gemm"][name] = (ctypes.cast(found[0], ctypes.c_void_p).value, int(found[1]))
        if found is not None and gemv is not None and gemv[1] == found[1]:  # tiles of one row or column
            _state["gemv"][name] = ctypes.cast(gemv[0], ctypes.c_void_p).value
    _state["backend"] = backend
    _state["kernels"] = {name: _matmul_kernel(dtype, matmul_op.reference) for name, dtype in DTYPES.items()}
    address, state = lib.address("vg_gemm"), (_setting, _state, _held)
    for name, kernel in _state["kernels"].items():
        kernel.eager_c = (DIRECT_MATMUL, address, _plans, DTYPES[name].num, backend, exact_default, state)
    _register_matmul(backend)

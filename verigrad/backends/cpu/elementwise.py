"""Element-wise kernels: unary ops on contiguous arrays (a strided view of rank at most 4 first copied
into the result by vg_copy); binary ops on operands of one shape or of shapes that broadcast (rank at
most 4, any element strides, broadcast dimensions read with stride 0). In f32
and f64; add, sub, mul, maximum and minimum also in i64 (a step count, an index offset), so that a
compiled plan's integer arithmetic is replayed with the rest (ir/replay.py). scaled_add (PyTorch's add
with alpha) is C's fma on operands of one shape, exactly the reference's emulated fma.

`cast` between f32 and f64 (contiguous arrays; from other dtypes, the reference) gives the reference's
bits, and so do the ops of `UNARY_EXACT` and the binary ops. The transcendentals and activations
(`UNARY_LIBM`, pow) evaluate their references' f64 formulas with the C library's routines and round once
(f32 exp, sigmoid, tanh, silu, gelu_tanh, gelu and gelu_deriv take an AVX2 path that gives the same bits, see
elementwise.c; a native build computes f32 exp, tanh, sigmoid, silu, gelu, gelu_deriv and gelu_tanh in
f32 arithmetic, within its tolerance).
They are exact where NumPy's f64 loops are the C library's (glibc on x86 without AVX-512, say);
`register` checks this per op on probe values. Where NumPy has routines of its own (its AVX-512 builds),
their inner loops are handed to elementwise.c (numpy_loops.py): the kernels run them a block at a time,
but the f32 vector paths, which send them only the elements whose rounding their own polynomials leave
in doubt: the reference's bits again. Where they cannot be found, the kernels are stated within
`ULP_BOUNDS` ulps, and one whose result cancels (`CANCELLING`: near a zero of the function one ulp of a
routine is many of the result's) within a tolerance, `cancelling_tolerance`."""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import numpy as np

from ...ops import REGISTRY, cast
from ...ops._op import never_warns, silenced
from ..kernel_table import EXACT, Exactness, tolerance, ulp
from . import _ffi, numpy_loops
from ._ffi import DTYPES, Library, collapse

UNARY_EXACT = ("relu", "relu_deriv", "neg", "abs", "sqrt", "rsqrt", "sigmoid_deriv", "tanh_deriv")
UNARY_LIBM = ("exp", "log", "expm1", "log1p", "sin", "cos", "tanh", "sigmoid", "silu", "silu_deriv")
UNARY_LIBM += ("gelu", "gelu_deriv", "gelu_tanh", "gelu_tanh_deriv", "erf")
BINARY = ("add", "sub", "mul", "div", "pow", "maximum", "minimum")
INT64_BINARY = ("add", "sub", "mul", "maximum", "minimum")  # NumPy's: add, sub and mul wrap around
CANCELLING = ("silu_deriv", "gelu_deriv", "gelu_tanh", "gelu_tanh_deriv")

# The bound stated, per (op, dtype), for an op whose C library routines differ from NumPy's here: f64
# results within a few ulps of NumPy's, and f32 ones then round to the same float or a neighbour.
# `register` fills in what it stated for every non-exact kernel (the tests hold the kernels to it).
LIBM_ULPS = {"f32": 1, "f64": 4}
ULP_BOUNDS: dict[tuple[str, str], int] = {}

# The absolute part of a cancelling op's bound where the C library's routines are not NumPy's. Their f64
# results are within 4 ulps of NumPy's (2^-50 relative), and where two evaluations' inputs differ, each
# rounding may differ by an ulp; the worst is where that error is multiplied by the terms that cancel:
# - silu_deriv, s (1 + x (1 - s)): 1 - s off by 2^-50 at most, times x; beyond x = 37.5, 1 - s is 0 in
#   both (exp(-x) < 2^-54): 37.5 2^-50 < 2^-44.
# - gelu_deriv, cdf + x pdf: only pdf's exp differs (erf is the C library's in both), and |x| pdf < 0.25.
# - gelu_tanh, 0.5 x (1 + t): 1 + t off by 2^-50 at most, and non-zero in double only where
#   |arg| < 19.1, |x| < 7.2: 3.6 2^-50 < 2^-48.
# - gelu_tanh_deriv, 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 a x^2): 1 - t^2 off by 2^-49.4 at
#   most, times 0.5 |x| 0.8 (1 + 0.134 x^2) < 23 where |x| < 7.2 (beyond, t = +-1): 2^-44.9.
# Stated with a margin of a factor of two to four. Measured here (NumPy's own AVX-512 routines) on 8M
# f64 inputs in [-1000, 1000]: 2^-49.2, 2^-54, 2^-50.4 and 2^-48.2 beyond 2^-50 |reference|.
CANCELLING_ATOL = {"silu_deriv": 2.0**-43, "gelu_deriv": 2.0**-48, "gelu_tanh": 2.0**-46}
CANCELLING_ATOL["gelu_tanh_deriv"] = 2.0**-43


def cancelling_tolerance(name: str, dtype_name: str) -> Exactness:
    """The bound of a cancelling op's kernel where the C library's routines are not NumPy's: its f64
    result within 2^-50 |reference| + CANCELLING_ATOL of the reference's; rounded to f32, one f32 ulp
    (2^-23 |reference|) more."""
    rtol = 2.0**-50 + (2.0**-23 if dtype_name == "f32" else 0.0)
    return tolerance(rtol, CANCELLING_ATOL[name])


_UNARY_ARGS = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int]
_BINARY_ARGS = [ctypes.c_void_p, *_UNARY_ARGS]
_BC_ARGS = [ctypes.c_void_p] * 4 + [ctypes.c_int64, ctypes.c_int]


def _unary(fn: Any, copy: Any, dtype: np.dtype, reference: Callable, backend: Any, ptr: Callable) -> Callable:
    chunk, reference = _ffi.min_chunk, silenced(reference)

    def kernel(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """fn(x) in a new array, or written into `out` (the result's shape, C-contiguous; it may be x). A
        strided view of rank at most 4 (a batch's gate, sliced from the fused gate-up product) is first
        copied into the result by vg_copy, which fn then overwrites in place: the same per-element
        arithmetic, so the same bits, and two C calls that a replayed plan makes again."""
        if type(x) is not np.ndarray or x.dtype != dtype or not x.flags.aligned:
            return _ffi.into(reference(x), out)
        strided = not x.flags.c_contiguous
        if strided and (x.ndim > 4 or any(step % x.itemsize for step in x.strides)):
            return _ffi.into(reference(x), out)
        if out is None:
            out = np.empty(x.shape, dtype)
        elif not _ffi.writable(out, x.shape, dtype) or (strided and np.may_share_memory(x, out)):
            return _ffi.into(kernel(x), out)
        if strided:
            if out.size == 0:
                return out
            copy(ptr(x), ptr(out), _ffi.copy_dims(x), x.itemsize, chunk(), backend.threads)
            x = out
        fn(ptr(x), ptr(out), x.size, chunk(), backend.threads)
        return out

    kernel.takes_out = True  # type: ignore[attr-defined]
    return never_warns(kernel)


CAST = ("cast",)
SCALED = ("scaled_add",)  # x + alpha * y, one fma
CASTS = (("f64", "f32"), ("f32", "f64"))  # (from, to): vg_cast_<from>_<to>


def _cast(
    fns: dict[np.dtype, Any], target: np.dtype, reference: Callable, backend: Any, ptr: Callable
) -> Callable:
    """The cast op to `target`: C's conversion from the dtypes of `fns` (contiguous arrays), else the
    reference. An optimizer's step size is cast from f64 to f32 every step: in C, a replayed plan makes
    that call without Python."""
    chunk, reference = _ffi.min_chunk, silenced(reference)

    def kernel(x: np.ndarray, dtype: Any) -> np.ndarray:
        fn = fns.get(x.dtype) if type(x) is np.ndarray and dtype.np == target else None
        if fn is None or not (x.flags.c_contiguous and x.flags.aligned):
            return reference(x, dtype)
        out = np.empty(x.shape, target)
        fn(ptr(x), ptr(out), x.size, chunk(), backend.threads)
        return out

    return never_warns(kernel)


_LAYOUTS: dict[tuple, tuple[tuple[int, ...], Any] | None] = {}


def broadcast_dims(a: np.ndarray, b: np.ndarray) -> tuple[tuple[int, ...], Any] | None:
    """The output shape and the `dims` argument of a broadcast kernel (`_ffi.collapse`: dimensions
    merged where both operands' strides allow, so a bias over channels is a few long rows), remembered
    per layout; None when the shapes do not broadcast, the collapsed rank is over 4, or a stride is not
    a whole number of elements."""
    key = (a.shape, a.strides, b.shape, b.strides, a.itemsize)
    found = _LAYOUTS.get(key, False)
    if found is False:
        try:
            shape = np.broadcast_shapes(a.shape, b.shape)
        except ValueError:
            return None
        dims = collapse(shape, (a, b))
        found = _ffi.remember(_LAYOUTS, key, None if dims is None else (shape, (ctypes.c_int64 * 12)(*dims)))
    return found


def _binary(
    fn: Any, fn_bc: Any, dtype: np.dtype, reference: Callable, backend: Any, ptr: Callable
) -> Callable:
    chunk, reference = _ffi.min_chunk, silenced(reference)

    def kernel(a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """fn(a, b) broadcast, in a new array or written into `out` (the result's shape, C-contiguous; it
        may be a or b where that is their shape: each element is read before its result is written)."""
        if (
            type(a) is not np.ndarray
            or type(b) is not np.ndarray
            or a.dtype != dtype
            or b.dtype != dtype
            or not (a.flags.aligned and b.flags.aligned)
        ):
            return _ffi.into(reference(a, b), out)
        same = a.shape == b.shape and a.flags.c_contiguous and b.flags.c_contiguous
        found = None if same else broadcast_dims(a, b)
        if not same and found is None:
            return _ffi.into(reference(a, b), out)
        shape = a.shape if same else found[0]
        if out is None:
            out = np.empty(shape, dtype)
        elif not _ffi.writable(out, shape, dtype):
            return _ffi.into(kernel(a, b), out)
        if same:
            fn(ptr(a), ptr(b), ptr(out), a.size, chunk(), backend.threads)
        else:
            fn_bc(ptr(a), ptr(b), ptr(out), found[1], chunk(), backend.threads)
        return out

    kernel.takes_out = True  # type: ignore[attr-defined]
    return never_warns(kernel)


_SCALED_ARGS = [ctypes.c_void_p] * 3 + [ctypes.c_int64, ctypes.c_double, ctypes.c_int64, ctypes.c_int]


def _scaled_add(fn: Any, dtype: np.dtype, reference: Callable, backend: Any, ptr: Callable) -> Callable:
    """scaled_add (a + alpha * b, one fma) in C on same-shape contiguous operands of `dtype` (an
    optimizer's p.add_(g, alpha=-lr)), else the reference."""
    chunk, reference = _ffi.min_chunk, silenced(reference)

    def kernel(a: np.ndarray, b: np.ndarray, alpha: float) -> np.ndarray:
        if (
            type(a) is not np.ndarray
            or type(b) is not np.ndarray
            or a.dtype != dtype
            or b.dtype != dtype
            or a.shape != b.shape
            or not (a.flags.c_contiguous and b.flags.c_contiguous and a.flags.aligned and b.flags.aligned)
            or isinstance(alpha, bool)
        ):
            return reference(a, b, alpha=alpha)
        out = np.empty(a.shape, dtype)
        fn(ptr(a), ptr(b), ptr(out), a.size, float(alpha), chunk(), backend.threads)
        return out

    return never_warns(kernel)


def _probe(np_dtype: np.dtype) -> list[np.ndarray]:
    """Values that exercise every branch of the formulas: special values, a fine grid and scattered values
    on several scales (a golden-ratio sequence, evenly spread without numpy.random: a process that only
    loads the kernels does not import it)."""
    with np.errstate(over="ignore"):
        special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-300, -1e-300, 1e300, -1e300], np_dtype)
    parts = [special, np.linspace(-30, 30, 2001, dtype=np_dtype)]
    parts += [
        (_scattered(1000, offset) * 2 - 1) * s for offset, s in enumerate((1e-6, 1.0, 8.0, 100.0, 800.0))
    ]
    return [p.astype(np_dtype) for p in parts]


def _scattered(n: int, offset: int) -> np.ndarray:
    """f64[n] in [0, 1): the fractional parts of (i + offset * n + 1) times the golden ratio's conjugate."""
    return (np.arange(offset * n + 1, offset * n + n + 1) * 0.6180339887498949) % 1.0


def same_as_reference(fn: Any, name: str, arity: int, lib: Library) -> bool:
    """Whether the f64 C kernel `fn` gives its op's reference bits on the probe values (so the C
    library's routines are NumPy's here)."""
    x = np.concatenate(_probe(DTYPES["f64"]))
    args = [x] if arity == 1 else [np.abs(x), x[np.argsort(_scattered(x.size, 7), kind="stable")] / 20]
    out = np.empty_like(x)
    fn(*(lib.data(a) for a in args), lib.data(out), x.size, x.size, 1)
    with np.errstate(all="ignore"):
        expected = np.asarray(REGISTRY[name].reference(*args))
    return bool(np.array_equal(out, expected, equal_nan=True))


# the ops whose f64 kernels gave the reference's bits on the probe (the C library's routines are NumPy's
# here): the fused kernels, which evaluate the C library's formulas, may hold them (fused.libm_members)
C_LIBRARY_EXACT: set[str] = set()
NUMPY_ROUTINES = [False]  # whether elementwise.c has NumPy's loops (`use_numpy_loops`)
NUMPY_LOOPS: list[tuple[int, int | None]] = []  # those loops, in numpy_loops.ROUTINES' order
# each op whose formula calls one routine: that routine's NumPy name (vg_math.h's VG_ROUTINE_OPS, and pow)
ROUTINE_OF = {"exp": "exp", "expm1": "expm1", "log": "log", "log1p": "log1p", "sin": "sin", "cos": "cos"}
ROUTINE_OF |= {"sigmoid": "exp", "silu": "exp", "silu_deriv": "exp", "gelu_deriv": "exp", "tanh": "expm1"}
ROUTINE_OF |= {"gelu_tanh": "expm1", "gelu_tanh_deriv": "expm1", "pow": "power"}


def use_numpy_routine(lib: Library, routine: str, loop: Any, data: Any = None) -> bool:
    """Have elementwise.c call `loop` (an address, or a `numpy_loops.LOOP`) for `routine` (one of
    numpy_loops.ROUTINES); whether it now has a loop for every routine."""
    use = lib.fn("vg_use_numpy_routine", [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p], ctypes.c_int)
    return bool(use(numpy_loops.ROUTINES.index(routine), ctypes.cast(loop, ctypes.c_void_p), data))


def use_numpy_loops(lib: Library) -> bool:
    """Hand NumPy's f64 loops (numpy_loops.py) to elementwise.c; whether all were found and taken."""
    found = numpy_loops.loops(np.concatenate(_probe(DTYPES["f64"])))
    if found is None:
        return False
    taken = [use_numpy_routine(lib, name, *loop) for name, loop in zip(numpy_loops.ROUTINES, found)]
    NUMPY_LOOPS[:] = found if taken[-1] else []  # the C side says, at the last, whether it has them all
    return taken[-1]


def _libm_exactness(name: str, dtype_name: str, exact: bool) -> Exactness:
    if exact:
        return EXACT
    if name in CANCELLING:
        return cancelling_tolerance(name, dtype_name)
    ULP_BOUNDS[(name, dtype_name)] = LIBM_ULPS[dtype_name]
    return ulp(LIBM_ULPS[dtype_name])


VECTORIZED = (
    "exp",
    "sigmoid",
    "tanh",
    "silu",
    "gelu_tanh",
    "gelu",
    "gelu_deriv",
)  # f32: elementwise.c vector paths
# f32 ops that a native build computes in f32 arithmetic (elementwise_float.h), and the ulps from the
# reference it then states: the most measured on every f32 input, against the reference's formula with
# the C library's exp and with NumPy's own (its AVX-512 builds) alike
# (exp and tanh: within 1 and 2 ulps of the reference's formula on the C library's exp and expm1, rounded to
# f32, on every input they keep (2.24e9 and 3.26e9); one more for NumPy's own routines, which the reference
# may round to the other neighbour where its double lies that close to half an ulp)
FLOAT_ULPS = {"exp": 2, "tanh": 3, "sigmoid": 2, "silu": 3, "gelu": 6, "gelu_tanh": 15}
# gelu_deriv's two terms cancel near its zero (x = -0.7518), where no ulp bound holds: a tolerance, the
# absolute part 2^-23 where every f32 input needs 2^-23.65 beside the relative 2^-22
# (tools/gelu_float_sweep.py measures both)
FLOAT_TOLERANCE = {"gelu_deriv": (2.0**-22, 2.0**-23)}
# kernels in which no product feeds an addition (one IEEE operation an element, or 1 - x then a
# product): a native build's contraction cannot change them, so they state the reference's bits there too
UNCONTRACTED = ("relu", "relu_deriv", "neg", "abs", "sqrt", "rsqrt", "sigmoid_deriv", "cast")
UNCONTRACTED += ("add", "sub", "mul", "div", "maximum", "minimum", "scaled_add")  # scaled_add: an fma


def native_claim(name: str, dtype_name: str) -> Exactness | None:
    """What the f32 or f64 kernel of `name` states in a native build where that differs from the
    contracted default claim (None: it does not)."""
    if name in UNCONTRACTED:
        return EXACT
    if dtype_name == "f32" and name in FLOAT_TOLERANCE:
        return tolerance(*FLOAT_TOLERANCE[name])
    return ulp(FLOAT_ULPS[name]) if dtype_name == "f32" and name in FLOAT_ULPS else None


VECTOR_PATHS = ("scalar", "avx2", "avx512")  # by the level elementwise.c numbers them with


def known_path(path: str | None) -> None:
    """Refuse a name that is not one of VECTOR_PATHS (None: no choice)."""
    if path is not None and path not in VECTOR_PATHS:
        raise ValueError(f"unknown vector path {path!r}: one of {', '.join(VECTOR_PATHS)}")


def vector_path(lib: Library, path: str | None = None) -> str:
    """The path the f32 exp, sigmoid, tanh, silu and gelu_tanh kernels take ("avx512", "avx2" or
    "scalar"; every path gives the same bits, but for a native build's sigmoid and silu, see
    `cpu.vector_path`); with `path`, first choose it, or the fastest the machine has below it."""
    known_path(path)
    level = -1 if path is None else VECTOR_PATHS.index(path)
    return VECTOR_PATHS[lib.fn("vg_vector_level", [ctypes.c_int], restype=ctypes.c_int)(level)]


def vectorized(lib: Library) -> bool:
    """Whether f32 exp, sigmoid, tanh, silu and gelu_tanh take a vector path (AVX2 or AVX-512) here."""
    return vector_path(lib) != "scalar"


def register(backend: Any, lib: Library) -> None:
    exact = {
        name: same_as_reference(lib.fn(f"vg_{name}_f64", _UNARY_ARGS), name, 1, lib) for name in UNARY_LIBM
    }
    exact["pow"] = same_as_reference(lib.fn("vg_pow_f64", _BINARY_ARGS), "pow", 2, lib)
    C_LIBRARY_EXACT.clear()
    C_LIBRARY_EXACT.update(name for name, same in exact.items() if same)
    numpy_routines = NUMPY_ROUTINES[0] = use_numpy_loops(lib)
    copy = lib.fn("vg_copy", [ctypes.c_void_p] * 3 + [ctypes.c_int64, ctypes.c_int64, ctypes.c_int])
    for dtype_name, dtype in DTYPES.items():
        for name in UNARY_EXACT + UNARY_LIBM:
            # NumPy's own routines, where the C library's differ (erf and gelu's erf: the C library's alone)
            same = exact.get(name) or (numpy_routines and name in ROUTINE_OF)
            stated = EXACT if name in UNARY_EXACT else _libm_exactness(name, dtype_name, bool(same))
            fn = lib.fn(f"vg_{name}_{dtype_name}", _UNARY_ARGS)
            kernel = _unary(fn, copy, dtype, REGISTRY[name].reference, backend, lib.ptr)
            _ffi.direct(kernel, _ffi.DIRECT_UNARY, lib.address(f"vg_{name}_{dtype_name}"), 0, dtype, backend)
            backend.register(name, kernel, dtype_name, stated, native_claim(name, dtype_name))
        for name in BINARY:
            same = name != "pow" or exact[name] or numpy_routines
            stated = _libm_exactness(name, dtype_name, bool(same)) if name == "pow" else EXACT
            fn = lib.fn(f"vg_{name}_{dtype_name}", _BINARY_ARGS)
            fn_bc = lib.fn(f"vg_{name}_bc_{dtype_name}", _BC_ARGS)
            kernel = _binary(fn, fn_bc, dtype, REGISTRY[name].reference, backend, lib.ptr)
            _binary_direct(kernel, lib, name, dtype_name, dtype, backend)
            backend.register(name, kernel, dtype_name, stated, native_claim(name, dtype_name))
        for name in SCALED:
            fn = lib.fn(f"vg_{name}_{dtype_name}", _SCALED_ARGS)
            kernel = _scaled_add(fn, dtype, REGISTRY[name].reference, backend, lib.ptr)
            backend.register(name, kernel, dtype_name, EXACT, native_claim(name, dtype_name))
    for target in sorted({to for _, to in CASTS}):
        fns = {DTYPES[a]: lib.fn(f"vg_cast_{a}_{b}", _UNARY_ARGS) for a, b in CASTS if b == target}
        kernel = _cast(fns, DTYPES[target], cast.reference, backend, lib.ptr)
        backend.register("cast", kernel, target, EXACT, native_claim("cast", target))
    for name in INT64_BINARY:
        fn, fn_bc = lib.fn(f"vg_{name}_i64", _BINARY_ARGS), lib.fn(f"vg_{name}_bc_i64", _BC_ARGS)
        kernel = _binary(fn, fn_bc, np.dtype(np.int64), REGISTRY[name].reference, backend, lib.ptr)
        _binary_direct(kernel, lib, name, "i64", np.dtype(np.int64), backend)
        backend.register(name, kernel, "i64", EXACT)


def _binary_direct(
    kernel: Any, lib: Library, name: str, dtype_name: str, dtype: np.dtype, backend: Any
) -> None:
    """`_ffi.direct` for a binary kernel: vg_<name>_<dtype> and its broadcast form vg_<name>_bc_<dtype>."""
    fn, fn_bc = lib.address(f"vg_{name}_{dtype_name}"), lib.address(f"vg_{name}_bc_{dtype_name}")
    _ffi.direct(kernel, _ffi.DIRECT_BINARY, fn, fn_bc, dtype, backend)
    kernel.eager_c += (broadcast_dims,)  # operands broadcast otherwise: their layout (eager_fast.c bc_layout)

"""The backend verification suite: every native kernel of a backend against its op's reference, at the
exactness the backend stated for it (`Backend.register(..., exactness=)`).

It needs no list of ops: for each (op, dtype) kernel the backend has, the cases come from the op's own
samples (and from those the backend adds where its kernel changes code path with the size,
`Backend.samples`). Each sample is also run with its float values mixed with special values (signed zeros,
infinities, NaN, subnormals and, unless the claim is a tolerance, the largest finite values), replaced
by zeros of both signs and ones (where the order of a reduction decides which zero it keeps), with each
of its sizes set to 0, to 1 and grown, and with its inputs as views (offset, transposed, offset and
strided, reversed, broadcast, unaligned; grown ones transposed and strided). Float inputs are cast to
every dtype whose result the kernel computes (ints and bool promoted to it get the plain cases); a case
the op's rules refuse is dropped.

Each case runs the kernel on one thread and compares its result with the reference's: the same bits
(EXACT; NaN meets NaN, whatever its sign and payload), within `ulps`, or within `rtol * |reference| +
atol` (infinities equal). Then it runs on 1, 2 and 3 threads with a small chunk, and on each code path
the backend has for it (`Backend.paths`: the cpu backend's AVX-512, AVX2 and scalar paths of the f32
exp, sigmoid, tanh, silu and gelu_tanh kernels), which must give the very same bits (NaN's included),
and the inputs must be unchanged. Where the reference raises (outside
the op's domain), the kernel must raise too. A kernel with modes a caller selects (`Backend.modes`: the
cpu backend's fast and exact GEMM paths) is verified in each, at the exactness it states there, and held
to the bits of the mode's own definition where it has one (the exact path's: the naive loop, double sums
in increasing k). A kernel that no case reaches (an op without samples, or
a kernel keyed by a dtype the op's result never has) is "untested", which fails the suite too.

`CheckedBackend(backend)` runs a backend's kernels with every call held to the same comparison, for
checking a whole program (a compiled training step) kernel by kernel.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .backends import cpu as _cpu
from .backends.active import lookup
from .backends.kernel_table import EXACT, Backend, Exactness
from .backends.reference import composite_reference
from .backends.threads import THREAD_COUNT, set_threads
from .dtypes import ALL, DType, bf16, from_numpy_dtype
from .errors import DTypeError, ShapeError
from .registry import OPS
from .shapes import Spec

THREADS = (1, 2, 3)
SMALL_CHUNK = 3  # elements per thread at least: odd, so chunk edges fall inside SIMD vectors
GROWN_SIZE = 600  # a grown size is at least this (rows past the pairwise-summation blocks)
GROWN_LIMIT = 1 << 13  # elements of the largest input (and of the result, times 2) of a grown case
EVERY_DTYPE = "*"  # the dtype of a kernel registered for every dtype


@dataclass
class Case:
    """One call of a kernel: what it is, its arrays and its (canonical) params."""

    what: str
    arrays: tuple[np.ndarray, ...]
    params: dict[str, Any]
    out: Spec

    def inputs(self) -> str:
        return ", ".join(f"{_dtype_name(a)}{list(a.shape)}" for a in self.arrays) or "no arrays"


@dataclass
class KernelResult:
    """The verdict on one kernel: `status` is "pass", "fail" or "untested" (no case reached it)."""

    op: str
    dtype: str
    exactness: Exactness
    mode: str = ""  # the kernel's mode (`Backend.modes`), where it has more than one
    status: str = "pass"
    cases: int = 0
    worst_ulps: int | None = None  # the largest difference in ulps seen (float results)
    worst_error: float | None = None  # tolerance claims: the largest |error| / (rtol*|reference| + atol)
    message: str = ""
    failing: Case | None = field(default=None, repr=False)  # the first case that failed, to reproduce it

    @property
    def passed(self) -> bool:
        return self.status == "pass"

    @property
    def name(self) -> str:
        """The op, and the mode where there is one: "matmul (exact)"."""
        return f"{self.op} ({self.mode})" if self.mode else self.op

    def worst(self) -> str:
        if self.worst_error is not None:
            return f"{self.worst_error:.2g} of tol"
        if self.worst_ulps is not None:
            return f"{self.worst_ulps} ulp"
        return "-"

    def _fail(self, case: Case, message: str) -> None:
        if self.status != "fail":  # the first failure is the one reported
            self.status, self.failing = "fail", case
            self.message = f"{case.what} ({case.inputs()}): {message}"


@dataclass
class Report:
    """The suite's result for a backend: native kernels with their claims, fallbacks, verdicts."""

    backend: str
    native: dict[str, list[tuple[str, Exactness, str]]]
    fallback: list[str]
    results: list[KernelResult] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return all(r.passed for r in self.results)


# which kernels a backend has ------------------------------------------------------------------------
def native_kernels(backend: Backend) -> list[tuple[str, str | None]]:
    """The (op, dtype name) pairs `backend` has its own kernel for; None for a kernel of every dtype."""
    return sorted(backend.registered(), key=lambda k: (k[0], k[1] or ""))


def claims(backend: Backend) -> dict[str, list[tuple[str, Exactness, str]]]:
    """Op name -> [(dtype name or "*", stated exactness, mode)] for each native kernel and mode."""
    out: dict[str, list[tuple[str, Exactness]]] = {}
    registered = backend.registered()
    for op, dtype in native_kernels(backend):
        for mode in backend.modes(op, dtype):
            with backend.in_mode(mode):
                exactness = backend.registered()[(op, dtype)][1] if mode else registered[(op, dtype)][1]
            out.setdefault(op, []).append((dtype or EVERY_DTYPE, exactness, mode))
    return out


# the suite -------------------------------------------------------------------------------------------
def verify(
    backend: Backend | str,
    ops: Sequence[str] | None = None,
    threads: Sequence[int] = THREADS,
    min_chunk: int = SMALL_CHUNK,
) -> Report:
    """Verify every native kernel of `backend` (or those of `ops`) against the references."""
    backend = lookup(backend) if isinstance(backend, str) else backend
    _known(ops or ())
    start = time.perf_counter()
    fallback = [name for name in backend.report()["fallback"] if name in OPS]
    report = Report(backend.name, claims(backend), fallback)
    for op, dtype in native_kernels(backend):
        if ops is None or op in ops:
            for mode in backend.modes(op, dtype):
                report.results.append(verify_kernel(backend, op, dtype, threads, min_chunk, mode))
    report.seconds = time.perf_counter() - start
    return report


def _known(ops: Sequence[str]) -> None:
    for name in ops:
        if name not in OPS:
            raise ValueError(f"unknown op {name!r}; `verigrad ops` lists them")


def verify_kernel(
    backend: Backend,
    op_name: str,
    dtype: str | None,
    threads: Sequence[int] = THREADS,
    min_chunk: int = SMALL_CHUNK,
    mode: str = "",
) -> KernelResult:
    """Run one kernel (registered for `dtype`, None: every dtype) on every case that reaches it, in
    `mode` (one of `backend.modes`): held to the op's reference at the exactness it states in that mode,
    and to the bits of the mode's own definition where it has one."""
    with backend.in_mode(mode):
        return _verify_in_mode(backend, op_name, dtype, threads, min_chunk, mode)


def _verify_in_mode(
    backend: Backend, op_name: str, dtype: str | None, threads: Sequence[int], min_chunk: int, mode: str
) -> KernelResult:
    registered = backend.registered()
    kernel, exactness = registered[(op_name, dtype)]
    definition = backend.modes(op_name, dtype).get(mode)
    result = KernelResult(op_name, dtype or EVERY_DTYPE, exactness, mode)
    if op_name not in OPS:
        result.status, result.message = "untested", f"no op named {op_name!r} in the registry"
        return result
    op = OPS[op_name]
    others = {d for o, d in registered if o == op_name and d is not None}
    reaches = (lambda d: d not in others) if dtype is None else (lambda d: d == dtype)
    extra = backend.samples(op_name, np.random.default_rng(0))
    cases = list(cases_for(op, reaches, tolerance=not exactness.is_exact and not exactness.ulps, extra=extra))
    result.cases = len(cases)
    reference = reference_kernel(op)
    firsts: list[tuple[Case, np.ndarray]] = []  # each case that passed, with its one-thread result
    with _threads(1, None):
        for case in cases:
            expected, error = _run(reference, case)
            if _check(result, backend, kernel, case, expected, error, exactness, firsts):
                return result
            if definition is not None and error is None and _differs_from(result, definition, case, firsts):
                return result
    paths = backend.paths(op_name, dtype)
    for path, n in [(path, n) for path in paths for n in threads]:
        with backend.on_path(path), _threads(n, min_chunk):
            for case, first in firsts:
                actual, error, hidden = _run_watched(backend, kernel, case)
                on = _on(n, min_chunk) + (f" on the {path} path" if path else "")
                if error is not None:
                    result._fail(case, f"raised {one_line(error)} on {on}")
                    return result
                if hidden:
                    result._fail(case, f"{HIDDEN} on {on}")
                    return result
                if _bits(actual) != _bits(first):
                    default = f" on the {paths[0]} path" if path else ""
                    where = _difference(actual, first)
                    what = f"{on} gives other bits than 1 thread at the default chunk{default}{where}"
                    result._fail(case, what)
                    return result
    if not cases:
        result.status, result.message = "untested", "no sample of the op reaches this kernel"
    return result


def _on(threads: int, min_chunk: int) -> str:
    return f"{threads} thread{'s' if threads > 1 else ''} (min chunk {min_chunk})"


def _check(
    result: KernelResult,
    backend: Backend,
    kernel: Callable,
    case: Case,
    expected: np.ndarray | None,
    ref_error: BaseException | None,
    exactness: Exactness,
    firsts: list[tuple[Case, np.ndarray]],
) -> bool:
    """Run the kernel on one case and hold it to the reference; True when it failed."""
    before = [_bits(a) for a in case.arrays]
    actual, error, hidden = _run_watched(backend, kernel, case)
    if any(_bits(a) != b for a, b in zip(case.arrays, before)):
        result._fail(case, "the kernel wrote into an input")
    elif hidden:
        result._fail(case, HIDDEN)
    elif ref_error is not None:
        if error is None:
            result._fail(case, f"the reference raises {one_line(ref_error)}; the kernel returned a result")
    elif error is not None:
        result._fail(case, f"raised {one_line(error)}; the reference returned a result")
    else:
        verdict = compare(actual, expected, exactness)
        if verdict.ulps is not None:
            result.worst_ulps = max(result.worst_ulps or 0, verdict.ulps)
        if verdict.error is not None:
            result.worst_error = max(result.worst_error or 0.0, verdict.error)
        if verdict.message:
            result._fail(case, verdict.message + _inputs_at(case, verdict.index))
        else:
            firsts.append((case, np.array(actual)))
    return result.status == "fail"


def _differs_from(
    result: KernelResult, definition: Callable, case: Case, firsts: list[tuple[Case, np.ndarray]]
) -> bool:
    """Hold the result the case just gave (the last of `firsts`) to the bits of the mode's definition;
    True when it failed."""
    actual = firsts[-1][1]
    wanted, error = _run(definition, case)
    if error is not None:
        result._fail(case, f"the {result.mode} mode's definition raises {one_line(error)}")
    else:
        verdict = compare(actual, wanted, EXACT)
        if verdict.message:
            message = verdict.message.replace("the reference", f"the {result.mode} mode's definition")
            result._fail(case, message + _inputs_at(case, verdict.index))
    return result.status == "fail"


HIDDEN = "a fast kernel gave an infinity or a NaN on inputs that cannot overflow (a rerun hid it)"
NO_OVERFLOW = 2.0**20  # inputs at most this large: no sum of products of the samples' sizes overflows f32


def _run_watched(
    backend: Backend, kernel: Callable, case: Case
) -> tuple[np.ndarray | None, BaseException | None, bool]:
    """`_run`, and whether a fast kernel's infinity or NaN was computed again (`Backend.reruns`) where
    the inputs cannot overflow: a bug that the rerun would otherwise hide."""
    before = backend.reruns()
    actual, error = _run(kernel, case)
    return actual, error, backend.reruns() > before and _cannot_overflow(case.arrays)


def _cannot_overflow(arrays: Sequence[Any]) -> bool:
    """Whether every float input is finite and at most NO_OVERFLOW in magnitude."""
    for a in arrays:
        if isinstance(a, np.ndarray) and a.dtype.kind == "f" and a.size:
            with np.errstate(all="ignore"):
                if not (np.abs(a.astype(np.float64)) <= NO_OVERFLOW).all():  # NaN: False too
                    return False
    return True


def _run(kernel: Callable, case: Case) -> tuple[np.ndarray | None, BaseException | None]:
    """The kernel's result with the dtype of the op's rule (as eager mode makes it), or its error."""
    try:
        with np.errstate(all="ignore"):
            out = kernel(*case.arrays, **case.params)
        want = case.out.dtype.np
        if not isinstance(out, np.ndarray) or out.dtype != want:
            out = np.asarray(out).astype(want, copy=False)
        if out.shape != case.out.shape:
            raise AssertionError(f"result of shape {list(out.shape)}, the rule says {list(case.out.shape)}")
        return out, None
    except Exception as e:
        return None, e


@contextlib.contextmanager
def _threads(n: int, min_chunk: int | None) -> Iterator[None]:
    """`n` threads and the cpu backend's chunk size (None: its default), the settings before restored
    after (the environment's still in force where they were)."""
    threads, chunk = THREAD_COUNT.explicit, _cpu.MIN_CHUNK.explicit
    set_threads(n)
    _cpu.set_min_chunk(min_chunk)
    try:
        yield
    finally:
        set_threads(threads)
        _cpu.set_min_chunk(chunk)


def reference_kernel(op: Any) -> Callable[..., Any]:
    """The op's meaning as a kernel: its NumPy reference, or its decomposition on the reference backend."""
    return op.reference if op.reference is not None else composite_reference(op)


# comparing results ----------------------------------------------------------------------------------
@dataclass
class Verdict:
    ulps: int | None = None  # float results: the largest difference in ulps
    error: float | None = None  # tolerance claims: the largest |error| / allowed error
    message: str = ""  # empty when the result meets the claim
    index: tuple[int, ...] | None = None  # where it failed first


def compare(actual: np.ndarray, expected: np.ndarray, exactness: Exactness) -> Verdict:
    """Hold `actual` to `expected` (same shape and dtype; bf16 as its uint16 bits) at `exactness`."""
    if actual.shape != expected.shape or actual.dtype != expected.dtype:
        return Verdict(
            message=f"{actual.dtype}{list(actual.shape)} where the reference gives "
            f"{expected.dtype}{list(expected.shape)}"
        )
    flat_a, flat_e = np.ascontiguousarray(actual).reshape(-1), np.ascontiguousarray(expected).reshape(-1)
    floats = actual.dtype.kind == "f" or actual.dtype == _BF16
    if flat_a.tobytes() == flat_e.tobytes():  # the same bits: the common case, at once
        if not floats:
            return Verdict()
        return Verdict(ulps=0) if exactness.is_exact or exactness.ulps else Verdict(error=0.0)
    if not floats:  # ints and bool: the very values
        bad = np.flatnonzero(flat_a != flat_e)
        return _failed(actual, expected, bad[0], "other values than the reference", None)
    a, r = _values(flat_a), _values(flat_e)
    nan_a, nan_r = np.isnan(a), np.isnan(r)
    bad = np.flatnonzero(nan_a != nan_r)
    if len(bad):
        return _failed(actual, expected, bad[0], "NaN where the reference has a number, or the reverse", 0)
    diff = np.abs(_ordered(flat_a) - _ordered(flat_e))
    diff[nan_r] = 0
    ulps = int(diff.max())
    if exactness.is_exact:
        width = _UINT[actual.itemsize]
        bad = np.flatnonzero((flat_a.view(width) != flat_e.view(width)) & ~nan_r)
        if len(bad):
            return _failed(actual, expected, bad[0], "other bits than the reference (claimed exact)", ulps)
        return Verdict(ulps=0)
    if exactness.ulps:
        bad = np.flatnonzero(diff > exactness.ulps)
        if len(bad):
            i = bad[np.argmax(diff[bad])]
            return _failed(actual, expected, i, f"{ulps} ulps from the reference (claimed {exactness})", ulps)
        return Verdict(ulps=ulps)
    inf = np.isinf(a) | np.isinf(r)
    bad = np.flatnonzero(inf & ~nan_r & (a != r))
    if len(bad):
        what = f"an infinity the reference does not give ({exactness})"
        return _failed(actual, expected, bad[0], what, None)
    finite = ~nan_r & ~inf
    a64, r64 = a[finite].astype(np.float64), r[finite].astype(np.float64)
    allowed = exactness.rtol * np.abs(r64) + exactness.atol
    err = np.abs(a64 - r64)
    ratio = np.divide(err, allowed, out=np.where(err > 0, np.inf, 0.0), where=allowed > 0)
    worst = float(ratio.max()) if ratio.size else 0.0
    if worst > 1:
        i = np.flatnonzero(finite)[np.argmax(ratio)]
        return _failed(actual, expected, i, f"error {worst:.3g} times the claimed {exactness}", None, worst)
    return Verdict(error=worst)


def _failed(
    actual: np.ndarray,
    expected: np.ndarray,
    flat: int,
    what: str,
    ulps: int | None,
    error: float | None = None,
) -> Verdict:
    index = tuple(int(i) for i in np.unravel_index(int(flat), actual.shape)) if actual.ndim else ()
    got, want = _show(actual, index), _show(expected, index)
    return Verdict(ulps, error, f"{what}: at {list(index)} kernel {got}, reference {want}", index)


_BF16 = np.dtype(np.uint16)  # how bf16 is stored (verigrad has no uint16 dtype)
_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
_INT = {2: np.int16, 4: np.int32, 8: np.int64}


def _values(a: np.ndarray) -> np.ndarray:
    """The float values (bf16's uint16 bits widened to the f32 they stand for)."""
    if a.dtype == _BF16:
        return (a.astype(np.uint32) << 16).view(np.float32)
    return a


def _ordered(a: np.ndarray) -> np.ndarray:
    """The float bits as integers ordered like the floats, so a difference counts ulps."""
    ints = a.view(_INT[a.itemsize]).astype(np.int64)
    magnitude = ints & np.iinfo(_INT[a.itemsize]).max
    return np.where(ints < 0, -magnitude, magnitude)


def _show(a: np.ndarray, index: tuple[int, ...]) -> str:
    value = a[index]
    if a.dtype == _BF16:
        return f"{float(_values(np.asarray(value))):.9g} (bf16 0x{int(value):04x})"
    if a.dtype.kind == "f":
        return f"{float(value)!r} (0x{int(np.asarray(value).view(_UINT[a.itemsize])):0{2 * a.itemsize}x})"
    return repr(value.item())


def _inputs_at(case: Case, index: tuple[int, ...] | None) -> str:
    """The inputs at a failing index, for an op whose inputs have the result's shape (element-wise)."""
    if index is None or not case.arrays or any(a.shape != case.out.shape for a in case.arrays):
        return ""
    return "; inputs there: " + ", ".join(_show(a, index) for a in case.arrays)


def _difference(actual: np.ndarray, first: np.ndarray) -> str:
    """Where two results of the same shape and dtype first differ in their bits."""
    if actual.shape != first.shape or actual.dtype != first.dtype or actual.size == 0:
        return f": {actual.dtype}{list(actual.shape)} against {first.dtype}{list(first.shape)}"
    width = _UINT[actual.itemsize]
    flat = np.flatnonzero(np.ascontiguousarray(actual).view(width) != np.ascontiguousarray(first).view(width))
    index = tuple(int(i) for i in np.unravel_index(int(flat[0]), actual.shape)) if actual.ndim else ()
    return f": at {list(index)} {_show(actual, index)} against {_show(first, index)}"


def _bits(a: np.ndarray | None) -> bytes:
    return b"" if a is None else np.ascontiguousarray(a).tobytes()


def one_line(e: BaseException) -> str:
    """An exception as one line: its type and the first line of its message."""
    text = str(e).splitlines()[0] if str(e) else ""
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


_NAMES = {np.dtype(d.storage): d.name for d in ALL if d is not bf16}


def _dtype_name(a: np.ndarray) -> str:
    """The verigrad name of an array's dtype (uint16 holds bf16)."""
    return _NAMES.get(a.dtype, "bf16" if a.dtype == np.uint16 else str(a.dtype))


# cases ------------------------------------------------------------------------------------------------
def cases_for(
    op: Any, reaches: Callable[[str], bool], tolerance: bool = False, seed: int = 0, extra: Sequence[Any] = ()
) -> Iterator[Case]:
    """Every case of `op` whose result dtype `reaches` accepts (see the module docstring), from its
    samples and the `extra` ones a backend adds (`Backend.samples`). `tolerance` leaves the largest
    finite values out of the special values: a kernel that sums in another order than the reference may
    round huge cancelling terms differently, which no `rtol` covers."""
    rng = np.random.default_rng(seed)
    samples = list(op.samples(np.random.default_rng(seed))) if op.samples is not None else []
    samples += extra
    seen: set = set()
    for i, sample in enumerate(samples):
        arrays = [np.asarray(a) for a in sample.args]
        templates = [(f"sample {i}", arrays, tuple(LAYOUTS))]
        for what, new, grown in _resized(arrays, rng):  # grown sizes: also as strided views
            templates.append((f"sample {i}, {what}", new, GROWN_LAYOUTS if grown else ()))
        for what, template, layouts in templates:
            key = (tuple((a.shape, a.dtype.kind) for a in template), repr(sample.params))
            if key in seen:
                continue
            seen.add(key)
            floats = [k for k, a in enumerate(template) if a.dtype.kind == "f"]
            for dtype in ALL if floats else (None,):
                specs = [
                    Spec(a.shape, dtype if k in floats else from_numpy_dtype(a.dtype))
                    for k, a in enumerate(template)
                ]
                found = result_spec(op, specs, sample.params)
                if found is None or not reaches(found[0].dtype.name):
                    continue
                out, params = found
                if math.prod(out.shape) > 2 * GROWN_LIMIT:
                    continue  # a size grown in both operands (an outer product): too large a result
                cast = [_cast(a, dtype) if k in floats else a for k, a in enumerate(template)]
                name = f"{what}, {dtype.name}" if dtype is not None else what
                yield Case(name, tuple(cast), params, out)
                if dtype is not None and not dtype.is_float and out.dtype is not dtype:
                    continue  # ints or bool promoted to the result's dtype: the plain values suffice
                last = (name, cast)
                if dtype is not None and any(template[k].size for k in floats):
                    pool = _specials(dtype, tolerance)
                    mixed = [_mix(a, pool, rng, 0.3) if k in floats else a for k, a in enumerate(cast)]
                    yield Case(f"{name}, special values", tuple(mixed), params, out)
                    last = (f"{name}, special values", mixed)
                    signs = _cast(_SIGNED_ZEROS, dtype)  # ties between zeros: which one an order keeps
                    zeros = [_mix(a, signs, rng, 1.0) if k in floats else a for k, a in enumerate(cast)]
                    yield Case(f"{name}, signed zeros and ones", tuple(zeros), params, out)
                    if what == f"sample {i}":
                        only = [_mix(a, pool, rng, 1.0) if k in floats else a for k, a in enumerate(cast)]
                        yield Case(f"{name}, only special values", tuple(only), params, out)
                yield from _viewed(*last, params, out, layouts)  # the special values if any


def result_spec(op: Any, specs: list[Spec], params: dict) -> tuple[Spec, dict] | None:
    """The result spec and canonical params the op's rules give operands of these specs, or None if
    they refuse them (called directly: `Op.spec` would also look for the user's line of the error)."""
    try:
        if op.canonical_params is not None:
            params = op.canonical_params(*specs, **params)
        shape = op.shape_rule(*[s.shape for s in specs], **params)
        return Spec(shape, op.dtype_rule(*[s.dtype for s in specs], **params)), dict(params)
    except (ShapeError, DTypeError, TypeError, ValueError):
        return None


def _cast(a: np.ndarray, dtype: DType) -> np.ndarray:
    """Float sample values in `dtype` (bf16: the upper half of the f32 bits)."""
    if dtype is bf16:
        return np.asarray(a.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    if dtype.kind == "b":
        return np.asarray(a != 0)
    with np.errstate(all="ignore"):
        return a.astype(dtype.np)


def _specials(dtype: DType, tolerance: bool) -> np.ndarray:
    """Signed zeros, infinities, NaN, subnormals and other edges of `dtype`, in its storage."""
    if dtype.kind == "b":
        return np.array([False, True])
    if dtype.kind in "iu":
        info = np.iinfo(dtype.np)
        return np.array([0, 1, 2, info.min, info.max], dtype.np)
    fi = np.finfo(np.float32 if dtype is bf16 else dtype.np)
    values = [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1.0, -1.0, 0.5, -2.0, 3.0]
    values += [fi.tiny, -fi.tiny, fi.smallest_subnormal, -fi.smallest_subnormal, fi.tiny / 3, fi.eps]
    if not tolerance:
        values += [fi.max, -fi.max, 88.5, -104.0, 710.0, -746.0]
    with np.errstate(over="ignore"):
        return _cast(np.array(values, np.float64), dtype)


_SIGNED_ZEROS = np.array([0.0, -0.0, 1.0, -1.0])


def _mix(a: np.ndarray, pool: np.ndarray, rng: np.random.Generator, share: float) -> np.ndarray:
    """`a` with a `share` of its elements replaced by values from `pool` (at least one when share is 1)."""
    pick = rng.random(a.shape) < share
    out = a.copy()
    out[pick] = rng.choice(pool, int(pick.sum()))
    if share >= 1 and a.size >= pool.size:  # every special value at least once
        out.reshape(-1)[rng.permutation(a.size)[: pool.size]] = pool
    return out


def _resized(
    arrays: list[np.ndarray], rng: np.random.Generator
) -> Iterator[tuple[str, list[np.ndarray], bool]]:
    """The arrays with every dimension of one size set to 0, to 1, and grown (floats drawn again in the
    sample's range; int and bool arrays repeated), for each size of the sample; True when grown."""
    sizes = sorted({d for a in arrays for d in a.shape if d > 1})
    for s in sizes:
        for new in (0, 1, _grown(arrays, s)):
            if new is not None:
                yield f"size {s}->{new}", [_refill(a, s, new, rng) for a in arrays], new > 1


def _grown(arrays: list[np.ndarray], s: int) -> int | None:
    factor = -(-GROWN_SIZE // s)
    while factor > 1:
        sizes = [a.size * factor ** a.shape.count(s) for a in arrays]
        if max(sizes) <= GROWN_LIMIT:
            return s * factor
        factor //= 2
    return None


def _refill(a: np.ndarray, s: int, new: int, rng: np.random.Generator) -> np.ndarray:
    shape = tuple(new if d == s else d for d in a.shape)
    if shape == a.shape:
        return a
    if a.dtype.kind == "f":
        finite = a[np.isfinite(a)]
        low, high = (float(finite.min()), float(finite.max())) if finite.size else (-2.0, 2.0)
        return rng.uniform(low, high, shape).astype(a.dtype)
    return np.resize(a, shape) if a.size else np.zeros(shape, a.dtype)


LAYOUTS: dict[str, Callable[[np.ndarray], np.ndarray | None]] = {}


def _layout(name: str) -> Callable:
    def add(fn: Callable[[np.ndarray], np.ndarray | None]) -> Callable:
        LAYOUTS[name] = fn
        return fn

    return add


@_layout("transposed")
def _transposed(a: np.ndarray) -> np.ndarray | None:
    """The same values stored transposed (Fortran order)."""
    return np.ascontiguousarray(a.T).T if a.ndim >= 2 and a.size else None


@_layout("offset")
def _offset(a: np.ndarray) -> np.ndarray | None:
    """The same values, contiguous, from the second element of a larger buffer."""
    if a.size == 0:
        return None
    out = np.zeros(a.size + 1, a.dtype)[1:].reshape(a.shape)
    out[...] = a
    return out


@_layout("offset and strided")
def _offset_strided(a: np.ndarray) -> np.ndarray | None:
    """The same values at every other element of a larger buffer, from its second element on."""
    if a.ndim == 0 or a.size == 0:
        return None
    big = np.zeros((*a.shape[:-1], 2 * a.shape[-1] + 1), a.dtype)
    big[..., 1::2] = a
    return big[..., 1::2]


@_layout("reversed")
def _reversed(a: np.ndarray) -> np.ndarray | None:
    """The same values read with a negative stride."""
    return a[::-1].copy()[::-1] if a.ndim and a.size else None


@_layout("broadcast")
def _broadcast(a: np.ndarray) -> np.ndarray | None:
    """The first row repeated by a zero stride (read-only)."""
    return np.broadcast_to(a[:1], a.shape) if a.ndim and a.shape[0] > 1 else None


@_layout("unaligned")
def _unaligned(a: np.ndarray) -> np.ndarray | None:
    """The same values at an address that is not a multiple of the item size."""
    if a.itemsize == 1 or a.size == 0:
        return None
    out = np.frombuffer(bytearray(a.nbytes + 1), a.dtype, a.size, offset=1).reshape(a.shape)
    out[...] = a
    return out


GROWN_LAYOUTS = ("transposed", "offset and strided")  # grown sizes: split over threads as views


def _viewed(
    name: str, arrays: list[np.ndarray], params: dict, out: Spec, layouts: Sequence[str]
) -> Iterator[Case]:
    """The case with all its arrays in each of `layouts`, and (two arrays or more, every layout) with
    only the first."""
    for layout in layouts:
        views = [LAYOUTS[layout](a) for a in arrays]
        if all(v is None for v in views):
            continue
        yield Case(
            f"{name} {layout}", tuple(a if v is None else v for a, v in zip(arrays, views)), params, out
        )
        if len(arrays) > 1 and views[0] is not None and len(layouts) == len(LAYOUTS):
            yield Case(f"{name} {layout} (first input)", (views[0], *arrays[1:]), params, out)


# the command: `verigrad verify --backend NAME [--op NAME]` -------------------------------------------
def run_command(backend_name: str, op: str | None = None, console: Any = None) -> int:
    """Print what is native (with each kernel's stated exactness) and what falls back, run the suite,
    print its table; 0 when every kernel passed, 1 otherwise."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = console or Console()
    backend = lookup(backend_name)
    ops = None if op is None else [op]
    _known(ops or ())
    stated = claims(backend)
    console.print(f"[bold]verigrad verify[/]: backend {backend.name} ({escape(backend.description)})")
    native = {name: kernels for name, kernels in stated.items() if op is None or name == op}
    lines = [
        f"  {name}: " + ", ".join(f"{dtype} {_claim(claim)}{_in(mode)}" for dtype, claim, mode in kernels)
        for name, kernels in native.items()
    ]
    console.print(f"native ({len(native)} ops):", markup=False)
    console.print("\n".join(lines) or "  none", markup=False)
    fallback = [n for n in backend.report()["fallback"] if n in OPS and (op is None or n == op)]
    console.print(f"on the reference ({len(fallback)} ops): {', '.join(fallback) or 'none'}", markup=False)
    report = verify(backend, ops)
    if not report.results:
        console.print("no native kernel to verify")
        return 0
    table = Table("op", "dtype", "claimed", "cases", "worst", "result", title=f"kernels of {backend.name}")
    for r in report.results:
        style = {"pass": "green", "fail": "bold red"}.get(r.status, "yellow")
        claim = _claim(r.exactness)
        table.add_row(r.name, r.dtype, claim, str(r.cases), r.worst(), f"[{style}]{r.status}[/]")
    console.print(table)
    for r in report.results:
        if not r.passed:
            console.print(f"{r.status.upper()} {r.name} {r.dtype}: {r.message}", markup=False, soft_wrap=True)
    failed = [r for r in report.results if not r.passed]
    console.print(
        f"{len(report.results)} kernels, {sum(r.cases for r in report.results)} cases, threads "
        f"{', '.join(map(str, THREADS))} (min chunk {SMALL_CHUNK}): "
        + (f"{len(failed)} not verified" if failed else "all verified")
        + f" in {report.seconds:.1f} s",
        markup=False,
    )
    return 1 if failed else 0


def _in(mode: str) -> str:
    return f" ({mode})" if mode else ""


def _claim(exactness: Exactness) -> str:
    if exactness.is_exact or exactness.ulps:
        return str(exactness)
    return f"rtol {exactness.rtol:.2g} atol {exactness.atol:.2g}"


# checking a program's kernels as they run --------------------------------------------------------
class CheckedBackend(Backend):
    """Runs `inner`'s kernels, each call held to its reference on the same inputs at the stated
    exactness; what failed is in `failures`, the calls made per (op, dtype) in `calls`, the largest
    difference in ulps seen in `worst_ulps`. A kernel for a fused group (not an op of the registry) is
    held to its group's reference at the exactness it states as `kernel.exactness`; one that states
    none runs unchecked."""

    def __init__(self, inner: Backend, name: str | None = None) -> None:
        super().__init__(name or f"{inner.name}-checked", f"{inner.name}, every kernel call checked")
        self.inner = inner
        self.failures: list[str] = []
        self.calls: dict[tuple[str, str], int] = {}
        self.worst_ulps: dict[tuple[str, str], int] = {}

    def exactness(self, op: str, dtype: str) -> Exactness:
        return self.inner.exactness(op, dtype)

    def reruns(self) -> int:
        return self.inner.reruns()

    def report(self) -> dict[str, list[str]]:
        return self.inner.report()

    def native(self, op: Any, dtype: Any) -> Any:
        kernel = self.inner.native(op, dtype)
        fused = op.name == "fused" and hasattr(kernel, "exactness")  # a fused group's kernel: its claim
        if kernel is None or (op.name not in OPS and not fused):
            return kernel
        key = (op.name, dtype.name)
        exactness = kernel.exactness if fused else self.inner.exactness(*key)
        reference = op.reference if fused else reference_kernel(op)
        want = dtype.np

        def checked(*arrays: np.ndarray, **params: Any) -> Any:
            with np.errstate(all="ignore"):
                expected = np.asarray(reference(*arrays, **params)).astype(want, copy=False)
                reruns = self.inner.reruns()
                result = kernel(*arrays, **params)
            verdict = compare(np.asarray(result).astype(want, copy=False), expected, exactness)
            if not verdict.message and self.inner.reruns() > reruns and _cannot_overflow(arrays):
                verdict.message = HIDDEN
            self.calls[key] = self.calls.get(key, 0) + 1
            if verdict.message:
                inputs = ", ".join(f"{_dtype_name(a)}{list(a.shape)}" for a in arrays)
                self.failures.append(f"{op.name} {dtype.name} ({inputs}, {params}): {verdict.message}")
            if verdict.ulps:
                self.worst_ulps[key] = max(self.worst_ulps.get(key, 0), verdict.ulps)
            return result

        return checked

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
exp, sigmoid, tanh, silu and gelu_tanh kernels, and the VNNI, AVX-512, AVX2 and scalar paths of the
quantized ones, quant.QUANT), which must give the very same bits (NaN's included),
and the inputs must be unchanged. Where the reference raises (outside
the op's domain), the kernel must raise too. A kernel with modes a caller selects (`Backend.modes`: the
cpu backend's fast and exact GEMM paths) is verified in each, at the exactness it states there, and held
to the bits of the mode's own definition where it has one (the exact path's: the naive loop, double sums
in increasing k). A kernel that no case reaches (an op without samples, or
a kernel keyed by a dtype the op's result never has) is "untested", which fails the suite too.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...ops import REGISTRY
from .. import cpu as _cpu
from ..active import lookup
from ..kernel_table import EXACT, Backend, Exactness
from ..reference import composite_reference
from ..threads import THREAD_COUNT, set_threads
from .cases import Case, cases_for
from .compare import bits, compare, first_difference, inputs_at, one_line

THREADS = (1, 2, 3)
SMALL_CHUNK = 3  # elements per thread at least: odd, so chunk edges fall inside SIMD vectors
EVERY_DTYPE = "*"  # the dtype of a kernel registered for every dtype


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
    known_ops(ops or ())
    start = time.perf_counter()
    fallback = [name for name in backend.report()["fallback"] if name in REGISTRY]
    report = Report(backend.name, claims(backend), fallback)
    for op, dtype in native_kernels(backend):
        if ops is None or op in ops:
            for mode in backend.modes(op, dtype):
                report.results.append(verify_kernel(backend, op, dtype, threads, min_chunk, mode))
    report.seconds = time.perf_counter() - start
    return report


def known_ops(ops: Sequence[str]) -> None:
    for name in ops:
        if name not in REGISTRY:
            raise ValueError(f"unknown op {name!r}; `verigrad ops` lists them")


def verify_kernel(
    backend: Backend,
    op_name: str,
    dtype: str | None,
    threads: Sequence[int] = THREADS,
    min_chunk: int = SMALL_CHUNK,
    mode: str = "",
    extra: Sequence[Any] = (),
) -> KernelResult:
    """Run one kernel (registered for `dtype`, None: every dtype) on every case that reaches it, in
    `mode` (one of `backend.modes`): held to the op's reference at the exactness it states in that mode,
    and to the bits of the mode's own definition where it has one. `extra`: samples added to the op's
    own (a user's, for an op that has none)."""
    with backend.in_mode(mode):
        return _verify_in_mode(backend, op_name, dtype, threads, min_chunk, mode, extra)


def _verify_in_mode(
    backend: Backend,
    op_name: str,
    dtype: str | None,
    threads: Sequence[int],
    min_chunk: int,
    mode: str,
    extra: Sequence[Any] = (),
) -> KernelResult:
    registered = backend.registered()
    kernel, exactness = registered[(op_name, dtype)]
    definition = backend.modes(op_name, dtype).get(mode)
    result = KernelResult(op_name, dtype or EVERY_DTYPE, exactness, mode)
    if op_name not in REGISTRY:
        result.status, result.message = "untested", f"no op named {op_name!r} in the registry"
        return result
    op = REGISTRY[op_name]
    others = {d for o, d in registered if o == op_name and d is not None}
    reaches = (lambda d: d not in others) if dtype is None else (lambda d: d == dtype)
    extra = [*backend.samples(op_name, np.random.default_rng(0)), *extra]
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
                if bits(actual) != bits(first):
                    default = f" on the {paths[0]} path" if path else ""
                    where = first_difference(actual, first)
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
    before = [bits(a) for a in case.arrays]
    actual, error, hidden = _run_watched(backend, kernel, case)
    if any(bits(a) != b for a, b in zip(case.arrays, before)):
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
            result._fail(case, verdict.message + inputs_at(case, verdict.index))
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
            result._fail(case, message + inputs_at(case, verdict.index))
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
    return actual, error, backend.reruns() > before and cannot_overflow(case.arrays)


def cannot_overflow(arrays: Sequence[Any]) -> bool:
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

"""The "cpu" backend: kernels in C, built on first use and run on a thread pool.

The C sources of this package are compiled by the system C compiler the first time a kernel is looked up
(see `build`); with no compiler, or a failed build, one line says so and every op runs its reference.
Each kernel family has one Python module that wraps and registers its C functions (`KERNEL_FAMILIES`);
its docstring says which layouts take the C path and how exact the results are. Anything else (another
dtype, rank, axis or layout) runs the op's reference inside the kernel, so results are always right. The
C functions are called through the vg_call extension (fastcall.py), or ctypes where it is not built.

Threads: the count `verigrad.set_threads(n)` gave, else `VERIGRAD_THREADS`, else the usable CPUs (at most
8), read at every call, splits [0, n) into at most n contiguous chunks of at least `min_chunk()` elements
(`set_min_chunk`, else `VERIGRAD_MIN_CHUNK`, else 16384, also read at every call; reductions: chunks of
whole rows holding at least that many elements); every
thread count gives the same bits (whichever thread computes a chunk: a late pool worker's chunk is taken
by the others); a worker woken from sleep is moved off the caller's CPU first. `VERIGRAD_PIN_THREADS=1`
pins pool worker k to the k-th CPU the process may use (for a machine given to one process; see threadpool.c).
`chunks_run()` says how many chunks each thread ran, and inside `static_schedule()` chunk k is run by
pool thread k: together they show whether a kernel ran on as many threads as it should.
`timed_chunks()` counts each chunk's thread CPU time: how evenly kernels split, on a busy machine too.
An idle worker spins `worker_spin()` seconds (200 us) for the next dispatch, then sleeps.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import functools
import importlib
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from ... import _lazy
from .. import blas, memory
from ..active import add_backend
from ..kernel_table import EXACT, Backend, Exactness
from ..reference import reference as _reference  # registered first: the reference stays the default
from ._ffi import DTYPES, MIN_CHUNK, Library, bufsize, min_chunk, set_min_chunk

MAX_POOL_THREADS = 64  # threadpool.c's VG_MAX_THREADS

# Each module has `register(backend, library)`, imported when the library is loaded (its first kernel)
KERNEL_FAMILIES = (
    "elementwise",
    "activations",  # after elementwise: gelu_grad states what gelu_deriv's kernel states
    "reduce",
    "movement",
    "pooling",
    "matmul",
    "convolution",
    "rows",
    "quant",
    "attention",
    "attention_q8",
    "attention_ragged",
    "rope",
    "optim",
    "checks",
    "softmax_grad",
)

# the families' tables of kernels, and the families themselves, read on first use (_lazy.py)
__getattr__, __dir__ = _lazy.attach(
    __name__,
    _lazy.table(
        {
            "activations": "ACTIVATIONS",
            "attention": "ATTENTION",
            "attention_q8": "ATTENTION_Q8",
            "attention_ragged": "ATTENTION_RAGGED",
            "checks": "CHECKS",
            "convolution": "COLUMNS CONVOLUTION",
            "elementwise": "BINARY CANCELLING CAST INT64_BINARY LIBM_ULPS SCALED ULP_BOUNDS UNARY_EXACT "
            "UNARY_LIBM",
            "matmul": "MATMUL",
            "movement": "MOVEMENT",
            "pooling": "POOL",
            "quant": "QUANT",
            "reduce": "REDUCE",
            "rope": "ROPE",
            "rows": "ROWS",
        },
        modules=(
            *KERNEL_FAMILIES,
            "build",
            "cache",
            "fastcall",
            "fused",
            "fused_source",
            "numpy_loops",
            "window",
        ),
    ),
)

__all__ = [
    "ACTIVATIONS",
    "ATTENTION",
    "ATTENTION_Q8",
    "ATTENTION_RAGGED",
    "BINARY",
    "CANCELLING",
    "CAST",
    "CHECKS",
    "COLUMNS",
    "CONVOLUTION",
    "DTYPES",
    "INT64_BINARY",
    "LIBM_ULPS",
    "MATMUL",
    "MIN_CHUNK",
    "MOVEMENT",
    "POOL",
    "QUANT",
    "REDUCE",
    "ROPE",
    "ROWS",
    "SCALED",
    "ULP_BOUNDS",
    "UNARY_EXACT",
    "UNARY_LIBM",
    "ThreadTimes",
    "available",
    "build_info",
    "chunks_run",
    "cpu",
    "min_chunk",
    "pool_size",
    "quant_paths",
    "set_min_chunk",
    "static_schedule",
    "timed_chunks",
    "vector_path",
    "vector_paths",
    "vectorized",
    "worker_spin",
]


@functools.cache
def _family(name: str) -> Any:
    """The kernel family `name`'s module, imported on first use (a replay asks for matmul's at every run)."""
    return importlib.import_module(f".{name}", __name__)


class CpuBackend(Backend):
    """Registers its kernels the first time one is looked up (building the library if need be)."""

    # a compiled plan runs an op whose kernel here is exact as its NumPy ufunc (the same bits) where the
    # result and every operand have fewer elements than this: a C kernel then runs on one thread, and
    # its per-call cost (ctypes, broadcast set-up) is several times a ufunc's
    ufunc_below = 16384

    def __init__(self) -> None:
        super().__init__("cpu", "C kernels on a thread pool; the reference for the rest")
        self._loaded = False  # True once loaded (or failed): set last, so a thread that sees it sees all
        self._loading = threading.RLock()  # one thread builds and registers; the others wait for it
        self._in_load = False  # the loading thread asking again (its families' registration)
        self._info: dict[str, Any] = {}
        self.library: Library | None = None
        self._reruns: Any = None

    def register(
        self,
        op: str,
        kernel: Any,
        dtype: str | None = None,
        exactness: Exactness = EXACT,
        native: Exactness | None = None,
    ) -> None:
        """As `Backend.register`, `exactness` being the default build's claim: a native build (with
        contraction) states `native` where given (a kernel that computes otherwise there), else what
        `build.contracted` makes of `exactness`."""
        if self.contracting and native is not None:
            super().register(op, kernel, dtype, native)
            return
        from .build import contracted

        super().register(op, kernel, dtype, contracted(exactness, dtype, self.contracting))

    @property
    def contracting(self) -> bool:
        """Whether the loaded library was built with contraction (VERIGRAD_NATIVE=1)."""
        return bool(self._info.get("native", False))

    def load(self) -> bool:
        """Build or load the library and register the kernels; False (and one line) when it cannot. A
        thread that asks while another loads waits for it (it was told False, and ran the reference)."""
        if self._loaded:
            return self.library is not None
        with self._loading:
            if self._loaded or self._in_load:  # done meanwhile, or asked again while loading
                return self.library is not None
            self._in_load = True
            try:
                return self._load()
            finally:
                self._loaded, self._in_load = True, False

    def _load(self) -> bool:
        from . import build, fastcall  # the compiler's subprocess, hashes and sysconfig: at the first kernel

        try:
            cdll, info = build.build()
        except build.BuildError as e:
            self._info = {"available": False, "error": str(e)}
            print(f"verigrad: cpu backend unavailable, using the reference: {e}", file=sys.stderr)
            return False
        memory.retain_freed()  # each step reuses the pages the last one freed (backends/memory.py)
        self._info = {"native": info["native"]}  # what `register` states depends on it
        lib = Library(cdll)
        for family in KERNEL_FAMILIES:
            _family(family).register(self, lib)
        lib.fn("vg_pool_size", [], restype=ctypes.c_int)
        lib.fn("vg_pool_chunks", [ctypes.c_void_p, ctypes.c_int, ctypes.c_int], restype=ctypes.c_int)
        lib.fn("vg_pool_static", [ctypes.c_int], restype=ctypes.c_int)
        lib.fn("vg_pool_spin", [ctypes.c_int64], restype=ctypes.c_int64)
        lib.fn("vg_pool_timing", [ctypes.c_int], restype=ctypes.c_int)
        lib.fn("vg_pool_times", [ctypes.c_void_p, ctypes.c_int], restype=ctypes.c_int)
        self._reruns = lib.fn("vg_reruns", [], restype=ctypes.c_int64)
        self.library = lib
        self._info = {"available": True, **info, "calls": fastcall.status()}
        return True

    def native(self, op: Any, dtype: Any) -> Any:
        if not self._loaded:
            self.load()
        if op.is_fused:  # a fused group (ir/passes/fuse.py): its generated kernel, see fused.py
            from . import fused

            return fused.kernel(self, op.group)
        return super().native(op, dtype)

    def paths(self, op: str, dtype: str | None) -> tuple[str, ...]:
        """The f32 kernels of elementwise.VECTORIZED: each vector path the machine has; the quantized ops'
        (quant.QUANT): each of their paths the machine has (quant.PATHS' names, "vnni" the fastest)."""
        from . import elementwise, quant

        if dtype == "f32" and op in elementwise.VECTORIZED:
            return vector_paths()
        return quant_paths() if dtype == "f32" and op in quant.QUANT else ("",)

    @contextlib.contextmanager
    def on_path(self, path: str) -> Iterator[None]:
        """Both families of kernels with paths take `path` where it is one of theirs (the quantized
        kernels alone know "vnni"; each family reads only its own choice)."""
        if not path:
            yield
            return
        from . import elementwise, quant

        chosen = vector_path() if path in elementwise.VECTOR_PATHS else None
        chosen_quant = quant.path() if path in quant.PATHS else None
        if chosen is not None:
            vector_path(path)
        if chosen_quant is not None:
            quant.path(path)
        try:
            yield
        finally:
            if chosen is not None:
                vector_path(chosen)
            if chosen_quant is not None:
                quant.path(chosen_quant)

    def modes(self, op: str, dtype: str | None) -> dict[str, Any]:
        """matmul: the fast path and the exact one, where this machine has the fast path; the exact one
        gives the naive loop's bits (`matmul.reference_exact`) but in a native build, where its sums of
        products are contracted."""
        from . import matmul

        if op == "matmul" and matmul.fast_available():
            return {"fast": None, "exact": None if self._info.get("native") else matmul.reference_exact}
        return super().modes(op, dtype)

    @contextlib.contextmanager
    def in_mode(self, mode: str) -> Iterator[None]:
        if not mode:
            yield
            return
        from . import matmul

        with matmul.exact_mode(mode == "exact"):
            yield

    @contextlib.contextmanager
    def rows_apart(self) -> Iterator[None]:
        """f32 and f64 products on the exact path in this thread (`matmul.exact_held`): the fast one's
        OpenBLAS tiles, and so an element's bits, depend on the row count. The quantized products' kernels
        give every row the 1-row kernel's bits on either path."""
        from . import matmul

        with matmul.exact_held():
            yield

    def write_rows(self, stores: list[np.ndarray], news: list[np.ndarray], at: np.ndarray) -> None:
        """In one C call where the arrays' layouts allow (`movement.write_rows`; SmolLM2's 60 NumPy writes
        took 0.7-0.9 ms of the engine's 30 ms step of 8 rows), else as every backend does."""
        from . import movement

        if not (self.load() and movement.write_rows(stores, news, at)):
            super().write_rows(stores, news, at)

    def samples(self, op: str, rng: Any) -> list[Any]:
        """matmul: products that the fast path computes with its own kernels (matmul_avx512.c); the
        convolutions: operands that take the implicit path."""
        from . import convolution, matmul

        if op == "matmul":
            return matmul.verification_samples(rng)
        return convolution.verification_samples(op, rng)

    def reruns(self) -> int:
        """GEMM's fast path and the convolutions (matmul.c's vg_count_rerun)."""
        return int(self._reruns()) if self.library is not None else 0

    def optimizer_kernel(self, name: str, dtype: str) -> Any:
        if not self._loaded:
            self.load()
        return super().optimizer_kernel(name, dtype)

    def tape(self) -> Any:
        """A vg_call tape (fastcall.py), or None where there is none."""
        from . import fastcall

        return fastcall.tape() if self.load() else None

    @contextlib.contextmanager
    def recording(self, tape: Any) -> Iterator[None]:
        """vg_call's calls on this thread also go onto `tape` while inside."""
        from . import fastcall

        fastcall.record(tape)
        try:
            yield
        finally:
            fastcall.record(None)

    def settings(self) -> tuple:
        """Threads, the thread chunk, the GEMM mode and NumPy's buffer size (OpenBLAS reads its own
        thread count when called, replayed or not)."""
        return (self.threads, min_chunk(), _family("matmul").exact_default(), bufsize())

    def report(self) -> dict[str, list[str]]:
        self.load()
        return super().report()

    def kernels(self) -> list[tuple[str, str]]:
        """The (op, dtype) pairs with a C kernel."""
        return sorted((op, str(dtype)) for op, dtype in self.registered())


cpu = add_backend(CpuBackend())


def available() -> bool:
    """Whether the C library was built (or found) and loaded."""
    return cpu.load()


def build_info() -> dict[str, Any]:
    """Which build is loaded: compiler, version, flags, path, native, cached (or built now), build seconds,
    how kernels are called ("vg_call", or "ctypes (why)"); or {"available": False, "error": ...}; and the
    OpenBLAS the fast products call ("blas": its source, "numpy" or "scipy-openblas32", and its file; None
    without one)."""
    cpu.load()
    found = blas.source()
    return {**cpu._info, "blas": None if found is None else {"source": found[0], "path": found[1]}}


def vectorized() -> bool:
    """Whether the f32 kernels of elementwise.VECTORIZED take a vector path here."""
    from . import elementwise

    return cpu.load() and cpu.library is not None and elementwise.vectorized(cpu.library)


def vector_path(path: str | None = None) -> str:
    """The path of the f32 kernels of elementwise.VECTORIZED: "avx512", "avx2" or "scalar"
    (also without a library). `path` first chooses one (the fastest the machine has at most that
    one); each gives the same bits (in a native build, sigmoid's and silu's vector paths compute in f32
    and give the same bits as each other, not as the scalar one), so this is for timing and for
    verifying each path."""
    from . import elementwise

    elementwise.known_path(path)
    if not (cpu.load() and cpu.library is not None):
        return "scalar"
    return elementwise.vector_path(cpu.library, path)


def vector_paths() -> tuple[str, ...]:
    """The paths this machine can take, fastest first."""
    from . import elementwise

    chosen = vector_path()
    most = vector_path(elementwise.VECTOR_PATHS[-1])  # capped at the fastest the machine has
    vector_path(chosen)
    return elementwise.VECTOR_PATHS[: elementwise.VECTOR_PATHS.index(most) + 1][::-1]


def quant_paths() -> tuple[str, ...]:
    """The paths the quantized kernels can take on this machine (quant.PATHS' names), fastest first."""
    from . import quant

    if not (cpu.load() and cpu.library is not None):
        return ("",)
    chosen = quant.path()
    most = quant.path(quant.PATHS[-1])  # capped at the fastest the machine has
    quant.path(chosen)
    return quant.PATHS[: quant.PATHS.index(most) + 1][::-1]


def pool_size() -> int:
    """The number of pool threads started so far (0 before any multi-threaded call)."""
    return int(cpu.library.cdll.vg_pool_size()) if cpu.load() and cpu.library is not None else 0


def chunks_run(reset: bool = True) -> tuple[int, ...]:
    """The chunks each thread ran since the last reset (`reset`: from now on), a count per thread: the
    calling threads' first (a call run whole on one thread is one chunk), then pool worker 1's, 2's, ...
    up to the last started; () without a library."""
    if not (cpu.load() and cpu.library is not None):
        return ()
    counts = np.zeros(MAX_POOL_THREADS, np.int64)
    cpu.library.cdll.vg_pool_chunks(counts.ctypes.data, MAX_POOL_THREADS, int(reset))
    return tuple(int(c) for c in counts[: pool_size() + 1])


@dataclasses.dataclass(frozen=True)
class ThreadTimes:
    """Thread CPU seconds of the pool's chunks (`timed_chunks`): `whole`, of the `whole_calls` calls run whole
    on the caller; for the `splits` calls split between threads, `slowest`, the sum of each split's slowest
    thread's time (what the splits take on idle cores, the dispatch aside), and `total`, of all their
    threads' time. Another process's use of the CPUs adds none of it."""

    whole: float = 0.0
    slowest: float = 0.0
    total: float = 0.0
    splits: int = 0
    whole_calls: int = 0


@contextlib.contextmanager
def timed_chunks() -> Iterator[Callable[[], ThreadTimes]]:
    """Inside, every chunk's thread CPU time is counted; yields a function giving what was counted since
    its last call (or the block's start)."""
    if not (cpu.load() and cpu.library is not None):
        yield ThreadTimes
        return
    lib = cpu.library.cdll
    counts = np.zeros(5, np.int64)

    def read() -> ThreadTimes:
        lib.vg_pool_times(counts.ctypes.data, 1)
        return ThreadTimes(*(float(c) / 1e9 for c in counts[:3]), int(counts[3]), int(counts[4]))

    was = lib.vg_pool_timing(1)
    try:
        read()
        yield read
    finally:
        lib.vg_pool_timing(was)


@contextlib.contextmanager
def static_schedule() -> Iterator[None]:
    """Inside, chunk k of every split is run by pool thread k (chunk 0 by the caller), whatever the
    timing, so that `chunks_run` says which threads a kernel's split gives work to (for tests: the
    chunks, and so the bits, are the ones of the usual schedule, where an idle thread takes a late one's
    chunk)."""
    if not (cpu.load() and cpu.library is not None):
        yield
        return
    was = cpu.library.cdll.vg_pool_static(1)
    try:
        yield
    finally:
        cpu.library.cdll.vg_pool_static(was)


def worker_spin(seconds: float | None = None) -> float:
    """How long an idle pool worker spins for the next dispatch before it sleeps (wall seconds); with
    `seconds`, set from each worker's next wait. Returns the setting before (0.0 without a library)."""
    if not (cpu.load() and cpu.library is not None):
        return 0.0
    if seconds is not None and not seconds >= 0:
        raise ValueError(f"worker_spin: seconds must be >= 0, got {seconds!r}")
    ns = -1 if seconds is None else round(seconds * 1e9)
    return int(cpu.library.cdll.vg_pool_spin(ns)) / 1e9

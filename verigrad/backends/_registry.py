"""Backends: a kernel table keyed by (op, dtype), with the reference as the fallback for the rest.

A backend registers kernels with `Backend.register`; `kernel(op, dtype)` returns its own kernel or the
op's NumPy reference. `report()` says which ops are native and which fall back.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..registry import OPS
from .blas import set_blas_threads

Kernel = Callable[..., Any]


@dataclass(frozen=True)
class Exactness:
    """How close a kernel's results are to its op's reference: the same bits (`EXACT`), within `ulps`
    units in the last place, or within `rtol * |reference| + atol` (for kernels that sum in another
    order). NaN must meet NaN in every case."""

    ulps: int = 0
    rtol: float = 0.0
    atol: float = 0.0

    @property
    def is_exact(self) -> bool:
        return self.ulps == 0 and self.rtol == 0.0 and self.atol == 0.0

    def __str__(self) -> str:
        if self.is_exact:
            return "exact"
        if self.ulps:
            return f"ulp({self.ulps})"
        return f"rtol={self.rtol:g}, atol={self.atol:g}"


EXACT = Exactness()


def ulp(k: int) -> Exactness:
    """Within `k` units in the last place of the reference."""
    return Exactness(ulps=int(k))


def tolerance(rtol: float, atol: float = 0.0) -> Exactness:
    """Within `rtol * |reference| + atol`: for kernels that sum in another order than the reference."""
    return Exactness(rtol=float(rtol), atol=float(atol))


class Backend:
    """A named kernel table; every op it lacks runs its reference."""

    def __init__(self, name: str, description: str = "") -> None:
        self.name = name
        self.description = description
        self._kernels: dict[tuple[str, str | None], Kernel] = {}
        self._exactness: dict[tuple[str, str | None], Exactness] = {}
        self._optimizers: dict[tuple[str, str], Kernel] = {}
        self._chosen: dict[tuple[Any, Any], tuple[Kernel, bool]] = {}  # (op, dtype) -> (kernel, native)
        self._chosen_from = self._kernels  # the table those answers came from

    @property
    def threads(self) -> int:
        """The threads its kernels may use now: one setting for every backend (`set_threads`)."""
        return THREAD_COUNT.get()

    def register(
        self, op: str, kernel: Kernel, dtype: str | None = None, exactness: Exactness = EXACT
    ) -> None:
        """Add a kernel for `op` (for one dtype name, or every dtype when None), stating how close it is
        to the op's reference; the verification suite holds it to that."""
        self._kernels[(op, dtype)] = kernel
        self._exactness[(op, dtype)] = exactness
        self._chosen.clear()

    def register_optimizer(self, name: str, dtype: str, kernel: Kernel) -> None:
        """Add a whole-vector update for optimizer `name` ("adam") on `dtype`; see verigrad.optim."""
        self._optimizers[(name, dtype)] = kernel

    def optimizer_kernel(self, name: str, dtype: str) -> Kernel | None:
        """The update kernel registered for (optimizer, dtype), or None (the update then runs as ops)."""
        return self._optimizers.get((name, dtype))

    def load(self) -> bool:
        """Make the kernels available (a backend that builds them on first use does it here)."""
        return True

    def paths(self, op: str, dtype: str | None) -> tuple[str, ...]:
        """The code paths of the (op, dtype) kernel this machine can take, the default first; each must
        give the same bits (the verification runs each). One path, unnamed, unless a backend says more."""
        return ("",)

    @contextlib.contextmanager
    def on_path(self, path: str) -> Iterator[None]:
        """Kernels take `path` (one of `paths`) inside the block."""
        yield

    def modes(self, op: str, dtype: str | None) -> dict[str, Kernel | None]:
        """The modes a caller can select for the (op, dtype) kernel, the default first, each stating its
        own exactness while selected, and each with the function whose bits it gives (None: only its
        stated exactness holds); the verification runs each. One mode, unnamed, unless a backend says
        more."""
        return {"": None}

    @contextlib.contextmanager
    def in_mode(self, mode: str) -> Iterator[None]:
        """Kernels run in `mode` (one of `modes`) inside the block."""
        yield

    def samples(self, op: str, rng: np.random.Generator) -> list[Any]:
        """Inputs (the ops' `Sample`s) the verification adds to `op`'s own for this backend's kernel:
        sizes from which the kernel takes another code path. None unless a backend says more."""
        return []

    def reruns(self) -> int:
        """How many results of fast kernels held an infinity or a NaN and were computed again on a path
        that cannot overflow (an f32 partial sum may overflow where the reference's does not), so far.
        Where the inputs cannot overflow, each one hides a bug: the verification fails it."""
        return 0

    def tape(self) -> Any:
        """A recorder of this backend's kernel calls, for a plan's replay (ir/replay.py); None here."""
        return None

    @contextlib.contextmanager
    def recording(self, tape: Any) -> Iterator[None]:
        """While inside, this thread's kernel calls also go onto `tape` (one `tape()` gave)."""
        yield

    def settings(self) -> tuple:
        """What the kernels read at every call besides their arguments: a replay recorded under other
        settings is recorded again."""
        return (self.threads,)

    def registered(self) -> dict[tuple[str, str | None], tuple[Kernel, Exactness]]:
        """Every kernel it has: (op, dtype name, or None for every dtype) -> (kernel, stated exactness)."""
        self.load()
        return {key: (kernel, self._exactness[key]) for key, kernel in self._kernels.items()}

    def exactness(self, op: str, dtype: str) -> Exactness:
        """What `register` stated for the kernel that runs `op` on `dtype` (EXACT for the reference)."""
        return self._exactness.get((op, dtype)) or self._exactness.get((op, None)) or EXACT

    def native(self, op: Any, dtype: Any) -> Kernel | None:
        return self._kernels.get((op.name, dtype.name)) or self._kernels.get((op.name, None))

    def kernel(self, op: Any, dtype: Any) -> Kernel:
        """The kernel that runs `op` on `dtype` here: the native one, else the op's reference (remembered
        until a kernel is registered or the table replaced; a fused group's generated kernel is looked
        up every time)."""
        if self._chosen_from is not self._kernels:
            self._chosen.clear()
            self._chosen_from = self._kernels
        chosen = self._chosen.get((op, dtype))
        if chosen is not None and (chosen[1] or chosen[0] is op.reference):  # a reference may be replaced
            return chosen[0]
        native = self.native(op, dtype)
        kernel = native or op.reference or _composite_reference(op)
        if op.name != "fused":
            self._chosen[(op, dtype)] = (kernel, native is not None)
        return kernel

    def report(self) -> dict[str, list[str]]:
        names = sorted(OPS)
        native = [n for n in names if any(k[0] == n for k in self._kernels)]
        return {"native": native, "fallback": [n for n in names if n not in native]}

    def __repr__(self) -> str:
        return f"<backend {self.name}>"


def _composite_reference(op: Any) -> Kernel:
    raise LookupError(f"{op.name} is a composite op: run its decomposition")


_BACKENDS: dict[str, Backend] = {}
_ACTIVE: list[Backend] = []


def add_backend(backend: Backend) -> Backend:
    _BACKENDS[backend.name] = backend
    if not _ACTIVE:
        _ACTIVE.append(backend)
    return backend


def available() -> list[str]:
    return sorted(_BACKENDS)


def get_backend() -> Backend:
    """The backend eager ops run on now."""
    return _ACTIVE[-1]


def lookup(name: str) -> Backend:
    """The backend called `name`; ValueError naming the available ones otherwise."""
    if name not in _BACKENDS:
        raise ValueError(f"unknown backend {name!r}; available: {', '.join(available())}")
    return _BACKENDS[name]


def set_backend(name: str) -> Backend:
    """Make `name` the backend for everything that follows."""
    _ACTIVE[0] = lookup(name)
    return _ACTIVE[0]


@contextlib.contextmanager
def backend(name: str) -> Iterator[Backend]:
    """Run the enclosed code on backend `name`."""
    _ACTIVE.append(lookup(name))
    try:
        yield _ACTIVE[-1]
    finally:
        _ACTIVE.pop()


MAX_DEFAULT_THREADS = 8


def count(value: Any, what: str) -> int:
    """`value` as a whole number of at least 1 (an int, or a NumPy integer), or a clear error naming
    `what`."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{what} must be a whole number, got {type(value).__name__} {value!r}")
    if value < 1:
        raise ValueError(f"{what} must be at least 1, got {value}")
    return int(value)


def env_count(variable: str, least: int = 1) -> int | None:
    """The environment variable `variable` as a whole number of at least `least`, or None where it is
    unset or empty; any other text is refused by name."""
    text = os.environ.get(variable, "").strip()
    if not text:
        return None
    if not text.isdecimal() or int(text) < least:
        raise ValueError(f"{variable} must be a whole number of at least {least}, got {text!r}")
    return int(text)


# CPython's mapping behind os.environ (it changes with it): a read of it costs 1/30 of os.environ.get
_ENVIRON = getattr(os.environ, "_data", None)
_UNREAD = object()


class CountSetting:
    """A whole number read at every call of `get()`: the one `set` gave, else the environment variable's
    (looked up at every call, its text parsed again only when it changes), else `default()`.
    `applied(value)` is called whenever the value in force may have changed."""

    def __init__(
        self, variable: str, default: Callable[[], int], applied: Callable[[int], Any] = lambda n: None
    ) -> None:
        self.variable, self._default, self._applied = variable, default, applied
        self.explicit: int | None = None  # what `set` gave
        self._seen: tuple[Any, int] = (_UNREAD, 0)  # (the variable's text as last read, its value)
        encodekey = getattr(os.environ, "encodekey", None)
        if isinstance(_ENVIRON, dict) and encodekey is not None:
            text = functools.partial(_ENVIRON.get, encodekey(variable))
        else:
            text = functools.partial(os.environ.get, variable)

        def unset() -> int:
            """The value without `set`: the environment variable's, else the default."""
            seen = self._seen
            return seen[1] if text() is seen[0] else self._read(text())

        def get() -> int:
            """The value in force."""
            return self.explicit if self.explicit is not None else unset()

        self.get, self.unset = get, unset  # closures, not methods: kernels call `get` twice a call

    def _read(self, text: Any) -> int:
        value = env_count(self.variable)
        self._seen = (text, self._default() if value is None else value)
        if self.explicit is None:
            self._applied(self._seen[1])
        return self._seen[1]

    def set(self, n: int | None, what: str) -> None:
        """Use `n` from now on; None: the environment variable's again, else the default."""
        self.explicit = None if n is None else count(n, what)
        self._seen = (_UNREAD, 0)  # read the variable anew
        if self.explicit is None:
            self.unset()  # applies it
        else:
            self._applied(self.explicit)


def default_threads() -> int:
    """The thread count verigrad uses without `set_threads`: `VERIGRAD_THREADS` where it is set (read at
    every call), else the CPUs this process may run on, at most MAX_DEFAULT_THREADS."""
    return THREAD_COUNT.unset()


def _usable_cpus() -> int:
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, MAX_DEFAULT_THREADS))


THREAD_COUNT = CountSetting("VERIGRAD_THREADS", _usable_cpus, set_blas_threads)


def get_threads() -> int:
    """The number of threads the backends may use now (`set_threads`)."""
    return get_backend().threads


def set_threads(n: int | None) -> None:
    """The number of threads every backend may use, and NumPy's BLAS with them, from now on; None:
    `VERIGRAD_THREADS` again, else the usable CPUs (at most 8)."""
    THREAD_COUNT.set(n, "threads")

"""Whole-number settings read at every call (`CountSetting`), and the one every backend shares: the thread
count (`set_threads`, else `VERIGRAD_THREADS`, else the usable CPUs, at most 8), which NumPy's BLAS
follows. A variable set to what is not a count in range is ignored with a warning (`settings.env_count`):
the thread count changes no result, only the time it takes."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any

import numpy as np

from ..settings import env_count
from .blas import set_blas_threads

MAX_DEFAULT_THREADS = 8
MAX_THREADS = 1024  # more than any machine's cores; a C int, as OpenBLAS takes it
MAX_COUNT = 2**31 - 1  # a C int, as the kernels take a count


def count(value: Any, what: str, most: int = MAX_COUNT) -> int:
    """`value` as a whole number from 1 to `most` (an int, or a NumPy integer), or a clear error naming
    `what`."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{what} must be a whole number, got {type(value).__name__} {value!r}")
    if value < 1:
        raise ValueError(f"{what} must be at least 1, got {value}")
    if value > most:
        raise ValueError(f"{what} must be at most {most}, got {value}")
    return int(value)


# CPython's mapping behind os.environ (it changes with it): a read of it costs 1/30 of os.environ.get
_ENVIRON = getattr(os.environ, "_data", None)
_UNREAD = object()


class CountSetting:
    """A whole number read at every call of `get()`: the one `set` gave, else the environment variable's
    (looked up at every call, its text parsed again only when it changes), else `default()`.
    `applied(value)` is called whenever the value in force may have changed."""

    def __init__(
        self,
        variable: str,
        default: Callable[[], int],
        applied: Callable[[int], Any] = lambda n: None,
        most: int = MAX_COUNT,
    ) -> None:
        self.variable, self._default, self._applied, self.most = variable, default, applied, most
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
        default = self._default()
        value = env_count(self.variable, 1, self.most, f"{default} (the default)")
        self._seen = (text, default if value is None else value)
        if self.explicit is None:
            self._applied(self._seen[1])
        return self._seen[1]

    def set(self, n: int | None, what: str) -> None:
        """Use `n` from now on; None: the environment variable's again, else the default."""
        self.explicit = None if n is None else count(n, what, self.most)
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


THREAD_COUNT = CountSetting("VERIGRAD_THREADS", _usable_cpus, set_blas_threads, MAX_THREADS)


def set_threads(n: int | None) -> None:
    """The number of threads every backend may use, and NumPy's BLAS with them, from now on; None:
    `VERIGRAD_THREADS` again, else the usable CPUs (at most 8)."""
    THREAD_COUNT.set(n, "threads")

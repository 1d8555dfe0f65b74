"""The backends by name and the active one: `set_backend` for everything that follows, `backend(name)` for
a block.

`set_backend` sets the process's default, which every thread starts from; `backend(name)` is a block of
this thread's alone (as PyTorch keeps no global that one thread's block would change under another's):
each thread keeps the stack of its blocks (`LOCAL.stack`), and the active backend is its top, else the
default."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from .kernel_table import Backend

_BACKENDS: dict[str, Backend] = {}
_DEFAULT: list[Backend] = []  # the process's default: the bottom of every thread's stack


class _Blocks(threading.local):
    """This thread's `backend(name)` blocks, innermost last."""

    def __init__(self) -> None:
        self.stack: list[Backend] = []


LOCAL = _Blocks()


def add_backend(backend: Backend) -> Backend:
    _BACKENDS[backend.name] = backend
    if not _DEFAULT:
        _DEFAULT.append(backend)
    return backend


def available() -> list[str]:
    return sorted(_BACKENDS)


def get_backend() -> Backend:
    """The backend ops run on now in this thread."""
    stack = LOCAL.stack
    return stack[-1] if stack else _DEFAULT[0]


def lookup(name: str) -> Backend:
    """The backend called `name`; ValueError naming the available ones otherwise."""
    if name not in _BACKENDS:
        raise ValueError(f"unknown backend {name!r}; available: {', '.join(available())}")
    return _BACKENDS[name]


def set_backend(name: str) -> Backend:
    """Make `name` the process's default backend, for everything that follows in every thread (outside
    its `backend(name)` blocks)."""
    _DEFAULT[0] = lookup(name)
    return _DEFAULT[0]


@contextlib.contextmanager
def backend(name: str) -> Iterator[Backend]:
    """Run the enclosed code on backend `name` (this thread's: other threads keep theirs)."""
    stack = LOCAL.stack
    stack.append(lookup(name))
    try:
        yield stack[-1]
    finally:
        stack.pop()


def get_threads() -> int:
    """The number of threads the backends may use now (`set_threads`)."""
    return get_backend().threads

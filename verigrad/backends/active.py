"""The backends by name and the active one: `set_backend` for everything that follows, `backend(name)` for
a block."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from .kernel_table import Backend

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


def get_threads() -> int:
    """The number of threads the backends may use now (`set_threads`)."""
    return get_backend().threads

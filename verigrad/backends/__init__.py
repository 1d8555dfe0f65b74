"""Backends and the active-backend switch."""

from . import cpu  # the "cpu" backend (registered after the reference, which stays the default)
from ._registry import Backend, available, backend, get_backend, set_backend, set_threads
from .blas import blas_threads, set_blas_threads
from .reference import reference

set_threads(1)

__all__ = [
    "Backend",
    "available",
    "backend",
    "get_backend",
    "reference",
    "set_backend",
    "set_threads",
]

"""Backends and the active-backend switch.

"cpu" (C kernels, built at first use) is the default; with no C compiler it says so once and every op
runs its NumPy reference. `set_backend("reference")` runs the references themselves.
"""

from . import cpu  # the "cpu" backend (registered after the reference)
from .active import available, backend, get_backend, get_threads, set_backend
from .blas import blas_threads, set_blas_threads
from .kernel_table import Backend
from .reference import reference
from .threads import THREAD_COUNT, default_threads, set_threads

THREAD_COUNT.get()  # VERIGRAD_THREADS checked, and NumPy's BLAS given that many threads
set_backend("cpu")

__all__ = [
    "Backend",
    "available",
    "backend",
    "default_threads",
    "get_backend",
    "get_threads",
    "reference",
    "set_backend",
    "set_threads",
]

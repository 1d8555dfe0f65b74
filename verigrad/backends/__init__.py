"""Backends and the active-backend switch.

"cpu" (C kernels, built at first use) is the default; with no C compiler it says so once and every op
runs its NumPy reference. `set_backend("reference")` runs the references themselves.
"""

from types import SimpleNamespace

from . import cpu, mha  # cpu: the "cpu" backend (registered after the reference)
from .active import available, backend, get_backend, get_threads, set_backend
from .blas import blas_threads, set_blas_threads
from .kernel_table import Backend
from .reference import reference
from .threads import THREAD_COUNT, default_threads, set_threads

# PyTorch's torch.backends flags, settable as there: verigrad has no cuDNN, CUDA or MPS to change
cudnn = SimpleNamespace(
    enabled=True, benchmark=False, deterministic=False, allow_tf32=True, is_available=lambda: False
)
cuda = SimpleNamespace(
    matmul=SimpleNamespace(allow_tf32=False, allow_fp16_reduced_precision_reduction=True),
    is_built=lambda: False,
)
mps = SimpleNamespace(is_available=lambda: False, is_built=lambda: False)

THREAD_COUNT.get()  # VERIGRAD_THREADS checked, and NumPy's BLAS given that many threads
set_backend("cpu")

__all__ = [
    "Backend",
    "available",
    "backend",
    "cuda",
    "cudnn",
    "default_threads",
    "get_backend",
    "get_threads",
    "mha",
    "mps",
    "reference",
    "set_backend",
    "set_threads",
]

"""The backend verification suite (`verigrad verify`): every native kernel of a backend against its op's
reference at the exactness the backend states for it (suite.py, on the cases of cases.py, compared as
compare.py says); `CheckedBackend` (checked.py) holds each call of a running program to the same
comparison; sweep.py runs a one-operand f32 kernel on every f32 input."""

from .cases import LAYOUTS, Case, cases_for, result_spec
from .checked import CheckedBackend
from .compare import Verdict, compare, one_line
from .suite import (
    HIDDEN,
    SMALL_CHUNK,
    THREADS,
    KernelResult,
    Report,
    claims,
    native_kernels,
    reference_kernel,
    verify,
    verify_kernel,
)

__all__ = [
    "HIDDEN",
    "LAYOUTS",
    "SMALL_CHUNK",
    "THREADS",
    "Case",
    "CheckedBackend",
    "KernelResult",
    "Report",
    "Verdict",
    "cases_for",
    "claims",
    "compare",
    "native_kernels",
    "one_line",
    "reference_kernel",
    "result_spec",
    "verify",
    "verify_kernel",
]

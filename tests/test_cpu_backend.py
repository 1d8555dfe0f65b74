"""The "cpu" backend as a whole: the default backend, the kernels it registers, kernels marked never_warns
that let NumPy warn on none of the verification cases, and which kernel runs an op as registrations and
references change. Each kernel family has its own test file (test_cpu_<family>.py)."""

from __future__ import annotations

import ctypes
import itertools
import subprocess
import sys
import warnings

import numpy as np
import pytest
from test_cpu_elementwise import _bound

import verigrad
from verigrad.backends import cpu
from verigrad.backends.cpu import elementwise
from verigrad.backends.kernel_table import EXACT
from verigrad.ops import REGISTRY

HAS_CC = cpu.available()
needs_cc = pytest.mark.skipif(not HAS_CC, reason="the cpu backend could not be built here")
ALL_KERNELS = cpu.cpu.kernels() if HAS_CC else []
ELEMENTWISE = cpu.UNARY_EXACT + cpu.UNARY_LIBM + cpu.BINARY
KERNELS = [(op, d) for op, d in ALL_KERNELS if op in ELEMENTWISE and d in cpu.DTYPES]  # the float ones


def test_cpu_is_the_default_backend():
    assert verigrad.backends.available() == ["cpu", "reference"]
    code = "import verigrad; print(verigrad.get_backend().name)"  # a fresh process: no test fixture
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "cpu"


@needs_cc
def test_the_kernels_registered():
    ops = {op for op, _ in ALL_KERNELS}
    lib = cpu.cpu.library
    args = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int]

    def agrees(op: str) -> bool:  # the C library's routines give NumPy's f64 bits (they differ where
        return elementwise.same_as_reference(lib.fn(f"vg_{op}_f64", args), op, 1, lib)  # NumPy has its own)

    libm = list(cpu.UNARY_LIBM)
    families = cpu.BINARY + cpu.REDUCE + cpu.ROWS + cpu.MOVEMENT + cpu.COLUMNS + cpu.POOL + cpu.MATMUL
    families += cpu.QUANT + cpu.ATTENTION + cpu.CONVOLUTION + cpu.ROPE + cpu.CAST + cpu.SCALED + cpu.CHECKS
    families += cpu.ATTENTION_Q8 + cpu.ATTENTION_RAGGED + cpu.softmax_grad.SOFTMAX_GRAD + cpu.ACTIVATIONS
    assert ops == set(cpu.UNARY_EXACT + tuple(libm) + families)
    assert {d for op, d in ALL_KERNELS if op not in (*cpu.MOVEMENT, "argmax")} == {"f32", "f64", "i64"}
    assert [(op, d) for op, d in ALL_KERNELS if op == "argmax"] == [("argmax", "i64")]  # its result's dtype
    assert {op for op, d in ALL_KERNELS if d == "i64"} == {"argmax", "check_index", *cpu.INT64_BINARY}
    movement = sorted((op, d) for op, d in ALL_KERNELS if op in cpu.MOVEMENT)
    assert movement == [
        ("broadcast_to", "None"),
        ("contiguous", "None"),
        ("take_grad", "f32"),
        ("take_grad", "f64"),
        ("unslice", "None"),
    ]
    for op, dtype in KERNELS:  # exact, or the bound for routines unlike NumPy's
        assert _bound(op, dtype) in (0, cpu.LIBM_ULPS[dtype]), (op, dtype)
        assert _bound(op, dtype) == cpu.ULP_BOUNDS.get((op, dtype), 0)
    for op in cpu.CANCELLING:  # a result that cancels: exact where the C library is NumPy's, else a tolerance
        for dtype in ("f32", "f64"):
            numpy = elementwise.NUMPY_ROUTINES[0]
            expected = EXACT if agrees(op) or numpy else elementwise.cancelling_tolerance(op, dtype)
            assert cpu.cpu.exactness(op, dtype) == expected, (op, dtype)
    for op, dtype in itertools.product(cpu.UNARY_LIBM, ("f32", "f64")):  # NumPy's routines: exact
        assert cpu.cpu.exactness(op, dtype).is_exact or not elementwise.NUMPY_ROUTINES[0], (op, dtype)


NEVER_WARN = [
    ("cpu", op)
    for op in sorted(
        {o for (o, _), (k, _) in cpu.cpu.registered().items() if getattr(k, "never_warns", False)}
    )
    if HAS_CC
] + [("reference", name) for name, op in REGISTRY.items() if getattr(op.reference, "never_warns", False)]


@pytest.mark.parametrize(("backend", "name"), NEVER_WARN)
def test_a_kernel_marked_never_warns_lets_numpy_warn_on_none_of_the_verification_cases(backend, name) -> None:
    """Eager calls skip NumPy's error state for kernels marked never_warns (the cpu backend's elementwise,
    reduction, matmul, copy and row kernels; the references that only move data): on every case of the
    verification suite (special values, views that take the reference's path) none may warn."""
    from verigrad.backends import verification
    from verigrad.backends.active import lookup
    from verigrad.backends.reference import composite_reference
    from verigrad.dtypes import as_dtype

    assert {n for b, n in NEVER_WARN if b == "reference"} >= {"reshape", "permute", "slice"}
    if HAS_CC:
        assert {n for b, n in NEVER_WARN if b == "cpu"} >= {"add", "exp", "sum", "matmul", "softmax"}
    op, kernels = REGISTRY[name], lookup(backend)
    cases = list(
        verification.cases_for(
            op, lambda d: backend == "reference" or kernels.native(op, as_dtype(d)) is not None
        )
    )
    assert cases
    reference = op.reference or composite_reference(op)
    for case in cases:
        try:
            with np.errstate(all="ignore"):
                reference(*case.arrays, **case.params)
        except (ValueError, IndexError):
            # an argmax over nothing, a class target out of range (a case with fewer classes than the
            # sample's): the kernel raises as the reference does
            continue
        kernel = kernels.kernel(op, case.out.dtype)
        assert getattr(kernel, "never_warns", False)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            kernel(*case.arrays, **case.params)


def test_the_kernel_an_op_runs_follows_registrations_and_replaced_references(monkeypatch) -> None:
    """Backends remember which kernel runs an op on a dtype; registering a kernel, replacing the table
    or the op's reference is seen by the next call."""
    from verigrad.backends.active import lookup

    backend, x = lookup("reference"), verigrad.tensor(np.array([1.0, -2.0], np.float32))
    with verigrad.backend("reference"):
        assert (-x).numpy().tolist() == [-1.0, 2.0]
        monkeypatch.setattr(backend, "_kernels", dict(backend._kernels))  # restored after the test
        backend.register("neg", lambda a: np.full_like(a, 7.0), "f32")
        assert (-x).numpy().tolist() == [7.0, 7.0]
        monkeypatch.setattr(REGISTRY["abs"], "reference", lambda a: np.full_like(a, 5.0))
        assert x.abs().numpy().tolist() == [5.0, 5.0]

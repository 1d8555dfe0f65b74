"""PyTorch's `torch.testing`: `assert_close` (with its default tolerances per dtype and its checks of
shape, dtype and device) and `make_tensor`, so test suites written against torch's API run as written;
and `check_op`, the registry's suites on any op (a built-in or a user's)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .backends.verification.op_suite import OpSuiteFailure as OpSuiteFailure
from .backends.verification.op_suite import run_all
from .dtypes import as_dtype
from .library import CustomOpDef
from .ops import Op, Sample, tensor
from .ops.creation import default_generator
from .tensor import Tensor

# PyTorch's default (rtol, atol) by dtype; integers and bools compare exactly
_TOLERANCES = {"f16": (1e-3, 1e-5), "bf16": (1.6e-2, 1e-5), "f32": (1.3e-6, 1e-5), "f64": (1e-7, 1e-7)}


def _leaves(value: Any, path: str) -> list[tuple[str, Any]]:
    if isinstance(value, Mapping):
        return [leaf for key in value for leaf in _leaves(value[key], f"{path}[{key!r}]")]
    if isinstance(value, Sequence) and not isinstance(value, str | bytes) and not _is_tensor(value):
        return [leaf for i, item in enumerate(value) for leaf in _leaves(item, f"{path}[{i}]")]
    return [(path, value)]


def _is_tensor(value: Any) -> bool:
    return isinstance(value, Tensor) or (type(value).__name__ == "Tensor" and hasattr(value, "numpy"))


def _array(value: Any) -> tuple[np.ndarray, str | None]:
    """The values as an array, and the tensor's dtype name (None for a Python number)."""
    if isinstance(value, Tensor):
        return np.asarray(value.detach().numpy()), value.dtype.name
    if isinstance(value, bool | int | float | complex | np.generic):
        return np.asarray(value), None
    raise TypeError(f"assert_close compares tensors and numbers, not {type(value).__name__}")


def assert_close(
    actual: Any,
    expected: Any,
    *,
    allow_subclasses: bool = True,
    rtol: float | None = None,
    atol: float | None = None,
    equal_nan: bool = False,
    check_device: bool = True,
    check_dtype: bool = True,
    check_layout: bool = True,
    check_stride: bool = False,
    msg: str | None = None,
) -> None:
    """Raise AssertionError unless `actual` and `expected` (tensors, numbers, or sequences and mappings
    of them) are close: |actual - expected| <= atol + rtol * |expected| elementwise, with PyTorch's
    default tolerances for the dtype when none are given, the same shapes, and (with `check_dtype`) the
    same dtypes."""
    if (rtol is None) != (atol is None):
        raise ValueError("Both 'rtol' and 'atol' must be either specified or omitted, not only one of them")
    got, want = _leaves(actual, ""), _leaves(expected, "")
    if len(got) != len(want) or [p for p, _ in got] != [p for p, _ in want]:
        raise AssertionError(msg or f"The structures differ: {len(got)} values against {len(want)}")
    for (path, a), (_, e) in zip(got, want):
        _assert_one(a, e, path, rtol, atol, equal_nan, check_dtype, msg)


def _assert_one(
    actual: Any, expected: Any, path: str, rtol: float | None, atol: float | None, equal_nan: bool,
    check_dtype: bool, msg: str | None,
) -> None:  # fmt: skip
    """One pair of leaves (see `assert_close`)."""
    where = f" at {path}" if path else ""
    kinds = f"{type(actual).__name__} and {type(expected).__name__}"
    if isinstance(actual, Tensor) != isinstance(expected, Tensor):
        raise TypeError(f"No comparison pair was able to handle inputs of type {kinds}{where}")
    a, a_dtype = _array(actual)
    e, e_dtype = _array(expected)
    if a.shape != e.shape:
        raise AssertionError(
            msg or f"The values for attribute 'shape' do not match{where}: {a.shape} != {e.shape}."
        )
    if check_dtype and a_dtype != e_dtype:
        raise AssertionError(
            msg or f"The values for attribute 'dtype' do not match{where}: {a_dtype} != {e_dtype}."
        )
    if check_dtype and a_dtype is None and type(actual) is not type(expected):
        raise AssertionError(msg or f"Type mismatch{where}: {kinds}")
    if rtol is None:
        names = [n for n in (a_dtype, e_dtype) if n is not None] or [
            "f64" if isinstance(actual, float) else "i64"
        ]
        rtol, atol = max((_TOLERANCES.get(n, (0.0, 0.0)) for n in names), key=lambda t: t[0])
    a64 = a.astype(np.complex128 if np.iscomplexobj(a) or np.iscomplexobj(e) else np.float64)
    e64 = e.astype(a64.dtype)
    both_nan = np.isnan(a64) & np.isnan(e64)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(a64 - e64)
        close = (a64 == e64) | (np.isfinite(a64) & np.isfinite(e64) & (diff <= atol + rtol * np.abs(e64)))
    if equal_nan:
        close |= both_nan
    if close.all():
        return
    bad = int((~close).sum())
    flat = np.argmax((~close).reshape(-1))
    index = np.unravel_index(flat, a.shape) if a.ndim else ()
    finite = np.where(np.isfinite(diff), diff, 0.0)
    greatest = float(finite.max()) if finite.size else math.nan
    raise AssertionError(
        msg
        or f"Tensor-likes are not close!{where}\n\nMismatched elements: {bad} / {a.size} "
        f"({100.0 * bad / max(a.size, 1):.1f}%)\nGreatest absolute difference: {greatest} at index "
        f"{tuple(int(i) for i in index)} (up to {atol} allowed)\n(rtol={rtol}, atol={atol})"
    )


def assert_allclose(actual: Any, expected: Any, rtol: float | None = None, atol: float | None = None,
                    equal_nan: bool = True, msg: str = "") -> None:  # fmt: skip
    """The deprecated `torch.testing.assert_allclose`: `assert_close` without the dtype check."""
    assert_close(
        actual, expected, rtol=rtol, atol=atol, equal_nan=equal_nan, check_dtype=False, msg=msg or None
    )


def make_tensor(
    *shape: Any,
    dtype: Any,
    device: Any = None,
    low: float | None = None,
    high: float | None = None,
    requires_grad: bool = False,
    noncontiguous: bool = False,
    exclude_zero: bool = False,
    memory_format: Any = None,
) -> Tensor:
    """A tensor of `shape` with uniform values in [low, high) (PyTorch's defaults: -9..9 for floats,
    -9..10 for integers, 0..10 for u8, False/True for bool), from verigrad's generator."""
    if len(shape) == 1 and isinstance(shape[0], Sequence):
        shape = tuple(shape[0])
    dt = as_dtype(dtype)
    rng = np.random.default_rng(default_generator.next_seed())
    if dt.name == "bool":
        values = rng.integers(0, 2, shape).astype(bool)
    elif dt.is_float:
        lo, hi = (-9.0 if low is None else low), (9.0 if high is None else high)
        values = rng.uniform(lo, hi, shape)
    else:
        lo = (0 if dt.name == "u8" else -9) if low is None else math.ceil(low)
        hi = 10 if high is None else math.ceil(high)
        values = rng.integers(lo, hi, shape)
    if exclude_zero:
        values = np.where(values == 0, 1 if not dt.is_float else np.finfo(np.float32).tiny, values)
    out = tensor(values, dtype=dt)
    return out.requires_grad_(True) if requires_grad else out


def check_op(op: Op | CustomOpDef, *, samples: Sequence[Sample] | None = None) -> dict[str, int]:
    """The registry's suites on `op` (an `Op`, a `custom_op`, or a user kernel) on `samples` (default:
    the op's own): its eager result against its reference in f32 and f64, its VJP against f64 finite
    differences, its spec rules over symbolic sizes against the reference's shapes, and every kernel
    the cpu backend has for it against the reference at its stated exactness with the same bits on
    1-3 threads. Returns how many checks each suite ran; raises `OpSuiteFailure` (an AssertionError)
    naming the op, the sample and what differed."""
    record = getattr(op, "op", op)  # a CustomOpDef or a user kernel holds its Op
    if not isinstance(record, Op):
        raise TypeError(f"check_op takes an op (verigrad.exp, a custom_op, ...), got {type(op).__name__}")
    return run_all(record, samples)

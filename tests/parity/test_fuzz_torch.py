"""A differential fuzzer against PyTorch: every case of `fuzz_torch_cases` on seeded random operands (each
dtype it takes, 0-d, empty and broadcast shapes, -0.0, inf, NaN and ties), run by both libraries; whether
each raised, and otherwise the results' dtypes, shapes, values and (for exact cases) signs of zero must be
the same. A silent difference is a failure; KNOWN lists those verigrad documents."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
import torch
from fuzz_torch_cases import BROADCAST, CASES, SHAPES, Case, draw
from fuzz_torch_more_cases import MORE_CASES

import verigrad

DRAWS = 4  # operand draws per case and dtype
EVERY_CASE = CASES + MORE_CASES
TORCH_DTYPES = {torch.float32: "f32", torch.float64: "f64", torch.int64: "i64", torch.bool: "bool",
                torch.int32: "i32", torch.float16: "f16", torch.bfloat16: "bf16", torch.uint8: "u8",
                torch.int8: "i8", torch.int16: "i16"}  # fmt: skip
TOLERANCE = {"f32": 2e-5, "f64": 1e-10}
# (the start of a case's name, words of the difference): why verigrad deliberately differs there
KNOWN: dict[tuple[str, str], str] = {
    ("cross_entropy_", "empty batch"): "the mean over no sample raises (PyTorch's NaN)",
    ("median", "empty dimension"): "raises where PyTorch's integer median of nothing is INT64_MIN",
    ("nanmedian", "empty dimension"): "raises where PyTorch's integer median of nothing is INT64_MIN",
    ("mode", "holding NaN"): "refused: PyTorch's answer there follows its sort's internals",
    ("F.gelu", "inf], torch [nan"): "gelu(inf) is inf; PyTorch's f32 kernel gives NaN (its f64 one inf)",
    (
        "F.pad_reflect",
        "torch raised",
    ): "reflect-padding an empty batch of rows: PyTorch refuses, verigrad pads",
    ("nanmedian", "bool tensor"): "refuses bool, as PyTorch does for a non-empty one",
    ("softmax_int", "cast it to a float dtype"): "refuses integers, as PyTorch does for a non-empty one",
    ("std_mean", "result 1"): "the mean of a row holding inf is its mean; PyTorch's Welford pass gives NaN",
    ("var_mean", "result 1"): "the mean of a row holding inf is its mean; PyTorch's Welford pass gives NaN",
    ("out_", "of its own dtype only"): "out= of another dtype than the result's is refused (PyTorch casts or "
    "computes in out's dtype, function by function)",
}


def _operands(case: Case, rng: np.random.Generator, dtype: str) -> list[np.ndarray]:
    if case.kind == "binary":  # a dtype "a+b" gives the two operands dtypes of their own
        a, b = BROADCAST[rng.integers(len(BROADCAST))]
        first, _, second = dtype.partition("+")
        return [draw(rng, a, first), draw(rng, b, second or first)]
    family = SHAPES[case.shapes]
    return [draw(rng, family[rng.integers(len(family))], dtype)]


def _flat(result: Any) -> list[Any]:
    """The result as a list of leaves: ('t', dtype name, array) for a tensor, ('v', value) otherwise."""
    if isinstance(result, torch.Tensor):
        return [("t", TORCH_DTYPES.get(result.dtype, str(result.dtype)), result.detach().numpy())]
    if isinstance(result, verigrad.Tensor):
        return [("t", result.dtype.name, result.detach().numpy())]
    if isinstance(result, tuple | list) and not isinstance(result, torch.Size | verigrad.Size):
        return [leaf for item in result for leaf in _flat(item)]
    if isinstance(result, torch.Size | verigrad.Size):
        return [("v", tuple(result))]
    return [("v", result)]


def _run(case: Case, lib: Any, arrays: list[np.ndarray]) -> tuple[str, Any]:
    tensors = [lib.from_numpy(a.copy()) for a in arrays]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return "ok", _flat(case.call(lib, *tensors))
    except Exception as e:
        return "raised", f"{type(e).__name__}: {e}"[:200]


def _magnitude(arrays: list[np.ndarray]) -> float:
    """The sum of the operands' finite magnitudes: the scale of a float a sum of them may lose to rounding."""
    floats = [a[np.isfinite(a)].astype(np.float64) for a in arrays if a.dtype.kind == "f"]
    return float(sum(np.abs(a).sum() for a in floats))


def _close_number(case: Case, ours: Any, theirs: Any, magnitude: float) -> bool:
    """Python numbers: the same, or (floats) within 1e-5 relative, and for an inexact case within 1e-5 of
    the operands' magnitude (a sum that cancels: its rounding error is relative to what it added)."""
    if ours == theirs:
        return True
    if not isinstance(ours, float):
        return False
    floor = 0.0 if case.exact else 1e-5 * magnitude
    return bool(np.isclose(ours, theirs, rtol=1e-5, atol=floor, equal_nan=True))


def _difference(
    case: Case, ours: tuple[str, Any], theirs: tuple[str, Any], magnitude: float = 0.0
) -> str | None:
    """What differs between verigrad's outcome and PyTorch's, or None (`magnitude`: see _close_number)."""
    if ours[0] != theirs[0]:
        return f"verigrad {ours[0]} ({ours[1] if ours[0] == 'raised' else ''}), torch {theirs[0]} ({theirs[1] if theirs[0] == 'raised' else ''})"  # noqa: E501
    if ours[0] == "raised":
        return None
    if len(ours[1]) != len(theirs[1]):
        return f"{len(ours[1])} results, torch {len(theirs[1])}"
    for i, (a, b) in enumerate(zip(ours[1], theirs[1])):
        if a[0] != b[0]:
            return f"result {i}: {a!r} vs torch {b!r}"
        if a[0] == "v":
            if not _close_number(case, a[1], b[1], magnitude):
                return f"result {i}: {a[1]!r}, torch {b[1]!r}"
            continue
        (_, dt_a, x), (_, dt_b, y) = a, b
        if dt_a != dt_b:
            return f"result {i}: dtype {dt_a}, torch {dt_b}"
        if x.shape != y.shape:
            return f"result {i}: shape {x.shape}, torch {y.shape}"
        if x.dtype.kind == "f" and not case.exact:
            tol = TOLERANCE.get(dt_a, 1e-3)
            close = np.isclose(x, y, rtol=tol, atol=tol, equal_nan=True)
            if not close.all():
                return f"result {i}: {x[~close][:4]}, torch {y[~close][:4]}"
        elif not np.array_equal(x, y, equal_nan=x.dtype.kind == "f"):
            wrong = x != y
            if x.dtype.kind == "f":
                wrong &= ~(np.isnan(x) & np.isnan(y))
            return f"result {i}: {x[wrong][:4]}, torch {y[wrong][:4]}"
        zeros = (x == 0) & (y == 0) if x.dtype.kind == "f" and case.zero_signs else False
        if np.any(np.signbit(x)[zeros] != np.signbit(y)[zeros]):
            return f"result {i}: signs of zero differ ({x.ravel()[:6]} vs torch {y.ravel()[:6]})"
    return None


def differences(cases: list[Case], seed: int = 0) -> list[str]:
    """Every difference the corpus finds: 'case[dtype]: operands: what'."""
    found = []
    for number, case in enumerate(cases):
        for dtype in case.dtypes:
            rng = np.random.default_rng([seed, number, len(dtype), ord(dtype[-1])])
            for _ in range(DRAWS):
                arrays = _operands(case, rng, dtype)
                ours, theirs = _run(case, verigrad, arrays), _run(case, torch, arrays)
                what = _difference(case, ours, theirs, _magnitude(arrays))
                if what is not None and not any(case.name.startswith(n) and w in what for n, w in KNOWN):
                    shapes = [a.shape for a in arrays]
                    found.append(f"{case.name}[{dtype}] {shapes} {[a.ravel()[:6] for a in arrays]}: {what}")
                    break
    return found


def test_corpus_is_large():
    calls = sum(len(c.dtypes) for c in EVERY_CASE) * DRAWS
    assert len(EVERY_CASE) >= 300 and calls >= 2000 and len({c.name for c in EVERY_CASE}) == len(EVERY_CASE)


@pytest.mark.parametrize("part", range(4))
def test_no_silent_difference_from_torch(part):
    found = differences(EVERY_CASE[part::4])
    assert not found, f"{len(found)} differences from PyTorch:\n" + "\n".join(found)


def test_the_comparison_catches_a_difference():
    """Planted differences (a zero's sign, a dtype, a raise only torch makes) are each found."""
    one = ("float32",)
    planted = [
        Case("signed_zero", lambda t, x: x * (0.0 if t is torch else -0.0), dtypes=one),
        Case("dtype", lambda t, x: x.double() if t is verigrad else x, dtypes=one),
        Case("raise", lambda t, x: t.tensor([1.0]).reshape(3) if t is torch else x, dtypes=one),
        Case("value", lambda t, x: x + (0 if t is torch else 1e-3), dtypes=one, exact=False),
    ]
    assert [found.split("[")[0] for found in differences(planted)] == [c.name for c in planted]


def test_a_cancelling_sum_is_compared_to_its_magnitude():
    """Seed 119's item_sum: 0.0111033 against torch's 0.0111036, summing numbers of magnitude 8.6 (f32
    rounding of a different order). Within the floor it is the same; a wrong digit beyond it is not."""
    sum_of = Case("item_sum", lambda t, x: x.sum().item(), dtypes=("float32",), exact=False)
    ours, theirs = ("ok", [("v", 0.011103332042694092)]), ("ok", [("v", 0.011103630065917969)])
    assert _difference(sum_of, ours, theirs, magnitude=8.6) is None
    assert _difference(sum_of, ours, theirs, magnitude=0.0) is not None  # no floor: relative error 3e-5
    assert _difference(sum_of, ("ok", [("v", 0.0121)]), theirs, magnitude=8.6) is not None
    exact = Case("item_sum", sum_of.call, dtypes=("float32",))
    assert _difference(exact, ours, theirs, magnitude=8.6) is not None
    arrays = [np.array([1.0, -2.0, np.inf, np.nan], np.float32), np.array([5, -7])]
    assert _magnitude(arrays) == 3.0  # finite floats only

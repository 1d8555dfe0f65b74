"""Bitwise ops on integer and bool tensors, as PyTorch's: and, or, xor, not, and the shifts (with
PyTorch's answers for shifts by a negative count or by the width or more)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..dtypes import DType, bool_, promote
from ..errors import DTypeError
from ._op import Op, Sample
from ._samples import BINARY_SHAPES
from .binary import _arith, _bool_samples


def _integer_dtype(name: str, *, bools: bool = True) -> Callable[..., DType]:
    """The promoted dtype of integer (and, for `bools`, bool) operands; floats refused, as PyTorch."""

    def rule(*dtypes: DType, **_) -> DType:
        out = promote(*dtypes)
        if out.is_float or (out is bool_ and not bools):
            allowed = "integer or bool" if bools else "integer"
            raise DTypeError(f"{name} takes {allowed} tensors (as PyTorch), got {out.name}")
        return out

    return rule


def _integer_samples(low: int, high: int, shift: bool = False) -> Callable:
    def samples(rng: np.random.Generator) -> list[Sample]:
        out = []
        for sa, sb in BINARY_SHAPES:
            b = rng.integers(0, 70, sb) if shift else rng.integers(low, high, sb)
            out.append(Sample((rng.integers(low, high, sa), b)))
        if not shift:
            out.append(Sample((rng.random((3, 4)) > 0.5, rng.random((3, 4)) > 0.5)))
        return out

    return samples


def _bitwise(name: str, fn: Callable, doc: str) -> Op:
    return _arith(
        name,
        fn,
        None,
        dtype=_integer_dtype(name),
        torch=lambda t, a, b: getattr(t, name)(a, b),
        fast=lambda out, dtypes, **_: fn if all(d is out for d in dtypes) else None,
        doc=doc,
    )


bitwise_and = _bitwise("bitwise_and", np.bitwise_and, "x & y bit by bit, on integers and bools (and).")
bitwise_or = _bitwise("bitwise_or", np.bitwise_or, "x | y bit by bit, on integers and bools (or).")
bitwise_xor = _bitwise("bitwise_xor", np.bitwise_xor, "x ^ y bit by bit, on integers and bools (xor).")
for _op in (bitwise_and, bitwise_or, bitwise_xor):
    _op.samples = _integer_samples(-100, 100)


def _left_shift(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a << b, 0 where b is negative or at least the width (PyTorch's)."""
    width = a.dtype.itemsize * 8
    inside = (b >= 0) & (b < width)
    return np.where(inside, np.left_shift(a, np.where(inside, b, 0)), 0).astype(a.dtype, copy=False)


def _right_shift(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a >> b (arithmetic for signed integers), shifted by width - 1 for signed and width for unsigned
    integers where b is negative or too large: the sign fill, or 0 (PyTorch's)."""
    most = a.dtype.itemsize * 8 - (1 if a.dtype.kind == "i" else 0)
    outside = (b < 0) | (b >= most)
    if a.dtype.kind == "u":
        return np.where(outside, 0, np.right_shift(a, np.where(outside, 0, b))).astype(a.dtype, copy=False)
    return np.right_shift(a, np.where(outside, most, b).astype(a.dtype, copy=False))


def _shift(name: str, fn: Callable, doc: str) -> Op:
    return _arith(
        name,
        fn,
        None,
        dtype=_integer_dtype(name, bools=False),
        torch=lambda t, a, b: getattr(t, name)(a, b),
        fast=lambda out, dtypes, **_: fn if all(d is out for d in dtypes) else None,
        doc=doc,
    )


bitwise_left_shift = _shift("bitwise_left_shift", _left_shift, f"x << y: {_left_shift.__doc__}")
bitwise_right_shift = _shift("bitwise_right_shift", _right_shift, f"x >> y: {_right_shift.__doc__}")
for _op in (bitwise_left_shift, bitwise_right_shift):
    _op.samples = _integer_samples(-1000, 1000, shift=True)


def _bitwise_not_dtype(x: DType, **_) -> DType:
    if x.is_float:
        raise DTypeError(f"bitwise_not (~) takes integer or bool tensors (as PyTorch), got {x.name}")
    return x


bitwise_not = Op(
    "bitwise_not",
    shape=lambda s: s,
    dtype=_bitwise_not_dtype,
    reference=lambda x: np.logical_not(x) if x.dtype.kind == "b" else np.invert(x),
    samples=lambda rng: [Sample((rng.integers(-100, 100, (3, 4)),)), *_bool_samples(1)(rng)],
    torch=lambda t, x: t.bitwise_not(x),
    doc="~x: each bit flipped on integers, not x on bools.",
)


def _gcd_lcm(name: str, fn: Callable, doc: str) -> Op:
    op = _arith(
        name,
        fn,
        None,
        dtype=_integer_dtype(name, bools=False),
        torch=lambda t, a, b: getattr(t, name)(a, b),
        fast=lambda out, dtypes, **_: fn if all(d is out for d in dtypes) else None,
        doc=doc,
    )
    op.samples = lambda rng: [
        Sample((rng.integers(-60, 60, sa), rng.integers(-60, 60, sb))) for sa, sb in BINARY_SHAPES
    ]
    return op


def _lcm(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """PyTorch's lcm, C++'s abs(a / gcd(a, b) * b) with the narrow integers promoted to int: the product
    wraps in i32 or i64 before the absolute value (NumPy's lcm takes |a| and |b| first, so a product past
    the range gets the other sign), and an i8/u8/i16 result is the int's low bits; 0 where gcd is 0."""
    g = np.gcd(a, b)
    zero = g == 0
    wide = np.promote_types(g.dtype, np.int32)
    with np.errstate(over="ignore"):
        product = (a // np.where(zero, 1, g)).astype(wide) * b.astype(wide)
        return np.where(zero, 0, np.abs(product)).astype(g.dtype)


gcd = _gcd_lcm("gcd", np.gcd, "The greatest common divisor of integers, non-negative (gcd(0, 0) = 0).")
lcm = _gcd_lcm(
    "lcm", _lcm, "The least common multiple of integers, |a / gcd(a, b) * b| (wrapping), 0 if either is 0."
)

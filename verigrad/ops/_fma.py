"""The exactly rounded fused multiply-add a * b + c in NumPy, the reference of PyTorch's add and sub with
alpha (`scaled_add`): error-free transforms (TwoSum, Veltkamp's split, Dekker's product) and rounding
to odd, so that one final rounding is the exact result's."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np


def _two_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """s = a + b rounded and its error e: a + b = s + e exactly (Knuth's TwoSum; no overflow)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _odd_sum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a + b rounded to odd: the exact sum where it is a double, else the neighbour of the two around it
    whose last significand bit is 1; a later rounding to fewer bits is then the exact sum's."""
    s, e = _two_sum(a, b)
    even = (s.view(np.int64) & 1) == 0
    move = (e != 0) & even & np.isfinite(e)
    return np.where(move, np.nextafter(s, np.where(e > 0, np.inf, -np.inf)), s)


def _split(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Veltkamp's split of a double into two halves of 26 bits: a = hi + lo exactly."""
    c = 134217729.0 * a  # 2^27 + 1
    hi = c - (c - a)
    return hi, a - hi


def fma_f64(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """a * b + c rounded once, in f64 (Boldo and Melquiond's emulation, exact): the product as the
    double p plus its error (Dekker's product of Veltkamp's halves), c + p as TwoSum's s + t, and
    s + RO(t + error), RO rounding to odd. Where the halves or the error could overflow or underflow (a
    product beyond 2^+-960, an operand beyond 2^990) it is computed exactly with fractions. Where a or b
    is not finite, or 0, a * b + c is the fma's own answer (the product is exact); where only c is not
    finite, c is."""
    shape = np.broadcast_shapes(np.shape(a), np.shape(b), np.shape(c))
    a, b, c = (np.array(np.broadcast_to(v, shape), np.float64).reshape(-1) for v in (a, b, c))
    with np.errstate(over="ignore", invalid="ignore"):  # where the halves overflow: replaced below
        p = a * b
        ah, al = _split(a)
        bh, bl = _split(b)
        err = ((ah * bh - p) + ah * bl + al * bh) + al * bl
        s, t = _two_sum(c, p)
        out = s + _odd_sum(t, err)
    factors = np.isfinite(a) & np.isfinite(b)
    plain = ~factors | (a == 0) | (b == 0)
    with np.errstate(invalid="ignore"):
        out = np.where(plain, p + c, np.where(np.isfinite(c), out, c))
    size, big = np.abs(p), np.maximum(np.abs(a), np.maximum(np.abs(b), np.abs(c)))
    exact = ~plain & np.isfinite(c) & ((size > 2.0**960) | (size < 2.0**-960) | (big > 2.0**990))
    for i in np.flatnonzero(exact):
        out[i] = _fraction_fma(float(a[i]), float(b[i]), float(c[i]))
    return out.reshape(shape)


def _fraction_fma(a: float, b: float, c: float) -> float:
    """a * b + c of finite doubles, exactly rounded (Python's int division rounds exactly)."""
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    try:
        return float(exact)
    except OverflowError:
        return math.inf if exact > 0 else -math.inf


def fma_f32(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """a * b + c of f32 values rounded once to f32: the product is exact in f64 (24 + 24 bits), the sum
    rounded to odd in f64 (53 bits, more than 24 + 2), so its rounding to f32 is the exact sum's."""
    p = a.astype(np.float64) * b.astype(np.float64)
    return _odd_sum(p, c.astype(np.float64)).astype(np.float32)

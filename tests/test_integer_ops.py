"""Integer arithmetic, the bitwise ops, add / sub with alpha (one fma) and copysign / tan / exp2, against
hand-computed values and exact arithmetic."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import verigrad
from verigrad.dtypes import f32, f64, i8, i16, i64, u8
from verigrad.ops._fma import fma_f32, fma_f64


def _t(values, dtype="i64") -> verigrad.Tensor:
    return verigrad.tensor(values, dtype=dtype)


def _v(t: verigrad.Tensor) -> list:
    return t.numpy().tolist()


def test_floor_division_and_remainders_of_integers() -> None:
    a, b = _t([-7, 7, -7, 7, 0]), _t([2, 2, -2, -2, 3])
    assert _v(a // b) == [-4, 3, 3, -4, 0]
    assert _v(a % b) == [1, 1, -1, -1, 0]  # the divisor's sign
    assert _v(verigrad.fmod(a, b)) == [-1, 1, -1, 1, 0]  # the dividend's sign
    assert _v(verigrad.div(a, b, rounding_mode="trunc")) == [-3, 3, 3, -3, 0]
    assert _v(verigrad.div(a, b, rounding_mode="floor")) == [-4, 3, 3, -4, 0]
    assert _v(verigrad.true_divide(a, b)) == [-3.5, 3.5, 3.5, -3.5, 0.0]
    assert _v(17 // _t([5, -5])) == [3, -4] and _v(_t([17, -17]) // 5) == [3, -4]
    assert (a // b).dtype is i64 and (_t([1], "i8") // _t([1], "i16")).dtype is i16
    assert _v(_t([-128], "i8") // -1) == [-128]  # wraps, as PyTorch's


@pytest.mark.parametrize(
    "fn",
    [
        lambda a, b: a // b,
        lambda a, b: a % b,
        lambda a, b: verigrad.fmod(a, b),
        lambda a, b: verigrad.div(a, b, rounding_mode="trunc"),
        lambda a, b: a.floor_divide_(b),
    ],
)
def test_integer_division_by_zero_raises(fn) -> None:
    with pytest.raises(ZeroDivisionError):
        fn(_t([1, 2], "i32"), _t([1, 0], "i32"))


def test_floor_division_of_floats() -> None:
    a = _t([-7.0, 7.0, 0.0, -0.0, 1.0, -1.0, 7.5, math.inf, 0.5], "f64")
    b = _t([2.0, -2.0, 3.0, 3.0, 0.0, 0.0, 0.5, 2.0, -math.inf], "f64")
    out = (a // b).numpy()
    want = [-4.0, -4.0, 0.0, -0.0, math.inf, -math.inf, 15.0, math.nan, -1.0]
    np.testing.assert_array_equal(out, want)
    assert list(np.signbit(out[2:4])) == [False, True]
    assert _v(verigrad.div(a, b, rounding_mode="trunc"))[:3] == [-3.0, -3.0, 0.0]
    r = (_t([-0.0, 0.0, 5.0, -5.0], "f64") % _t([1.0, -1.0, -3.0, 3.0], "f64")).numpy()
    assert r.tolist() == [0.0, 0.0, -1.0, 1.0] and list(np.signbit(r[:2])) == [True, False]  # fmod's zero


def test_rounded_divisions_have_zero_gradients_and_floor_divide_none() -> None:
    x = _t([3.5, -2.0], "f64").requires_grad_()
    verigrad.div(x, 2.0, rounding_mode="floor").sum().backward()
    assert _v(x.grad) == [0.0, 0.0]
    out = x // 2.0
    assert out.requires_grad
    with pytest.raises(NotImplementedError, match="floor_divide"):
        out.sum().backward()
    with pytest.raises(ValueError, match="rounding_mode"):
        verigrad.div(x, 2.0, rounding_mode="nearest")
    with pytest.raises(verigrad.DTypeError, match="bool"):
        _t([True], "bool") // _t([True], "bool")


def test_bitwise_on_integers_and_bools() -> None:
    a, b = _t([12, -1, 5], "i8"), _t([10, 3, -6], "i8")
    assert _v(a & b) == [8, 3, 0] and _v(a | b) == [14, -1, -1] and _v(a ^ b) == [6, -4, -1]
    assert _v(~a) == [-13, 0, -6] and _v(~_t([0, 255], "u8")) == [255, 0]
    t, f = _t([True, True, False], "bool"), _t([True, False, False], "bool")
    assert (
        _v(t & f) == [True, False, False]
        and _v(t ^ f) == [False, True, False]
        and _v(~t) == [False, False, True]
    )
    assert _v(6 & _t([3, 5])) == [2, 4] and _v(1 | _t([2])) == [3]
    assert (t & f).dtype.name == "bool" and (t | _t([1], "i16")).dtype is i16
    with pytest.raises(verigrad.DTypeError, match="bitwise_and"):
        _t([1.0], "f32") & _t([1.0], "f32")
    with pytest.raises(verigrad.DTypeError, match="bitwise_not"):
        ~_t([1.0], "f32")


def test_shifts_as_pytorch() -> None:
    x = _t([1, -1, 64, 1, 1], "i8")
    assert _v(x << _t([3, 1, 1, 8, -1], "i8")) == [8, -2, -128, 0, 0]  # beyond the width or negative: 0
    y = _t([-100, 100, -1, 100], "i8")
    assert _v(y >> _t([2, 9, 3, -1], "i8")) == [-25, 0, -1, 0]  # beyond: the sign fill
    assert _v(_t([200], "u8") >> _t([9], "u8")) == [0] and _v(_t([200], "u8") >> 1) == [100]
    assert _v(1 << _t([0, 3, 62])) == [1, 8, 2**62] and _v(_t([1]) << 64) == [0]
    assert _v(verigrad.bitwise_right_shift(_t([-8]), 1)) == [-4]
    with pytest.raises(verigrad.DTypeError, match="integer"):
        _t([True], "bool") << _t([True], "bool")


def test_in_place_operators() -> None:
    x = _t([-7, 12, 5], "i16")
    x //= 2
    assert _v(x) == [-4, 6, 2]
    x %= 4
    assert _v(x) == [0, 2, 2]
    x |= 1
    x ^= 2
    x &= _t([7, 7, 7], "i16")
    assert _v(x) == [3, 1, 1]
    x <<= 2
    x >>= 1
    assert _v(x) == [6, 2, 2] and x.dtype is i16
    y = _t([5, 6])
    for method, arg, want in [
        ("floor_divide_", 4, [1, 1]),
        ("bitwise_left_shift_", 2, [4, 4]),
        ("bitwise_or_", 3, [7, 7]),
        ("remainder_", 4, [3, 3]),
    ]:
        assert getattr(y, method)(arg) is y and _v(y) == want


# add / sub with alpha: one fma ---------------------------------------------------------------
def _exact_fma(a: float, b: float, c: float) -> float:
    return float(Fraction(a) * Fraction(b) + Fraction(c))


def test_fma_f64_is_exactly_rounded() -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal(2000) * np.exp2(rng.integers(-30, 30, 2000))
    b = rng.standard_normal(2000)
    c = -a * b * (1 + rng.standard_normal(2000) * 1e-12)  # near cancellation: where one rounding shows
    c[:200] = rng.standard_normal(200)
    want = [_exact_fma(x, y, z) for x, y, z in zip(a, b, c)]
    np.testing.assert_array_equal(fma_f64(a, b, c), want)
    assert not np.array_equal(a * b + c, want)  # two roundings differ here


def test_fma_f64_extremes() -> None:
    big, tiny = 2.0**1000, 2.0**-1000
    a = np.array([big, tiny, 1e300, 0.0, np.inf, 3.0, -0.0, 1e-300])
    b = np.array([4.0, tiny, 1e10, np.inf, 0.0, 2.0, 5.0, 1e-300])
    c = np.array([-big, 1.0, -np.inf, 1.0, 1.0, np.nan, -0.0, 1e-320])
    out = fma_f64(a, b, c)
    assert out[0] == 3 * big and out[1] == 1.0 and out[2] == -np.inf  # no overflow to inf - inf
    assert np.isnan(out[3]) and np.isnan(out[4]) and np.isnan(out[5])
    assert out[6] == 0.0 and np.signbit(out[6])  # -0 * 5 + -0 is -0
    assert out[7] == _exact_fma(1e-300, 1e-300, 1e-320)


def test_fma_f32_is_exactly_rounded() -> None:
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal(3000).astype(np.float32), rng.standard_normal(3000).astype(np.float32)
    c = (-a.astype(np.float64) * b * (1 + rng.standard_normal(3000) * 1e-6)).astype(np.float32)
    exact = [
        np.float32(Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z))) for x, y, z in zip(a, b, c)
    ]
    # Fraction -> float rounds once to f64, then to f32: check with the round-to-odd-free exact value
    want = np.array(
        [
            _round_to_f32(Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z)))
            for x, y, z in zip(a, b, c)
        ]
    )
    np.testing.assert_array_equal(fma_f32(a, b, c), want)
    assert len(exact) == len(want)


def _round_to_f32(q: Fraction) -> np.float32:
    """The nearest f32 to q (ties to even), by comparing q with the two f32 around it."""
    lo = np.float32(float(q))  # within one f32 of q
    while Fraction(float(lo)) > q:
        lo = np.nextafter(lo, np.float32(-np.inf))
    while Fraction(float(np.nextafter(lo, np.float32(np.inf)))) <= q:
        lo = np.nextafter(lo, np.float32(np.inf))
    hi = np.nextafter(lo, np.float32(np.inf))
    d_lo, d_hi = q - Fraction(float(lo)), Fraction(float(hi)) - q
    if d_lo != d_hi:
        return lo if d_lo < d_hi else hi
    return lo if int(np.array(lo).view(np.int32)) % 2 == 0 else hi


def test_add_and_sub_with_alpha() -> None:
    a, g = _t([1.0, 2.0], "f64"), _t([3.0, 4.0], "f64")
    assert _v(a.add(g, alpha=2)) == [7.0, 10.0] and _v(verigrad.add(a, g, alpha=0.5)) == [2.5, 4.0]
    assert _v(a.sub(g, alpha=2)) == [-5.0, -6.0] and _v(verigrad.sub(a, g, alpha=-1)) == [4.0, 6.0]
    x, y = 0.1, 0.3
    want = _exact_fma(-0.1, y, x)
    assert (
        float(verigrad.tensor(x, dtype="f64").add(verigrad.tensor(y, dtype="f64"), alpha=-0.1).numpy())
        == want
    )
    b = a.add_(g, alpha=-1.0)
    assert b is a and _v(a) == [-2.0, -2.0]
    assert _v(_t([1, 2]).add(_t([3, 4]), alpha=3)) == [10, 14]
    assert _v(_t([250], "u8").sub(_t([3], "u8"), alpha=-2)) == [0]  # 250 + 6 wraps
    assert _v(_t([True, False], "bool").add(_t([False, True], "bool"), alpha=True)) == [True, True]
    for bad in (
        lambda: _t([1]).add(_t([1]), alpha=0.5),
        lambda: _t([1]).sub(_t([1]), alpha=True),
        lambda: _t([1.0], "f32").add(_t([1.0], "f32"), alpha=True),
        lambda: _t([True], "bool").sub(_t([True], "bool"), alpha=2),
    ):
        with pytest.raises(verigrad.DTypeError, match=r"alpha|bool"):
            bad()


def test_add_with_alpha_gradients() -> None:
    x, y = _t([1.0, 2.0], "f64").requires_grad_(), _t([3.0], "f64").requires_grad_()
    x.sub(y, alpha=0.25).sum().backward()
    assert _v(x.grad) == [1.0, 1.0] and _v(y.grad) == [-0.5]


# copysign, tan, exp2 ---------------------------------------------------------------------------
def test_copysign_tan_exp2() -> None:
    out = verigrad.copysign(_t([1.0, -2.0, 3.0, 0.0], "f32"), _t([-1.0, 1.0, -0.0, -5.0], "f32")).numpy()
    assert out.tolist() == [-1.0, 2.0, -3.0, 0.0] and np.signbit(out[3])
    assert verigrad.copysign(_t([1, 2]), -1.0).dtype is f32 and _t([1.5], "f64").copysign(-1).dtype is f64
    assert _v(verigrad.exp2(_t([0.0, 3.0, -1.0], "f64"))) == [1.0, 8.0, 0.5] and _v(_t([3]).exp2()) == [8.0]
    assert float(verigrad.tensor(np.float64(math.pi / 4)).tan().numpy()) == math.tan(math.pi / 4)
    x = np.linspace(-1.5, 1.5, 101, dtype=np.float32)
    np.testing.assert_array_equal(
        verigrad.tan(verigrad.tensor(x)).numpy(), np.tan(x.astype(np.float64)).astype(np.float32)
    )
    g = _t([0.5, -1.0], "f64").requires_grad_()
    verigrad.tan(g).sum().backward()
    np.testing.assert_allclose(g.grad.numpy(), 1 / np.cos([0.5, -1.0]) ** 2, rtol=1e-15)
    h = _t([1.0, -2.0, 0.0], "f64").requires_grad_()
    verigrad.copysign(h, _t([-1.0, -1.0, -1.0], "f64")).sum().backward()
    assert _v(h.grad) == [-1.0, 1.0, 0.0]


# integer results -------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["bool", "u8", "i8", "i16", "i32"])
def test_integer_sums_give_i64(dtype: str) -> None:
    x = _t([[True, True], [False, True]] if dtype == "bool" else [[100, 100], [100, 27]], dtype)
    assert x.sum().dtype is i64 and x.prod(dim=0).dtype is i64 and x.cumsum(dim=1).dtype is i64
    if dtype != "bool":
        assert int(x.sum().numpy()) == 327 and int(x.prod().numpy()) == 27_000_000  # no wrap at 8 bits
    with pytest.raises(verigrad.DTypeError, match="mean"):
        x.mean()


def test_new_dtypes_keep_their_dtype() -> None:
    x = _t([-3, 0, 5], "i8")
    assert (abs(x).dtype, (-x).dtype, x.sign().dtype, x.clamp(-1, 1).dtype) == (i8, i8, i8, i8)
    assert _v(x.clamp(-1, 1)) == [-1, 0, 1] and _v(verigrad.maximum(x, _t([0, 0, 0], "i8"))) == [0, 0, 5]
    assert _v(-_t([1], "u8")) == [255] and (x > 0).dtype.name == "bool"
    assert _t([1, 2], verigrad.int8).dtype is i8 and (x + _t([1], "u8")).dtype is i16
    assert (_t([1], "u8") * 2).dtype is u8 and (x * 2.5).dtype is f32 and (x.double() * 2).dtype is f64

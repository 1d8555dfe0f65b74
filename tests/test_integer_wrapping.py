"""Integer functions that compute as PyTorch's integer kernels (wrapping where PyTorch's C++ wraps), checked
against hand-computed values: lcm's sign past the dtype's range, the trapezoidal rules' integer sums."""

from __future__ import annotations

import numpy as np
import pytest

import verigrad


def _wrap64(v: int) -> int:
    return (v + 2**63) % 2**64 - 2**63


def test_lcm_takes_the_absolute_value_after_the_wrapping_product() -> None:
    a = -(2**61) - 7  # gcd(a, 7) = 1, so lcm = |a * 7| with the product wrapped to i64
    got = verigrad.lcm(verigrad.tensor([a, -4, 0]), verigrad.tensor([7, 6, 5])).tolist()
    assert got == [abs(_wrap64(a * 7)), 12, 0] and got[0] == 2305843009213693903
    # narrow integers multiply as C++ ints: |13 * 11| = 143, whose i8 bits are -113
    small = verigrad.lcm(
        verigrad.tensor([13, -128], dtype=verigrad.int8), verigrad.tensor([11, 3], dtype=verigrad.int8)
    )
    assert small.dtype is verigrad.int8 and small.tolist() == [-113, -128]
    i32 = verigrad.lcm(
        verigrad.tensor([-(2**31)], dtype=verigrad.int32), verigrad.tensor([3], dtype=verigrad.int32)
    )
    assert i32.tolist() == [-(2**31)]  # |-(2^31) * 3 wrapped| = |-2^31| wraps to itself


def test_trapezoid_of_integers_sums_in_i64_then_divides() -> None:
    """PyTorch's formulas: sum((left + right) * diff(x)) / 2 and (sum(y) - (y[0] + y[-1]) * 0.5) * dx, the
    integer products and sums wrapping, the division in the default float dtype."""
    s = verigrad.tensor([1, 5, 2**53 + 1, 9])  # the exact i64 sum of the areas times 2 is 80
    out = verigrad.trapezoid(s, s)
    assert out.dtype is verigrad.float32 and out.item() == 40.0
    areas = [6 * 4, _wrap64((2**53 + 6) * (2**53 - 4)), _wrap64((2**53 + 10) * (8 - 2**53))]
    running = np.cumsum(np.array(areas, dtype=np.int64)) / 2
    assert verigrad.cumulative_trapezoid(s, s).tolist() == np.float32(running).tolist()
    b = verigrad.full((3,), 2**62)  # sum 3 * 2^62 wraps to -2^62, the ends' 2^63 to -2^63
    assert verigrad.trapezoid(b).item() == 0.0 and verigrad.trapezoid(b, dx=2).item() == 0.0
    assert verigrad.cumulative_trapezoid(b).tolist() == [-(2.0**62), -(2.0**63)]


def test_float_multipliers_of_integer_results_truncate_as_pytorchs() -> None:
    """addcmul's value and index_add's alpha are read in the result's dtype: 0.5 is 0 and -1.7 is -1 for
    integers (they gave f32 results); addr refuses them."""
    m = verigrad.tensor([[2, 3], [5, 7]])
    assert verigrad.addcmul(m, m, m, value=0.5).tolist() == [[2, 3], [5, 7]]
    assert verigrad.addcmul(m, m, m, value=-1.7).tolist() == [[-2, -6], [-20, -42]]
    assert verigrad.addcmul(m, m > 0, m, value=2.9).tolist() == [[6, 9], [15, 21]]
    assert verigrad.addcmul(m * 1.0, m, m, value=0.5).tolist() == [[4.0, 7.5], [17.5, 31.5]]
    assert verigrad.index_add(m, 0, verigrad.tensor([0]), m[:1], alpha=1.7).tolist() == [[4, 6], [5, 7]]
    assert verigrad.index_add(m, 0, verigrad.tensor([0]), m[:1], alpha=-1.7).tolist() == [[0, 0], [5, 7]]
    with pytest.raises(verigrad.DTypeError, match="addr: for integral input tensors"):
        verigrad.addr(m, m[0], m[1], alpha=1.5)
    assert verigrad.addmv(m[0], m, m[1], beta=0.5).tolist() == [31, 74]  # beta 0: the product alone

"""polygamma at its poles (0, -1, ...) and at +inf: PyTorch's values, derived by hand from its formulas."""

from __future__ import annotations

import math

import numpy as np
import pytest

import verigrad


def _polygamma(n: int, values: list[float], dtype: verigrad.DType) -> np.ndarray:
    return verigrad.polygamma(n, verigrad.tensor(values, dtype=dtype)).numpy()


@pytest.mark.parametrize("n", [2, 3, 4])
def test_higher_orders_are_signed_infinities_at_the_poles(n: int) -> None:
    # PyTorch: (-1)^(n+1) n! zeta(n + 1, x), and Hurwitz zeta is +inf at q = 0, -1, ...
    out = _polygamma(n, [0.0, -0.0, -1.0, -7.0, math.inf], verigrad.float64)
    assert (out[:4] == (math.inf if n % 2 else -math.inf)).all()
    assert math.isnan(out[4])  # its series divides 0 by 0 at +inf


def test_digamma_poles() -> None:
    out = _polygamma(0, [0.0, -0.0, -1.0, -3.0], verigrad.float64)
    assert out[0] == -math.inf and out[1] == math.inf and np.isnan(out[2:]).all()


@pytest.mark.parametrize("dtype", [verigrad.float32, verigrad.float64, verigrad.int16])
def test_trigamma_at_the_negative_integers_is_pi_squared_over_the_rounding_of_pi_x(dtype) -> None:
    # trigamma reflects: pi^2 / sin(pi x)^2 + ..., where pi x rounded to the dtype is off a multiple of
    # pi by k times the rounding error of pi itself, so sin(pi x) = +-k d
    d = math.sin(math.pi) if dtype is verigrad.float64 else float(np.float32(math.pi)) - math.pi
    out = _polygamma(1, [-1, -2, 0, 5], dtype)
    np.testing.assert_allclose(out[:2], [math.pi**2 / d**2, math.pi**2 / (2 * d) ** 2], rtol=1e-6)
    assert out[2] == math.inf
    np.testing.assert_allclose(out[3], math.pi**2 / 6 - 1 - 1 / 4 - 1 / 9 - 1 / 16, rtol=1e-6)
    assert _polygamma(1, [math.inf], verigrad.float64)[0] == 0.0

"""igamma and igammac (special.gammainc, gammaincc) against tabulated values (30-digit evaluations),
their special values, dtypes and gradient (in x only, as PyTorch's)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import verigrad
from verigrad import DTypeError, special
from verigrad.ops import special_gamma

A = [0.5, 0.5, 1.0, 2.5, 2.5, 10.0, 30.0, 150.0, 1e-3, 1e-10]
X = [0.2, 3.0, 1.0, 0.1, 7.0, 9.0, 25.0, 160.0, 0.5, 2.0]
P = [
    0.4729107431344619,
    0.9856941215645704,
    0.6321205588285577,
    0.0008861387888124426,
    0.9843905838997331,
    0.4125917556680586,
    0.18210391597745512,
    0.7956261882343224,
    0.9994399333435292,
    0.9999999999951099,
]
Q = [
    0.5270892568655381,
    0.01430587843542964,
    0.36787944117144233,
    0.9991138612111875,
    0.015609416100266916,
    0.5874082443319414,
    0.8178960840225449,
    0.20437381176567754,
    0.0005600666564707498,
    4.890051071569974e-12,
]


def _f64(values: list[float]) -> verigrad.Tensor:
    return verigrad.tensor(values, dtype=verigrad.float64)


def test_values_match_tabulated_ones() -> None:
    # the series, the continued fraction, Stirling's factor for large a, and Q of a small a (where 1 - P
    # would keep none of its digits)
    np.testing.assert_allclose(verigrad.igamma(_f64(A), _f64(X)).numpy(), P, rtol=1e-14)
    np.testing.assert_allclose(verigrad.igammac(_f64(A), _f64(X)).numpy(), Q, rtol=1e-14)
    np.testing.assert_array_equal(
        special.gammainc(_f64(A), _f64(X)).numpy(), verigrad.igamma(_f64(A), _f64(X)).numpy()
    )
    np.testing.assert_array_equal(
        special.gammaincc(_f64(A), _f64(X)).numpy(), verigrad.igammac(_f64(A), _f64(X)).numpy()
    )


def test_tiny_a_keeps_q_s_digits() -> None:
    # Q(a, x) ~ a E1(x) as a -> 0: E1(1) = 0.21938393439552...
    q = verigrad.igammac(_f64([1e-30]), _f64([1.0])).numpy()[0]
    assert math.isclose(q, 0.2193839343955203e-30, rel_tol=1e-13)


def test_special_values_are_pytorchs() -> None:
    inf, nan = math.inf, math.nan
    a = _f64([-1.0, 1.0, 0.0, 0.0, 0.0, 2.0, inf, inf, 2.0, nan, nan, inf])
    x = _f64([1.0, -1.0, 2.0, 0.0, nan, 0.0, 3.0, inf, inf, 0.0, inf, nan])
    np.testing.assert_array_equal(
        verigrad.igamma(a, x).numpy(), [nan, nan, 1.0, nan, nan, 0.0, 0.0, nan, 1.0, 0.0, 1.0, 0.0]
    )
    np.testing.assert_array_equal(
        verigrad.igammac(a, x).numpy(), [nan, nan, 0.0, nan, nan, 1.0, 1.0, nan, 0.0, 1.0, 0.0, 1.0]
    )


def test_dtypes() -> None:
    a32, x64 = verigrad.tensor([1.5]), _f64([2.0])
    assert verigrad.igamma(a32, a32).dtype is verigrad.float32
    assert verigrad.igamma(a32, x64).dtype is verigrad.float64  # promoted
    assert a32.igamma(a32).dtype is verigrad.float32 and a32.igammac(a32).dtype is verigrad.float32
    for bad in (verigrad.tensor([1, 2]), verigrad.tensor([True])):  # beside a float: promoted, as PyTorch's
        assert verigrad.igamma(bad, a32).dtype is verigrad.float32
        assert verigrad.igammac(bad, x64).dtype is verigrad.float64
        with pytest.raises(DTypeError, match="expected a floating point tensor"):
            verigrad.igamma(bad, bad)
        with pytest.raises(DTypeError, match="expected a floating point tensor"):
            verigrad.igammac(bad, verigrad.tensor([2]))


def test_gradient_in_x_is_the_density() -> None:
    a = _f64([0.5, 2.0, 7.5])
    x = _f64([0.3, 2.5, 6.0]).requires_grad_(True)
    verigrad.igamma(a, x).sum().backward()
    av, xv = a.numpy(), x.detach().numpy()
    density = np.exp((av - 1) * np.log(xv) - xv - np.array([math.lgamma(v) for v in av]))
    np.testing.assert_allclose(x.grad.numpy(), density, rtol=1e-13)
    x.grad = None
    verigrad.igammac(a, x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), -density, rtol=1e-13)
    # finite differences of P in x agree
    h = 1e-6
    fd = (verigrad.igamma(a, _f64(list(xv + h))).numpy() - verigrad.igamma(a, _f64(list(xv - h))).numpy()) / (
        2 * h
    )
    np.testing.assert_allclose(fd, density, rtol=1e-7)


@pytest.mark.parametrize("fn", [verigrad.igamma, verigrad.igammac])
def test_gradient_in_a_raises_at_backward_as_pytorchs(fn) -> None:
    a = _f64([1.5]).requires_grad_(True)
    out = fn(a, _f64([2.0]))
    assert out.requires_grad  # recorded, as PyTorch's
    with pytest.raises(NotImplementedError, match=f"the derivative for '{fn.__name__}: input'"):
        out.sum().backward()


@pytest.mark.parametrize("name", ["igamma", "igammac"])
def test_complex_numbers_are_refused(name) -> None:
    # the ops refuse a complex operand; torch.igamma, as PyTorch's, refuses any operand that is no tensor
    with pytest.raises(TypeError, match="verigrad has no complex numbers"):
        getattr(special_gamma, name)(_f64([1.0]), np.array([1j]))
    with pytest.raises(
        TypeError, match=f"{name}\\(\\): argument 'other' \\(position 2\\) must be Tensor, not ndarray"
    ):
        getattr(verigrad, name)(_f64([1.0]), np.array([1j]))

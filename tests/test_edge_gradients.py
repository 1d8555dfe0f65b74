"""Hand-computed values at the edges: softplus's gradient far beyond its threshold, pow's gradients at 0,
and integer powers (integer results, negative exponents refused), on both backends and compiled.
PyTorch's own values: tests/parity/test_integer_and_edge_gradients_torch.py."""

from __future__ import annotations

import math

import numpy as np
import pytest

import verigrad
import verigrad.nn.functional as F


@pytest.fixture(params=["reference", "cpu"])
def backend(request):
    with verigrad.backend(request.param):
        yield request.param


def _grad(fn, values: list[float], dtype: str = "f64") -> tuple[np.ndarray, np.ndarray]:
    x = verigrad.tensor(values, dtype=dtype, requires_grad=True)
    out = fn(x)
    out.sum().backward()
    return out.numpy(), x.grad.numpy()


def test_softplus_gradient_is_one_above_the_threshold_and_sigmoid_below(backend) -> None:
    out, grad = _grad(F.softplus, [350.0, 1e4, 0.0, -350.0, 20.0])
    assert out[:3].tolist() == [350.0, 1e4, math.log(2.0)]
    assert grad[:3].tolist() == [1.0, 1.0, 0.5]
    np.testing.assert_allclose(grad[3:], [math.exp(-350.0), 1.0 / (1.0 + math.exp(-20.0))], rtol=1e-15)


def test_softplus_with_beta_scales_the_threshold(backend) -> None:
    # beta 2, threshold 4: x = 2 sits on the threshold (still the curve), 2.5 above it (x itself)
    out, grad = _grad(lambda x: F.softplus(x, beta=2.0, threshold=4.0), [2.0, 2.5, 0.0], "f32")
    np.testing.assert_allclose(out, [math.log1p(math.exp(4.0)) / 2, 2.5, math.log(2.0) / 2], rtol=1e-7)
    np.testing.assert_allclose(grad, [1 / (1 + math.exp(-4.0)), 1.0, 0.5], rtol=1e-7)


def test_pow_gradients_at_zero(backend) -> None:
    assert _grad(lambda x: x**0.0, [0.0, -2.0, 3.0])[1].tolist() == [0.0, 0.0, 0.0]
    x = verigrad.tensor([0.0, 0.0, 0.0], requires_grad=True)
    y = verigrad.tensor([0.0, 2.0, -1.0], requires_grad=True)
    (x**y).sum().backward()
    # d/dx: 0 where y == 0, y x^(y-1) else; d/dy: 0 where x == 0 and y >= 0, x^y log x (-inf) else
    assert x.grad.numpy().tolist() == [0.0, 0.0, -math.inf]
    assert y.grad.numpy().tolist() == [0.0, 0.0, -math.inf]


def test_integer_powers_stay_integer(backend) -> None:
    x = verigrad.tensor(np.array([2, -1, 1, 3], np.int32))
    got = x ** verigrad.tensor(np.array([3, -3, -5, -1], np.int32))
    assert got.dtype is verigrad.i32 and got.numpy().tolist() == [8, -1, 1, 0]
    assert (x**2).dtype is verigrad.i32 and (x**2).numpy().tolist() == [4, 1, 1, 9]
    assert (2**x).numpy().tolist() == [4, 0, 2, 8]
    assert (x**0.5).dtype is verigrad.f32
    compiled = verigrad.compile(lambda x: x**3)(x)
    assert compiled.dtype is verigrad.i32 and compiled.numpy().tolist() == [8, -1, 1, 27]


def test_integer_to_a_negative_python_int_is_refused() -> None:
    x = verigrad.tensor([2, 3])
    with pytest.raises(verigrad.DTypeError, match="Integers to negative integer powers are not allowed"):
        x**-1
    assert (x**-1.0).numpy().tolist() == [0.5, np.float32(1 / 3)]  # a float exponent: a float power

"""frexp, linalg.matrix_exp, linalg.cond and linalg.ldl_factor / ldl_solve against hand-computed values
and their definitions."""

from __future__ import annotations

import math

import numpy as np
import pytest

import verigrad
from verigrad import DTypeError, ShapeError, linalg


def _f64(values) -> verigrad.Tensor:
    return verigrad.from_numpy(np.asarray(values, dtype=np.float64))


def test_frexp_splits_into_mantissa_and_exponent() -> None:
    m, e = verigrad.frexp(_f64([1.5, 0.0, -3.0, 8.0, math.inf, math.nan, 1e-310]))
    np.testing.assert_array_equal(m.numpy()[:5], [0.75, 0.0, -0.75, 0.5, math.inf])
    assert math.isnan(m.numpy()[5])
    np.testing.assert_array_equal(e.numpy()[:6], [1, 0, 2, 4, 0, 0])
    assert e.dtype is verigrad.int32 and m.dtype is verigrad.float64
    assert m.numpy()[6] * 2.0 ** e.numpy()[6] == 1e-310  # subnormals too
    out = verigrad.tensor([3.0]).frexp()
    assert out.mantissa.dtype is verigrad.float32 and out.exponent.dtype is verigrad.int32


def test_frexp_gradient_is_one_over_two_to_the_exponent() -> None:
    x = _f64([3.0, -0.3, 40.0]).requires_grad_(True)
    m, e = verigrad.frexp(x)
    assert not e.requires_grad
    m.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0.25, 2.0, 1 / 64])


def test_frexp_refuses_integers() -> None:
    with pytest.raises(DTypeError, match="frexp only supports floating-point dtypes"):
        verigrad.frexp(verigrad.tensor([1, 2]))


def test_matrix_exp_values() -> None:
    t = 0.7
    rotation = linalg.matrix_exp(_f64([[0.0, t], [-t, 0.0]])).numpy()
    np.testing.assert_allclose(
        rotation, [[math.cos(t), math.sin(t)], [-math.sin(t), math.cos(t)]], rtol=1e-15
    )
    nilpotent = linalg.matrix_exp(_f64([[0.0, 1.0, 2.0], [0.0, 0.0, 3.0], [0.0, 0.0, 0.0]])).numpy()
    np.testing.assert_allclose(nilpotent, [[1, 1, 2 + 1.5], [0, 1, 3], [0, 0, 1]], rtol=1e-15)
    big = linalg.matrix_exp(_f64([[10.0, 0.0], [0.0, -10.0]])).numpy()  # scaled and squared
    np.testing.assert_allclose(big, np.diag([math.exp(10), math.exp(-10)]), rtol=1e-14, atol=1e-300)
    assert verigrad.matrix_exp is linalg.matrix_exp
    np.testing.assert_array_equal(
        linalg.matrix_exp(_f64([[[math.inf]], [[-math.inf]]])).numpy().ravel(), [math.inf, 0]
    )


def test_matrix_exp_gradient_matches_finite_differences() -> None:
    rng = np.random.default_rng(0)
    a0, g = rng.standard_normal((3, 3)), rng.standard_normal((3, 3))
    a = _f64(a0).requires_grad_(True)
    (linalg.matrix_exp(a) * _f64(g)).sum().backward()
    h, fd = 1e-6, np.zeros((3, 3))
    for i in range(3):
        for j in range(3):
            d = np.zeros((3, 3))
            d[i, j] = h
            up, down = (linalg.matrix_exp(_f64(a0 + s * d)).numpy() for s in (1, -1))
            fd[i, j] = ((up - down) * g).sum() / (2 * h)
    np.testing.assert_allclose(a.grad.numpy(), fd, rtol=1e-7, atol=1e-8)


def test_matrix_exp_refuses_what_pytorch_refuses() -> None:
    with pytest.raises(ShapeError, match="square"):
        linalg.matrix_exp(_f64(np.zeros((2, 3))))
    with pytest.raises(DTypeError, match="floating-point"):
        linalg.matrix_exp(verigrad.tensor([[1, 2], [3, 4]]))


@pytest.mark.parametrize("p", [None, 2, -2, "fro", "nuc", math.inf, -math.inf, 1, -1])
def test_cond_is_the_norm_times_the_inverses_norm(p) -> None:
    a = np.array([[4.0, 1.0], [2.0, 3.0]])
    s = np.linalg.svd(a, compute_uv=False)
    want = {None: s[0] / s[1], 2: s[0] / s[1], -2: s[1] / s[0]}.get(p)
    if want is None:
        want = np.linalg.norm(a, p) * np.linalg.norm(np.linalg.inv(a), p)
    np.testing.assert_allclose(linalg.cond(_f64(a), p).numpy(), want, rtol=1e-14)


def test_cond_of_a_singular_matrix_and_errors() -> None:
    z = _f64(np.zeros((2, 2)))
    assert linalg.cond(z, 1).numpy() == math.inf and math.isnan(linalg.cond(z).numpy())
    assert linalg.cond(_f64(np.ones((2, 3)))).shape == ()  # p = None: any m x n
    with pytest.raises(ShapeError, match="square"):
        linalg.cond(_f64(np.ones((2, 3))), "fro")
    with pytest.raises(ValueError, match="p must be one of"):
        linalg.cond(z, 3)


def _symmetric_lower(a: np.ndarray) -> np.ndarray:
    return np.tril(a) + np.tril(a, -1).T


def test_ldl_factor_of_a_matrix_needing_two_by_two_pivots() -> None:
    # zero diagonal: Bunch-Kaufman takes a 2 x 2 block at once (pivots -p, -p)
    a = np.array([[0.0, 1.0, 2.0], [1.0, 0.0, 3.0], [2.0, 3.0, 0.0]])
    ld, piv = linalg.ldl_factor(_f64(a))
    assert piv.dtype is verigrad.int32 and (piv.numpy() < 0).sum() == 2
    np.testing.assert_allclose(np.tril(ld.numpy(), 1), ld.numpy())  # L and D below, nothing above
    x = linalg.ldl_solve(ld, piv, _f64([[1.0], [2.0], [3.0]]))
    np.testing.assert_allclose(a @ x.numpy(), [[1.0], [2.0], [3.0]], atol=1e-14)


def test_ldl_factor_reads_the_lower_triangle() -> None:
    rng = np.random.default_rng(3)
    a = rng.standard_normal((2, 6, 6))
    ld, piv, info = linalg.ldl_factor_ex(_f64(a))
    assert (info.numpy() == 0).all() and ld.shape == (2, 6, 6) and piv.shape == (2, 6)
    inverses = linalg.ldl_solve(ld, piv, _f64(np.broadcast_to(np.eye(6), (2, 6, 6)))).numpy()
    for i in range(2):  # the factors are those of the symmetric matrix of the lower triangle
        np.testing.assert_allclose(inverses[i], np.linalg.inv(_symmetric_lower(a[i])), rtol=1e-10, atol=1e-12)
    b = rng.standard_normal((2, 6, 3))
    x = linalg.ldl_solve(ld, piv, _f64(b)).numpy()
    np.testing.assert_allclose(np.stack([_symmetric_lower(m) for m in a]) @ x, b, atol=1e-12)


def test_ldl_singular_and_refusals() -> None:
    _, piv, info = linalg.ldl_factor_ex(_f64(np.zeros((3, 3))))
    assert int(info.numpy()) == 1 and (piv.numpy() == [1, 2, 3]).all()
    with pytest.raises(ValueError, match="singular"):
        linalg.ldl_factor(_f64(np.zeros((3, 3))))
    with pytest.raises(ValueError, match="singular"):
        linalg.ldl_factor_ex(_f64(np.zeros((3, 3))), check_errors=True)
    with pytest.raises(ShapeError, match="square"):
        linalg.ldl_factor(_f64(np.zeros((3, 4))))
    with pytest.raises(DTypeError, match="floating-point"):
        linalg.ldl_factor(verigrad.tensor([[1, 0], [0, 1]]))
    with pytest.raises(NotImplementedError, match="larger than 64"):
        linalg.ldl_factor(_f64(np.eye(65)))
    with pytest.raises(DTypeError, match="int32"):
        linalg.ldl_solve(_f64(np.eye(2)), verigrad.tensor([1, 2]), _f64(np.ones((2, 1))))


def test_f16_is_refused_where_pytorchs_cpu_refuses_it() -> None:
    half = verigrad.eye(3, dtype=verigrad.float16)
    with pytest.raises(DTypeError, match="not implemented for f16"):
        linalg.ldl_factor(half)
    with pytest.raises(DTypeError, match="float32 or float64"):
        linalg.cond(half)
    assert linalg.matrix_exp(half).dtype is verigrad.float16  # PyTorch's takes f16
    assert verigrad.frexp(verigrad.tensor([3.0], dtype=verigrad.float16)).mantissa.dtype is verigrad.float16

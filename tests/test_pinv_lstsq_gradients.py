"""Gradients of linalg.pinv at rank-deficient matrices and of linalg.lstsq's residuals (PyTorch's
formulas), checked against finite differences and closed forms."""

from __future__ import annotations

import numpy as np
import pytest

import verigrad


def _orthonormal(rng: np.random.Generator, m: int, k: int) -> np.ndarray:
    return np.linalg.qr(rng.standard_normal((m, k)))[0]


@pytest.mark.parametrize(("m", "k", "n"), [(3, 2, 3), (4, 1, 2), (2, 2, 5), (6, 2, 3)])
def test_pinv_gradient_at_a_rank_deficient_matrix(m: int, k: int, n: int) -> None:
    # A = U V^T with orthonormal columns: rank k < min(m, n) and k equal singular values, where the
    # SVD's gradient divides by their zero gaps (PyTorch's OpInfo "singular" samples are such)
    rng = np.random.default_rng(0)
    u, v = _orthonormal(rng, m, k), _orthonormal(rng, n, k)
    a = u @ v.T
    g = rng.standard_normal((n, m))
    x = verigrad.tensor(a, requires_grad=True)
    (verigrad.linalg.pinv(x) * verigrad.tensor(g)).sum().backward()
    # PyTorch's choice, the adjoint of Golub and Pereyra's dP:
    # -P^T G P^T + (I - A P) G^T P P^T + P^T P G^T (I - P A)
    p = np.linalg.pinv(a)
    want = -p.T @ g @ p.T + (np.eye(m) - a @ p) @ g.T @ p @ p.T + p.T @ p @ g.T @ (np.eye(n) - p @ a)
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-9, atol=1e-12)
    # pinv is smooth where the rank stays: along A(t) = (U + t dU)(V + t dV)^T its directional
    # derivative is <gradient, dA/dt>
    du, dv = rng.standard_normal((m, k)), rng.standard_normal((n, k))
    h = 1e-6
    plus = np.linalg.pinv((u + h * du) @ (v + h * dv).T)
    minus = np.linalg.pinv((u - h * du) @ (v - h * dv).T)
    numeric = ((plus - minus) / (2 * h) * g).sum()
    np.testing.assert_allclose((x.grad.numpy() * (du @ v.T + u @ dv.T)).sum(), numeric, rtol=1e-6)


def test_pinv_takes_tolerances_per_matrix() -> None:
    a = np.stack([np.diag([2.0, 0.5]), np.diag([2.0, 0.5])])
    out = verigrad.linalg.pinv(verigrad.tensor(a), atol=verigrad.tensor([0.0, 1.0])).numpy()
    np.testing.assert_allclose(out, np.stack([np.diag([0.5, 2.0]), np.diag([0.5, 0.0])]))
    with pytest.raises(verigrad.ShapeError, match="pinv"):
        verigrad.linalg.pinv(verigrad.tensor([1.0, 2.0]))


@pytest.mark.parametrize("driver", ["gels", "gelsd", "gelss"])
def test_lstsq_residuals_gradient_is_pytorchs_closed_form(driver: str) -> None:
    # at the least-squares solution the derivative through X vanishes: dL/dA = 2 (AX - B) diag(c) X^T
    # and dL/dB = -2 (AX - B) diag(c), with no f32 digits lost to the cancellation through X
    rng = np.random.default_rng(1)
    a32, b32 = rng.standard_normal((5, 3)).astype(np.float32), rng.standard_normal((5, 2)).astype(np.float32)
    c = rng.standard_normal(2).astype(np.float32)
    A, B = verigrad.tensor(a32, requires_grad=True), verigrad.tensor(b32, requires_grad=True)
    out = verigrad.linalg.lstsq(A, B, driver=driver)
    out.residuals.backward(verigrad.tensor(c))
    x = out.solution.detach().numpy().astype(np.float64)
    r = a32.astype(np.float64) @ x - b32
    np.testing.assert_allclose(A.grad.numpy(), 2 * (r * c) @ x.T, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(B.grad.numpy(), -2 * r * c, rtol=1e-5, atol=1e-5)


def test_lstsq_outputs_that_carry_history_are_pytorchs() -> None:
    # the residuals, even empty, are differentiable; the rank and the singular values are not
    A = verigrad.tensor(np.eye(3, 2) + 1.0, requires_grad=True)
    for driver in ("gels", "gelsy", "gelsd", "gelss"):
        wide = verigrad.linalg.lstsq(A.mT, verigrad.tensor(np.ones((2, 1))), driver=driver)
        assert wide.residuals.shape == (0,) and wide.residuals.requires_grad
        tall = verigrad.linalg.lstsq(A, verigrad.tensor(np.ones((3, 1))), driver=driver)
        assert not tall.singular_values.requires_grad and not tall.rank.requires_grad


def test_pinv_of_non_finite_values_raises_as_pytorchs():
    """PyTorch's pinv raises on NaN or inf; LAPACK's SVD of such a matrix may not return at all."""
    for bad in (np.nan, np.inf):
        a = np.array([[bad, 1.0], [2.0, 3.0]])
        with pytest.raises(np.linalg.LinAlgError, match="non-finite"):
            verigrad.linalg.pinv(verigrad.tensor(a))

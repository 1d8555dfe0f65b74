"""verigrad.linalg and the top-level linear algebra functions against hand-computed values: products,
powers, (log) determinants, trace (and the IR tracer under the same name), the decompositions, pinv and
the norms."""

from __future__ import annotations

import math

import numpy as np
import pytest

import verigrad
from verigrad import linalg


def t(values) -> verigrad.Tensor:
    return verigrad.tensor(np.array(values, dtype=np.float64))


def test_products_by_hand() -> None:
    assert verigrad.dot(t([1, 2, 3]), t([4, 5, 6])).item() == 32
    assert verigrad.vdot(t([1, 2]), t([3, 4])).item() == 11
    np.testing.assert_array_equal(verigrad.inner(t([[1, 2], [3, 4]]), t([1, 1])).numpy(), [3, 7])
    out = verigrad.tensordot(verigrad.ones(2, 3, 4), verigrad.ones(3, 4, 5), 2)
    assert out.shape == (2, 5) and out.numpy().max() == 12
    assert verigrad.tensordot(verigrad.ones(2), verigrad.ones(3), 0).shape == (2, 3)


def test_matrix_power_by_hand() -> None:
    shear = t([[1, 1], [0, 1]])
    np.testing.assert_array_equal(linalg.matrix_power(shear, 5).numpy(), [[1, 5], [0, 1]])
    np.testing.assert_array_equal(linalg.matrix_power(shear, 0).numpy(), np.eye(2))
    np.testing.assert_allclose(linalg.matrix_power(shear, -2).numpy(), [[1, -2], [0, 1]], atol=1e-15)
    with pytest.raises(verigrad.ShapeError, match="square"):
        linalg.matrix_power(verigrad.ones(2, 3), 2)


def test_determinants_by_hand() -> None:
    sign, logabs = verigrad.slogdet(t([[-2, 0], [0, 3]]))
    assert sign.item() == -1 and math.isclose(logabs.item(), math.log(6), rel_tol=1e-15)
    assert math.isclose(verigrad.logdet(t([[2, 0], [0, 3]])).item(), math.log(6), rel_tol=1e-15)
    assert math.isnan(verigrad.logdet(t([[-2, 0], [0, 3]])).item())
    assert verigrad.logdet(t([[0, 0], [0, 3]])).item() == -math.inf


def test_trace_takes_a_tensor_or_a_function() -> None:
    assert verigrad.trace(t([[1, 2], [3, 4]])).item() == 5
    assert isinstance(verigrad.trace(lambda x: x + 1, verigrad.spec([2])), verigrad.Program)
    with pytest.raises(TypeError, match="one matrix"):
        verigrad.trace(t([[1.0]]), verigrad.spec([2]))


def test_decompositions_by_hand() -> None:
    np.testing.assert_allclose(linalg.cholesky(t([[4, 2], [2, 3]])).numpy(), [[2, 0], [1, math.sqrt(2)]])
    upper = linalg.cholesky(t([[4, 2], [9, 3]]), upper=True)  # reads the upper triangle
    np.testing.assert_allclose(upper.numpy(), [[2, 1], [0, math.sqrt(2)]])
    np.testing.assert_allclose(linalg.eigvalsh(t([[2, 1], [1, 2]])).numpy(), [1, 3], rtol=1e-15)
    np.testing.assert_allclose(linalg.eigvalsh(t([[2, 7], [1, 2]])).numpy(), [1, 3], rtol=1e-15)  # the lower
    np.testing.assert_allclose(linalg.svdvals(t([[3, 0], [0, -4]])).numpy(), [4, 3])
    q, r = linalg.qr(t([[3, 0], [4, 5]]))
    np.testing.assert_allclose((q @ r).numpy(), [[3, 0], [4, 5]], atol=1e-14)
    np.testing.assert_allclose(np.abs(r.numpy()), [[5, 4], [0, 3]], atol=1e-14)
    np.testing.assert_allclose(linalg.pinv(t([[2, 0], [0, 0]])).numpy(), [[0.5, 0], [0, 0]])


def test_norms_by_hand() -> None:
    a = t([[1, -2], [3, 4]])
    assert linalg.matrix_norm(a, math.inf).item() == 7
    assert linalg.matrix_norm(a, 1).item() == 6
    assert linalg.matrix_norm(a, -1).item() == 4
    assert math.isclose(linalg.matrix_norm(a).item(), math.sqrt(30), rel_tol=1e-15)
    assert math.isclose(linalg.norm(t([[3, 0], [0, -4]]), "nuc").item(), 7, rel_tol=1e-15)
    assert math.isclose(verigrad.norm(t([[3, 0], [0, -4]]), p="nuc").item(), 7, rel_tol=1e-15)
    assert linalg.vector_norm(a, math.inf).item() == 4
    assert linalg.norm(t([3, 4])).item() == 5
    with pytest.raises(ValueError, match="ord"):
        linalg.matrix_norm(a, 3)
    with pytest.raises(ValueError, match="'fro' or 'nuc'"):
        verigrad.norm(a, p="max")


def test_lstsq_by_hand() -> None:
    result = linalg.lstsq(t([[1, 0], [0, 1], [0, 0]]), t([1, 2, 3]))
    np.testing.assert_allclose(result.solution.numpy(), [1, 2], atol=1e-15)
    assert int(result.rank.item()) == 2 and result.residuals.shape == (0,)
    assert int(linalg.lstsq(t([[1, 1], [1, 1]]), t([[2], [2]])).rank.item()) == 1
    with pytest.raises(RuntimeError, match="driver"):
        linalg.lstsq(t([[1.0]]), t([1.0]), driver="qr")

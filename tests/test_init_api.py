"""nn.init's additions against hand-computed values: the gains of every nonlinearity, eye_,
trunc_normal_'s bounds, orthogonal_ and sparse_; and the refusals."""

from __future__ import annotations

import math

import numpy as np
import pytest

import verigrad
from verigrad.nn import init


def test_gains_by_hand() -> None:
    for name in ("linear", "conv1d", "conv3d", "conv_transpose1d", "conv_transpose3d", "sigmoid"):
        assert init.calculate_gain(name) == 1
    assert init.calculate_gain("tanh") == 5 / 3 and init.calculate_gain("selu") == 0.75
    assert init.calculate_gain("leaky_relu") == math.sqrt(2 / (1 + 0.01**2))
    assert init.calculate_gain("leaky_relu", 1) == 1.0
    with pytest.raises(ValueError, match="unknown nonlinearity 'identity'"):
        init.calculate_gain("identity")
    with pytest.raises(ValueError, match="not a valid number"):
        init.calculate_gain("leaky_relu", True)


def test_eye_and_refusals() -> None:
    np.testing.assert_array_equal(init.eye_(verigrad.empty(2, 3)).numpy(), [[1, 0, 0], [0, 1, 0]])
    with pytest.raises(ValueError, match="2 dimensions"):
        init.eye_(verigrad.empty(2))
    with pytest.raises(ValueError, match="2 or more"):
        init.orthogonal_(verigrad.empty(3))
    with pytest.raises(ValueError, match="a must be below b"):
        init.trunc_normal_(verigrad.empty(3), a=1.0, b=0.0)


def test_trunc_normal_stays_within_its_bounds() -> None:
    t = init.trunc_normal_(verigrad.empty(100, 100, dtype="f64"), mean=1.0, std=3.0, a=0.0, b=1.5)
    values = t.numpy()
    assert t.dtype.name == "f64" and values.min() >= 0.0 and values.max() <= 1.5
    assert 0.7 < values.mean() < 0.8  # the mean of N(1, 9) truncated to [0, 1.5] is about 0.747


def test_orthogonal_and_sparse_by_hand() -> None:
    q = init.orthogonal_(verigrad.empty(4, 3, dtype="f64"), gain=3.0).numpy()
    np.testing.assert_allclose(q.T @ q, 9 * np.eye(3), atol=1e-12)
    s = init.sparse_(verigrad.empty(5, 4), 0.3).numpy()
    np.testing.assert_array_equal((s == 0).sum(0), [2, 2, 2, 2])  # ceil(0.3 * 5)

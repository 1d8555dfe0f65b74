"""The activations added for PyTorch's set, by hand: threshold, the shrinks, tanhshrink, softmin, rrelu
in eval, softmax's implicit dim, and inplace=True writing into an input outside any gradient."""

from __future__ import annotations

import numpy as np
import pytest

import verigrad
import verigrad.nn.functional as F
from verigrad import nn

X = np.array([-2.0, -0.5, -0.25, 0.0, 0.25, 0.5, 2.0])


def _t(a=X) -> verigrad.Tensor:
    return verigrad.tensor(np.asarray(a, np.float64))


def test_shrinks_and_threshold_by_hand() -> None:
    assert F.hardshrink(_t(), 0.3).numpy().tolist() == [-2.0, -0.5, 0.0, 0.0, 0.0, 0.5, 2.0]
    assert F.softshrink(_t(), 0.25).numpy().tolist() == [-1.75, -0.25, 0.0, 0.0, 0.0, 0.25, 1.75]
    assert F.threshold(_t(), 0.25, 9.0).numpy().tolist() == [9.0, 9.0, 9.0, 9.0, 9.0, 0.5, 2.0]
    np.testing.assert_allclose(F.tanhshrink(_t()).numpy(), X - np.tanh(X), rtol=1e-15)
    assert nn.Hardshrink(0.3)(_t()).numpy().tolist() == F.hardshrink(_t(), 0.3).numpy().tolist()


def test_softmin_and_rrelu_in_eval() -> None:
    x = np.array([[1.0, 2.0], [0.0, -1.0]])
    e = np.exp(-x)
    np.testing.assert_allclose(F.softmin(_t(x), 1).numpy(), e / e.sum(1, keepdims=True), rtol=1e-15)
    np.testing.assert_allclose(nn.Softmin(0)(_t(x)).numpy(), e / e.sum(0, keepdims=True), rtol=1e-15)
    slope = (0.1 + 0.3) / 2
    np.testing.assert_allclose(
        nn.RReLU(0.1, 0.3).eval()(_t()).numpy(), np.where(X > 0, X, X * slope), rtol=1e-15
    )
    with pytest.raises(ValueError, match="lower <= upper"):
        F.rrelu(_t(), 0.5, 0.1)


def test_softmax_without_dim_takes_pytorchs_implicit_one() -> None:
    x = np.arange(24.0).reshape(2, 3, 4) / 10
    with pytest.warns(UserWarning, match="Implicit dimension choice for softmax"):
        got = F.softmax(_t(x))
    e = np.exp(x)
    np.testing.assert_allclose(got.numpy(), e / e.sum(0, keepdims=True), rtol=1e-14)  # dim 0 for 3-D
    with pytest.warns(UserWarning, match="Implicit dimension choice for log_softmax"):
        assert nn.LogSoftmax()(_t(x[0])).shape == (3, 4)


def test_inplace_writes_into_the_input_and_the_forms_ending_in_underscore() -> None:
    x = _t()
    assert F.leaky_relu(x, 0.5, inplace=True) is x and x.numpy()[0] == -1.0
    y = _t()
    assert F.relu_(y) is y and float(y.numpy().min()) == 0.0
    leaf = _t().requires_grad_()
    for write in (lambda t: F.relu(t, inplace=True), F.selu_, nn.ReLU(inplace=True)):
        with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an"):
            write(leaf)
    h = leaf * 3.0  # not a leaf: written in place, the write recorded
    assert F.relu(h, inplace=True) is h and h.numpy()[0] == 0.0
    h.sum().backward()
    assert leaf.grad.tolist() == [3.0 if v > 0 else 0.0 for v in leaf.tolist()]

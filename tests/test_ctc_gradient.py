"""ctc_loss's gradient for log_probs that are not log_softmax outputs: PyTorch's exp(lp) - posterior."""

from __future__ import annotations

import math

import numpy as np
import pytest

import verigrad
import verigrad.nn.functional as F


def test_gradient_is_exp_log_probs_minus_the_posterior() -> None:
    # one step, target [1]: the only alignment emits 1, posterior [0, 1]; the step past sample 1's input
    # length and sample 1 itself (no alignment: 2 labels in 1 step, zero_infinity) get no gradient
    lp = np.array([[[0.3, -0.2], [0.1, 0.4]], [[0.5, 0.7], [0.2, 0.6]]])  # [T=2, N=2, C=2]
    x = verigrad.tensor(lp, requires_grad=True)
    loss = F.ctc_loss(x, np.array([[1, 1], [1, 1]]), [1, 1], [1, 2], reduction="sum", zero_infinity=True)
    loss.backward()
    np.testing.assert_allclose(loss.item(), 0.2)
    want = np.zeros_like(lp)
    want[0, 0] = [math.exp(0.3), math.exp(-0.2) - 1.0]
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-15)


def test_through_log_softmax_the_exp_term_vanishes() -> None:
    rng = np.random.default_rng(0)
    logits = verigrad.tensor(rng.standard_normal((4, 1, 3)), requires_grad=True)
    F.ctc_loss(F.log_softmax(logits, 2), np.array([[1, 2]]), [4], [2]).backward()
    np.testing.assert_allclose(logits.grad.numpy().sum(2), 0.0, atol=1e-15)  # softmax's: rows sum to 0


def test_no_alignment_gives_a_nan_gradient_without_zero_infinity() -> None:
    # PyTorch's: (exp(lp) - exp(-inf + inf - lp)) * g is NaN for a sample whose target cannot fit
    lp = np.log(np.full((2, 1, 3), 1 / 3))
    x = verigrad.tensor(lp, requires_grad=True)
    loss = F.ctc_loss(x, np.array([[1, 1]]), [2], [2], reduction="sum")
    assert loss.item() == math.inf
    loss.backward()
    assert np.isnan(x.grad.numpy()).all()


def test_a_second_derivative_is_refused_as_pytorch() -> None:
    x = verigrad.tensor(np.log(np.full((3, 1, 3), 1 / 3)), requires_grad=True)
    (g,) = verigrad.autograd.grad(F.ctc_loss(x, np.array([[1]]), [3], [1]), x, create_graph=True)
    with pytest.raises(NotImplementedError, match="derivative of ctc_loss's gradient is not implemented"):
        g.sum().backward()

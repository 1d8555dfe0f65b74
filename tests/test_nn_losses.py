"""The classification losses' rules worked out by hand: cross_entropy and nll_loss with weights,
ignore_index, label smoothing, class probabilities and [N, C, d] inputs; the legacy size_average and
reduce; the loss modules' settings."""

from __future__ import annotations

import contextlib
import math

import numpy as np
import pytest

import verigrad
import verigrad.nn.functional as F
from verigrad import nn

TIGHT = {"rtol": 1e-12, "atol": 1e-12}


def _log_softmax(x: np.ndarray, axis: int) -> np.ndarray:
    shifted = x - x.max(axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis, keepdims=True))


def test_weighted_cross_entropy_ignores_and_smooths_by_hand() -> None:
    x = np.array([[1.0, 2.0, 0.5], [0.0, -1.0, 3.0], [2.0, 2.0, 2.0]])
    target, weight = np.array([1, -100, 2]), np.array([0.5, 2.0, 4.0])
    log_p = _log_softmax(x, 1)
    nll = [-2.0 * log_p[0, 1], 0.0, -4.0 * log_p[2, 2]]
    smooth = [-(log_p[0] * weight).sum(), 0.0, -(log_p[2] * weight).sum()]
    loss = F.cross_entropy(
        verigrad.tensor(x),
        verigrad.tensor(target),
        verigrad.tensor(weight),
        reduction="none",
        label_smoothing=0.3,
    )
    np.testing.assert_allclose(loss.numpy(), 0.7 * np.array(nll) + 0.1 * np.array(smooth), **TIGHT)
    mean = F.cross_entropy(
        verigrad.tensor(x), verigrad.tensor(target), verigrad.tensor(weight), label_smoothing=0.3
    )
    np.testing.assert_allclose(mean.item(), (0.7 * sum(nll) + 0.1 * sum(smooth)) / 6.0, **TIGHT)  # 2 + 4


def test_cross_entropy_of_probabilities_and_of_positions_by_hand() -> None:
    x = np.array([[[1.0, 0.0], [2.0, -1.0], [0.0, 0.5]]])  # [N=1, C=3, d=2]
    p = np.exp(_log_softmax(np.array([[[0.3, 1.0], [0.1, 0.0], [-0.2, 0.4]]]), 1))
    log_p = _log_softmax(x, 1)
    per_position = -(p * log_p).sum(1)  # [1, 2]
    got = F.cross_entropy(verigrad.tensor(x), verigrad.tensor(p), reduction="none")
    np.testing.assert_allclose(got.numpy(), per_position, **TIGHT)
    np.testing.assert_allclose(
        F.cross_entropy(verigrad.tensor(x), verigrad.tensor(p)).item(), per_position.mean()
    )
    classes = np.array([[2, 0]])
    np.testing.assert_allclose(
        F.nll_loss(verigrad.tensor(log_p), verigrad.tensor(classes), reduction="none").numpy(),
        [[-log_p[0, 2, 0], -log_p[0, 0, 1]]],
        **TIGHT,
    )
    one = F.cross_entropy(verigrad.tensor(x[0, :, 0]), verigrad.tensor(2))  # [C] and a [] target
    np.testing.assert_allclose(one.item(), -log_p[0, 2, 0], **TIGHT)


def test_every_target_ignored_gives_nan_as_pytorch() -> None:
    loss = F.cross_entropy(verigrad.randn(2, 3), verigrad.tensor([-100, -100]))
    assert math.isnan(loss.item())


@pytest.mark.parametrize(
    ("size_average", "reduce", "reduction"),
    [
        (None, None, "mean"),
        (True, None, "mean"),
        (False, None, "sum"),
        (None, False, "none"),
        (False, True, "sum"),
    ],
)
def test_legacy_arguments_map_to_a_reduction(size_average, reduce, reduction) -> None:
    legacy = size_average is not None or reduce is not None
    with pytest.warns(UserWarning, match=f"reduction='{reduction}'") if legacy else contextlib.nullcontext():
        module = nn.NLLLoss(None, size_average, -100, reduce)
    assert module.reduction == reduction and module.ignore_index == -100 and module.weight is None


def test_loss_modules_take_pytorchs_positions() -> None:
    ce = nn.CrossEntropyLoss(verigrad.ones(3), None, 1, None, "sum", 0.1)
    assert (ce.ignore_index, ce.reduction, ce.label_smoothing) == (1, "sum", 0.1)
    assert [n for n, _ in ce.named_buffers()] == ["weight"]
    assert nn.HuberLoss("sum", 0.5).delta == 0.5 and nn.PoissonNLLLoss(False, True).full
    with pytest.raises(TypeError):
        nn.MSELoss(None, None, "mean", 1)  # one argument too many
    with pytest.raises(TypeError, match="weight must be a tensor"):
        nn.BCELoss("sum")


def test_multilabel_margin_loss_by_hand() -> None:
    """PyTorch's documented example: classes 3 and 0 (the list ends at -1), the others 1 and 2."""
    x, y = verigrad.tensor([[0.1, 0.2, 0.4, 0.8]]), verigrad.tensor([[3, 0, -1, 1]])
    np.testing.assert_allclose(F.multilabel_margin_loss(x, y).item(), 0.85, rtol=1e-6)
    with pytest.raises(IndexError, match="target 4 is out of range"):
        F.multilabel_margin_loss(x, verigrad.tensor([[4, -1, 0, 0]]))

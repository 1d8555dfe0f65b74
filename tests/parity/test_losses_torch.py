"""The losses (regression, classification, margin, likelihood, CTC) against PyTorch's: values and
gradients."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from gradients import check_values_and_gradients as _check

import verigrad
import verigrad.nn.functional as F
from verigrad import nn

RNG = np.random.default_rng(11)


PRED, TARGET = RNG.standard_normal((4, 5)), RNG.standard_normal((4, 5))


REDUCTIONS = ["mean", "sum", "none"]


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize(
    ("ours", "theirs"),
    [
        (F.mse_loss, TF.mse_loss),
        (F.l1_loss, TF.l1_loss),
        (
            lambda x, t, **kw: F.smooth_l1_loss(x, t, beta=0.7, **kw),
            lambda x, t, **kw: TF.smooth_l1_loss(x, t, beta=0.7, **kw),
        ),
        (
            lambda x, t, **kw: F.smooth_l1_loss(x, t, beta=0.0, **kw),
            lambda x, t, **kw: TF.smooth_l1_loss(x, t, beta=0.0, **kw),
        ),
        (
            lambda x, t, **kw: F.huber_loss(x, t, delta=0.8, **kw),
            lambda x, t, **kw: TF.huber_loss(x, t, delta=0.8, **kw),
        ),
    ],
)
def test_regression_losses(ours, theirs, reduction) -> None:
    _check(
        {"x": PRED, "t": TARGET},
        lambda x, t: ours(x, t, reduction=reduction),
        lambda x, t: theirs(x, t, reduction=reduction),
    )


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_nll_loss_with_an_ignored_class(reduction) -> None:
    target = np.array([1, -100, 4, 0])
    _check(
        {"x": PRED},
        lambda x: F.nll_loss(x.log_softmax(-1), verigrad.tensor(target), reduction=reduction),
        lambda x: TF.nll_loss(x.log_softmax(-1), torch.from_numpy(target), reduction=reduction),
    )
    _check(
        {"x": PRED},
        lambda x: nn.NLLLoss(ignore_index=4)(x, verigrad.tensor(target[[0, 2, 2, 3]])),
        lambda x: torch.nn.NLLLoss(ignore_index=4)(x, torch.from_numpy(target[[0, 2, 2, 3]])),
    )


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_binary_cross_entropy(reduction) -> None:
    probs, labels = 1 / (1 + np.exp(-PRED)), (TARGET > 0).astype(np.float64)
    _check(
        {"p": probs},
        lambda p: F.binary_cross_entropy(p, verigrad.tensor(labels), reduction=reduction),
        lambda p: TF.binary_cross_entropy(p, torch.from_numpy(labels), reduction=reduction),
    )
    logits = PRED * 30  # large magnitudes: the logits form must not overflow
    _check(
        {"x": logits, "t": 1 / (1 + np.exp(-TARGET))},
        lambda x, t: nn.BCEWithLogitsLoss(reduction=reduction)(x, t),
        lambda x, t: torch.nn.BCEWithLogitsLoss(reduction=reduction)(x, t),
    )
    edges = np.array([0.0, 1.0, 1.0, 0.0])  # log(0): PyTorch bounds each log below by -100
    ours = F.binary_cross_entropy(
        verigrad.tensor(edges), verigrad.tensor([0.0, 0.0, 1.0, 1.0]), reduction="none"
    )
    theirs = TF.binary_cross_entropy(
        torch.from_numpy(edges), torch.tensor([0.0, 0.0, 1.0, 1.0], dtype=torch.float64), reduction="none"
    )
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_with_label_smoothing(reduction) -> None:
    classes = np.array([0, 4, 2, 1])
    _check(
        {"x": PRED},
        lambda x: F.cross_entropy(x, verigrad.tensor(classes), reduction=reduction, label_smoothing=0.2),
        lambda x: TF.cross_entropy(x, torch.tensor(classes), reduction=reduction, label_smoothing=0.2),
    )
    loss = nn.CrossEntropyLoss(label_smoothing=0.1)(verigrad.tensor(PRED), verigrad.tensor(classes))
    expected = torch.nn.CrossEntropyLoss(label_smoothing=0.1)(torch.tensor(PRED), torch.tensor(classes))
    np.testing.assert_allclose(loss.numpy(), expected.numpy(), rtol=1e-12)


@pytest.mark.filterwarnings("ignore:reduction. 'mean' divides the total loss:UserWarning")  # PyTorch's kl_div
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_weighted_losses(reduction: str) -> None:
    logits, target = RNG.standard_normal((6, 4)), np.array([0, 3, -100, 1, 3, 2])
    weight = np.array([0.5, 2.0, 1.0, 3.0])
    _check(
        {"x": logits},
        lambda x: F.cross_entropy(
            x, verigrad.tensor(target), reduction=reduction, weight=verigrad.tensor(weight), ignore_index=-100
        ),
        lambda x: TF.cross_entropy(x, torch.tensor(target), torch.tensor(weight), reduction=reduction),
    )
    _check(
        {"x": logits},
        lambda x: nn.CrossEntropyLoss(reduction=reduction, ignore_index=-100)(x, verigrad.tensor(target)),
        lambda x: torch.nn.CrossEntropyLoss(reduction=reduction)(x, torch.tensor(target)),
    )
    labels = (RNG.random((6, 4)) > 0.5).astype(np.float64)
    _check(
        {"x": logits},
        lambda x: F.binary_cross_entropy_with_logits(
            x, verigrad.tensor(labels), reduction=reduction, pos_weight=verigrad.tensor(weight)
        ),
        lambda x: TF.binary_cross_entropy_with_logits(
            x, torch.tensor(labels), reduction=reduction, pos_weight=torch.tensor(weight)
        ),
    )
    target_p = np.exp(RNG.standard_normal((6, 4)))
    target_p[0, 0] = 0.0  # a zero target adds nothing
    target_p /= target_p.sum(1, keepdims=True)
    for mode, log_target, given in [
        (reduction, False, target_p),
        ("batchmean", False, target_p),
        (reduction, True, np.log(target_p + 1e-3)),
    ]:
        _check(
            {"x": logits},
            lambda x, m=mode, lt=log_target, g=given: F.kl_div(
                F.log_softmax(x, 1), verigrad.tensor(g), reduction=m, log_target=lt
            ),
            lambda x, m=mode, lt=log_target, g=given: TF.kl_div(
                TF.log_softmax(x, 1), torch.tensor(g), reduction=m, log_target=lt
            ),
        )


def _signs(n: int) -> np.ndarray:
    return np.where(np.arange(n) % 3 == 0, -1.0, 1.0)


LOSSES = {
    "margin_ranking_loss": (lambda r: {"a": r((6,)), "b": r((6,)), "y": _signs(6)}, {"margin": 0.3}),
    "hinge_embedding_loss": (lambda r: {"a": r((4, 3)), "y": np.tile(_signs(3), (4, 1))}, {"margin": 0.8}),
    "soft_margin_loss": (lambda r: {"a": r((4, 3)), "y": np.tile(_signs(3), (4, 1))}, {}),
    "cosine_embedding_loss": (lambda r: {"a": r((5, 4)), "b": r((5, 4)), "y": _signs(5)}, {"margin": 0.1}),
    "triplet_margin_loss": (lambda r: {"a": r((5, 4)), "b": r((5, 4)), "c": r((5, 4))}, {"margin": 0.5}),
    "poisson_nll_loss": (lambda r: {"a": r((4, 3)), "t": np.abs(r((4, 3))) * 3}, {"full": True}),
    "gaussian_nll_loss": (
        lambda r: {"a": r((4, 3)), "t": r((4, 3)), "v": np.abs(r((4,))) + 0.1},
        {"full": True, "eps": 0.2},
    ),
}


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("name", sorted(LOSSES))
def test_margin_and_likelihood_losses(name, reduction) -> None:
    """Values and gradients of every float input, as PyTorch's; the target is a constant where it is one."""
    make, settings = LOSSES[name]
    arrays = make(lambda shape: RNG.standard_normal(shape))
    constants = {k: arrays.pop(k) for k in ("y",) if k in arrays}
    if name == "poisson_nll_loss":
        constants["t"] = arrays.pop("t")
    ours_fn, theirs_fn = getattr(F, name), getattr(TF, name)
    _check(
        arrays,
        lambda **a: ours_fn(
            *a.values(), *map(verigrad.tensor, constants.values()), **settings, reduction=reduction
        ),
        lambda **a: theirs_fn(
            *a.values(), *map(torch.from_numpy, constants.values()), **settings, reduction=reduction
        ),
    )


def test_multi_margin_loss_and_pairwise_distance() -> None:
    x, y, w = RNG.standard_normal((5, 4)), np.array([0, 3, 1, 1, 2]), np.array([0.5, 1.0, 2.0, 1.5])
    for p in (1, 2):
        _check(
            {"x": x},
            lambda x: F.multi_margin_loss(x, verigrad.tensor(y), p=p, margin=0.7, weight=verigrad.tensor(w)),
            lambda x: TF.multi_margin_loss(
                x, torch.from_numpy(y), p=p, margin=0.7, weight=torch.from_numpy(w)
            ),
        )
    _check(
        {"x": x[0]},
        lambda x: F.multi_margin_loss(x, verigrad.tensor(2)),
        lambda x: TF.multi_margin_loss(x, torch.tensor(2)),
    )
    a, b = RNG.standard_normal((3, 4)), RNG.standard_normal((3, 4))
    _check(
        {"a": a, "b": b},
        lambda a, b: F.pairwise_distance(a, b, 3.0),
        lambda a, b: TF.pairwise_distance(a, b, 3.0),
    )
    ours = nn.TripletMarginLoss(margin=0.5, swap=True)
    theirs = torch.nn.TripletMarginLoss(margin=0.5, swap=True)
    c = RNG.standard_normal((3, 4))
    _check({"a": a, "b": b, "c": c}, lambda a, b, c: ours(a, b, c), lambda a, b, c: theirs(a, b, c))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("layout", ["padded", "concatenated"])
def test_ctc_loss(reduction, layout) -> None:
    """F.ctc_loss and nn.CTCLoss: the loss and the gradient of the logits (through log_softmax) as
    PyTorch's, for targets padded or concatenated, repeated labels, shorter inputs and another blank;
    an input too short for its target: an infinite loss, or 0 with zero_infinity."""
    steps, classes = 12, 5
    logits = RNG.standard_normal((steps, 3, classes))
    padded = np.array([[1, 2, 2, 3], [3, 1, 3, 3], [4, 4, 4, 4]])
    lengths, inputs = np.array([3, 2, 4]), np.array([12, 9, 10])
    targets = padded if layout == "padded" else np.concatenate([r[:n] for r, n in zip(padded, lengths)])
    for blank in (0, classes - 1) if layout == "padded" else (0,):
        tg = np.where(padded == blank, 1, padded) if blank else targets

        def ours(x, tg=tg, blank=blank):
            return nn.CTCLoss(blank, reduction)(F.log_softmax(x, 2), tg, inputs, lengths)

        def theirs(x, tg=tg, blank=blank):
            args = (torch.from_numpy(tg), torch.from_numpy(inputs), torch.from_numpy(lengths))
            return torch.nn.CTCLoss(blank, reduction)(torch.log_softmax(x, 2), *args)

        _check({"x": logits}, ours, theirs)
    short = (np.array([1, 1, 2, 1, 2]), np.array([2, 4]), np.array([2, 3]))  # target 0 needs 3 steps
    for zero_infinity, expected in ((False, np.inf), (True, 0.0)):
        loss = F.ctc_loss(
            F.log_softmax(verigrad.tensor(logits[:4, :2]), 2),
            *short,
            reduction="none",
            zero_infinity=zero_infinity,
        )
        assert loss.numpy()[0] == expected and np.isfinite(loss.numpy()[1])

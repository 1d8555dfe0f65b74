"""Every loss in nn.functional and nn with PyTorch 2.13's signature (names, order, kinds, defaults), the
deprecated size_average/reduce mapped as PyTorch maps them, and cross_entropy and nll_loss in every
combination PyTorch allows (class indices or probabilities, [C] / [N, C] / [N, C, d1, ...], weight,
ignore_index, label_smoothing): values and gradients in f64."""

from __future__ import annotations

import inspect
import itertools
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from gradients import check_values_and_gradients as _check

import verigrad
import verigrad.nn.functional as F
from verigrad import nn

RNG = np.random.default_rng(3)
NOT_YET: set[str] = set()  # every loss PyTorch has is here
MADE_WITH = {"AdaptiveLogSoftmaxWithLoss": (8, 10, [4]), "LinearCrossEntropyLoss": (8, 10)}  # else no args
FUNCTIONS = sorted(n for n in dir(TF) if n.endswith("_loss") or n in ("cross_entropy", "nll_loss", "kl_div"))
FUNCTIONS += ["binary_cross_entropy", "binary_cross_entropy_with_logits"]
MODULES = sorted(n for n in dir(torch.nn) if n.endswith("Loss") and not n.startswith("_"))


def _shape_of(signature: inspect.Signature) -> list[tuple]:
    """(name, kind, default) of each parameter: what a caller sees, without the annotations."""
    return [(p.name, p.kind, p.default) for p in signature.parameters.values()]


@pytest.mark.parametrize("name", [n for n in FUNCTIONS if n not in NOT_YET])
def test_functional_losses_have_pytorchs_signature(name) -> None:
    ours, theirs = getattr(F, name), getattr(TF, name)
    assert _shape_of(inspect.signature(ours)) == _shape_of(inspect.signature(theirs))
    assert ours.__name__ == name and ours.__doc__


@pytest.mark.parametrize("name", [n for n in MODULES if n not in NOT_YET])
def test_loss_modules_have_pytorchs_signature(name) -> None:
    ours, theirs = getattr(nn, name), getattr(torch.nn, name)
    assert _shape_of(inspect.signature(ours)) == _shape_of(inspect.signature(theirs))
    assert _shape_of(inspect.signature(ours.forward)) == _shape_of(inspect.signature(theirs.forward))
    made = MADE_WITH.get(name, ())
    assert repr(ours(*made)) == repr(theirs(*made))


def test_the_missing_ones_are_the_known_ones() -> None:
    missing = {n for n in FUNCTIONS if not hasattr(F, n)} | {n for n in MODULES if not hasattr(nn, n)}
    assert missing == NOT_YET


@pytest.mark.parametrize(("size_average", "reduce"), list(itertools.product([None, True, False], repeat=2)))
def test_legacy_size_average_and_reduce_map_as_pytorchs(size_average, reduce) -> None:
    x, t = RNG.standard_normal((3, 4)), RNG.standard_normal((3, 4))
    legacy = size_average is not None or reduce is not None
    with warnings.catch_warnings(record=True) as ours_warned:
        warnings.simplefilter("always")
        ours = F.mse_loss(verigrad.tensor(x), verigrad.tensor(t), size_average, reduce)
        module = nn.L1Loss(size_average, reduce)
    with warnings.catch_warnings(record=True) as theirs_warned:
        warnings.simplefilter("always")
        theirs = TF.mse_loss(torch.tensor(x), torch.tensor(t), size_average, reduce)
        their_module = torch.nn.L1Loss(size_average, reduce)
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-12)
    assert module.reduction == their_module.reduction
    assert [str(w.message) for w in ours_warned] == [str(w.message) for w in theirs_warned]
    assert len(ours_warned) == (2 if legacy else 0)


def _targets(shape: tuple, classes: int, ignored: int | None) -> np.ndarray:
    target = RNG.integers(0, classes, shape)
    if ignored is not None and target.size > 1:
        target.flat[1] = ignored
    return target


CE_SHAPES = [(5,), (4, 5), (3, 5, 2), (2, 5, 3, 2)]


@pytest.mark.parametrize("shape", CE_SHAPES)
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("ignore_index", [None, -1, 2])
@pytest.mark.parametrize("label_smoothing", [0.0, 0.2])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_with_class_indices(shape, weighted, ignore_index, label_smoothing, reduction) -> None:
    classes = shape[1] if len(shape) > 1 else shape[0]
    target = _targets(shape[:1] + shape[2:] if len(shape) > 1 else (), classes, ignore_index)
    weight = RNG.uniform(0.5, 2.0, classes)
    settings = {"reduction": reduction, "label_smoothing": label_smoothing}
    if ignore_index is not None:
        settings["ignore_index"] = ignore_index
    x = RNG.standard_normal(shape)
    ours_w, theirs_w = (verigrad.tensor(weight), torch.tensor(weight)) if weighted else (None, None)
    _check(  # PyTorch takes no gradient of a class weight
        {"x": x},
        lambda x: F.cross_entropy(x, verigrad.tensor(target), ours_w, **settings),
        lambda x: TF.cross_entropy(x, torch.tensor(target), theirs_w, **settings),
    )
    _check(  # the module, with its weight as a buffer
        {"x": x},
        lambda x: nn.CrossEntropyLoss(verigrad.tensor(weight) if weighted else None, **settings)(
            x, verigrad.tensor(target)
        ),
        lambda x: torch.nn.CrossEntropyLoss(torch.tensor(weight) if weighted else None, **settings)(
            x, torch.tensor(target)
        ),
    )


@pytest.mark.parametrize("shape", CE_SHAPES)
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("label_smoothing", [0.0, 0.3])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_with_class_probabilities(shape, weighted, label_smoothing, reduction) -> None:
    arrays = {"x": RNG.standard_normal(shape), "p": _probabilities(shape)}
    if weighted:
        arrays["w"] = RNG.uniform(0.5, 2.0, shape[1] if len(shape) > 1 else shape[0])
    settings = {"reduction": reduction, "label_smoothing": label_smoothing}
    _check(
        arrays,
        lambda x, p, w=None: F.cross_entropy(x, p, w, **settings),
        lambda x, p, w=None: TF.cross_entropy(x, p, w, **settings),
    )


def _probabilities(shape: tuple) -> np.ndarray:
    axis = 1 if len(shape) > 1 else 0
    e = np.exp(RNG.standard_normal(shape))
    return e / e.sum(axis, keepdims=True)


@pytest.mark.parametrize("shape", CE_SHAPES)
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("ignore_index", [None, 1])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nll_loss_of_every_rank(shape, weighted, ignore_index, reduction) -> None:
    classes = shape[1] if len(shape) > 1 else shape[0]
    target = _targets(shape[:1] + shape[2:] if len(shape) > 1 else (), classes, ignore_index)
    settings = {"reduction": reduction} | ({} if ignore_index is None else {"ignore_index": ignore_index})
    weight = RNG.uniform(0.5, 2.0, classes)
    ours_w, theirs_w = (verigrad.tensor(weight), torch.tensor(weight)) if weighted else (None, None)
    _check(
        {"x": RNG.standard_normal(shape)},
        lambda x: F.nll_loss(x, verigrad.tensor(target), ours_w, **settings),
        lambda x: TF.nll_loss(x, torch.tensor(target), theirs_w, **settings),
    )


def test_classification_refusals_as_pytorchs() -> None:
    x = verigrad.tensor(RNG.standard_normal((3, 4)))
    for call, error, match in [
        (lambda: F.cross_entropy(x, verigrad.tensor([0, 1])), ValueError, r"class indices must be \[3\]"),
        (lambda: F.cross_entropy(x, verigrad.tensor([0, 1, 4])), IndexError, "target 4 is out of range"),
        (lambda: F.cross_entropy(x, verigrad.zeros(3, 3, dtype="f64")), ValueError, "shaped as the input"),
        (
            lambda: F.cross_entropy(x, verigrad.zeros(3, 4, dtype="f64"), ignore_index=1),
            ValueError,
            "ignore_index is not supported",
        ),
        (
            lambda: F.cross_entropy(x, verigrad.tensor([0, 1, 2]), label_smoothing=1.5),
            ValueError,
            "label_smoothing",
        ),
        (lambda: F.cross_entropy(x, verigrad.tensor([0, 1, 2]), reduction="avg"), ValueError, "reduction"),
        (
            lambda: F.nll_loss(x, verigrad.tensor([0, 1, 2]), verigrad.ones(3, dtype="f64")),
            ValueError,
            "weight",
        ),
        (lambda: F.mse_loss(x, x, weight=verigrad.ones(4, dtype="f64")), ValueError, "weight must be shaped"),
    ]:
        with pytest.raises(error, match=match):
            call()


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_weighted_regression_and_the_newer_losses(reduction) -> None:
    a, b, w = (RNG.standard_normal((3, 4)) for _ in range(3))
    w = np.abs(w)
    for ours, theirs in [(F.mse_loss, TF.mse_loss), (F.l1_loss, TF.l1_loss), (F.huber_loss, TF.huber_loss)]:
        _check(
            {"a": a, "b": b, "w": w},
            lambda a, b, w, f=ours: f(a, b, reduction=reduction, weight=w),
            lambda a, b, w, f=theirs: f(a, b, reduction=reduction, weight=w),
        )
    p, y = 1 / (1 + np.exp(-a)), (b > 0).astype(np.float64)
    _check(  # PyTorch takes no gradient of these weights
        {"p": p},
        lambda p: F.binary_cross_entropy(p, verigrad.tensor(y), verigrad.tensor(w[0]), reduction=reduction),
        lambda p: TF.binary_cross_entropy(p, torch.tensor(y), torch.tensor(w[0]), reduction=reduction),
    )
    _check(
        {"a": a},
        lambda a: F.binary_cross_entropy_with_logits(
            a, verigrad.tensor(y), verigrad.tensor(w), reduction=reduction
        ),
        lambda a: TF.binary_cross_entropy_with_logits(
            a, torch.tensor(y), torch.tensor(w), reduction=reduction
        ),
    )
    _check(
        {"a": a, "w": w[0]},
        lambda a, w: nn.MultiLabelSoftMarginLoss(w, reduction=reduction)(a, verigrad.tensor(y)),
        lambda a, w: torch.nn.MultiLabelSoftMarginLoss(w, reduction=reduction)(a, torch.tensor(y)),
    )
    c = RNG.standard_normal((3, 4))
    for swap, distance in itertools.product([False, True], [None, "cosine"]):
        _check(
            {"a": a, "b": b, "c": c},
            lambda a, b, c, s=swap, d=distance: nn.TripletMarginWithDistanceLoss(
                distance_function=None if d is None else lambda u, v: 1 - F.cosine_similarity(u, v),
                margin=0.7,
                swap=s,
                reduction=reduction,
            )(a, b, c),
            lambda a, b, c, s=swap, d=distance: torch.nn.TripletMarginWithDistanceLoss(
                distance_function=None if d is None else lambda u, v: 1 - TF.cosine_similarity(u, v),
                margin=0.7,
                swap=s,
                reduction=reduction,
            )(a, b, c),
        )
    _check(
        {"a": a, "b": b},
        lambda a, b: nn.GaussianNLLLoss(reduction=reduction)(a, b, 0.5),
        lambda a, b: torch.nn.GaussianNLLLoss(reduction=reduction)(a, b, 0.5),
    )
    log_p, target = F.log_softmax, _probabilities((3, 4))
    _check(
        {"a": a},
        lambda a: nn.KLDivLoss(reduction="batchmean" if reduction == "mean" else reduction)(
            log_p(a, 1), verigrad.tensor(target)
        ),
        lambda a: torch.nn.KLDivLoss(reduction="batchmean" if reduction == "mean" else reduction)(
            TF.log_softmax(a, 1), torch.tensor(target)
        ),
    )


def test_class_weights_are_buffers_as_pytorchs() -> None:
    ours = nn.CrossEntropyLoss(verigrad.ones(3))
    theirs = torch.nn.CrossEntropyLoss(torch.ones(3))
    assert list(ours.state_dict()) == list(theirs.state_dict()) == ["weight"]
    assert list(nn.BCEWithLogitsLoss(pos_weight=verigrad.ones(3)).state_dict()) == list(
        torch.nn.BCEWithLogitsLoss(pos_weight=torch.ones(3)).state_dict()
    )
    assert ours.ignore_index == -100 and ours.label_smoothing == 0.0 and ours.reduction == "mean"
    with pytest.raises(TypeError, match="size_average must be a bool or None"):
        nn.CrossEntropyLoss(None, "sum")
    x, w = verigrad.randn(3, 4), verigrad.ones(4, requires_grad=True)
    for call in [
        lambda: F.cross_entropy(x, verigrad.tensor([0, 1, 2]), w),
        lambda: F.nll_loss(x, verigrad.tensor([0, 1, 2]), w),
        lambda: F.binary_cross_entropy_with_logits(x, x, pos_weight=w),
    ]:
        with pytest.raises(RuntimeError, match="not differentiable with respect to"):
            call()
    with verigrad.no_grad():
        F.cross_entropy(x, verigrad.tensor([0, 1, 2]), w)
    assert F.cross_entropy(x, F.softmax(x, 1), w).requires_grad  # probabilities: it is differentiable


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("batched", [True, False])
def test_multilabel_margin_loss(reduction, batched) -> None:
    """Target lists ended by -1 (the rest ignored), a repeated class counted twice, as PyTorch's."""
    target = np.array([[3, 0, -1, 1, 2], [1, 1, 4, -1, -1], [-1, 2, 2, 2, 2], [0, 1, 2, 3, 4]])
    x = RNG.standard_normal((4, 5)) * 0.6
    if not batched:
        target, x = target[0], x[0]
    _check(
        {"x": x},
        lambda x: nn.MultiLabelMarginLoss(reduction=reduction)(x, verigrad.tensor(target)),
        lambda x: torch.nn.MultiLabelMarginLoss(reduction=reduction)(x, torch.tensor(target)),
    )

"""Loss functions written with ops, as in `torch.nn.functional`: cross_entropy, mse_loss, l1_loss,
smooth_l1_loss, huber_loss, nll_loss, binary_cross_entropy, binary_cross_entropy_with_logits, kl_div,
and the margin and likelihood losses (margin_ranking_loss, hinge_embedding_loss, soft_margin_loss,
cosine_embedding_loss, multi_margin_loss, triplet_margin_loss, poisson_nll_loss, gaussian_nll_loss).
Each takes `reduction`: "mean" (the default), "sum" or "none" (kl_div also "batchmean").
"""

from __future__ import annotations

import math

import numpy as np

from ... import ops
from ...autograd import no_grad
from ...errors import ShapeError
from ...functions import clamp
from ...ops import arange, log1p, minimum, relu, take, unsqueeze, where
from ...shapes import shape_text
from ...tensor import Tensor
from .activations import log_softmax
from .distance import pairwise_distance

REDUCTIONS = ("mean", "sum", "none")


def reduce(loss: Tensor, reduction: str, name: str) -> Tensor:
    """The per-element `loss` reduced as `reduction` says."""
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    if reduction == "none":
        return loss
    raise ValueError(f"{name}: reduction must be one of {', '.join(REDUCTIONS)}, got {reduction!r}")


def cross_entropy(
    input: Tensor,
    target: Tensor,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
    weight: Tensor | None = None,
    ignore_index: int | None = None,
) -> Tensor:
    """Cross-entropy of logits [N, C] against integer classes [N]; reduction 'mean', 'sum' or 'none'.
    With label_smoothing e, PyTorch's: (1 - e) times it plus e times the mean over classes of
    -log_softmax. With `weight` [C], each sample's loss times its class's weight, and 'mean' divides by
    the weights' sum; targets equal to `ignore_index` add nothing (and count for nothing in 'mean')."""
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing}")
    if weight is not None or ignore_index is not None:
        if label_smoothing:
            raise NotImplementedError("cross_entropy: label_smoothing with weight or ignore_index")
        if weight is not None and weight.shape != input.shape[-1:]:
            classes_text = shape_text(input.shape[-1:])
            raise ShapeError(f"cross_entropy: weight must be {classes_text}, got {shape_text(weight.shape)}")
        ignored = -100 if ignore_index is None else ignore_index  # PyTorch's default
        return nll_loss(log_softmax(input, -1), target, reduction, ignored, weight)
    if label_smoothing:
        nll = cross_entropy(input, target, reduction="none")
        uniform = -ops.log_softmax(input, axis=-1).mean(axis=-1)
        loss = nll * (1.0 - label_smoothing) + uniform * label_smoothing
        return reduce(loss, reduction, "cross_entropy")
    if isinstance(target, Tensor) and isinstance(target.payload, np.ndarray) and target.dtype.kind == "i":
        classes = input.shape[-1]
        values = target.payload
        if values.size and isinstance(classes, int) and (values.min() < 0 or values.max() >= classes):
            bad = values[(values < 0) | (values >= classes)][0]
            raise IndexError(f"cross_entropy: target {bad} is out of range for {classes} classes")
    return ops.cross_entropy(input, target, reduction=reduction)


def mse_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    """(input - target)^2."""
    diff = input - target
    return reduce(diff * diff, reduction, "mse_loss")


def l1_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    """|input - target|."""
    return reduce((input - target).abs(), reduction, "l1_loss")


def smooth_l1_loss(input: Tensor, target: Tensor, reduction: str = "mean", beta: float = 1.0) -> Tensor:
    """0.5 d^2 / beta where d = |input - target| < beta, else d - 0.5 beta (beta 0: the L1 loss)."""
    if beta < 0:
        raise ValueError(f"smooth_l1_loss: beta must be >= 0, got {beta}")
    d = (input - target).abs()
    if beta == 0:
        return reduce(d, reduction, "smooth_l1_loss")
    return reduce(where(d < beta, d * d * (0.5 / beta), d - 0.5 * beta), reduction, "smooth_l1_loss")


def huber_loss(input: Tensor, target: Tensor, reduction: str = "mean", delta: float = 1.0) -> Tensor:
    """0.5 d^2 where d = |input - target| < delta, else delta (d - 0.5 delta)."""
    if delta <= 0:
        raise ValueError(f"huber_loss: delta must be > 0, got {delta}")
    d = (input - target).abs()
    return reduce(where(d < delta, d * d * 0.5, (d - 0.5 * delta) * delta), reduction, "huber_loss")


def nll_loss(
    input: Tensor,
    target: Tensor,
    reduction: str = "mean",
    ignore_index: int = -100,
    weight: Tensor | None = None,
) -> Tensor:
    """-input[n, target[n]] for log-probabilities input [N, C] and integer classes target [N]; targets
    equal to `ignore_index` add nothing, and "mean" divides by the count of the others. With `weight`
    [C], each sample's loss times its class's weight, and "mean" divides by those weights' sum."""
    if input.ndim != 2 or target.ndim != 1:
        raise ValueError(
            f"nll_loss takes log-probabilities [N, C] and classes [N], got {input.ndim}-D and {target.ndim}-D"
        )
    if target.dtype.kind != "i":
        raise TypeError(f"nll_loss: the classes must be integers, got {target.dtype.name}")
    classes = input.shape[1]
    if isinstance(target.payload, np.ndarray) and isinstance(classes, int):
        t = target.payload
        bad = t[((t < 0) | (t >= classes)) & (t != ignore_index)]
        if bad.size:
            raise IndexError(f"nll_loss: target {bad[0]} is out of range for {classes} classes")
    chosen = unsqueeze(target, 1) == arange(0, classes)
    kept = target != ignore_index
    picked = where(chosen, input, 0.0).sum(1)
    if weight is None:
        loss = -where(kept, picked, 0.0)
        if reduction == "mean":
            return loss.sum() / kept.sum().cast(input.dtype)
        return reduce(loss, reduction, "nll_loss")
    weights = where(kept, take(weight, where(kept, target, 0), axis=0), 0.0)  # an ignored one reads class 0
    loss = -picked * weights
    return loss.sum() / weights.sum() if reduction == "mean" else reduce(loss, reduction, "nll_loss")


def binary_cross_entropy(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    """-(target log(input) + (1 - target) log(1 - input)) for probabilities input, each log bounded
    below by -100 as in PyTorch (so a 0 or 1 gives a large finite loss, not inf)."""
    log_p, log_q = input.log().clamp(min=-100.0), (1 - input).log().clamp(min=-100.0)
    return reduce(-(target * log_p + (1 - target) * log_q), reduction, "binary_cross_entropy")


def binary_cross_entropy_with_logits(
    input: Tensor, target: Tensor, reduction: str = "mean", pos_weight: Tensor | None = None
) -> Tensor:
    """binary_cross_entropy of sigmoid(input), formed from the logits without overflow:
    (1 - target) x + m + log(exp(-m) + exp(-x - m)) with m = max(-x, 0); with `pos_weight` (broadcast
    to the input, one per class), PyTorch's weighting of the positive term: (1 - target) x + (1 +
    (pos_weight - 1) target) (m + log(exp(-m) + exp(-x - m)))."""
    m = relu(-input)
    softplus = m + ((-m).exp() + (-input - m).exp()).log()  # log(1 + exp(-x))
    if pos_weight is None:
        loss = (1 - target) * input + softplus
    else:
        loss = (1 - target) * input + (1 + (pos_weight - 1) * target) * softplus
    return reduce(loss, reduction, "binary_cross_entropy_with_logits")


def kl_div(input: Tensor, target: Tensor, reduction: str = "mean", log_target: bool = False) -> Tensor:
    """target (log target - input) for log-probabilities input (0 where target is 0), or with
    `log_target` exp(target) (target - input); "batchmean" divides the sum by the batch size (the
    divergence PyTorch's "mean" does not give)."""
    if log_target:
        loss = target.exp() * (target - input)
    else:
        loss = where(target > 0, target * (where(target > 0, target, 1.0).log() - input), 0.0)
    if reduction == "batchmean":
        return loss.sum() / input.shape[0] if input.ndim else loss.sum()
    return reduce(loss, reduction, "kl_div")


def margin_ranking_loss(
    input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0, reduction: str = "mean"
) -> Tensor:
    """max(0, -target (input1 - input2) + margin), target 1 or -1: which input should rank higher."""
    return reduce(relu(-target * (input1 - input2) + margin), reduction, "margin_ranking_loss")


def hinge_embedding_loss(
    input: Tensor, target: Tensor, margin: float = 1.0, reduction: str = "mean"
) -> Tensor:
    """input where target is 1, max(0, margin - input) where it is -1."""
    loss = where(target == 1, input, 0.0) + where(target == -1, relu(margin - input), 0.0)
    return reduce(loss, reduction, "hinge_embedding_loss")


def soft_margin_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    """log(1 + exp(-target input)), target 1 or -1."""
    z = -target * input
    return reduce(relu(z) + log1p((-z.abs()).exp()), reduction, "soft_margin_loss")


_COSINE_EPS = 1e-12  # PyTorch's, added to each squared norm


def cosine_embedding_loss(
    input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0, reduction: str = "mean"
) -> Tensor:
    """1 - cos(input1, input2) where target is 1, max(0, cos - margin) where it is -1 (cos along the last
    dimension, each squared norm plus 1e-12, as PyTorch's)."""
    dim = input1.ndim - 1
    dot = (input1 * input2).sum(axis=dim)
    norms = ((input1 * input1).sum(axis=dim) + _COSINE_EPS) * ((input2 * input2).sum(axis=dim) + _COSINE_EPS)
    cos = dot / norms.sqrt()
    loss = where(target == 1, 1 - cos, 0.0) + where(target == -1, relu(cos - margin), 0.0)
    return reduce(loss, reduction, "cosine_embedding_loss")


def multi_margin_loss(
    input: Tensor,
    target: Tensor,
    p: int = 1,
    margin: float = 1.0,
    weight: Tensor | None = None,
    reduction: str = "mean",
) -> Tensor:
    """For scores [N, C] (or [C]) and classes [N]: the mean over the other classes j of
    max(0, margin - input[y] + input[j])^p (p 1 or 2), each sample's term weighted by weight[y]."""
    if p not in (1, 2):
        raise ValueError(f"multi_margin_loss: p must be 1 or 2, got {p}")
    scores = input if input.ndim == 2 else unsqueeze(input, 0)
    classes = target.reshape(-1)
    chosen = scores.gather(1, classes.reshape(-1, 1))
    hinge = relu(scores - chosen + margin)
    if p == 2:
        hinge = hinge * hinge
    if weight is not None:
        hinge = hinge * take(weight, classes).reshape(-1, 1)
    others = arange(0, scores.shape[1]) != classes.reshape(-1, 1)
    loss = where(others, hinge, 0.0).sum(axis=1) / scores.shape[1]
    return reduce(loss if input.ndim == 2 else loss.reshape(()), reduction, "multi_margin_loss")


def triplet_margin_loss(
    anchor: Tensor,
    positive: Tensor,
    negative: Tensor,
    margin: float = 1.0,
    p: float = 2.0,
    eps: float = 1e-6,
    swap: bool = False,
    reduction: str = "mean",
) -> Tensor:
    """max(0, d(anchor, positive) - d(anchor, negative) + margin), d the pairwise distance; with `swap`,
    the negative's distance is the smaller of its distances to anchor and positive."""
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = minimum(d_neg, pairwise_distance(positive, negative, p, eps))
    return reduce(relu(d_pos - d_neg + margin), reduction, "triplet_margin_loss")


def poisson_nll_loss(
    input: Tensor,
    target: Tensor,
    log_input: bool = True,
    full: bool = False,
    eps: float = 1e-8,
    reduction: str = "mean",
) -> Tensor:
    """exp(input) - target input for a log-rate (`log_input`), else input - target log(input + eps);
    `full` adds Stirling's target log(target) - target + log(2 pi target) / 2 where target > 1."""
    loss = input.exp() - target * input if log_input else input - target * (input + eps).log()
    if full:
        safe = where(target > 1, target, 1.0)
        stirling = safe * safe.log() - safe + 0.5 * (safe * (2 * math.pi)).log()
        loss = loss + where(target > 1, stirling, 0.0)
    return reduce(loss, reduction, "poisson_nll_loss")


def gaussian_nll_loss(
    input: Tensor,
    target: Tensor,
    var: Tensor,
    full: bool = False,
    eps: float = 1e-6,
    reduction: str = "mean",
) -> Tensor:
    """(log(var) + (input - target)^2 / var) / 2 (plus log(2 pi) / 2 if `full`), var at least eps (its
    gradient passes as if not clamped, as PyTorch's); a var with one dimension fewer, or a last one of 1,
    is one variance per row."""
    if var.ndim == input.ndim - 1:
        var = unsqueeze(var, -1)
    with no_grad():
        lifted = clamp(var, min=eps) - var  # what clamping adds, outside the gradient
    var = var + lifted
    loss = 0.5 * (var.log() + (input - target) * (input - target) / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return reduce(loss, reduction, "gaussian_nll_loss")

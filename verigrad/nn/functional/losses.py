"""Loss functions written with ops, as in `torch.nn.functional`: cross_entropy, mse_loss, l1_loss,
smooth_l1_loss, huber_loss, nll_loss, binary_cross_entropy, binary_cross_entropy_with_logits, kl_div,
and the margin and likelihood losses (margin_ranking_loss, hinge_embedding_loss, soft_margin_loss,
cosine_embedding_loss, multi_margin_loss, triplet_margin_loss, poisson_nll_loss, gaussian_nll_loss).
Each takes `reduction`: "mean" (the default), "sum" or "none" (kl_div also "batchmean").
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from ... import ops
from ...autograd import is_grad_enabled, no_grad
from ...errors import ShapeError
from ...functions import any as any_of
from ...functions import broadcast_tensors, clamp
from ...ops import arange, log1p, minimum, relu, take, unsqueeze, where
from ...ops._op import floating_only
from ...shapes import shape_text
from ...tensor import Tensor, describe
from .activations import log_softmax, logsigmoid
from .distance import pairwise_distance
from .loss_step import cross_entropy_kept

REDUCTIONS = ("mean", "sum", "none")


def reduce_loss(loss: Tensor, reduction: str, name: str) -> Tensor:
    """The per-element `loss` reduced as `reduction` says."""
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    if reduction == "none":
        return loss
    raise ValueError(f"{name}: reduction must be one of {', '.join(REDUCTIONS)}, got {reduction!r}")


reduce = reduce_loss  # the name ctc imports


def legacy_reduction(name: str, size_average: Any, reduce: Any) -> str:
    """PyTorch's mapping of the deprecated size_average and reduce (each None meaning True) to a
    reduction, with its warning: both true "mean", reduce alone "sum", else "none"."""
    for arg, value in (("size_average", size_average), ("reduce", reduce)):
        if value is not None and not isinstance(value, bool):
            raise TypeError(
                f"{name}: {arg} must be a bool or None (it is PyTorch's deprecated argument), got "
                f"{value!r}; give the reduction by name: reduction=..."
            )
    average, reduced = size_average is not False, reduce is not False
    reduction = "mean" if average and reduced else "sum" if reduced else "none"
    warnings.warn(
        f"size_average and reduce args will be deprecated, please use reduction='{reduction}' instead.",
        UserWarning,
        stacklevel=3,
    )
    return reduction


def checked_reduction(
    name: str, reduction: str, size_average: Any = None, reduce: Any = None, also: tuple[str, ...] = ()
) -> str:
    """The reduction to use: from the legacy arguments if either is given, else `reduction`, checked."""
    if size_average is not None or reduce is not None:
        return legacy_reduction(name, size_average, reduce)
    if reduction not in REDUCTIONS + also:
        allowed = ", ".join(REDUCTIONS + also)
        raise ValueError(f"{name}: reduction must be one of {allowed}, got {reduction!r}")
    return reduction


def _weighted(loss: Tensor, weight: Tensor | None, reduction: str, name: str, mean_by_weight: bool) -> Tensor:
    """PyTorch's optional element weights of mse_loss, l1_loss and huber_loss (shaped as the input):
    the loss times the weight, and "mean" the weighted sum over the weights' sum (mse and l1) or over
    the count (huber)."""
    if weight is None:
        return reduce_loss(loss, reduction, name)
    loss = loss * weight
    if reduction == "mean" and mean_by_weight:
        return loss.sum() / weight.sum()
    return reduce_loss(loss, reduction, name)


def _difference(name: str, input: Tensor, target: Tensor) -> Tensor:
    """input - target as PyTorch's pointwise losses take it: of different sizes, they warn as PyTorch's and
    are broadcast first (so that a 0-d operand's dtype counts as a dimensioned one's in the promotion)."""
    if tuple(target.shape) != tuple(input.shape):
        warnings.warn(
            f"{name}: using a target size ({tuple(target.shape)}) that is different to the input size "
            f"({tuple(input.shape)}). This will likely lead to incorrect results due to broadcasting. "
            "Please ensure they have the same size.",
            UserWarning,
            stacklevel=3,
        )
        input, target = broadcast_tensors(input, target)
    return input - target


def _constant_weights(name: str, **weights: Tensor | None) -> None:
    """PyTorch takes no gradient of these losses' weights: one that requires grad is refused."""
    for arg, weight in weights.items():
        if weight is not None and weight.requires_grad and is_grad_enabled():
            raise RuntimeError(
                f"{name} is not differentiable with respect to {arg} (as PyTorch's); it requires grad: "
                f"pass {arg}.detach()"
            )


def _check_weight_shape(name: str, input: Tensor, weight: Tensor | None) -> None:
    if weight is not None and tuple(weight.shape) != tuple(input.shape):
        raise ValueError(
            f"{name}: weight must be shaped as the input, {shape_text(input.shape)}; "
            f"got {shape_text(weight.shape)}"
        )


def _check_target_shape(name: str, input: Tensor, target: Tensor) -> None:
    if tuple(target.shape) != tuple(input.shape):
        raise ShapeError(
            f"{name}: target must be shaped as the input {shape_text(input.shape)}, "
            f"got {shape_text(target.shape)}"
        )


def cross_entropy(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    size_average: bool | None = None,
    ignore_index: int = -100,
    reduce: bool | None = None,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
) -> Tensor:
    """Cross-entropy of logits input [C], [N, C] or [N, C, d1, ...] (classes on dimension 1), as
    PyTorch's: against class indices ([], [N] or [N, d1, ...]) or class probabilities (a float target
    shaped as the input). `weight` [C] weighs each class; a target equal to `ignore_index` adds nothing
    (and counts for nothing in "mean", which divides by the summed weights of the targets);
    `label_smoothing` e mixes in the uniform distribution: (1 - e) nll + e / C sum_c -w_c log p_c."""
    reduction = checked_reduction("cross_entropy", reduction, size_average, reduce)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing}")
    classes = _check_class_input("cross_entropy", input, target, weight)
    if input.ndim == 1:  # one sample: as a batch of one
        out = cross_entropy(
            unsqueeze(input, 0),
            unsqueeze(target, 0),
            weight,
            None,
            ignore_index,
            None,
            reduction,
            label_smoothing,
        )
        return out.reshape(()) if reduction == "none" else out
    if target.dtype.is_float:
        if ignore_index != -100:
            raise ValueError("cross_entropy: ignore_index is not supported for class-probability targets")
        return _cross_entropy_probabilities(input, target, weight, reduction, label_smoothing, classes)
    _constant_weights("cross_entropy", weight=weight)
    if weight is None and not label_smoothing and input.ndim == 2:
        # the cross_entropy op: one kernel forward and one backward, which check the targets (eagerly, where
        # the logits require grad: both from one pass, loss_step.py)
        kept = cross_entropy_kept(input, target, reduction, ignore_index)
        if kept is not None:
            return kept
        return ops.cross_entropy(input, target, reduction=reduction, ignore_index=ignore_index)
    checked = _class_targets("cross_entropy", target, classes, ignore_index)
    log_p = log_softmax(input, 1)
    loss, weights = _class_nll(log_p, target, checked, weight, ignore_index)
    result = _class_reduce(loss, weights, reduction)
    if not label_smoothing:
        return result
    per_class = log_p if weight is None else log_p * _class_axis(weight, log_p.ndim)
    smooth = where(target != ignore_index, -per_class.sum(1), 0.0)
    return result * (1.0 - label_smoothing) + _class_reduce(smooth, weights, reduction) * (
        label_smoothing / classes
    )


def _cross_entropy_probabilities(
    input: Tensor, target: Tensor, weight: Tensor | None, reduction: str, smoothing: float, classes: Any
) -> Tensor:
    """PyTorch's cross-entropy against class probabilities: -sum_c w_c target_c log_softmax_c, "mean"
    over the samples (every position but the class dimension)."""
    if smoothing:
        target = target * (1.0 - smoothing) + smoothing / classes
    terms = log_softmax(input, 1) * target
    if weight is not None:
        terms = terms * _class_axis(weight, input.ndim)
    if reduction == "sum":
        return -terms.sum()
    loss = -terms.sum(1)
    return loss if reduction == "none" else loss.mean()


def _check_class_input(name: str, input: Tensor, target: Tensor, weight: Tensor | None) -> Any:
    """The number of classes, after PyTorch's checks of the shapes and dtypes of a classification loss's
    input [C], [N, C] or [N, C, d1, ...], target (indices, or for cross_entropy probabilities) and
    weight [C]."""
    if not isinstance(input, Tensor) or not isinstance(target, Tensor):
        raise TypeError(f"{name} takes tensors input and target")
    if input.ndim < 1 or not input.dtype.is_float:
        raise ValueError(
            f"{name}: input must be a float tensor [C], [N, C] or [N, C, d1, ...], got {describe(input)}"
        )
    classes = input.shape[1] if input.ndim > 1 else input.shape[0]
    if target.dtype.is_float and name == "cross_entropy":
        if tuple(target.shape) != tuple(input.shape):
            raise ShapeError(
                f"{name}: class-probability targets must be shaped as the input {shape_text(input.shape)}, "
                f"got {shape_text(target.shape)}"
            )
    elif target.dtype.name != "i64":  # PyTorch's kernels take Long indices only
        also = " or float class probabilities shaped as the input" if name == "cross_entropy" else ""
        raise TypeError(f"{name}: the classes must be int64 (Long) indices{also}, got {target.dtype.name}")
    else:
        want = tuple(input.shape[:1]) + tuple(input.shape[2:]) if input.ndim > 1 else ()
        if tuple(target.shape) != want:
            raise ShapeError(
                f"{name}: for input {shape_text(input.shape)} the class indices must be {shape_text(want)}, "
                f"got {shape_text(target.shape)}"
            )
    if weight is not None and (weight.ndim != 1 or weight.shape[0] != classes):
        raise ShapeError(
            f"{name}: weight must be [{classes}], got {shape_text(weight.shape)} (one weight per class)"
        )
    return classes


def _class_targets(name: str, target: Tensor, classes: Any, ignore_index: int) -> Tensor:
    """The class targets checked (`check_index`: an index outside [0, C) other than ignore_index raises
    IndexError, eagerly and in a compiled plan's every run), those equal to ignore_index made 0."""
    return ops.check_index(target, size=classes, name=name, what="target", ignore=ignore_index)


def _class_axis(weight: Tensor, ndim: int) -> Tensor:
    """weight [C] shaped to broadcast along dimension 1 of an [N, C, d1, ...] tensor."""
    return weight.reshape(-1, *([1] * (max(ndim, 2) - 2)))


def _class_nll(
    log_p: Tensor, target: Tensor, checked: Tensor, weight: Tensor | None, ignore_index: int
) -> tuple[Tensor, Tensor]:
    """(-w[t] log_p[t], w[t]) per sample of log_p [N, C, d1, ...] and target [N, d1, ...] (`checked`:
    `_class_targets`), both 0 where the target is ignored (w = 1 without weights). The class is picked
    by comparing with arange(C), so C may be symbolic."""
    hit = unsqueeze(checked, 1) == arange(0, log_p.shape[1]).reshape(-1, *([1] * (log_p.ndim - 2)))
    kept = target != ignore_index
    picked = where(hit, log_p, 0.0).sum(1)
    if weight is None:
        return where(kept, -picked, 0.0), kept.cast(log_p.dtype)
    weights = where(kept, where(hit, _class_axis(weight, log_p.ndim), 0.0).sum(1), 0.0)
    return where(kept, -picked * weights, 0.0), weights


def _class_reduce(loss: Tensor, weights: Tensor, reduction: str) -> Tensor:
    """PyTorch's reduction of nll_loss: "mean" divides by the summed weights of the targets kept."""
    if reduction == "mean":
        return loss.sum() / weights.sum()
    return loss.sum() if reduction == "sum" else loss


def mse_loss(
    input: Tensor,
    target: Tensor,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
    weight: Tensor | None = None,
) -> Tensor:
    """(input - target)^2, times `weight` (shaped as the input) if given."""
    reduction = checked_reduction("mse_loss", reduction, size_average, reduce)
    _check_weight_shape("mse_loss", input, weight)
    diff = _difference("mse_loss", input, target)
    return _weighted(diff * diff, weight, reduction, "mse_loss", mean_by_weight=True)


def l1_loss(
    input: Tensor,
    target: Tensor,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
    weight: Tensor | None = None,
) -> Tensor:
    """|input - target|, times `weight` (shaped as the input) if given."""
    reduction = checked_reduction("l1_loss", reduction, size_average, reduce)
    _check_weight_shape("l1_loss", input, weight)
    return _weighted(
        _difference("l1_loss", input, target).abs(), weight, reduction, "l1_loss", mean_by_weight=True
    )


def smooth_l1_loss(
    input: Tensor,
    target: Tensor,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
    beta: float = 1.0,
) -> Tensor:
    """0.5 d^2 / beta where d = |input - target| < beta, else d - 0.5 beta (beta 0: the L1 loss)."""
    floating_only(input.dtype, target.dtype, what="smooth_l1_loss")
    reduction = checked_reduction("smooth_l1_loss", reduction, size_average, reduce)
    if beta < 0:
        raise ValueError(f"smooth_l1_loss: beta must be >= 0, got {beta}")
    d = _difference("smooth_l1_loss", input, target).abs()
    if beta == 0:
        return reduce_loss(d, reduction, "smooth_l1_loss")
    return reduce_loss(where(d < beta, d * d * (0.5 / beta), d - 0.5 * beta), reduction, "smooth_l1_loss")


def huber_loss(
    input: Tensor,
    target: Tensor,
    reduction: str = "mean",
    delta: float = 1.0,
    weight: Tensor | None = None,
) -> Tensor:
    """0.5 d^2 where d = |input - target| < delta, else delta (d - 0.5 delta), in the input's dtype (as
    PyTorch's); times `weight` if given ("mean" then over the count, as PyTorch's)."""
    floating_only(input.dtype, target.dtype, what="huber_loss")
    reduction = checked_reduction("huber_loss", reduction)
    if delta <= 0:
        raise ValueError(f"huber_loss: delta must be > 0, got {delta}")
    _check_weight_shape("huber_loss", input, weight)
    d = _difference("huber_loss", input, target).abs()
    loss = where(d < delta, d * d * 0.5, (d - 0.5 * delta) * delta)
    if loss.dtype is not input.dtype:  # PyTorch's is the input's dtype, rounded from the promoted one
        loss = loss.cast(input.dtype)
    return _weighted(loss, weight, reduction, "huber_loss", mean_by_weight=False)


def nll_loss(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    size_average: bool | None = None,
    ignore_index: int = -100,
    reduce: bool | None = None,
    reduction: str = "mean",
) -> Tensor:
    """-input[n, target[n]] for log-probabilities [C], [N, C] or [N, C, d1, ...] (classes on dimension 1)
    and class indices [], [N] or [N, d1, ...]; targets equal to `ignore_index` add nothing, and "mean"
    divides by the count of the others. With `weight` [C], each sample's loss times its class's weight,
    and "mean" divides by those weights' sum."""
    reduction = checked_reduction("nll_loss", reduction, size_average, reduce)
    classes = _check_class_input("nll_loss", input, target, weight)
    _constant_weights("nll_loss", weight=weight)
    if input.ndim == 1:  # one sample: as a batch of one
        out = nll_loss(unsqueeze(input, 0), unsqueeze(target, 0), weight, None, ignore_index, None, reduction)
        return out.reshape(()) if reduction == "none" else out
    checked = _class_targets("nll_loss", target, classes, ignore_index)
    loss, weights = _class_nll(input, target, checked, weight, ignore_index)
    return _class_reduce(loss, weights, reduction)


def binary_cross_entropy(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
) -> Tensor:
    """-w (target log(input) + (1 - target) log(1 - input)) for probabilities input, each log bounded
    below by -100 as in PyTorch (so a 0 or 1 gives a large finite loss, not inf, and a finite gradient:
    the op binary_cross_entropy's); `weight` broadcasts to the input."""
    reduction = checked_reduction("binary_cross_entropy", reduction, size_average, reduce)
    _constant_weights("binary_cross_entropy", weight=weight)
    _check_target_shape("binary_cross_entropy", input, target)
    for what, probabilities in (("input", input), ("target", target)):
        values = probabilities.payload  # eagerly: PyTorch checks both (a NaN is refused too)
        if isinstance(values, np.ndarray) and not ((values >= 0) & (values <= 1)).all():
            raise ValueError(
                f"binary_cross_entropy: all elements of {what} should be between 0 and 1 (as PyTorch)"
            )
    loss = ops.binary_cross_entropy(input, target)
    return reduce_loss(loss if weight is None else loss * weight, reduction, "binary_cross_entropy")


def binary_cross_entropy_with_logits(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
    pos_weight: Tensor | None = None,
) -> Tensor:
    """binary_cross_entropy of sigmoid(input), formed from the logits without overflow:
    (1 - target) x + m + log(exp(-m) + exp(-x - m)) with m = max(-x, 0); with `pos_weight` (broadcast
    to the input, one per class), PyTorch's weighting of the positive term: (1 - target) x + (1 +
    (pos_weight - 1) target) (m + log(exp(-m) + exp(-x - m))); times `weight` (broadcast) if given."""
    reduction = checked_reduction("binary_cross_entropy_with_logits", reduction, size_average, reduce)
    _constant_weights("binary_cross_entropy_with_logits", weight=weight, pos_weight=pos_weight)
    _check_target_shape("binary_cross_entropy_with_logits", input, target)
    m = relu(-input)
    softplus = m + ((-m).exp() + (-input - m).exp()).log()  # log(1 + exp(-x))
    if pos_weight is None:
        loss = (1 - target) * input + softplus
    else:
        loss = (1 - target) * input + (1 + (pos_weight - 1) * target) * softplus
    if weight is not None:
        loss = loss * weight
    return reduce_loss(loss, reduction, "binary_cross_entropy_with_logits")


def kl_div(
    input: Tensor,
    target: Tensor,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
    log_target: bool = False,
) -> Tensor:
    """target (log target - input) for log-probabilities input (0 where target is 0), or with
    `log_target` exp(target) (target - input); "batchmean" divides the sum by the batch size (the
    divergence; PyTorch's "mean", which also divides by the support size, warns so, as here)."""
    floating_only(input.dtype, target.dtype, what="kl_div")
    reduction = checked_reduction("kl_div", reduction, size_average, reduce, also=("batchmean",))
    if reduction == "mean" and size_average is None and reduce is None:
        warnings.warn(
            "reduction: 'mean' divides the total loss by both the batch size and the support size. "
            "'batchmean' divides only by the batch size, and aligns with the KL div math definition.",
            UserWarning,
            stacklevel=2,
        )
    if log_target:
        loss = target.exp() * (target - input)
    else:  # PyTorch's xlogy(target, target) - target * input: 0 log 0 is 0
        loss = where(target == 0, 0.0, target * where(target == 0, 1.0, target).log()) - target * input
    if reduction == "batchmean":
        return loss.sum() / input.shape[0] if input.ndim else loss.sum()
    return reduce_loss(loss, reduction, "kl_div")


def margin_ranking_loss(
    input1: Tensor,
    input2: Tensor,
    target: Tensor,
    margin: float = 0,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
) -> Tensor:
    """max(0, -target (input1 - input2) + margin), target 1 or -1: which input should rank higher."""
    reduction = checked_reduction("margin_ranking_loss", reduction, size_average, reduce)
    if not input1.ndim == input2.ndim == target.ndim:  # PyTorch's refusal (it broadcasts equal ranks)
        raise ShapeError(
            "margin_ranking_loss: all input tensors should have the same number of dimensions, got "
            f"{shape_text(input1.shape)}, {shape_text(input2.shape)} and target {shape_text(target.shape)}"
        )
    # a float margin, as aten's double: integer inputs give a float loss in the default dtype, as PyTorch's
    return reduce_loss(relu(-target * (input1 - input2) + float(margin)), reduction, "margin_ranking_loss")


def hinge_embedding_loss(
    input: Tensor,
    target: Tensor,
    margin: float = 1.0,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
) -> Tensor:
    """input where target is 1, max(0, margin - input) where it is -1; for another target, their sum (as
    PyTorch's: input where target != -1, plus the margin term where target != 1)."""
    floating_only(input.dtype, what="hinge_embedding_loss")
    reduction = checked_reduction("hinge_embedding_loss", reduction, size_average, reduce)
    loss = where(target != -1, input, 0.0) + where(target != 1, relu(margin - input), 0.0)
    return reduce_loss(loss, reduction, "hinge_embedding_loss")


def soft_margin_loss(
    input: Tensor,
    target: Tensor,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
) -> Tensor:
    """log(1 + exp(-target input)), target 1 or -1."""
    floating_only(input.dtype, what="soft_margin_loss")
    reduction = checked_reduction("soft_margin_loss", reduction, size_average, reduce)
    z = -target * input
    if tuple(z.shape) != tuple(input.shape):  # PyTorch's writes into a tensor of the input's shape
        raise ShapeError(
            f"soft_margin_loss: the target {shape_text(target.shape)} must broadcast to the input's shape "
            f"{shape_text(input.shape)}"
        )
    return reduce_loss(relu(z) + log1p((-z.abs()).exp()), reduction, "soft_margin_loss")


_COSINE_EPS = 1e-12  # PyTorch's, added to each squared norm


def cosine_embedding_loss(
    input1: Tensor,
    input2: Tensor,
    target: Tensor,
    margin: float = 0,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
) -> Tensor:
    """1 - cos(input1, input2) where target is 1, max(0, cos - margin) where it is -1 (cos along the last
    dimension, each squared norm plus 1e-12, as PyTorch's)."""
    reduction = checked_reduction("cosine_embedding_loss", reduction, size_average, reduce)
    dim = input1.ndim - 1
    dot = (input1 * input2).sum(axis=dim)
    norms = ((input1 * input1).sum(axis=dim) + _COSINE_EPS) * ((input2 * input2).sum(axis=dim) + _COSINE_EPS)
    cos = dot / norms.sqrt()
    loss = where(target == 1, 1 - cos, 0.0) + where(target == -1, relu(cos - margin), 0.0)
    return reduce_loss(loss, reduction, "cosine_embedding_loss")


def multi_margin_loss(
    input: Tensor,
    target: Tensor,
    p: int = 1,
    margin: float = 1.0,
    weight: Tensor | None = None,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
) -> Tensor:
    """For scores [N, C] (or [C]) and classes [N]: the mean over the other classes j of
    max(0, margin - input[y] + input[j])^p (p 1 or 2), each sample's term weighted by weight[y]."""
    floating_only(input.dtype, what="multi_margin_loss")
    reduction = checked_reduction("multi_margin_loss", reduction, size_average, reduce)
    _constant_weights("multi_margin_loss", weight=weight)
    if input.ndim == 0:  # PyTorch's: one score of one class
        input = input.reshape(1)
    if p not in (1, 2):
        raise ValueError(f"multi_margin_loss: p must be 1 or 2, got {p}")
    scores = input if input.ndim == 2 else unsqueeze(input, 0)
    classes = target.reshape(-1)
    chosen = scores.gather(1, classes.reshape(-1, 1))
    z = scores - chosen + margin
    hinge = where(z > 0, z, 0.0)  # PyTorch's: a NaN margin term adds nothing (its z > 0 is false)
    if p == 2:
        hinge = hinge * hinge
    if weight is not None:
        hinge = hinge * take(weight, classes).reshape(-1, 1)
    others = arange(0, scores.shape[1]) != classes.reshape(-1, 1)
    loss = where(others, hinge, 0.0).sum(axis=1) / scores.shape[1]
    if input.ndim < 2:  # one sample's loss is shaped as its target, [] or [1] (PyTorch's)
        loss = loss.reshape(target.shape)
    return reduce_loss(loss, reduction, "multi_margin_loss")


def multilabel_margin_loss(
    input: Tensor,
    target: Tensor,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
) -> Tensor:
    """For scores [C] or [N, C] and target class indices of the same shape, read up to the first -1:
    the sum over those classes j and the other classes i of max(0, 1 - (x[j] - x[i])), over C."""
    reduction = checked_reduction("multilabel_margin_loss", reduction, size_average, reduce)
    if input.ndim == 0 and target.ndim == 0:  # PyTorch's: one score of one class
        input, target = input.reshape(1), target.reshape(1)
    if input.ndim not in (1, 2) or tuple(target.shape) != tuple(input.shape):
        raise ShapeError(
            "multilabel_margin_loss takes scores [C] or [N, C] and target indices of the same shape, got "
            f"{shape_text(input.shape)} and {shape_text(target.shape)}"
        )
    if target.dtype.kind != "i":
        raise TypeError(f"multilabel_margin_loss: the classes must be integers, got {target.dtype.name}")
    classes = input.shape[-1]
    checked = _class_targets("multilabel_margin_loss", target, classes, -1)
    scores, listed, checked = (
        (input, target, checked)
        if input.ndim == 2
        else (unsqueeze(input, 0), unsqueeze(target, 0), unsqueeze(checked, 0))
    )
    valid = ops.cumprod((listed != -1).cast(listed.dtype), axis=1) == 1  # before the first -1
    picked = where(valid, checked, 0)
    is_class = unsqueeze(picked, 2) == arange(0, classes)  # [N, J, C]: entry j names class c
    is_target = any_of(is_class & unsqueeze(valid, 2), dim=1)  # [N, C]
    hinge = relu(1 - unsqueeze(scores.gather(1, picked), 2) + unsqueeze(scores, 1))  # [N, J, C]
    counted = unsqueeze(valid, 2) & ~unsqueeze(is_target, 1)
    loss = where(counted, hinge, 0.0).sum(axis=(1, 2)) / classes
    return reduce_loss(loss if input.ndim == 2 else loss.reshape(()), reduction, "multilabel_margin_loss")


def multilabel_soft_margin_loss(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
) -> Tensor:
    """-(target log sigmoid(x) + (1 - target) log sigmoid(-x)), times `weight`, averaged over the
    classes (the last dimension): one loss per sample."""
    reduction = checked_reduction("multilabel_soft_margin_loss", reduction, size_average, reduce)
    loss = -(target * logsigmoid(input) + (1 - target) * logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    dim = input.ndim - 1
    return reduce_loss(loss.sum(dim) / input.shape[dim], reduction, "multilabel_soft_margin_loss")


def triplet_margin_loss(
    anchor: Tensor,
    positive: Tensor,
    negative: Tensor,
    margin: float = 1.0,
    p: float = 2,
    eps: float = 1e-6,
    swap: bool = False,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
) -> Tensor:
    """max(0, d(anchor, positive) - d(anchor, negative) + margin), d the pairwise distance; with `swap`,
    the negative's distance is the smaller of its distances to anchor and positive."""
    reduction = checked_reduction("triplet_margin_loss", reduction, size_average, reduce)
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = minimum(d_neg, pairwise_distance(positive, negative, p, eps))
    return reduce_loss(relu(d_pos - d_neg + margin), reduction, "triplet_margin_loss")


def triplet_margin_with_distance_loss(
    anchor: Tensor,
    positive: Tensor,
    negative: Tensor,
    *,
    distance_function: Callable[[Tensor, Tensor], Tensor] | None = None,
    margin: float = 1.0,
    swap: bool = False,
    reduction: str = "mean",
) -> Tensor:
    """triplet_margin_loss with any distance (pairwise_distance if None): max(0, margin + d(a, p) -
    d(a, n)), d(a, n) the smaller of d(a, n) and d(p, n) with `swap`."""
    reduction = checked_reduction("triplet_margin_with_distance_loss", reduction)
    if margin <= 0:
        raise ValueError(f"triplet_margin_with_distance_loss: margin must be greater than 0, got {margin}")
    distance = pairwise_distance if distance_function is None else distance_function
    d_pos, d_neg = distance(anchor, positive), distance(anchor, negative)
    if swap:
        d_neg = minimum(d_neg, distance(positive, negative))
    return reduce_loss(relu(d_pos - d_neg + margin), reduction, "triplet_margin_with_distance_loss")


def poisson_nll_loss(
    input: Tensor,
    target: Tensor,
    log_input: bool = True,
    full: bool = False,
    size_average: bool | None = None,
    eps: float = 1e-8,
    reduce: bool | None = None,
    reduction: str = "mean",
) -> Tensor:
    """exp(input) - target input for a log-rate (`log_input`), else input - target log(input + eps);
    `full` adds Stirling's target log(target) - target + log(2 pi target) / 2 where target > 1."""
    reduction = checked_reduction("poisson_nll_loss", reduction, size_average, reduce)
    loss = input.exp() - target * input if log_input else input - target * (input + eps).log()
    if full:
        safe = where(target > 1, target, 1.0)
        stirling = safe * safe.log() - safe + 0.5 * (safe * (2 * math.pi)).log()
        loss = loss + where(target > 1, stirling, 0.0)
    return reduce_loss(loss, reduction, "poisson_nll_loss")


def gaussian_nll_loss(
    input: Tensor,
    target: Tensor,
    var: Tensor | float,
    full: bool = False,
    eps: float = 1e-6,
    reduction: str = "mean",
) -> Tensor:
    """(log(var) + (input - target)^2 / var) / 2 (plus log(2 pi) / 2 if `full`), var at least eps (its
    gradient passes as if not clamped, as PyTorch's); a var with one dimension fewer, or a last one of 1,
    is one variance per row; a number is one variance for all."""
    floating_only(input.dtype, what="gaussian_nll_loss")
    reduction = checked_reduction("gaussian_nll_loss", reduction)
    if not isinstance(var, Tensor):
        if var < 0:
            raise ValueError(f"gaussian_nll_loss: var must be non-negative, got {var}")
        var = ops.full((), float(var), dtype=input.dtype)
    elif var.ndim == input.ndim - 1:
        var = unsqueeze(var, -1)
    with no_grad():
        lifted = clamp(var, min=eps) - var  # what clamping adds, outside the gradient
    var = var + lifted
    loss = 0.5 * (var.log() + (input - target) * (input - target) / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return reduce_loss(loss, reduction, "gaussian_nll_loss")

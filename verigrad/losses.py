"""Loss functions written with ops, as in `torch.nn.functional` (re-exported by `verigrad.functional`):
mse_loss, l1_loss, smooth_l1_loss, huber_loss, nll_loss, binary_cross_entropy,
binary_cross_entropy_with_logits and kl_div. Each takes `reduction`: "mean" (the default), "sum" or
"none" (kl_div also "batchmean").
"""

from __future__ import annotations

import numpy as np

from .ops import arange, relu, take, unsqueeze, where
from .tensor import Tensor

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
    if isinstance(target.data, np.ndarray) and isinstance(classes, int):
        bad = target.data[((target.data < 0) | (target.data >= classes)) & (target.data != ignore_index)]
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

"""The connectionist temporal classification loss, as PyTorch's `F.ctc_loss`: -log of the probability of
a target sequence summed over every alignment of it (with blanks and repeats) to the input's time steps,
by the forward (alpha) recursion in log space. Written with ops over the time steps, so its gradient is
autograd's, plus PyTorch's exp(log_probs) term (`_softmax_assumed`); impossible alignments (an input
too short for its target) give an infinite loss, or 0 with
`zero_infinity`, and pass no gradient either way (PyTorch's is NaN without zero_infinity).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import ops
from ...autograd import no_grad
from ...errors import ShapeError
from ...functions.pointwise import values_of as _values
from ...shapes import shape_text
from ...tensor import Tensor
from .losses import reduce as reduce_loss

_IMPOSSIBLE = -1e30  # log 0 in the recursion: finite, so that no gradient is NaN; below it means none


def _ints(t: Any, what: str) -> np.ndarray:
    return _values(t, what).astype(np.int64)


def ctc_loss(
    log_probs: Tensor,
    targets: Any,
    input_lengths: Any,
    target_lengths: Any,
    blank: int = 0,
    reduction: str = "mean",
    zero_infinity: bool = False,
) -> Tensor:
    """log_probs [T, N, C] (log-softmax over C), targets [N, S] padded or the N targets concatenated,
    input and target lengths [N]: the loss per sample, reduced ("mean": each over its target length, then
    averaged; "sum"; "none"). The lengths and targets are read as values (eagerly)."""
    if log_probs.ndim != 3:
        raise ShapeError(f"ctc_loss takes log_probs [T, N, C], got {shape_text(log_probs.shape)}")
    steps, batch, classes = log_probs.shape
    in_lens, tgt_lens = _ints(input_lengths, "ctc_loss"), _ints(target_lengths, "ctc_loss")
    labels = _ints(targets, "ctc_loss")
    if in_lens.shape != (batch,) or tgt_lens.shape != (batch,):
        raise ShapeError(
            f"ctc_loss needs {batch} input and target lengths, got {in_lens.shape}, {tgt_lens.shape}"
        )
    if (in_lens > steps).any() or (in_lens < 1).any():
        raise ValueError(f"ctc_loss: input lengths must be in [1, {steps}], got {in_lens.tolist()}")
    if labels.ndim == 1:  # the targets concatenated: split by their lengths
        starts = np.concatenate([[0], np.cumsum(tgt_lens)[:-1]])
        rows = [labels[s : s + n] for s, n in zip(starts, tgt_lens)]
    else:
        rows = [labels[i, :n] for i, n in enumerate(tgt_lens)]
    longest = max(1, int(tgt_lens.max(initial=0)))
    states = 2 * longest + 1
    extended = np.full((batch, states), blank, dtype=np.int64)  # blank, l1, blank, l2, ..., blank
    for i, row in enumerate(rows):
        if (row == blank).any() or (row < 0).any() or (row >= classes).any():
            raise ValueError(f"ctc_loss: target {i} has a blank or a class outside [0, {classes})")
        extended[i, 1 : 2 * len(row) : 2] = row
    valid = np.arange(states)[None, :] < (2 * tgt_lens + 1)[:, None]
    skip = np.zeros((batch, states), dtype=bool)  # from s - 2: a label unlike the one two states back
    skip[:, 2:] = (extended[:, 2:] != blank) & (extended[:, 2:] != extended[:, :-2])

    impossible = ops.tensor(np.where(valid, 0.0, _IMPOSSIBLE)).cast(log_probs.dtype)
    index = ops.tensor(extended)
    emit = ops.gather(log_probs, index.expand(steps, batch, states), axis=2)  # [T, N, states]
    start = np.full((batch, states), _IMPOSSIBLE)
    start[:, :2] = 0.0
    alpha = emit[0] + ops.tensor(start).cast(log_probs.dtype)
    floor = ops.tensor(np.full((batch, 2), _IMPOSSIBLE)).cast(log_probs.dtype)
    skip_t = ops.tensor(skip)
    for t in range(1, steps):
        shifted = ops.concat([floor[:, :1], alpha[:, :-1]], axis=1)
        shifted2 = ops.where(skip_t, ops.concat([floor, alpha[:, :-2]], axis=1), _IMPOSSIBLE)
        step = ops.logaddexp(ops.logaddexp(alpha, shifted), shifted2) + emit[t] + impossible
        alpha = ops.where(ops.tensor((t < in_lens)[:, None]), step, alpha)  # past its length: kept
    last = ops.tensor(np.stack([2 * tgt_lens, np.maximum(2 * tgt_lens - 1, 0)], axis=1))
    ends = ops.gather(alpha, last, axis=1)  # the last blank, and the last label (none: an empty target)
    nll = -ops.logaddexp(ends[:, 0], ops.where(ops.tensor(tgt_lens > 0), ends[:, 1], _IMPOSSIBLE))
    with no_grad():
        lost = (nll > -_IMPOSSIBLE / 2).numpy()  # no alignment: the recursion's floor, not a probability
    lost_t = ops.tensor(lost)
    nll = ops.where(lost_t, 0.0, nll) if zero_infinity else ops.where(lost_t, np.inf, nll)
    nll = nll + _softmax_assumed(log_probs, in_lens, lost)
    if reduction == "mean":
        return (nll / ops.tensor(np.maximum(tgt_lens, 1)).cast(nll.dtype)).mean()
    return reduce_loss(nll, reduction, "ctc_loss")


def _softmax_assumed(log_probs: Tensor, in_lens: np.ndarray, lost: np.ndarray) -> Tensor:
    """0, with the gradient exp(log_probs) over each sample's steps: PyTorch's backward assumes log_probs
    are log_softmax outputs and gives exp(log_probs) - posterior, where the derivative is -posterior.
    Through a log_softmax the term's gradient vanishes (its exps sum to 1), so both agree there; a sample
    with no alignment gets none (its loss has none either)."""
    steps = np.arange(log_probs.shape[0])[:, None] < in_lens[None, :]
    counted = ops.tensor((steps & ~lost[None, :])[:, :, None])
    mass = ops.where(counted, log_probs.exp(), 0.0).sum((0, 2))
    return mass - mass.detach()

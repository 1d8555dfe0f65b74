"""The connectionist temporal classification loss, as PyTorch's `F.ctc_loss`: -log of the probability of
a target sequence summed over every alignment of it (with blanks and repeats) to the input's time steps.
The per-sample loss is the `ctc_nll` op, PyTorch's CPU kernels' log-space recursions in the input's dtype,
and its gradient PyTorch's exp(log_probs) - posterior (which assumes log_softmax outputs: the op gives
-posterior, `_softmax_assumed` the exp(log_probs) term); impossible
alignments (an input too short for its target) give an infinite loss and a NaN gradient, or 0 and no
gradient with `zero_infinity`, as PyTorch's.
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
    for i, row in enumerate(rows):
        if (row == blank).any() or (row < 0).any() or (row >= classes).any():
            raise ValueError(f"ctc_loss: target {i} has a blank or a class outside [0, {classes})")
    nll = ops.ctc_nll(
        log_probs,
        targets=tuple(tuple(row.tolist()) for row in rows),
        input_lengths=tuple(in_lens.tolist()),
        blank=blank,
        zero_infinity=zero_infinity,
    )
    with no_grad():
        lost = (nll == np.inf).numpy()  # no alignment
    if zero_infinity:
        nll = ops.where(ops.tensor(lost), 0.0, nll)
    nll = nll + _softmax_assumed(log_probs, in_lens, lost)
    if reduction == "mean":
        return (nll / ops.tensor(np.maximum(tgt_lens, 1)).cast(nll.dtype)).mean()
    return reduce_loss(nll, reduction, "ctc_loss")


def _softmax_assumed(log_probs: Tensor, in_lens: np.ndarray, lost: np.ndarray) -> Tensor:
    """0, with the gradient exp(log_probs) over each sample's steps: PyTorch's backward assumes log_probs
    are log_softmax outputs and gives exp(log_probs) - posterior, where the derivative is -posterior.
    Through a log_softmax the term's gradient vanishes (its exps sum to 1), so both agree there; a sample
    with no alignment gets none (its gradient is 0 with zero_infinity, NaN without)."""
    steps = np.arange(log_probs.shape[0])[:, None] < in_lens[None, :]
    counted = ops.tensor((steps & ~lost[None, :])[:, :, None])
    mass = ops.where(counted, log_probs.exp(), 0.0).sum((0, 2))
    return mass - mass.detach()

"""A decoder's training loss on the rows whose target counts: the mean cross-entropy over the targets
that are not `ignore_index`, with the output matrix applied to those rows alone.

A fine-tuning example's prompt rows have no loss (often half its tokens), and their logits (rows x
vocabulary: 256 x 49152 f32 for SmolLM2, 48 MiB with their gradient) were most of the head's time.
Which rows count is data, not shape: eagerly they are gathered (`take`) before the product; in a trace
(a compiled step) the loss is one custom Function instruction whose forward reads the targets at each
run. The loss is the same sum over the same rows, and each kept row's logits and gradient the same
products: the same bits where the products' are those of each row alone (the exact GEMM; the fast
path's bits depend on the product's shape, within its stated tolerance; tests/test_answer_loss.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import modes
from ..function import Function
from ..nn import Embedding, Linear
from ..nn import functional as F
from ..nn.dequantized_product import dequantized_product, product, product_t
from ..nn.lora import MANY_ROWS, TrainingQLinear
from ..ops import from_numpy, take, take_grad
from ..ops.composite.losses import cross_entropy_grad
from ..tensor import Tensor
from ._decoder import check_room, token_ids
from .llama import Llama


def _answer_rows(h: Tensor, targets: Tensor, ignore_index: int) -> tuple[Tensor, Tensor, Tensor | None]:
    """The rows of h [N, d] and targets [N] whose target counts, and their positions; h, targets and None
    where every row counts, or none (every row then, for the mean's 0 / 0, NaN, as before)."""
    rows = np.flatnonzero(targets.numpy() != ignore_index)
    if not 0 < rows.size < h.shape[0]:
        return h, targets, None
    at = from_numpy(rows)
    return take(h, at), take(targets, at), at


class KeptRowsLoss(Function):
    """`kept_rows_loss` in a trace: one instruction whose forward reads the targets at each run."""

    @staticmethod
    def forward(
        ctx: Any, h: Tensor, weight: Tensor, targets: Tensor, ignore_index: int, qtype: str | None
    ) -> Tensor:
        if modes.current().name != "eager":  # shapes alone (the trace): every row, for the loss's spec
            return F.cross_entropy(_logits(h, weight, qtype), targets, ignore_index=ignore_index)
        kept, kept_targets, ctx.at = _answer_rows(h, targets, ignore_index)
        logits = _logits(kept, weight, qtype)
        ctx.rows, ctx.ignore_index, ctx.qtype = h.shape[0], ignore_index, qtype
        ctx.save_for_backward(kept, weight, logits, kept_targets)
        return F.cross_entropy(logits, kept_targets, ignore_index=ignore_index)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor | None, ...]:
        kept, weight, logits, kept_targets = ctx.saved_tensors
        dlogits = cross_entropy_grad(logits, kept_targets, g, reduction="mean", ignore_index=ctx.ignore_index)
        dh = None
        if ctx.needs_input_grad[0]:
            dh = dlogits @ weight if ctx.qtype is None else product_t(dlogits, weight, ctx.qtype)
            dh = dh if ctx.at is None else take_grad(dh, ctx.at, axis=0, size=ctx.rows)  # take's VJP
        dweight = dlogits.T @ kept if ctx.needs_input_grad[1] else None
        ctx.save_for_backward()  # a plan keeps the ctx until its next run: not the logits
        return dh, dweight, None, None, None


def _logits(h: Tensor, weight: Tensor, qtype: str | None) -> Tensor:
    """h @ W.T, W the f32 `weight` (qtype None) or the blocks `weight` of qtype de-quantized."""
    return h @ weight.T if qtype is None else product(h, weight, qtype)


def kept_rows_loss(
    h: Tensor, weight: Tensor, targets: Tensor, ignore_index: int, qtype: str | None = None
) -> Tensor:
    """cross_entropy(h @ W.T, targets, ignore_index=ignore_index) ("mean"; h [N, d], W [V, d], targets
    [N]), the product made for the rows whose target counts; W is `weight` (f32), or with a `qtype` the
    blocks `weight` de-quantized, in the forward and again in the backward (no f32 copy kept). Eagerly
    those rows are gathered (`take`) and the tape differentiates it; in a trace it is `KeptRowsLoss`."""
    if modes.current().name != "eager":
        return KeptRowsLoss.apply(h, weight, targets, ignore_index, qtype)
    kept, kept_targets, _ = _answer_rows(h, targets, ignore_index)
    logits = kept @ weight.T if qtype is None else dequantized_product(kept, weight, qtype)
    return F.cross_entropy(logits, kept_targets, ignore_index=ignore_index)


def head_weight(model: Llama, rows: Any) -> tuple[Tensor, str | None] | None:
    """The output matrix [vocab, d] that `model`'s logits of `rows` rows are norm(x) @ W.T of: an f32
    weight and None, or a TrainingQLinear's blocks and their qtype (multiplied de-quantized, as it
    multiplies so many rows), or None where the logits are not one such product (qmatmul, a bias)."""
    head = model.lm_head
    if head is None:
        table = model.embed_tokens
        return (table.weight, None) if type(table) is Embedding else None
    if type(head) is TrainingQLinear:
        return (head.weight, head.qtype) if not isinstance(rows, int) or rows >= MANY_ROWS else None
    if type(head) is Linear and head.bias is None:
        return head.weight, None
    return None


def answer_loss(model: Llama, ids: Any, targets: Tensor, ignore_index: int) -> Tensor:
    """The mean cross-entropy of `model`'s logits of `ids` [B, T] against `targets` [B, T] over the
    targets other than `ignore_index`, the head applied to those rows alone (every row where the model's
    logits are not norm(x) @ W.T: a Gemma's soft-capping)."""
    ids = token_ids(ids)
    b, t = ids.shape
    head = head_weight(model, b * t) if type(model)._logits is Llama._logits else None
    if head is None:
        logits = model(ids)
        return F.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=ignore_index
        )
    check_room(None, ids, model.context_length)
    model.prepare(t)
    h = model.norm(model.hidden(ids))
    weight, qtype = head
    return kept_rows_loss(h.reshape(-1, h.shape[-1]), weight, targets.reshape(-1), ignore_index, qtype)

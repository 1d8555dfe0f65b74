"""A decoder's training loss on the rows whose target counts: the mean cross-entropy over the targets
that are not `ignore_index`, with the output matrix applied to those rows alone.

A fine-tuning example's prompt rows have no loss (often half its tokens), and their logits (rows x
vocabulary: 256 x 49152 f32 for SmolLM2, 48 MiB with their gradient) were most of the head's time.
`KeptRowsLoss` is a custom Function, so it is one instruction of a compiled step too: its forward reads
the targets' values (which rows count is data, not shape) and gathers those rows; its backward puts
their gradient back among zero rows. The loss is the same sum over the same rows, and each kept row's
logits and gradient the same products, so the loss and gradients keep their bits (tests/test_finetune.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import modes
from ..function import Function
from ..nn import Embedding, Linear
from ..nn import functional as F
from ..nn.lora import MANY_ROWS, TrainingQLinear
from ..ops import dequantize_op, from_numpy
from ..ops.composite.losses import cross_entropy_grad
from ..tensor import Tensor
from ._decoder import check_room, token_ids
from .llama import Llama


class KeptRowsLoss(Function):
    """cross_entropy(h @ weight.T, targets, ignore_index) ("mean"), the product made for the kept rows."""

    @staticmethod
    def forward(ctx: Any, h: Tensor, weight: Tensor, targets: Tensor, ignore_index: int) -> Tensor:
        if modes.current().name != "eager":  # shapes alone (a trace): every row, for the loss's spec
            return F.cross_entropy(h @ weight.T, targets, ignore_index=ignore_index)
        rows = np.flatnonzero(targets.numpy() != ignore_index)
        kept, kept_targets = h, targets
        if 0 < rows.size < h.shape[0]:  # none kept: every row, for the mean's 0 / 0 (NaN) as before
            kept = from_numpy(np.ascontiguousarray(h.numpy()[rows]))
            kept_targets = from_numpy(np.ascontiguousarray(targets.numpy()[rows]))
        else:
            rows = None
        logits = kept @ weight.T
        ctx.rows, ctx.shape, ctx.ignore_index = rows, h.shape, ignore_index
        ctx.save_for_backward(kept, weight, logits, kept_targets)
        return F.cross_entropy(logits, kept_targets, ignore_index=ignore_index)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor | None, ...]:
        kept, weight, logits, kept_targets = ctx.saved_tensors
        dlogits = cross_entropy_grad(logits, kept_targets, g, reduction="mean", ignore_index=ctx.ignore_index)
        dh = None
        if ctx.needs_input_grad[0]:
            dh = dlogits @ weight
            if ctx.rows is not None:
                out = np.zeros(ctx.shape, dtype=kept.numpy().dtype)
                out[ctx.rows] = dh.numpy()
                dh = from_numpy(out)
        dweight = dlogits.T @ kept if ctx.needs_input_grad[1] else None
        return dh, dweight, None, None


def head_weight(model: Llama, rows: Any) -> Tensor | None:
    """The output matrix [vocab, d] that `model`'s logits of `rows` rows are norm(x) @ weight.T of (a
    quantized one de-quantized, as TrainingQLinear multiplies so many rows), or None where they are not
    one such product (qmatmul, a bias)."""
    head = model.lm_head
    if head is None:
        table = model.embed_tokens
        return table.weight if type(table) is Embedding else None
    if type(head) is TrainingQLinear:
        many = not isinstance(rows, int) or rows >= MANY_ROWS
        return dequantize_op(head.weight, qtype=head.qtype) if many else None
    if type(head) is Linear and head.bias is None:
        return head.weight
    return None


def answer_loss(model: Llama, ids: Any, targets: Tensor, ignore_index: int) -> Tensor:
    """The mean cross-entropy of `model`'s logits of `ids` [B, T] against `targets` [B, T] over the
    targets other than `ignore_index`, the head applied to those rows alone (every row where the model's
    logits are not norm(x) @ W.T: a Gemma's soft-capping)."""
    ids = token_ids(ids)
    b, t = ids.shape
    weight = head_weight(model, b * t) if type(model)._logits is Llama._logits else None
    if weight is None:
        logits = model(ids)
        return F.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=ignore_index
        )
    check_room(None, ids, model.context_length)
    model.prepare(t)
    h = model.norm(model.hidden(ids))
    return KeptRowsLoss.apply(h.reshape(-1, h.shape[-1]), weight, targets.reshape(-1), ignore_index)

"""gumbel_softmax, as PyTorch's `torch.nn.functional.gumbel_softmax`: a sample of the Gumbel-softmax
(concrete) distribution, soft or one-hot with the soft sample's gradient (straight through). The noise is
verigrad's generator's, not PyTorch's."""

from __future__ import annotations

import warnings

from ... import ops
from ...tensor import Tensor
from .activations import softmax


def gumbel_softmax(
    logits: Tensor, tau: float = 1, hard: bool = False, eps: float = 1e-10, dim: int = -1
) -> Tensor:
    """softmax((logits + g) / tau) along `dim`, g = -log(E) with E ~ Exponential(1); with `hard`, the
    one-hot of its largest entry, differentiated as the soft sample."""
    if eps != 1e-10:
        warnings.warn("`eps` parameter is deprecated and has no effect.", stacklevel=2)
    exponential = -ops.log(1.0 - ops.rand(*logits.shape, dtype=logits.dtype))  # 1 - U is in (0, 1]
    y_soft = softmax((logits + -ops.log(exponential)) / tau, dim)
    if not hard:
        return y_soft
    index = y_soft.argmax(dim, keepdim=True)
    y_hard = ops.zeros_like(logits).scatter(dim, index, 1.0)
    return y_hard - y_soft.detach() + y_soft

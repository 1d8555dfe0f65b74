"""torch.distributions.kl_divergence for the pairs verigrad has: Normal-Normal and Categorical-Categorical
(PyTorch's closed forms)."""

from __future__ import annotations

import math

from ..functions.indexing import where
from ..tensor import Tensor
from .categorical import Categorical
from .distribution import Distribution
from .normal import Normal


def kl_divergence(p: Distribution, q: Distribution) -> Tensor:
    """KL(p || q), batched."""
    if isinstance(p, Normal) and isinstance(q, Normal):
        var_ratio = (p.scale / q.scale).pow(2)
        t1 = ((p.loc - q.loc) / q.scale).pow(2)
        return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())
    if isinstance(p, Categorical) and isinstance(q, Categorical):
        t = p.probs * (p.logits - q.logits)
        t = where(q.probs == 0, math.inf, t)
        t = where(p.probs == 0, 0.0, t)
        return t.sum(-1)
    raise NotImplementedError(
        f"kl_divergence({type(p).__name__}, {type(q).__name__}) is not supported "
        "(verigrad has Normal-Normal and Categorical-Categorical)"
    )

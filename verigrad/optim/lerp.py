"""PyTorch's lerp with a number weight, to the bit, for the optimizers that use it (Muon's momentum,
swa_utils' averages): from the nearer end, with one rounding, the weight in the tensor's dtype."""

from __future__ import annotations

import numpy as np

from ..dtypes import f32
from ..tensor import Tensor


def lerp(start: Tensor, end: Tensor, weight: float) -> Tensor:
    """start + weight (end - start) for weight < 0.5, else end - (1 - weight) (end - start), each one
    fused multiply-add (add and sub with alpha round once), as PyTorch's CPU kernel."""
    if start.dtype is f32:
        weight = np.float32(weight)
    if weight < 0.5:
        return start.add(end - start, alpha=float(weight))
    return end.sub(end - start, alpha=float(1 - weight))

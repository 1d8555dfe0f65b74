"""Linear maps, as in `torch.nn.functional`: linear (x weight^T + bias) and bilinear."""

from __future__ import annotations

from ... import functions
from ...tensor import Tensor


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """x @ weight.T + bias (PyTorch's F.linear: weight [out, in])."""
    out = x @ weight.T
    return out if bias is None else out + bias


def bilinear(x1: Tensor, x2: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """y[..., o] = x1[..., i] weight[o, i, j] x2[..., j] (+ bias[o])."""
    y = functions.einsum("...i,oij,...j->...o", x1, weight, x2)
    return y if bias is None else y + bias

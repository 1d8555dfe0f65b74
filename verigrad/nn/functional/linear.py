"""Linear maps, as in `torch.nn.functional`: linear (x weight^T + bias) and bilinear."""

from __future__ import annotations

from ... import functions
from ...tensor import Tensor


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """x @ weight.T + bias (PyTorch's F.linear: weight [out, in])."""
    out = input @ weight.T
    return out if bias is None else out + bias


def bilinear(input1: Tensor, input2: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """y[..., o] = x1[..., i] weight[o, i, j] x2[..., j] (+ bias[o])."""
    y = functions.einsum("...i,oij,...j->...o", input1, weight, input2)
    return y if bias is None else y + bias

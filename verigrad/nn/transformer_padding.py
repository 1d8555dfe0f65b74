"""What PyTorch's TransformerEncoder returns at padded positions in inference.

With `enable_nested_tensor` (the default), a layer PyTorch's fast path takes, a `src_key_padding_mask`
whose padding trails each sequence, in evaluation and without gradients, PyTorch runs the layers on a
nested tensor of the unpadded tokens and pads the result with zeros: the padded positions of the output
are 0 (the final `norm`'s value at 0 where there is one), not what the layers compute there. The other
positions are the same either way (padded keys are masked out of attention), so verigrad runs the layers
as always and sets the padded positions as PyTorch does."""

from __future__ import annotations

from typing import Any

from .. import modes
from ..autograd import is_grad_enabled
from ..backends import mha
from ..dtypes import bool_
from ..tensor import Tensor
from .attention import autocast_on


def padded_positions(encoder: Any, src: Tensor, mask: Tensor | None, padding: Tensor | None) -> Tensor | None:
    """The (N, S) positions PyTorch's fast path sets to zero, or None where it would not be taken."""
    first = encoder.layers[0]
    if (
        not encoder.use_nested_tensor
        or not mha.get_fastpath_enabled()
        or first.training
        or src.ndim != 3
        or padding is None
        or mask is not None
    ):
        return None
    if is_grad_enabled() and (src.requires_grad or any(p.requires_grad for p in first.parameters())):
        return None
    if autocast_on():
        return None
    padded = padding if padding.dtype == bool_ else padding != 0
    if getattr(encoder, "mask_check", True):
        if modes.current().name != "eager":  # PyTorch skips the fast path when compiling with mask_check
            return None
        valid = ~padded.numpy()
        if not (valid[:, 1:] <= valid[:, :-1]).all():  # padding not only at the end of each sequence
            return None
    return padded


def zero_padded(x: Tensor, padded: Tensor) -> Tensor:
    """x (N, S, E) with its padded positions 0, as PyTorch's `to_padded_tensor(0.0)`."""
    return x.masked_fill(padded.unsqueeze(-1), 0.0)


__all__ = ["padded_positions", "zero_padded"]

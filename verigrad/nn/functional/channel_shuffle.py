"""channel_shuffle, as PyTorch's `torch.nn.functional.channel_shuffle` (ShuffleNet's): the channels of
[N, C, *] split into `groups` groups and interleaved."""

from __future__ import annotations

from ...tensor import Tensor


def channel_shuffle(input: Tensor, groups: int) -> Tensor:
    """[N, C, *] -> [N, groups, C / groups, *] -> its axes 1 and 2 swapped -> [N, C, *]."""
    if input.ndim <= 2:
        raise RuntimeError(
            f"channel_shuffle expects input with > 2 dims, but got input with sizes {list(input.shape)}"
        )
    if groups <= 0:
        raise RuntimeError(
            f"Number of groups to divide channels in must be positive. Value of groups:{groups}"
        )
    batch, channels, *rest = input.shape
    if channels % groups:
        raise RuntimeError(
            f"Number of channels must be divisible by groups. Got {channels} channels and {groups} groups."
        )
    split = input.reshape(batch, groups, channels // groups, *rest)
    return split.transpose(1, 2).reshape(batch, channels, *rest)

"""ChannelShuffle, as PyTorch's `torch.nn.ChannelShuffle`."""

from __future__ import annotations

from ..tensor import Tensor
from .functional.channel_shuffle import channel_shuffle
from .module import Module


class ChannelShuffle(Module):
    """Interleaves the channels of [N, C, *] from `groups` groups (see F.channel_shuffle)."""

    def __init__(self, groups: int) -> None:
        super().__init__()
        self.groups = groups

    def forward(self, input: Tensor) -> Tensor:
        return channel_shuffle(input, self.groups)

    def extra_repr(self) -> str:
        return f"groups={self.groups}"

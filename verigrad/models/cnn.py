"""The small CNN that `verigrad train` trains on the digits (or MNIST).

Legend: B = batch, H x W = image size (a multiple of 4: two 2x2 poolings), C1, C2 = channels.
[B, 1, H, W] -> conv3x3 -> relu -> pool -> [B, C1, H/2, W/2] -> conv3x3 -> relu -> pool
-> [B, C2, H/4, W/4] -> flatten -> linear -> [B, classes]
"""

from __future__ import annotations

from typing import Any

from ..dtypes import f32
from ..nn import Conv2d, Flatten, Linear, MaxPool2d, ReLU, Sequential
from ..shapes import DimLike


def digits_cnn(
    height: DimLike = 8,
    width: DimLike = 8,
    channels: tuple[DimLike, DimLike] = (16, 32),
    classes: DimLike = 10,
    in_channels: DimLike = 1,
    dtype: Any = f32,
) -> Sequential:
    """The CNN for images of `height` x `width` (ints, or symbols that are multiples of 4)."""
    c1, c2 = channels
    return Sequential(
        Conv2d(in_channels, c1, 3, padding=1, dtype=dtype),
        ReLU(),
        MaxPool2d(2),
        Conv2d(c1, c2, 3, padding=1, dtype=dtype),
        ReLU(),
        MaxPool2d(2),
        Flatten(),
        Linear(c2 * (height // 4) * (width // 4), classes, dtype=dtype),
    )


def digits_cnn_torch(torch: Any, height: int = 8, width: int = 8, classes: int = 10) -> Any:
    """The same CNN built with the given `torch` module, with the same layer indices (so the same
    state-dict names): the peer in the benchmarks and the parity suite. verigrad never imports torch."""
    nn = torch.nn
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(32 * (height // 4) * (width // 4), classes),
    )

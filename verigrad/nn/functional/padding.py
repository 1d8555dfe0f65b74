"""Padding, as in `torch.nn.functional`'s pad: constant, reflect, replicate and circular."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ... import ops
from ...errors import ShapeError
from ...tensor import Tensor

PAD_MODES = ("constant", "reflect", "replicate", "circular")


def pad(x: Tensor, pad: Sequence[int], mode: str = "constant", value: float = 0.0) -> Tensor:
    """PyTorch's F.pad: `pad` gives (before, after) pairs from the last axis backwards, so (1, 2) pads
    the last axis and (1, 2, 3, 4) the last two (the last by 1 and 2). `mode`: "constant" (`value`),
    "reflect" (mirrored about the edge element, which is not repeated), "replicate" (the edge element
    repeated) or "circular" (wrapped around); the last three take the elements at positions a NumPy
    table computes, so their gradients add back where an element was copied."""
    if mode not in PAD_MODES:
        raise ValueError(f"pad: mode must be one of {', '.join(PAD_MODES)}, got {mode!r}")
    if len(pad) % 2 or len(pad) // 2 > x.ndim:
        raise ValueError(f"pad needs (before, after) pairs for at most {x.ndim} axes, got {tuple(pad)}")
    pairs = [(pad[i], pad[i + 1]) for i in range(0, len(pad), 2)][::-1]
    if mode == "constant":
        return x.pad([(0, 0)] * (x.ndim - len(pairs)) + pairs, value=value)
    for axis, (before, after) in zip(range(x.ndim - len(pairs), x.ndim), pairs):
        if before or after:
            x = ops.take(x, ops.from_numpy(_pad_positions(x.shape[axis], before, after, mode)), axis=axis)
    return x


def _pad_positions(size: Any, before: int, after: int, mode: str) -> np.ndarray:
    """The positions along an axis of `size` that the padded axis reads, in order."""
    if not isinstance(size, int):
        raise ShapeError(f"pad: mode {mode!r} needs concrete sizes, got {size}")
    if min(before, after) < 0:
        raise ValueError(f"pad: mode {mode!r} takes no negative padding, got {(before, after)}")
    if mode == "reflect" and max(before, after) >= size:
        raise ValueError(f"pad: reflect padding must be smaller than the size {size}, got {(before, after)}")
    if mode == "circular" and max(before, after) > size:
        raise ValueError(f"pad: circular padding must be at most the size {size}, got {(before, after)}")
    positions = np.arange(-before, size + after)
    if mode == "reflect":
        positions = np.abs(positions)
        positions = np.where(positions >= size, 2 * (size - 1) - positions, positions)
    elif mode == "replicate":
        positions = np.clip(positions, 0, size - 1)
    else:
        positions = positions % size
    return positions.astype(np.int64)

"""Padding, as in `torch.nn.functional`'s pad: constant, reflect, replicate and circular; a negative
width crops that side."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ... import ops
from ...errors import DTypeError, ShapeError
from ...tensor import Tensor

PAD_MODES = ("constant", "reflect", "replicate", "circular")


def pad(input: Tensor, pad: Sequence[int], mode: str = "constant", value: float | None = None) -> Tensor:
    """PyTorch's F.pad: `pad` gives (before, after) pairs from the last axis backwards, so (1, 2) pads
    the last axis and (1, 2, 3, 4) the last two (the last by 1 and 2); a negative width removes that
    many elements instead. `mode`: "constant" (`value`, default 0), "reflect" (mirrored about the edge
    element, which is not repeated), "replicate" (the edge element repeated) or "circular" (wrapped
    around what is left after cropping); the last three pad 1 to 3 trailing axes of an input with one or
    two more (PyTorch's), taking the elements at positions a NumPy table computes, so their gradients add
    back where an element was copied."""
    if mode not in PAD_MODES:
        raise ValueError(f"pad: mode must be one of {', '.join(PAD_MODES)}, got {mode!r}")
    if mode in ("reflect", "replicate") and input.dtype.name == "bool":
        raise DTypeError(f"pad: mode {mode!r} of a bool tensor is not supported (as PyTorch); cast it first")
    if len(pad) % 2 or len(pad) // 2 > input.ndim:
        raise ValueError(f"pad needs (before, after) pairs for at most {input.ndim} axes, got {tuple(pad)}")
    if not all(isinstance(p, int) and not isinstance(p, bool) for p in pad):
        raise TypeError(f"pad: the widths must be ints, got {tuple(pad)}")
    pairs = [(pad[i], pad[i + 1]) for i in range(0, len(pad), 2)][::-1]
    first = input.ndim - len(pairs)
    for axis, (before, after) in zip(range(first, input.ndim), pairs):
        _check_widths(input.shape[axis], axis, before, after, mode)
    sizes = [input.shape[axis] + a + b for axis, (a, b) in zip(range(first, input.ndim), pairs)]
    if mode in ("reflect", "replicate") and all(isinstance(n, int) and n < 1 for n in sizes):
        # PyTorch's: at least one padded axis keeps an element
        raise ValueError(
            f"pad: {tuple(pad)} in mode {mode!r} leaves every padded axis of {input.shape} empty"
        )
    if mode == "constant":
        input = _crop(input, first, pairs)
        widths = [(max(a, 0), max(b, 0)) for a, b in pairs]
        return input.pad([(0, 0)] * first + widths, value=0.0 if value is None else value)
    if value is not None and value != 0:
        raise ValueError(f'pad: padding mode "{mode}" doesn\'t take in value argument')
    if input.ndim not in (len(pairs) + 1, len(pairs) + 2) or len(pairs) > 3:
        raise NotImplementedError(
            f"pad: padding size {len(pad)} is not supported for {input.ndim}D input in mode {mode!r}: 2 pads "
            "a 2D or 3D input, 4 a 3D or 4D one, 6 a 4D or 5D one"
        )
    if mode == "circular":  # wraps around what the negative widths leave
        input = _crop(input, first, pairs)
        pairs = [(max(a, 0), max(b, 0)) for a, b in pairs]
    for axis, (before, after) in zip(range(first, input.ndim), pairs):
        if before or after:
            input = ops.take(
                input, ops.from_numpy(_pad_positions(input.shape[axis], before, after, mode)), axis=axis
            )
    return input


_pad = pad  # constant_pad_nd's argument `pad` hides the function


def constant_pad_nd(input: Tensor, pad: Sequence[int], value: float = 0) -> Tensor:
    """torch.constant_pad_nd: pad(input, pad, "constant", value) (negative widths crop)."""
    return _pad(input, pad, "constant", value)


def _check_widths(size: Any, axis: int, before: int, after: int, mode: str) -> None:
    """PyTorch's refusals of an axis's widths: a negative size; in constant mode, more cropped than there
    is (its narrow fails before padding)."""
    if not isinstance(size, int):
        return
    if size + before + after < 0:
        raise ValueError(
            f"pad: axis {axis} of size {size} padded by {(before, after)} would have a negative size"
        )
    if mode == "constant" and size + min(before, 0) + min(after, 0) < 0:
        raise ValueError(f"pad: axis {axis} of size {size} cannot be cropped by {(before, after)}")


def _crop(x: Tensor, first: int, pairs: list[tuple[int, int]]) -> Tensor:
    """x without the elements negative widths remove."""
    if all(a >= 0 and b >= 0 for a, b in pairs):
        return x
    index: list[Any] = [slice(None)] * first
    index += [slice(max(-a, 0), x.shape[first + i] - max(-b, 0)) for i, (a, b) in enumerate(pairs)]
    return x[tuple(index)]


def _pad_positions(size: Any, before: int, after: int, mode: str) -> np.ndarray:
    """The positions along an axis of `size` that the padded (or cropped) axis reads, in order."""
    if not isinstance(size, int):
        raise ShapeError(f"pad: mode {mode!r} needs concrete sizes, got {size}")
    if mode == "reflect" and max(before, after) >= size:
        raise ValueError(f"pad: reflect padding must be smaller than the size {size}, got {(before, after)}")
    if mode == "circular" and max(before, after) > size:
        raise ValueError(
            f"pad: circular padding must be at most the size {size} (it would wrap around more than once), "
            f"got {(before, after)}"
        )
    positions = np.arange(-before, size + after)
    if mode == "reflect":
        positions = np.abs(positions)
        positions = np.where(positions >= size, 2 * (size - 1) - positions, positions)
    elif mode == "replicate":
        positions = np.clip(positions, 0, size - 1)
    else:
        positions = positions % size
    return positions.astype(np.int64)

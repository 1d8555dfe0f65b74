"""As PyTorch's `torch.nn.utils.rnn`: pad_sequence, a list of sequences made one padded tensor."""

from __future__ import annotations

from collections.abc import Sequence

from ... import ops
from ...errors import ShapeError
from ...tensor import Tensor, describe


def pad_sequence(
    sequences: Tensor | Sequence[Tensor],
    batch_first: bool = False,
    padding_value: float = 0.0,
    padding_side: str = "right",
) -> Tensor:
    """Sequences [L_i, *] of one trailing shape stacked into [T, B, *] ([B, T, *] with batch_first),
    T the longest L_i, each padded with `padding_value` on its `padding_side` ("right" or "left")."""
    if padding_side not in ("right", "left"):
        raise ValueError(f"pad_sequence: padding_side must be 'left' or 'right', got {padding_side!r}")
    seqs = list(sequences.unbind(0)) if isinstance(sequences, Tensor) else list(sequences)
    if not seqs:
        raise ValueError("pad_sequence: received an empty list of sequences")
    trailing = tuple(seqs[0].shape[1:])
    for s in seqs:
        if s.ndim < 1 or tuple(s.shape[1:]) != trailing or s.dtype is not seqs[0].dtype:
            raise ShapeError(
                f"pad_sequence: every sequence must be [L, {', '.join(map(str, trailing))}] of dtype "
                f"{seqs[0].dtype.name}, got {describe(s)}"
            )
    longest = max(s.shape[0] for s in seqs)
    padded = []
    for s in seqs:
        fill = ops.full((longest - s.shape[0], *trailing), padding_value, dtype=s.dtype)
        padded.append(ops.concat([s, fill] if padding_side == "right" else [fill, s], axis=0))
    return ops.stack(padded, axis=0 if batch_first else 1)

"""As PyTorch's `torch.nn.utils.rnn`: sequences of different lengths padded into one tensor
(`pad_sequence`, `unpad_sequence`) or packed (`PackedSequence`: the rows of every time step that still
run, `pack_padded_sequence`, `pack_sequence`, `pad_packed_sequence`, `unpack_sequence`), which
`nn.RNN`, `nn.LSTM` and `nn.GRU` take as input.

Lengths and batch sizes are plain numbers (PyTorch keeps them on the CPU too): packing is indexing with
ops, so the data keeps its history and gradients flow through it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from ... import ops
from ...dtypes import f32, f64
from ...errors import ShapeError
from ...functions import index_select
from ...tensor import Tensor, describe

__all__ = [
    "PackedSequence",
    "invert_permutation",
    "pack_padded_sequence",
    "pack_sequence",
    "pad_packed_sequence",
    "pad_sequence",
    "unpack_sequence",
    "unpad_sequence",
]


class _PackedFields(NamedTuple):
    data: Tensor
    batch_sizes: Tensor
    sorted_indices: Tensor | None
    unsorted_indices: Tensor | None


class PackedSequence(_PackedFields):
    """PyTorch's packed batch: `data` [sum of lengths, *] holds time step 0's rows of every sequence
    (longest first), then step 1's of those still running, ...; `batch_sizes` [T] how many run at each
    step; `sorted_indices` the batch order by decreasing length (None: it was sorted) and
    `unsorted_indices` its inverse."""

    def __new__(
        cls,
        data: Tensor,
        batch_sizes: Tensor | None = None,
        sorted_indices: Tensor | None = None,
        unsorted_indices: Tensor | None = None,
    ) -> PackedSequence:
        if batch_sizes is None:
            raise TypeError("PackedSequence needs batch_sizes (make one with pack_padded_sequence)")
        if unsorted_indices is None and sorted_indices is not None:
            unsorted_indices = invert_permutation(sorted_indices)
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def to(self, *args: Any, **kwargs: Any) -> PackedSequence:
        """The data moved or cast (`Tensor.to`'s arguments); the sizes and indices as they are."""
        return type(self)(self.data.to(*args, **kwargs), self.batch_sizes, self.sorted_indices,
                          self.unsorted_indices)  # fmt: skip

    def float(self) -> PackedSequence:
        return self.to(dtype=f32)

    def double(self) -> PackedSequence:
        return self.to(dtype=f64)

    @property
    def is_cuda(self) -> bool:
        return False

    def is_pinned(self) -> bool:
        return False


def invert_permutation(permutation: Tensor | None) -> Tensor | None:
    """The inverse permutation (None for None)."""
    if permutation is None:
        return None
    order = np.asarray(permutation.numpy())
    inverse = np.empty_like(order)
    inverse[order] = np.arange(order.size)
    return ops.tensor(inverse.astype(np.int64))


def _numbers(t: Tensor, what: str) -> np.ndarray:
    """A tensor of sizes as NumPy numbers: packing is eager (which rows run at each step is Python's)."""
    if not isinstance(t.payload, np.ndarray):
        raise NotImplementedError(
            f"{what} of a PackedSequence in a trace: packing reads its lengths as numbers and runs eagerly; "
            "run it eagerly, or give the recurrent layer a padded batch inside verigrad.compile"
        )
    return np.asarray(t.numpy())


def _lengths(lengths: Any) -> np.ndarray:
    values = np.asarray(_numbers(lengths, "pack_padded_sequence") if isinstance(lengths, Tensor) else lengths)
    if values.ndim != 1 or (values.size and values.dtype.kind not in "iu"):
        raise ShapeError(f"pack_padded_sequence: lengths must be a 1-D list of integers, got {lengths!r}")
    return values.astype(np.int64)


def pack_padded_sequence(
    input: Tensor, lengths: Any, batch_first: bool = False, enforce_sorted: bool = True
) -> PackedSequence:
    """Pack a padded batch [T, B, *] ([B, T, *] with batch_first) of sequences of `lengths` (a list or
    1-D tensor of B positive lengths, decreasing unless enforce_sorted=False)."""
    sizes = _lengths(lengths)
    steps, batch = (input.shape[1], input.shape[0]) if batch_first else (input.shape[0], input.shape[1])
    if sizes.size != batch:
        raise ShapeError(
            f"pack_padded_sequence: {sizes.size} lengths for a batch of {batch}: {describe(input)}"
        )
    if enforce_sorted:
        if np.any(np.diff(sizes) > 0):
            raise RuntimeError(
                "`lengths` array must be sorted in decreasing order when `enforce_sorted` is True. You can "
                "pass `enforce_sorted=False` to pack_padded_sequence and/or pack_sequence to sidestep this "
                "requirement if you do not need ONNX exportability."
            )
        order = None
    else:
        order = np.argsort(-sizes, kind="stable")
    if np.any(sizes <= 0):
        raise RuntimeError(
            "Length of all samples has to be greater than 0, but found an element in 'lengths' that is <= 0"
        )
    if sizes.max() > steps:
        raise ShapeError(
            f"pack_padded_sequence: a length of {sizes.max()} in a padded input of {steps} steps"
        )
    sorted_indices = None if order is None else ops.tensor(order.astype(np.int64))
    if batch_first:
        input = input.transpose(0, 1)
    if sorted_indices is not None:
        input = index_select(input, 1, sorted_indices)
    ordered = sizes if order is None else sizes[order]
    batch_sizes = np.array([(ordered > t).sum() for t in range(int(ordered[0]))], dtype=np.int64)
    data = ops.concat([input[t, : int(n)] for t, n in enumerate(batch_sizes)], axis=0)
    return PackedSequence(data, ops.tensor(batch_sizes), sorted_indices, invert_permutation(sorted_indices))


def pad_packed_sequence(
    sequence: PackedSequence,
    batch_first: bool = False,
    padding_value: float = 0.0,
    total_length: int | None = None,
) -> tuple[Tensor, Tensor]:
    """The inverse of pack_padded_sequence: (padded [T, B, *] ([B, T, *] with batch_first), the lengths,
    an i64 tensor), in the batch's original order; T the longest length, or total_length."""
    batch_sizes = [int(n) for n in _numbers(sequence.batch_sizes, "pad_packed_sequence")]
    steps = len(batch_sizes)
    if total_length is not None:
        if total_length < steps:
            raise ValueError(
                "Expected total_length to be at least the length of the longest sequence in input, but got "
                f"total_length={total_length} and max sequence length being {steps}"
            )
        steps = total_length
    data, batch = sequence.data, batch_sizes[0]
    trailing = tuple(data.shape[1:])
    rows, at = [], 0
    for n in batch_sizes:
        step = data[at : at + n]
        if n < batch:
            step = ops.concat(
                [step, ops.full((batch - n, *trailing), padding_value, dtype=data.dtype)], axis=0
            )
        rows.append(step)
        at += n
    rows += [ops.full((batch, *trailing), padding_value, dtype=data.dtype)] * (steps - len(batch_sizes))
    padded = ops.stack(rows, axis=0)
    lengths = np.array([sum(1 for n in batch_sizes if n > b) for b in range(batch)], dtype=np.int64)
    if sequence.unsorted_indices is not None:
        padded = index_select(padded, 1, sequence.unsorted_indices)
        lengths = lengths[np.asarray(sequence.unsorted_indices.numpy())]
    return (padded.transpose(0, 1) if batch_first else padded), ops.tensor(lengths)


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


def unpad_sequence(padded_sequences: Tensor, lengths: Any, batch_first: bool = False) -> list[Tensor]:
    """The sequences of a padded batch, each cut to its length."""
    if not batch_first:
        padded_sequences = padded_sequences.transpose(0, 1)
    return [padded_sequences[b, : int(n)] for b, n in enumerate(_lengths(lengths))]


def pack_sequence(sequences: Sequence[Tensor], enforce_sorted: bool = True) -> PackedSequence:
    """Pack a list of sequences [L_i, *] (longest first, unless enforce_sorted=False)."""
    lengths = [s.shape[0] for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences: PackedSequence) -> list[Tensor]:
    """The list of sequences a PackedSequence holds, in their original order."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)


def pack_like(padded: Tensor, like: PackedSequence) -> PackedSequence:
    """A padded output [T, B, *] (B in the original order) packed as `like` is: its sizes and order."""
    if like.sorted_indices is not None:
        padded = index_select(padded, 1, like.sorted_indices)
    sizes = [int(n) for n in _numbers(like.batch_sizes, "packing")]
    data = ops.concat([padded[t, :n] for t, n in enumerate(sizes)], axis=0)
    return PackedSequence(data, like.batch_sizes, like.sorted_indices, like.unsorted_indices)

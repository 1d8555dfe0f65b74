"""Lookups by integer index, as in `torch.nn.functional`: embedding (rows of a table, with PyTorch's
max_norm, padding_idx and scale_grad_by_freq), embedding_bag (rows reduced per bag) and one_hot."""

from __future__ import annotations

import numpy as np

from ... import functions, ops
from ...autograd import no_grad
from ...errors import ShapeError
from ...functions.pointwise import values_of
from ...ops._op import floating_only
from ...ops.checks import checked
from ...shapes import plain_int
from ...tensor import Tensor, describe


def embedding(
    input: Tensor,
    weight: Tensor,
    padding_idx: int | None = None,
    max_norm: float | None = None,
    norm_type: float = 2.0,
    scale_grad_by_freq: bool = False,
    sparse: bool = False,
) -> Tensor:
    """Rows of `weight` [V, D] at the integer indices `input` [...], giving [..., D] (PyTorch's
    F.embedding): the row `padding_idx` gets no gradient; with `max_norm`, each row looked up whose
    `norm_type`-norm exceeds it is scaled in place to max_norm / (norm + 1e-7); with
    `scale_grad_by_freq`, a row's gradient is divided by how often the batch looks it up.

    verigrad's older order (weight, idx) is accepted too: the integer tensor is the index.
    """
    if input.dtype.kind != "i" and weight.dtype.kind == "i":
        input, weight = weight, input
    if sparse:
        raise ValueError("embedding: sparse gradients are not supported (sparse=True); use sparse=False")
    if weight.ndim != 2:
        raise ShapeError(f"embedding: weight must be a [V, D] table, got {describe(weight)}")
    rows_count = weight.shape[0]
    if padding_idx is not None:
        if isinstance(rows_count, int) and not -rows_count <= padding_idx < rows_count:
            raise ValueError(
                f"embedding: padding_idx must be within the {rows_count} rows, got {padding_idx}"
            )
        padding_idx %= rows_count
    if max_norm is not None:
        _renorm_used_rows(weight, input, float(max_norm), float(norm_type))
    rows = ops.embedding(weight, input)
    if scale_grad_by_freq:
        rows = _scaled_by_freq(rows, weight, input)
    if padding_idx is None:
        return rows
    padding = ops.unsqueeze(input == padding_idx, -1)  # over the lookups, not the table
    return ops.where(padding, rows.detach(), rows)


def _scaled_by_freq(rows: Tensor, weight: Tensor, idx: Tensor) -> Tensor:
    """rows with their values unchanged and their gradient divided by how often idx names each row."""
    counts = _lookups(weight, idx)
    share = ops.unsqueeze(1.0 / ops.embedding(ops.unsqueeze(counts, -1), idx)[..., 0], -1)
    return rows.detach() + (rows - rows.detach()) * share


def _lookups(weight: Tensor, idx: Tensor) -> Tensor:
    """How often `idx` names each row of `weight`, in weight's dtype."""
    flat = idx.reshape(-1)
    zeros = ops.zeros((weight.shape[0],), dtype=weight.dtype)
    return functions.index_add(zeros, 0, flat, ops.ones(flat.shape, dtype=weight.dtype))


def _renorm_used_rows(weight: Tensor, idx: Tensor, max_norm: float, norm_type: float) -> None:
    """PyTorch's embedding_renorm_: rows of `weight` that `idx` names, whose norm exceeds max_norm, scaled
    in place by max_norm / (norm + 1e-7); outside the graph."""
    with no_grad():
        used = _lookups(weight, idx) > 0
        norms = weight.norm(norm_type, dim=1)
        scale = ops.where(used & (norms > max_norm), max_norm / (norms + 1e-7), 1.0).cast(weight.dtype)
        weight.assign(weight * ops.unsqueeze(scale, -1))


_BAG_MODES = ("sum", "mean", "max")


def embedding_bag(
    input: Tensor,
    weight: Tensor,
    offsets: Tensor | None = None,
    max_norm: float | None = None,
    norm_type: float = 2,
    scale_grad_by_freq: bool = False,
    mode: str = "mean",
    sparse: bool = False,
    per_sample_weights: Tensor | None = None,
    include_last_offset: bool = False,
    padding_idx: int | None = None,
) -> Tensor:
    """The rows of `weight` at `input`, reduced ("sum", "mean" or "max") per bag (PyTorch's
    F.embedding_bag): a 2-D input [B, N] is B bags of N; a 1-D input is cut into bags at `offsets` (the
    start of each bag; with include_last_offset, one more: the end). An empty bag gives zeros; entries
    equal to `padding_idx` are left out; `per_sample_weights` (mode "sum" only) scale each row."""
    floating_only(weight.dtype, what="embedding_bag's weight")
    if mode not in _BAG_MODES:
        raise ValueError(f"embedding_bag: mode must be one of {_BAG_MODES}, got {mode!r}")
    if scale_grad_by_freq or sparse:  # PyTorch's bag gradient by frequency does not follow its docs yet
        raise ValueError("embedding_bag: scale_grad_by_freq and sparse are not supported; leave them False")
    if input.dtype.kind != "i":
        raise TypeError(f"embedding_bag: input must be an integer tensor, got {describe(input)}")
    if per_sample_weights is not None and mode != "sum":
        raise ValueError(
            f"embedding_bag: per_sample_weights is only supported for mode='sum', got mode={mode!r}"
        )
    if per_sample_weights is not None and tuple(per_sample_weights.shape) != tuple(input.shape):
        raise ShapeError(
            f"embedding_bag: per_sample_weights must be shaped like input, got {describe(per_sample_weights)}"
        )
    bags, count, flat = _bag_ids(input, offsets, include_last_offset)
    if per_sample_weights is not None:
        per_sample_weights = per_sample_weights.reshape(-1)
    if max_norm is not None:
        _renorm_used_rows(weight, flat, float(max_norm), float(norm_type))
    rows = ops.embedding(weight, flat)
    bag = ops.tensor(bags.astype(np.int64))
    if padding_idx is not None:
        padding_idx %= weight.shape[0]
        bag = ops.where(flat == padding_idx, count, bag)  # the padding's entries go to a bag left off
    if per_sample_weights is not None:
        rows = rows * ops.unsqueeze(per_sample_weights, -1)
    spread_to = ops.unsqueeze(bag, -1).broadcast_to(rows.shape)
    base = ops.zeros((count + 1, weight.shape[1]), dtype=weight.dtype)
    if mode == "max":
        out = ops.scatter_reduce(base, 0, spread_to, rows, "amax", include_self=False)
    else:
        out = ops.scatter_reduce(base, 0, spread_to, rows, "sum")
        if mode == "mean":
            ones = ops.ones(bag.shape, dtype=weight.dtype)
            sizes = ops.scatter_reduce(ops.zeros((count + 1,), dtype=weight.dtype), 0, bag, ones, "sum")
            out = out / ops.unsqueeze(ops.where(sizes > 0, sizes, 1), -1)
    return out[:count]


def _bag_ids(
    input: Tensor, offsets: Tensor | None, include_last_offset: bool
) -> tuple[np.ndarray, int, Tensor]:
    """(the bag of each entry, the number of bags, the entries as a vector)."""
    if input.ndim == 2:
        if offsets is not None:
            raise ValueError("embedding_bag: offsets must be None when input is 2-D (each row is a bag)")
        b, n = input.shape
        if not isinstance(b, int) or not isinstance(n, int):
            raise ShapeError(f"embedding_bag needs concrete sizes, got {describe(input)}")
        return np.repeat(np.arange(b), n), b, input.reshape(-1)
    if input.ndim != 1:
        raise ShapeError(f"embedding_bag: input must be 1-D (with offsets) or 2-D, got {describe(input)}")
    if offsets is None or offsets.ndim != 1:
        raise ValueError("embedding_bag: a 1-D input needs offsets, a 1-D tensor of the bags' starts")
    starts = values_of(offsets, "embedding_bag's offsets").astype(np.int64)
    n = input.shape[0]
    if not isinstance(n, int):
        raise ShapeError(f"embedding_bag needs concrete sizes, got {describe(input)}")
    if starts.size and starts[0] != 0:
        raise ValueError(
            "embedding_bag: offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to "
            f"start from position 0. However, got {starts[0]}"
        )
    if np.any(np.diff(starts) < 0) or (starts.size and starts[-1] > n):
        raise ValueError(
            f"embedding_bag: offsets must be non-decreasing and at most {n}, got {starts.tolist()}"
        )
    if include_last_offset:
        if not starts.size or starts[-1] != n:  # past it, PyTorch's sum, mean and max disagree
            raise ValueError(
                f"embedding_bag: with include_last_offset, offsets must end with the input's size {n} "
                f"(the end of the last bag), got {starts.tolist()}"
            )
        starts = starts[:-1]
    position = np.arange(n)
    return np.searchsorted(starts, position, side="right") - 1, len(starts), input


def one_hot(input: Tensor, num_classes: int = -1) -> Tensor:
    """[..., num_classes] i64 with 1 at each class (PyTorch's F.one_hot: i64 classes, non-negative and
    below num_classes; num_classes -1: the largest + 1)."""
    if input.dtype.name != "i64":
        raise TypeError(
            f"one_hot takes integer classes of dtype i64 (PyTorch's LongTensor), got {describe(input)}"
        )
    num_classes = plain_int(num_classes)  # a NumPy integer, read through __index__ as PyTorch's
    if not isinstance(num_classes, int):
        raise TypeError(f"one_hot: num_classes must be an int, got {type(num_classes).__name__}")
    values = input.payload if isinstance(input.payload, np.ndarray) else None
    if num_classes == -1:
        if values is None:
            raise ValueError("one_hot of an abstract or traced tensor needs num_classes")
        if not values.size:
            raise ValueError("one_hot: Can not infer total number of classes from empty tensor.")
        num_classes = int(values.max()) + 1
    # negative classes or ones >= num_classes raise ValueError, eagerly and compiled alike
    classes = checked(input, num_classes, "one_hot", what="class")
    return (ops.unsqueeze(classes, -1) == ops.arange(0, num_classes)).cast("i64")

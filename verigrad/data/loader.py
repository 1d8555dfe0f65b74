"""verigrad's own `DataLoader(x, y, batch_size=..., shuffle=True, seed=...)`: batches of arrays (or of a
dataset), shuffled by a seed whose order changes every epoch. It is PyTorch's `DataLoader`
(`verigrad.utils.data`) over a `TensorDataset` of the arrays, with a seeded sampler."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from ..ops import cast
from ..ops.creation import as_tensor
from ..tensor import Tensor
from ..utils import data as torch_data
from ..utils.data import Dataset, Sampler, TensorDataset


class SeededShuffle(Sampler):
    """0 .. n-1 in an order drawn from NumPy's PCG64 seeded with `seed`; a new order every epoch."""

    def __init__(self, n: int, seed: int) -> None:
        self.n, self._rng = n, np.random.default_rng(seed)

    def __iter__(self) -> Iterator[int]:
        return iter(self._rng.permutation(self.n).tolist())

    def __len__(self) -> int:
        return self.n


def _cast_floats(batch: Any, dtype: str) -> Any:
    """The float tensors of a collated batch (alone, or in a list or tuple) cast to `dtype`."""
    if isinstance(batch, Tensor):
        return cast(batch, dtype=dtype) if batch.dtype.is_float and batch.dtype.name != dtype else batch
    if isinstance(batch, list | tuple):
        return type(batch)(_cast_floats(b, dtype) for b in batch)
    return batch


def _is_dataset(x: Any) -> bool:
    indexable = hasattr(x, "__getitem__") and hasattr(x, "__len__")
    return indexable and not isinstance(x, np.ndarray | Tensor | list)


class DataLoader(torch_data.DataLoader):
    """Batches of the arrays (or tensors) given, or of a dataset (anything with `len` and `[i]`):
    `DataLoader(x, y)` and `DataLoader(TensorDataset(x, y))` both give [x, y] batches, and a dataset
    whose items are single arrays gives single tensors. `dtype` converts float batches. The same seed
    gives the same batches."""

    def __init__(
        self,
        *arrays: Any,
        batch_size: int = 64,
        shuffle: bool = False,
        seed: int = 0,
        drop_last: bool = False,
        dtype: str | None = None,
    ) -> None:
        if not arrays:
            raise ValueError("DataLoader needs at least one array, or a dataset")
        collate_fn = None
        if len(arrays) == 1 and isinstance(arrays[0], TensorDataset):
            arrays = arrays[0].tensors
        if len(arrays) == 1 and _is_dataset(arrays[0]):
            dataset = arrays[0]
            if dtype is not None:
                collate_fn = lambda items: _cast_floats(torch_data.default_collate(items), dtype)
        else:  # the float arrays converted once, not batch by batch
            tensors = [a if isinstance(a, Tensor) else as_tensor(np.asarray(a)) for a in arrays]
            dataset = TensorDataset(*(_cast_floats(t, dtype) if dtype else t for t in tensors))
        sampler = SeededShuffle(len(dataset), seed) if shuffle else None
        super().__init__(
            dataset, batch_size=batch_size, sampler=sampler, drop_last=drop_last, collate_fn=collate_fn
        )


__all__ = ["DataLoader", "Dataset", "SeededShuffle", "TensorDataset"]

"""`DataLoader`: batches of tensors from arrays or a dataset, shuffled by a seed that changes every
epoch; `Dataset` and `TensorDataset`, PyTorch's datasets."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from ..ops import tensor
from ..tensor import Tensor


def _array(a: Any) -> np.ndarray:
    return a.numpy() if isinstance(a, Tensor) else np.asarray(a)


class Dataset:
    """PyTorch's map-style dataset: a subclass gives `__len__` and `__getitem__` (DataLoader takes any
    object that has both)."""

    def __len__(self) -> int:
        raise NotImplementedError(f"{type(self).__name__} has no __len__")

    def __getitem__(self, i: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} has no __getitem__")


class TensorDataset(Dataset):
    """Rows of equally long arrays or tensors: `dataset[i]` is the tuple of their i-th rows."""

    def __init__(self, *arrays: Any) -> None:
        if not arrays:
            raise ValueError("TensorDataset needs at least one array")
        self.arrays = tuple(_array(a) for a in arrays)
        if len({len(a) for a in self.arrays}) != 1:
            raise ValueError(f"arrays differ in length: {[len(a) for a in self.arrays]}")

    def __len__(self) -> int:
        return len(self.arrays[0])

    def __getitem__(self, i: Any) -> tuple[np.ndarray, ...]:
        return tuple(a[i] for a in self.arrays)


def _is_dataset(x: Any) -> bool:
    indexable = hasattr(x, "__getitem__") and hasattr(x, "__len__")
    return indexable and not isinstance(x, np.ndarray | Tensor | list)


class DataLoader:
    """Batches of the arrays (or tensors) given, or of a dataset (anything with `len` and `[i]`, as
    PyTorch's): `DataLoader(x, y)` and `DataLoader(TensorDataset(x, y))` both give (x, y) batches, and a
    dataset whose items are single arrays gives single tensors. The same seed gives the same batches."""

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
        self.dataset = None
        if len(arrays) == 1 and isinstance(arrays[0], TensorDataset):
            arrays = arrays[0].arrays
        elif len(arrays) == 1 and _is_dataset(arrays[0]):
            self.dataset = arrays[0]
        else:
            arrays = tuple(_array(a) for a in arrays)
            if len({len(a) for a in arrays}) != 1:
                raise ValueError(f"arrays differ in length: {[len(a) for a in arrays]}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self.arrays = arrays
        self.batch_size, self.shuffle, self.drop_last = batch_size, shuffle, drop_last
        self.dtype = dtype
        self._rng = np.random.default_rng(seed)

    def _size(self) -> int:
        return len(self.dataset) if self.dataset is not None else len(self.arrays[0])

    def __len__(self) -> int:
        n = self._size()
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def __iter__(self) -> Iterator[Any]:
        n = self._size()
        order = self._rng.permutation(n) if self.shuffle else np.arange(n)
        for b in range(len(self)):
            index = order[b * self.batch_size : (b + 1) * self.batch_size]
            if self.dataset is None:
                yield tuple(self._tensor(a[index]) for a in self.arrays)
            else:
                yield self._collate([self.dataset[int(i)] for i in index])

    def _collate(self, items: list[Any]) -> Any:
        """A dataset's items stacked: a tuple of batches for tuple items, else one batch."""
        if isinstance(items[0], tuple | list):
            return tuple(self._stacked(fields) for fields in zip(*items))
        return self._stacked(items)

    def _stacked(self, rows: Any) -> Tensor:
        return self._tensor(np.stack([_array(row) for row in rows]))

    def _tensor(self, batch: np.ndarray) -> Tensor:
        if self.dtype is not None and batch.dtype.kind == "f":
            return tensor(batch, dtype=self.dtype)
        return tensor(batch)

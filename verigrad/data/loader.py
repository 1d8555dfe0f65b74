"""`DataLoader`: batches of tensors from arrays, shuffled by a seed that changes every epoch."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from ..ops import tensor
from ..tensor import Tensor


class DataLoader:
    """Iterate over (x, y) batches of the arrays; the same seed gives the same batches."""

    def __init__(
        self,
        *arrays: np.ndarray,
        batch_size: int = 64,
        shuffle: bool = False,
        seed: int = 0,
        drop_last: bool = False,
        dtype: str | None = None,
    ) -> None:
        if not arrays:
            raise ValueError("DataLoader needs at least one array")
        if len({len(a) for a in arrays}) != 1:
            raise ValueError(f"arrays differ in length: {[len(a) for a in arrays]}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self.arrays = arrays
        self.batch_size, self.shuffle, self.drop_last = batch_size, shuffle, drop_last
        self.dtype = dtype
        self._rng = np.random.default_rng(seed)

    def __len__(self) -> int:
        n = len(self.arrays[0])
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def __iter__(self) -> Iterator[tuple[Tensor, ...]]:
        n = len(self.arrays[0])
        order = self._rng.permutation(n) if self.shuffle else np.arange(n)
        for b in range(len(self)):
            index = order[b * self.batch_size : (b + 1) * self.batch_size]
            yield tuple(self._tensor(a[index]) for a in self.arrays)

    def _tensor(self, batch: np.ndarray) -> Tensor:
        if self.dtype is not None and batch.dtype.kind == "f":
            return tensor(batch, dtype=self.dtype)
        return tensor(batch)

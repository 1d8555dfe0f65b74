"""PyTorch's datasets: `Dataset`, `IterableDataset`, `TensorDataset`, `Subset`, `ConcatDataset`,
`ChainDataset`, and `random_split`."""

from __future__ import annotations

import bisect
import itertools
import math
import operator
import warnings
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from ...ops.creation import Generator, as_tensor, randperm
from ...tensor import Tensor


class Dataset:
    """A map-style dataset: a subclass gives `__getitem__` (and `__len__`, which DataLoader needs);
    `a + b` is their `ConcatDataset`."""

    def __getitem__(self, index: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} has no __getitem__")

    def __add__(self, other: Dataset) -> ConcatDataset:
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """A dataset read by iterating it (`__iter__`), as a stream; `a + b` is their `ChainDataset`."""

    def __iter__(self) -> Iterator[Any]:
        raise NotImplementedError(f"{type(self).__name__} has no __iter__")

    def __add__(self, other: Dataset) -> ChainDataset:  # type: ignore[override]
        return ChainDataset([self, other])


class TensorDataset(Dataset):
    """Rows of equally long tensors (NumPy arrays are taken too): `dataset[i]` is the tuple of their
    i-th rows."""

    def __init__(self, *tensors: Any) -> None:
        if not tensors:
            raise ValueError("TensorDataset needs at least one tensor")
        self.tensors = tuple(t if isinstance(t, Tensor) else as_tensor(np.asarray(t)) for t in tensors)
        lengths = [len(t) for t in self.tensors]
        if len(set(lengths)) != 1:
            raise ValueError(f"TensorDataset: the tensors differ in length (size mismatch): {lengths}")

    def __getitem__(self, index: Any) -> tuple[Tensor, ...]:
        return tuple(t[index] for t in self.tensors)

    def __len__(self) -> int:
        return len(self.tensors[0])


class Subset(Dataset):
    """The items of `dataset` at `indices`, in that order."""

    def __init__(self, dataset: Any, indices: Sequence[int]) -> None:
        self.dataset, self.indices = dataset, indices

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, list):
            return self.dataset[[self.indices[i] for i in index]]
        return self.dataset[self.indices[index]]

    def __getitems__(self, indices: list[int]) -> list[Any]:
        inner = getattr(self.dataset, "__getitems__", None)
        if inner is not None:
            return inner([self.indices[i] for i in indices])
        return [self.dataset[self.indices[i]] for i in indices]

    def __len__(self) -> int:
        return len(self.indices)


class ConcatDataset(Dataset):
    """Map-style datasets one after another."""

    def __init__(self, datasets: Iterable[Any]) -> None:
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("ConcatDataset: datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise TypeError("ConcatDataset does not take an IterableDataset (ChainDataset joins those)")
        self.cumulative_sizes = list(np.cumsum([len(d) for d in self.datasets]).tolist())

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    def __getitem__(self, index: int) -> Any:
        if index < 0:
            if -index > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            index = len(self) + index
        which = bisect.bisect_right(self.cumulative_sizes, index)
        start = self.cumulative_sizes[which - 1] if which else 0
        return self.datasets[which][index - start]


class StackDataset(Dataset):
    """Datasets side by side (PyTorch's StackDataset): item i is (a[i], b[i], ...) for datasets given by
    position, {"name": a[i], ...} for datasets given by name; all of one length."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if args and kwargs:
            raise ValueError("StackDataset takes datasets by position (tuples) or by name (dicts), not both")
        if not args and not kwargs:
            raise ValueError("At least one dataset should be passed")
        self.datasets: tuple | dict = args or kwargs
        parts = list(args or kwargs.values())
        self._length = len(parts[0])
        if any(len(d) != self._length for d in parts):
            raise ValueError("Size mismatch between datasets")

    def __len__(self) -> int:
        return self._length

    def __getitem__(self, index: int) -> Any:
        if isinstance(self.datasets, dict):
            return {k: d[index] for k, d in self.datasets.items()}
        return tuple(d[index] for d in self.datasets)


class ChainDataset(IterableDataset):
    """Iterable datasets one after another."""

    def __init__(self, datasets: Iterable[Any]) -> None:
        self.datasets = datasets

    def __iter__(self) -> Iterator[Any]:
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise TypeError("ChainDataset only takes IterableDatasets")
            yield from d

    def __len__(self) -> int:
        return sum(len(d) for d in self.datasets)


def split_lengths(n: int, lengths: Sequence[float]) -> list[int]:
    """PyTorch's sizes for `random_split`: lengths as given, or fractions floored and the remainder
    handed out one by one from the first."""
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        for i, frac in enumerate(lengths):
            if not 0 <= frac <= 1:
                raise ValueError(f"random_split: the fraction at index {i} is not between 0 and 1")
        sizes = [math.floor(n * frac) for frac in lengths]
        for i in range(n - sum(sizes)):
            sizes[i % len(sizes)] += 1
        for i, size in enumerate(sizes):
            if size == 0:
                warnings.warn(f"random_split: length of split at index {i} is 0", stacklevel=3)
        return sizes
    if sum(lengths) != n:
        raise ValueError(f"random_split: the lengths {list(lengths)} do not add up to the dataset's {n}")
    try:  # PyTorch's randperm refuses a float sum: [2.5, 2.5] must not become [2, 2]
        return [operator.index(size) for size in lengths]
    except TypeError:
        raise TypeError(
            f"random_split: lengths must be ints or fractions summing to 1, got {list(lengths)}"
        ) from None


def random_split(dataset: Any, lengths: Sequence[float], generator: Generator | None = None) -> list[Subset]:
    """`dataset` cut into non-overlapping random `Subset`s of the given lengths (or fractions of it)."""
    sizes = split_lengths(len(dataset), lengths)
    order = randperm(sum(sizes), generator=generator).tolist()
    starts = np.cumsum([0, *sizes]).tolist()
    return [Subset(dataset, order[a:b]) for a, b in itertools.pairwise(starts)]

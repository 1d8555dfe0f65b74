"""PyTorch's samplers: the order in which a DataLoader reads a map-style dataset, index by index
(`SequentialSampler`, `RandomSampler`, ...) or batch by batch (`BatchSampler`).

Random ones draw from verigrad's generators: the same seed gives the same order, not PyTorch's order.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence, Sized
from typing import Any

from ...functions.distributions import multinomial
from ...ops.creation import Generator, default_generator, randint, randperm, tensor


class Sampler:
    """Indices into a dataset: a subclass gives `__iter__` (and `__len__` where it knows it)."""

    def __init__(self, data_source: Any = None) -> None:
        pass

    def __iter__(self) -> Iterator[Any]:
        raise NotImplementedError(f"{type(self).__name__} has no __iter__")


def _positive(name: str, value: Any) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"{name} should be a positive integer value, but got {name}={value!r}")


def _flag(name: str, value: Any, error: type[Exception] = ValueError) -> None:
    if not isinstance(value, bool):
        raise error(f"{name} should be a boolean value, but got {name}={value!r}")


def check_batching(batch_size: Any, drop_last: Any) -> None:
    """PyTorch's checks of a batch size and `drop_last`."""
    _positive("batch_size", batch_size)
    _flag("drop_last", drop_last)


class SequentialSampler(Sampler):
    """0, 1, ..., len(data_source) - 1."""

    def __init__(self, data_source: Sized) -> None:
        self.data_source = data_source

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


class RandomSampler(Sampler):
    """The indices shuffled (each epoch anew), or `num_samples` drawn with `replacement`. Without a
    `generator`, each epoch seeds its own from the default one (so `manual_seed` fixes the order)."""

    def __init__(
        self,
        data_source: Sized,
        replacement: bool = False,
        num_samples: int | None = None,
        generator: Generator | None = None,
    ) -> None:
        self.data_source, self.replacement = data_source, replacement
        self._num_samples, self.generator = num_samples, generator
        _flag("replacement", replacement, TypeError)
        _positive("num_samples", self.num_samples)

    @property
    def num_samples(self) -> int:
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self) -> Iterator[int]:
        n = len(self.data_source)
        generator = self.generator or Generator(default_generator.next_seed())
        if self.replacement:
            yield from randint(n, (self.num_samples,), generator=generator).tolist()
            return
        for _ in range(self.num_samples // n):
            yield from randperm(n, generator=generator).tolist()
        yield from randperm(n, generator=generator).tolist()[: self.num_samples % n]

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices, shuffled each epoch."""

    def __init__(self, indices: Sequence[int], generator: Generator | None = None) -> None:
        self.indices, self.generator = indices, generator

    def __iter__(self) -> Iterator[int]:
        for i in randperm(len(self.indices), generator=self.generator).tolist():
            yield self.indices[i]

    def __len__(self) -> int:
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """`num_samples` indices into `weights`, drawn in proportion to them (with `replacement` or not)."""

    def __init__(
        self,
        weights: Sequence[float],
        num_samples: int,
        replacement: bool = True,
        generator: Generator | None = None,
    ) -> None:
        _positive("num_samples", num_samples)
        _flag("replacement", replacement)
        self.weights = tensor(weights, dtype="f64")
        if self.weights.ndim != 1:
            raise ValueError(f"weights should be a 1d sequence, but have shape {tuple(self.weights.shape)}")
        self.num_samples, self.replacement, self.generator = num_samples, replacement, generator

    def __iter__(self) -> Iterator[int]:
        draw = multinomial(self.weights, self.num_samples, self.replacement, generator=self.generator)
        yield from draw.tolist()

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler(Sampler):
    """Lists of `batch_size` indices from `sampler` (the last one shorter unless `drop_last`)."""

    def __init__(self, sampler: Sampler | Iterable[int], batch_size: int, drop_last: bool) -> None:
        check_batching(batch_size, drop_last)
        self.sampler, self.batch_size, self.drop_last = sampler, batch_size, drop_last

    def __iter__(self) -> Iterator[list[int]]:
        indices = iter(self.sampler)
        while batch := list(itertools.islice(indices, self.batch_size)):
            if len(batch) < self.batch_size and self.drop_last:
                return
            yield batch

    def __len__(self) -> int:
        n = len(self.sampler)  # type: ignore[arg-type]
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

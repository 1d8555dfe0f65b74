"""PyTorch's `DataLoader`: batches of a dataset, read in the order a sampler gives, collated.

Everything is loaded in this process: `num_workers`, `pin_memory`, `timeout`, `prefetch_factor`,
`persistent_workers` are checked as PyTorch checks them and change nothing else, and `worker_init_fn`
is not called (PyTorch calls it in worker processes only). A map-style dataset gives PyTorch's batches
whatever `num_workers` is; an `IterableDataset` with workers is refused, as PyTorch would read a copy
of it in each worker.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from ...ops import index as index_ops
from ...ops.creation import Generator, from_numpy
from .collate import default_collate, default_convert
from .dataset import IterableDataset, TensorDataset
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler, check_batching


def get_worker_info() -> None:
    """None: verigrad reads every dataset in the main process."""
    return None


class DataLoader:
    """Batches of `dataset`, as PyTorch's `DataLoader` (see the module's note on workers)."""

    def __init__(
        self,
        dataset: Any,
        batch_size: int | None = 1,
        shuffle: bool | None = None,
        sampler: Sampler | Any = None,
        batch_sampler: Sampler | Any = None,
        num_workers: int = 0,
        collate_fn: Callable[[list[Any]], Any] | None = None,
        pin_memory: bool = False,
        drop_last: bool = False,
        timeout: float = 0,
        worker_init_fn: Callable[[int], None] | None = None,
        multiprocessing_context: Any = None,
        generator: Generator | None = None,
        *,
        prefetch_factor: int | None = None,
        persistent_workers: bool = False,
        pin_memory_device: str = "",
        in_order: bool = True,
    ) -> None:
        iterable = isinstance(dataset, IterableDataset)
        if iterable:
            for name, value in (("shuffle", shuffle), ("sampler", sampler), ("batch_sampler", batch_sampler)):
                if value not in (None, False):
                    raise ValueError(f"DataLoader with IterableDataset: expected unspecified {name} option")
            if num_workers > 0:
                raise NotImplementedError(
                    "DataLoader: an IterableDataset with num_workers > 0 is not supported (PyTorch reads a"
                    " copy of it in each worker process; verigrad reads in this one): use num_workers=0"
                )
        if timeout < 0:
            raise ValueError("DataLoader: timeout option should be non-negative")
        if num_workers < 0:
            raise ValueError("DataLoader: num_workers option should be non-negative (0: in this process)")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("DataLoader: prefetch_factor needs num_workers > 0; leave it None")
        if persistent_workers and num_workers == 0:
            raise ValueError("DataLoader: persistent_workers option needs num_workers > 0")
        if sampler is not None and shuffle:
            raise ValueError("DataLoader: sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError(
                    "DataLoader: batch_sampler option is mutually exclusive with batch_size, shuffle,"
                    " sampler, and drop_last"
                )
            batch_size, drop_last = None, False
        elif batch_size is None and drop_last:
            raise ValueError("DataLoader: batch_size=None (no batching) is mutually exclusive with drop_last")
        if sampler is None and not iterable:
            sampler = RandomSampler(dataset, generator=generator) if shuffle else SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None and not iterable:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        elif batch_size is not None:
            check_batching(batch_size, drop_last)
        self.dataset, self.batch_size, self.drop_last = dataset, batch_size, drop_last
        self.sampler, self.batch_sampler, self.generator = sampler, batch_sampler, generator
        self.num_workers, self.pin_memory, self.timeout = num_workers, pin_memory, timeout
        self.worker_init_fn, self.prefetch_factor = worker_init_fn, prefetch_factor
        self.persistent_workers, self.multiprocessing_context = persistent_workers, multiprocessing_context
        self.collate_fn = collate_fn or (default_collate if self._auto_collation else default_convert)

    @property
    def _auto_collation(self) -> bool:
        return self.batch_size is not None or self.batch_sampler is not None

    def __len__(self) -> int:
        if isinstance(self.dataset, IterableDataset):
            n = len(self.dataset)  # a TypeError where the dataset has no length, as PyTorch's
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        return len(self.batch_sampler if self._auto_collation else self.sampler)

    def __iter__(self) -> Iterator[Any]:
        if self.pin_memory:
            warnings.warn(
                "DataLoader: pin_memory=True has no effect, there is no accelerator (as PyTorch warns)",
                stacklevel=2,
            )
        if isinstance(self.dataset, IterableDataset):
            yield from self._stream()
        elif self._auto_collation:
            for indices in self.batch_sampler:
                yield self._batch(list(indices))
        else:
            for i in self.sampler:
                yield self.collate_fn(self.dataset[i])

    def _batch(self, indices: list[int]) -> Any:
        if type(self.dataset) is TensorDataset and self.collate_fn is default_collate:
            # the rows at once: the same batches as collating them one by one, without the per-row work
            at = from_numpy(np.asarray(indices, dtype=np.int64))
            return [index_ops.take(t, at, axis=0) for t in self.dataset.tensors]
        getitems = getattr(self.dataset, "__getitems__", None)
        items = getitems(indices) if getitems is not None else [self.dataset[i] for i in indices]
        return self.collate_fn(items)

    def _stream(self) -> Iterator[Any]:
        items = iter(self.dataset)
        if self.batch_size is None:
            yield from (self.collate_fn(item) for item in items)
            return
        while batch := [item for _, item in zip(range(self.batch_size), items)]:
            if len(batch) < self.batch_size and self.drop_last:
                return
            yield self.collate_fn(batch)

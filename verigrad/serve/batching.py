"""The batch's key/value cache: one cache of `max_batch` rows, a row (slot) per running sequence.

The running sequences hold rows 0 .. n-1, so that a decode step runs the cache's first n rows (windows
that are views, no copy); when a sequence leaves, the last row's keys and values move into its row.
A row alone (`row(i)`) is a cache of batch 1 viewing the same memory, for a prompt's prefill.

The engine keeps every row zero past its sequence's length (`clear` when a sequence leaves or moves): a
step's window covers the batch's longest row, and a hidden position's key or value that is not finite
counts as `cached_attention`'s reference counts it (0 * NaN), so a NaN or an infinity that a sequence
left in its row would reach the next sequence there in some batches and not in others.
"""

from __future__ import annotations

import numpy as np

from ..models.lm import KVCache, LanguageModel


class BatchCache:
    """A model's cache of `rows` sequences of up to `capacity` positions each."""

    def __init__(self, model: LanguageModel, rows: int, capacity: int):
        self.cache = model.new_cache(rows, capacity)
        self.capacity = capacity
        keys, values = self.cache.keys, self.cache.values
        self._rows = [
            KVCache([k[i : i + 1] for k in keys], [v[i : i + 1] for v in values], capacity)
            for i in range(rows)
        ]

    def row(self, i: int, length: int) -> KVCache:
        """Row i as a cache of one sequence holding `length` positions (views of the batch's arrays)."""
        row = self._rows[i]
        row.length = length
        return row

    def move(self, source: int, target: int, length: int) -> None:
        """Copy row `source`'s first `length` positions into row `target`."""
        for arrays in (self.cache.keys, self.cache.values):
            for a in arrays:
                a[target, :, :length] = a[source, :, :length]

    def swap(self, a: int, b: int, length: int) -> None:
        """Exchange rows `a` and `b`'s first `length` positions."""
        for arrays in (self.cache.keys, self.cache.values):
            for x in arrays:
                x[[a, b], :, :length] = x[[b, a], :, :length]

    def clear(self, i: int, start: int, end: int) -> None:
        """Zero row i's positions start ... end-1 (those past the capacity are not there)."""
        at = slice(start, min(end, self.capacity))
        for arrays in (self.cache.keys, self.cache.values):
            for a in arrays:
                a[i, :, at] = 0

    def read(self, i: int, start: int, count: int) -> tuple[np.ndarray, np.ndarray]:
        """Row i's keys and values at positions start ... start+count-1 [layers, kv_heads, count, hd]."""
        at = slice(start, start + count)
        keys, values = self.cache.keys, self.cache.values
        return np.stack([k[i, :, at] for k in keys]), np.stack([v[i, :, at] for v in values])

    def write(self, i: int, start: int, keys: np.ndarray, values: np.ndarray) -> None:
        """Write `read`'s arrays back at positions start .. of row i."""
        at = slice(start, start + keys.shape[2])
        for layer, (k, v) in enumerate(zip(self.cache.keys, self.cache.values)):
            k[i, :, at] = keys[layer]
            v[i, :, at] = values[layer]

"""The prefix cache: the keys and values of whole blocks of prompt tokens, kept after a prompt's prefill
so that a later prompt starting with the same tokens copies them instead of computing them again.

The rule is block-granular: a prompt is prefilled in chunks of `block` tokens at positions 0, block,
2 block, ...; block i is found by a digest of the prompt's tokens 0 .. (i + 1) block - 1 (its own and
every earlier one), so a hit means the same tokens from the start. Since a chunk's keys and values depend
only on those tokens and the chunks before it, and each chunk runs the same computation whatever
precedes the request, a copied block holds the bits its computation would give. The least recently used
blocks are dropped beyond `max_blocks`.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np


class PrefixCache:
    """Blocks of keys and values [layers, kv_heads, block, head_dim] by the digest of their prefix."""

    def __init__(self, block: int, max_blocks: int):
        if not (isinstance(block, int) and block >= 1 and isinstance(max_blocks, int) and max_blocks >= 0):
            raise ValueError(f"PrefixCache: block must be >= 1, max_blocks >= 0, got {block}, {max_blocks}")
        self.block, self.max_blocks = block, max_blocks
        self._blocks: OrderedDict[bytes, tuple[np.ndarray, np.ndarray]] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = 0  # blocks

    def __len__(self) -> int:
        return len(self._blocks)

    def digests(self, tokens: Sequence[int]) -> list[bytes]:
        """The digest of each whole block of `tokens`: block i's covers tokens 0 .. (i + 1) block - 1."""
        out, h = [], hashlib.sha256()
        for start in range(0, len(tokens) - self.block + 1, self.block):
            h.update(np.asarray(tokens[start : start + self.block], dtype="<i8").tobytes())
            out.append(h.copy().digest())
        return out

    def lookup(self, digests: Sequence[bytes]) -> list[tuple[np.ndarray, np.ndarray]]:
        """The cached blocks that start the prompt, in order (as long a run as is cached)."""
        found = []
        with self._lock:
            for d in digests:
                entry = self._blocks.get(d)
                if entry is None:
                    break
                self._blocks.move_to_end(d)
                found.append(entry)
            self.hits += len(found)
            self.misses += len(digests) - len(found)
        return found

    def store(self, digest: bytes, keys: np.ndarray, values: np.ndarray) -> None:
        """Keep a block (copies of `keys` and `values`), dropping the least recently used beyond the limit."""
        if self.max_blocks == 0:
            return
        with self._lock:
            if digest in self._blocks:
                self._blocks.move_to_end(digest)
                return
            self._blocks[digest] = (keys.copy(), values.copy())
            while len(self._blocks) > self.max_blocks:
                self._blocks.popitem(last=False)

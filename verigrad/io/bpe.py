"""A GGUF file's byte-level BPE (GPT-2's split) held in NumPy arrays, encoding plain text without the
`tokenizers` library: its BPE model keeps each token twice as a Rust string in hash maps (11 MiB for
SmolLM2's 49k tokens and merges, resident for the whole process, which a chat's peak memory counts);
these arrays take 1.2 MiB. The library is built only for a text this encoder does not take.

It gives the library's ids (tests/test_bpe.py holds it to them) on plain text: printable ASCII, tabs and
line breaks. On such text GPT-2's split regex needs no Unicode tables (a letter is A-Z or a-z, a number
0-9, a space one of " \\t\\n\\r") and Python's `re` matches it as the library does; any other character,
and a vocabulary other than a plain byte-level one, leaves the text to the library. The added tokens (the
file's control and user-defined tokens) are cut out first, leftmost and then longest, as the library's
added vocabulary does; each piece of the split is then merged pair by pair, the pair of lowest rank first
(of equal ranks, the leftmost), as the library's BPE merges.
"""

from __future__ import annotations

import bisect
import contextlib
import hashlib
import itertools
import re
from array import array
from pathlib import Path

import numpy as np

from . import byte_level
from .atomic import write_atomically
from .byte_level import TokenBytes, byte_unspelling, plain_merges
from .gguf import StringArray

ARRAYS_VERSION = b"verigrad plain BPE arrays 2\x00"  # part of the cache's key: a new layout, new files

# GPT-2's split (the `tokenizers` ByteLevel pre-tokenizer's regex) on plain text
_SPLIT = re.compile(r"'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+", re.ASCII)
_PLAIN = re.compile(r"[\x20-\x7e\t\n\r]*")
_NONE = 2**62  # the rank of a pair no merge makes
_WORDS = 4096  # words whose ids are remembered (a chat encodes its whole conversation again each turn)


class ByteLevelBPE:
    """Encodes plain text (see the module) as the `tokenizers` library's byte-level BPE of the same tokens,
    merges and added tokens; `encode` returns None for a text it leaves to the library."""

    def __init__(
        self,
        singles: np.ndarray,
        keys: np.ndarray,
        merged: np.ndarray,
        added: dict[str, int],
        special: frozenset[int],
        size: int,
    ) -> None:
        """`singles`: the id of each byte's token (-1: none); `keys`: the merges' left * size + right,
        sorted; `merged`: their ranks and tokens [2, merges] (Python arrays of them are kept: a merge looks up
        one pair at a time, where a NumPy call's overhead would be most of the time)."""
        self._singles = singles.tolist()
        self._keys, self._ranks, self._into = (
            array("q", a.astype(np.int64).tobytes()) for a in (keys, *merged)
        )
        self.size = size  # the vocabulary's: a merge's key is left * size + right
        self.added, self.special = added, special  # the added tokens (text: id), which are special
        longest_first = sorted(added, key=len, reverse=True)  # at one position, the longest token wins
        self._added = re.compile("|".join(map(re.escape, longest_first))) if added else None
        self._words: dict[bytes, list[int]] = {}

    @classmethod
    def of(
        cls,
        tokens: StringArray,
        merges: StringArray,
        pieces: TokenBytes,
        added: dict[str, int],
        special: frozenset[int],
    ) -> ByteLevelBPE | None:
        """The encoder of a byte-level vocabulary (`tokens` in GPT-2's byte alphabet, `pieces` their bytes),
        its merges ("left right" each, in the alphabet) and added tokens (text: id; `special`: the special
        ones' ids), or None where the library would see it otherwise: a repeated token, a merge of tokens
        the vocabulary lacks or into one it lacks, a merge that is not one line of a merges.txt, a token
        JSON escapes. Its arrays are kept in verigrad's cache (`tokenizer_cache`, under the SHA-256 of the
        tokens and merges, as the library's files are) and read from there by the next load."""
        key = hashlib.sha256(ARRAYS_VERSION)
        for strings in (tokens, merges):
            key.update(len(strings).to_bytes(8, "little"))
            key.update(strings.data)
        file = byte_level.tokenizer_cache() / key.hexdigest()[:40] / "plain.npy"  # as tests redirect it
        packed = _read(file, len(pieces))
        if packed is None:
            if not plain_merges(merges) or (tokens.joined() < 0x20).any():
                return None
            packed = _packed(pieces, merges)
            if packed is None:
                return None
            with contextlib.suppress(OSError):  # a cache that cannot be written: built again next time
                sealed = np.concatenate([packed, _digest(packed)])
                write_atomically(file, lambda f: np.save(f, sealed, allow_pickle=False))
        m = (packed.size - 256) // 3
        singles, keys, merged = packed[:256], packed[256 : 256 + m], packed[256 + m :].reshape(2, m)
        return cls(singles, keys, merged, dict(added), special, len(pieces))

    def encode(self, text: str) -> list[int] | None:
        """The ids of `text`, or None where it is not plain text."""
        if _PLAIN.fullmatch(text) is None:
            return None
        out: list[int] = []
        start = 0
        if self._added is not None:
            for found in self._added.finditer(text):
                if not self._encode_words(text[start : found.start()], out):
                    return None
                out.append(self.added[found.group()])
                start = found.end()
        return out if self._encode_words(text[start:], out) else None

    def _encode_words(self, text: str, out: list[int]) -> bool:
        """Append the ids of `text` (no added token in it) to `out`; False where a byte has no token."""
        for word in _SPLIT.findall(text):
            raw = word.encode("ascii")
            ids = self._words.get(raw)
            if ids is None:
                ids = self._merge(raw)
                if ids is None:
                    return False
                if len(self._words) < _WORDS:
                    self._words[raw] = ids
            out.extend(ids)
        return True

    def _merge(self, word: bytes) -> list[int] | None:
        """The ids of one word: merged pair by pair, the lowest rank first (of equal ranks, the leftmost),
        each merge looking up only the two pairs it changed; None where a byte has no token."""
        ids = [self._singles[b] for b in word]
        if ids and min(ids) < 0:
            return None
        found = [self._pair(a, b) for a, b in itertools.pairwise(ids)]
        ranks, into = [r for r, _ in found], [t for _, t in found]
        while ranks and (best := min(ranks)) != _NONE:
            i = ranks.index(best)  # the leftmost of the lowest rank
            ids[i : i + 2] = [into[i]]
            del ranks[i], into[i]
            for j in (i - 1, i):  # the pairs around the new token
                if 0 <= j < len(ids) - 1:
                    ranks[j], into[j] = self._pair(ids[j], ids[j + 1])
        return ids

    def _pair(self, left: int, right: int) -> tuple[int, int]:
        """The merge of two tokens: its rank and token, or (_NONE, -1)."""
        key = left * self.size + right
        i = bisect.bisect_left(self._keys, key)
        if i < len(self._keys) and self._keys[i] == key:
            return self._ranks[i], self._into[i]
        return _NONE, -1


def _packed(pieces: TokenBytes, merges: StringArray) -> np.ndarray | None:
    """The encoder's arrays in one (i64): each byte's token (256, -1 for none), the merges' sorted keys,
    their ranks and their tokens; None where `ByteLevelBPE.of` says."""
    count, cuts = len(pieces), pieces.offsets.tolist()
    ids = dict(zip(map(pieces.blob.__getitem__, map(slice, cuts[:-1], cuts[1:])), range(count)))
    if len(ids) != count:
        return None
    # -1: a byte without a token (a vocabulary may lack those no UTF-8 text has); `encode` leaves a text
    # with one to the library
    singles = np.array([ids.get(bytes([b]), -1) for b in range(256)], np.int64)
    # the merges' characters, each in GPT-2's alphabet (one byte) but the NUL between two merges and the
    # space inside each: cut apart by character, as the bytes themselves may be NUL or space
    text = merges.joined(separator=True).tobytes().decode("utf-8")
    points = np.frombuffer(text.encode("utf-32-le"), np.uint32)
    table, inside = byte_unspelling()
    cut, space = points == 0, points == 0x20
    known = inside[np.minimum(points, table.size - 1)] & (points < table.size)
    if not (known | cut | space).all():
        return None
    ends = np.append(np.flatnonzero(cut), points.size)
    starts = np.append(0, ends[:-1] + 1)
    spaces = np.flatnonzero(space)
    if len(merges) and (ends.size != len(merges) or spaces.size != len(merges)):
        return None
    if not ((starts < spaces) & (spaces + 1 < ends)).all():  # one space inside each, not at an end
        return None
    data = table[np.minimum(points, table.size - 1)].tobytes()
    lefts = list(map(data.__getitem__, map(slice, starts.tolist(), spaces.tolist())))
    rights = list(map(data.__getitem__, map(slice, (spaces + 1).tolist(), ends.tolist())))
    n = len(lefts)
    try:
        left = np.fromiter(map(ids.__getitem__, lefts), np.int64, n)
        right = np.fromiter(map(ids.__getitem__, rights), np.int64, n)
        into = np.fromiter(map(ids.__getitem__, map(bytes.__add__, lefts, rights)), np.int64, n)
    except KeyError:
        return None
    keys = left * count + right
    # the library keeps a repeated merge's last rank: the first of the reversed list
    keys, last = np.unique(keys[::-1], return_index=True)
    rank = n - 1 - last
    return np.concatenate([singles, keys, rank, into[rank]])


def _digest(packed: np.ndarray) -> np.ndarray:
    """The SHA-256 of the packed arrays as 4 int64s, written after them: a cache file changed since it was
    written (a flipped bit, a partial copy) is built again, not read as another tokenizer."""
    return np.frombuffer(hashlib.sha256(packed.tobytes()).digest(), np.int64)


def _read(file: Path, count: int) -> np.ndarray | None:
    """The packed arrays cached in `file`, or None where there are none (or they are not such arrays, or
    not those written there)."""
    try:  # memory-mapped first: a damaged header's shape is checked against the file's size, not allocated
        sealed = np.array(np.load(file, mmap_mode="r", allow_pickle=False))
    except (OSError, ValueError, EOFError):
        return None
    if sealed.dtype != np.int64 or sealed.ndim != 1 or sealed.size < 4:
        return None
    packed = sealed[:-4]
    if not np.array_equal(sealed[-4:], _digest(packed)):
        return None
    if packed.dtype != np.int64 or packed.ndim != 1 or packed.size < 256 or (packed.size - 256) % 3:
        return None
    m = (packed.size - 256) // 3
    singles, (keys, ranks, into) = packed[:256], packed[256:].reshape(3, m)
    fits = ((singles >= -1) & (singles < count)).all() and ((into >= 0) & (into < count)).all()
    if not (fits and (ranks >= 0).all() and (keys >= 0).all() and (keys < count * count).all()):
        return None
    return packed if (np.diff(keys) > 0).all() else None

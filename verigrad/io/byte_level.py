"""GPT-2's byte alphabet, and a byte-level BPE vocabulary read from a GGUF file's arrays of strings with
NumPy, without a Python string per token: each token's bytes (`TokenBytes`), and the BPE model built by the
`tokenizers` library from a vocab.json and merges.txt written from those bytes, kept in verigrad's cache
under the SHA-256 of the arrays (a file whose tokens or merges change gets files of its own).

Building the BPE from Python lists took the 98,000 strings of SmolLM2's tokens and merges as Python
objects (13 MiB), their dict and pairs besides, and most of a model's load; from the files it takes none.
"""

from __future__ import annotations

import hashlib
import os
from array import array
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, overload

import numpy as np

from .atomic import write_atomically
from .gguf import StringArray

if TYPE_CHECKING:  # imported where a BPE is built
    from tokenizers import models

FILES_VERSION = b"verigrad byte-level BPE files 1\x00"  # part of the key: a new layout, new files


@cache
def byte_alphabet() -> dict[int, str]:
    """GPT-2's map of the 256 byte values to printable characters (a space is "Ġ", a newline "Ċ")."""
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    chars = list(printable)
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return {b: chr(c) for b, c in zip(printable, chars)}


@cache
def byte_unspelling() -> tuple[np.ndarray, np.ndarray]:
    """The byte each character of GPT-2's byte alphabet stands for, by code point (u8; 0 elsewhere), and
    which code points are in the alphabet (bool)."""
    size = 1 + max(map(ord, byte_alphabet().values()))
    table, inside = np.zeros(size, np.uint8), np.zeros(size, bool)
    for b, c in byte_alphabet().items():
        table[ord(c)], inside[ord(c)] = b, True
    return table, inside


class TokenBytes(Sequence[bytes]):
    """Each token id's bytes, in one bytes object cut at `offsets` (49k bytes objects took 1.9 MiB), with
    `extra` ids' bytes (added tokens: their text) in place of their cut; ids past both have none (b"")."""

    def __init__(self, blob: bytes, offsets: Sequence[int], extra: dict[int, bytes] | None = None) -> None:
        self.blob, self.offsets = blob, array("q", offsets)
        self.extra = dict(extra or {})
        self._size = max(len(self.offsets) - 1, 1 + max(self.extra, default=-1))

    @classmethod
    def of(cls, pieces: Sequence[bytes]) -> TokenBytes:
        """The table of a list of each id's bytes."""
        offsets = np.zeros(len(pieces) + 1, np.int64)
        np.cumsum(np.fromiter(map(len, pieces), np.int64, len(pieces)), out=offsets[1:])
        return cls(b"".join(pieces), offsets.tolist())

    def with_extra(self, extra: dict[int, bytes]) -> TokenBytes:
        return TokenBytes(self.blob, self.offsets, {**self.extra, **extra})

    def __len__(self) -> int:
        return self._size

    @overload
    def __getitem__(self, i: int) -> bytes: ...
    @overload
    def __getitem__(self, i: slice) -> list[bytes]: ...
    def __getitem__(self, i: int | slice) -> bytes | list[bytes]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self._size))]
        found = self.extra.get(i)
        if found is not None:
            return found
        if not -self._size <= i < self._size:
            raise IndexError(f"token id {i} is outside the table ({self._size} ids)")
        i %= self._size
        return self.blob[self.offsets[i] : self.offsets[i + 1]] if i < len(self.offsets) - 1 else b""


def token_bytes(tokens: StringArray) -> TokenBytes | None:
    """Each token's bytes, its characters (GPT-2's byte alphabet) mapped back to bytes in one NumPy step;
    None if a token has a character outside the alphabet."""
    joined = tokens.joined()
    points = np.frombuffer(joined.tobytes().decode("utf-8").encode("utf-32-le"), np.uint32)
    table, inside = byte_unspelling()
    if points.size and (points.max() >= table.size or not inside[points].all()):
        return None
    lengths = tokens.lengths
    ends = np.cumsum(lengths)
    leading = np.zeros(joined.size + 1, np.int64)  # UTF-8 lead bytes so far: a character each
    np.cumsum((joined & 0xC0) != 0x80, out=leading[1:])
    offsets = [*leading[ends - lengths].tolist(), int(leading[-1])]
    return TokenBytes(table[points].tobytes(), offsets)


def unspellable(table: TokenBytes, count: int) -> bytes:
    """The bytes no token of ids 0 ... count-1 stands for alone (BPE would drop them from a text)."""
    offsets = np.frombuffer(table.offsets, np.int64)[: count + 1]
    single = np.flatnonzero(np.diff(offsets) == 1)
    alone = np.frombuffer(table.blob, np.uint8)[offsets[single]] if single.size else np.zeros(0, np.uint8)
    spelled = np.zeros(256, bool)  # not np.setdiff1d: NumPy's unique imports numpy.ma (a tenth of a load)
    spelled[alone] = True
    return bytes(np.flatnonzero(~spelled).astype(np.uint8))


def cached_bpe(tokens: StringArray, merges: StringArray) -> models.BPE | None:
    """The BPE model of a byte-level vocabulary (every token in GPT-2's alphabet) and its merges, built by
    the `tokenizers` library from files in verigrad's cache (written the first time, in a temporary folder
    where the cache cannot be written). None where the merges cannot be lines of a merges.txt (a line break
    in one, other than one space in one, one starting "#version") or a token holds a character JSON
    escapes: the caller builds it from Python lists, which refuse what is wrong."""
    if not plain_merges(merges) or (tokens.joined() < 0x20).any():  # JSON would escape more
        return None
    key = hashlib.sha256(FILES_VERSION)
    for strings in (tokens, merges):
        key.update(len(strings).to_bytes(8, "little"))
        key.update(strings.data)
    folder = tokenizer_cache() / key.hexdigest()[:40]
    try:
        return _built(folder, tokens, merges)
    except OSError:
        import tempfile

        with tempfile.TemporaryDirectory() as scratch:
            return _built(Path(scratch), tokens, merges)


def tokenizer_cache() -> Path:
    """The folder of the cached tokenizer files: `VERIGRAD_TOKENIZER_CACHE`, else `tokenizers` in verigrad's
    cache (`VERIGRAD_CACHE`, else the user's cache folder)."""
    from ..backends.cpu.cache import cache_dir

    own = os.environ.get("VERIGRAD_TOKENIZER_CACHE")
    return Path(own) if own else cache_dir() / "tokenizers"


def _built(folder: Path, tokens: StringArray, merges: StringArray) -> models.BPE:
    """The BPE of the files in `folder`, written first where they are not there or not those written
    there (their SHA-256 in `sha256`, written last: a flipped bit in a cached id was another tokenizer)."""
    from tokenizers import models

    vocab_file, merges_file, digest_file = folder / "vocab.json", folder / "merges.txt", folder / "sha256"
    found = _digest(vocab_file, merges_file)
    if found is None or found != _contents(digest_file):
        write_atomically(vocab_file, lambda f: f.write(_vocab_json(tokens)))
        write_atomically(merges_file, lambda f: f.write(_merges_txt(merges)))
        written = _digest(vocab_file, merges_file)
        write_atomically(digest_file, lambda f: f.write(written))
    return models.BPE.from_file(str(vocab_file), str(merges_file))


def _digest(*files: Path) -> bytes | None:
    """The SHA-256 (hex) of the files' bytes one after the other; None where one cannot be read."""
    key = hashlib.sha256()
    for file in files:
        contents = _contents(file)
        if contents is None:
            return None
        key.update(len(contents).to_bytes(8, "little"))
        key.update(contents)
    return key.hexdigest().encode()


def _contents(file: Path) -> bytes | None:
    try:
        return file.read_bytes()
    except OSError:
        return None


def plain_merges(merges: StringArray) -> bool:
    """Whether every merge is one line of a merges.txt the `tokenizers` library reads back as it is."""
    joined, lengths = merges.joined(), merges.lengths
    if not lengths.size:
        return True
    if np.isin(joined, (0x0A, 0x0D)).any():
        return False
    spaces = np.zeros(joined.size + 1, np.int64)
    np.cumsum(joined == 0x20, out=spaces[1:])
    ends = np.cumsum(lengths)
    starts = ends - lengths
    if not (spaces[ends] - spaces[starts] == 1).all():
        return False
    hashes = starts[(lengths >= 8) & (joined[np.minimum(starts, joined.size - 1)] == ord("#"))]
    return not any(joined[a : a + 8].tobytes() == b"#version" for a in hashes.tolist())


def _merges_txt(merges: StringArray) -> bytes:
    """The merges, a line each."""
    if not len(merges):
        return b""
    joined, lengths = merges.joined(separator=True), merges.lengths
    joined[np.cumsum(lengths[:-1]) + np.arange(len(lengths) - 1)] = 0x0A
    return joined.tobytes() + b"\n"


def _vocab_json(tokens: StringArray) -> bytes:
    """{"token":id,...} of the tokens in order, written with NumPy (`"` and `\\` escaped: no token holds
    a control character, `cached_bpe` checked)."""
    joined, lengths, count = tokens.joined(), tokens.lengths, len(tokens)
    if not count:
        return b"{}"
    escaped = (joined == 0x22) | (joined == 0x5C)
    text = np.insert(joined, np.flatnonzero(escaped), 0x5C)  # a backslash before each
    marks = np.zeros(joined.size + 1, np.int64)
    np.cumsum(escaped, out=marks[1:])
    ends = np.cumsum(lengths)
    sizes = lengths + marks[ends] - marks[ends - lengths]  # each token's bytes, escaped
    digits = np.arange(count).astype("S").view(np.uint8).reshape(count, -1)  # NUL-padded on the right
    widths = (digits != 0).sum(axis=1)
    entries = 1 + sizes + 2 + widths + 1  # "token":id,
    begins = np.cumsum(entries) - entries
    body = np.full(int(entries.sum()), ord(","), np.uint8)
    body[begins] = ord('"')
    body[_spread(begins + 1, sizes)] = text
    body[begins + 1 + sizes] = ord('"')
    body[begins + 2 + sizes] = ord(":")
    body[_spread(begins + 3 + sizes, widths)] = digits[digits != 0]
    return b"{" + body[:-1].tobytes() + b"}"


def _spread(starts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """The positions starts[k], starts[k] + 1, ..., starts[k] + sizes[k] - 1 for each k, in order."""
    firsts = np.cumsum(sizes) - sizes
    return np.repeat(starts - firsts, sizes) + np.arange(int(sizes.sum()))

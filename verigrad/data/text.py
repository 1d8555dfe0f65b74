"""Text for language-model training: a corpus of files split by file into training and validation
sets, a byte-level BPE tokenizer trained on the training split (the `tokenizers` package), and the
token ids of both splits cached as memory-mapped `.npy` files, so a second run starts at once.

By default the corpus is the Python standard library's own `.py` files (on every machine that runs
verigrad; no download), outside its `test`/`tests`/`idlelib`/`site-packages`/`encodings` folders.
`TokenBatches` draws training batches at random offsets with verigrad's generator, seeded per step, so
the data order of a run depends only on its seed and step (a resumed run reads what an unbroken one
reads).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..backends.cpu.cache import cache_dir, write_atomically

END_OF_TEXT = "<|endoftext|>"  # between files, so the model learns where one ends
# tests, the IDE, installed packages, and `encodings/` (codec tables: 12% of the bytes, generated, not code
# anyone writes)
SKIPPED_FOLDERS = frozenset({"test", "tests", "idlelib", "site-packages", "__pycache__", "encodings"})
VALIDATION_FRACTION = 0.05
MAX_VOCAB = 1 << 20
FORMAT = 1  # bump when what is cached changes


def stdlib_files(limit: int | None = None) -> list[Path]:
    """The standard library's `.py` files (sorted; `limit`: the first that many), without its tests,
    IDLE and installed packages."""
    root = Path(sysconfig.get_paths()["stdlib"])
    found = []
    for folder, subfolders, names in os.walk(root):
        subfolders[:] = sorted(d for d in subfolders if d not in SKIPPED_FOLDERS)
        found += [Path(folder) / n for n in sorted(names) if n.endswith(".py")]
    return found[:limit]


def text_files(path: str | os.PathLike) -> list[Path]:
    """`path` if it is a file, else the files under the folder `path` (sorted, hidden ones skipped);
    a path that does not exist is refused by name."""
    path = Path(path)
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise ValueError(f"--data {path}: no such file or folder")
    found = []
    for folder, subfolders, names in os.walk(path):
        subfolders[:] = sorted(d for d in subfolders if not d.startswith("."))
        found += [Path(folder) / n for n in sorted(names) if not n.startswith(".")]
    return found


def read_texts(files: list[Path]) -> list[tuple[Path, str]]:
    """(file, text) of each file that reads as UTF-8 text with something in it; the rest is skipped."""
    texts = []
    for f in files:
        try:
            text = f.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if text.strip() and "\0" not in text:
            texts.append((f, text))
    return texts


def split_files(count: int, seed: int, fraction: float = VALIDATION_FRACTION) -> np.ndarray:
    """A boolean mask over `count` files: True for validation (round(fraction * count) files, at least
    one, chosen by `seed`; at least one file is left to train on)."""
    if count < 2:
        raise ValueError(f"the corpus has {count} text file(s): training and validation need at least 2")
    n = min(count - 1, max(1, round(fraction * count)))
    mask = np.zeros(count, bool)
    mask[np.random.default_rng(seed).permutation(count)[:n]] = True
    return mask


def train_tokenizer(texts: list[str], vocab_size: int) -> Any:
    """A byte-level BPE tokenizer (GPT-2's pre-tokenization, every byte a token, `<|endoftext|>` a
    special token) with `vocab_size` entries at most, trained on `texts`."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[END_OF_TEXT],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer)
    return tokenizer


@dataclass
class Corpus:
    """The token ids of both splits (memory-mapped), the tokenizer's JSON, and the sizes."""

    train: np.ndarray
    validation: np.ndarray
    tokenizer_json: str
    vocab_size: int
    train_files: int
    validation_files: int
    validation_bytes: int  # UTF-8 bytes of the validation text: bits per byte = nats / bytes / ln 2
    folder: Path

    @property
    def bytes_per_token(self) -> float:
        """Validation bytes per validation token (what turns nats per token into bits per byte)."""
        return self.validation_bytes / max(1, len(self.validation))


def corpus_key(files: list[Path], vocab_size: int, seed: int) -> str:
    """The cache key: the files' paths, sizes and modification times, the vocabulary size, the split
    seed and this module's format."""
    h = hashlib.sha256(json.dumps([FORMAT, vocab_size, seed]).encode())
    for f in files:
        try:
            stat = f.stat()
        except OSError:
            continue
        h.update(f"{f.resolve()}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return h.hexdigest()[:24]


def check_vocab_size(vocab_size: int) -> None:
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or not 257 <= vocab_size <= MAX_VOCAB:
        raise ValueError(
            f"--vocab-size must be an integer in 257..{MAX_VOCAB} (the 256 bytes, the end-of-text token, "
            f"then merges), got {vocab_size!r}"
        )


def prepare_corpus(
    files: list[Path], vocab_size: int, seed: int = 0, cache: str | os.PathLike | None = None
) -> Corpus:
    """The corpus of `files` split by `seed`, tokenized with a BPE trained on its training split; read from
    the cache (`cache`, default verigrad's cache folder) when the same files, vocabulary size and seed
    were prepared before, else made and written there."""
    check_vocab_size(vocab_size)
    folder = Path(cache if cache is not None else cache_dir() / "lm-data") / corpus_key(
        files, vocab_size, seed
    )
    if (folder / "info.json").is_file():
        return _load(folder)
    texts = read_texts(files)
    if len(texts) < 2:
        raise ValueError(
            f"the data has {len(texts)} readable UTF-8 text file(s) out of {len(files)}: training and "
            "validation need at least 2 (the split is by file)"
        )
    mask = split_files(len(texts), seed)
    train = [t for (_, t), v in zip(texts, mask) if not v]
    validation = [t for (_, t), v in zip(texts, mask) if v]
    tokenizer = train_tokenizer(train, vocab_size)
    vocab = tokenizer.get_vocab_size()
    dtype = np.uint16 if vocab <= 1 << 16 else np.uint32
    end = tokenizer.token_to_id(END_OF_TEXT)
    folder.mkdir(parents=True, exist_ok=True)
    for name, part in (("train", train), ("validation", validation)):
        ids = np.fromiter(_joined(tokenizer.encode_batch(part), end), dtype=dtype)
        _save_atomically(folder / f"{name}.npy", ids)
    _write_text_atomically(folder / "tokenizer.json", tokenizer.to_str())
    info = {
        "vocab_size": vocab,
        "train_files": len(train),
        "validation_files": len(validation),
        "validation_bytes": sum(len(t.encode("utf-8")) for t in validation),
    }
    _write_text_atomically(folder / "info.json", json.dumps(info))  # last: it marks the folder complete
    return _load(folder)


def _joined(encodings: list[Any], end: int) -> Iterator[int]:
    for e in encodings:
        yield from e.ids
        yield end


def _save_atomically(path: Path, array: np.ndarray) -> None:
    npy = io.BytesIO()
    np.save(npy, array)
    write_atomically(path, npy.getbuffer(), f".{path.stem}-")  # a failed write leaves no temporary file


def _write_text_atomically(path: Path, text: str) -> None:
    write_atomically(path, text.encode("utf-8"), f".{path.stem}-")


def _load(folder: Path) -> Corpus:
    info = json.loads((folder / "info.json").read_text())
    return Corpus(
        train=np.load(folder / "train.npy", mmap_mode="r"),
        validation=np.load(folder / "validation.npy", mmap_mode="r"),
        tokenizer_json=(folder / "tokenizer.json").read_text(encoding="utf-8"),
        folder=folder,
        **info,
    )


class TokenBatches:
    """Batches of (inputs, targets) [A, B, T] (int64; targets one token ahead) cut from `ids` at random
    offsets: those of step s come from verigrad's generator seeded with (seed, s), so any step's batch is
    the same whether the run got there straight or resumed."""

    def __init__(self, ids: np.ndarray, context: int, batch: int, accumulate: int = 1, seed: int = 0):
        if len(ids) < context + 2:
            raise ValueError(
                f"the training split has {len(ids)} tokens: too few for one sequence of context {context} "
                f"(it needs {context + 2}); give more text or a smaller --context"
            )
        self.ids, self.context, self.batch, self.accumulate, self.seed = ids, context, batch, accumulate, seed

    def offsets(self, step: int) -> np.ndarray:
        from ..ops import Generator, randint

        seed = int(np.random.SeedSequence([self.seed, step]).generate_state(1, np.uint64)[0] >> 1)
        count = self.accumulate * self.batch
        high = len(self.ids) - self.context - 1
        return randint(0, high, (count,), generator=Generator(seed)).numpy()

    def __call__(self, step: int) -> tuple[np.ndarray, np.ndarray]:
        return windows(self.ids, self.offsets(step), self.context, (self.accumulate, self.batch))


def windows(
    ids: np.ndarray, offsets: np.ndarray, context: int, shape: tuple
) -> tuple[np.ndarray, np.ndarray]:
    """Inputs ids[o : o + context] and targets ids[o + 1 : o + context + 1] for each offset, as int64
    arrays of shape `shape + (context,)`."""
    rows = np.stack([np.asarray(ids[o : o + context + 1]) for o in offsets]).astype(np.int64)
    rows = rows.reshape(*shape, context + 1)
    return rows[..., :-1], rows[..., 1:]


def validation_offsets(length: int, context: int, count: int, seed: int) -> np.ndarray:
    """`count` fixed offsets into a validation split of `length` tokens (the same every evaluation), or
    non-overlapping windows from the start where the split has fewer."""
    if length < context + 2:
        raise ValueError(
            f"the validation split has {length} tokens: too few for one sequence of context {context} "
            f"(it needs {context + 2}); give more text or a smaller --context"
        )
    high = length - context - 1
    if high // context < count:
        return np.arange(0, high, context)[:count]
    return np.sort(np.random.default_rng([seed, 1]).choice(high, count, replace=False))

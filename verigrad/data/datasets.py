"""Datasets: the shipped UCI digits, and a reader for MNIST's IDX files.

Images come as f32 arrays [N, 1, H, W] scaled to [0, 1]; labels as i64 [N].
"""

from __future__ import annotations

import gzip
import math
import os
import struct
import zlib
from importlib import resources
from pathlib import Path
from typing import BinaryIO

import numpy as np

from ..errors import WeightFileError


def load_digits() -> tuple[np.ndarray, np.ndarray]:
    """The 1,797 8x8 UCI handwritten digits shipped with verigrad (see data/DIGITS.md)."""
    with resources.files(__package__).joinpath("digits.npz").open("rb") as f, np.load(f) as z:
        images, labels = z["images"], z["labels"]
    return (images.astype(np.float32) / 16.0)[:, None], labels.astype(np.int64)


def split(images: np.ndarray, labels: np.ndarray, test_fraction: float = 0.2, seed: int = 0):
    """A shuffled train/test split fixed by `seed`: (train_x, train_y, test_x, test_y)."""
    if not 0 < test_fraction < 1:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    order = np.random.default_rng(seed).permutation(len(images))
    n_test = round(len(images) * test_fraction)
    test, train = order[:n_test], order[n_test:]
    return images[train], labels[train], images[test], labels[test]


# MNIST IDX files ------------------------------------------------------------------------------------
IDX_IMAGES_MAGIC = 0x00000803  # unsigned byte, 3 dimensions
IDX_LABELS_MAGIC = 0x00000801  # unsigned byte, 1 dimension
MNIST_IMAGE = (28, 28)
MNIST_FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}


def read_idx(path: str | Path, magic: int) -> np.ndarray:
    """An IDX file (optionally gzipped) as a uint8 array. The magic number (data type and dimension count)
    is checked first, then the header's sizes against the file's length, before the data is read: any
    mismatch is a WeightFileError naming the file."""
    path = Path(path)
    ndim = magic & 0xFF
    header_size = 4 + 4 * ndim
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as f:
            header = f.read(header_size)
            found = struct.unpack(">I", header[:4])[0] if len(header) >= 4 else None
            if found is not None and found != magic:  # before the length: a wrong file is named as such
                raise WeightFileError(
                    f"{path}: magic number 0x{found:08x}, expected 0x{magic:08x} (unsigned bytes in {ndim} "
                    "dimensions: is this the right IDX file?)"
                )
            if len(header) < header_size:
                raise WeightFileError(
                    f"{path}: {len(header)} bytes is shorter than the {header_size}-byte IDX header"
                )
            shape = struct.unpack(f">{ndim}I", header[4:])
            expected = math.prod(shape)  # Python ints: no overflow however large the header's sizes
            if opener is open:  # the length is known before reading: refuse a wrong one first
                _check_length(path, shape, expected, os.fstat(f.fileno()).st_size - header_size)
            data = _read_at_most(f, expected + 1)  # one byte more tells a longer file
    except FileNotFoundError:
        raise WeightFileError(f"{path}: no such file") from None
    except (OSError, EOFError, zlib.error) as e:  # a truncated or corrupt .gz raises the last two
        raise WeightFileError(f"{path}: cannot be read ({e})") from None
    _check_length(path, shape, expected, len(data) if len(data) <= expected else None)
    return np.frombuffer(data, dtype=np.uint8).reshape(shape)


def _check_length(path: Path, shape: tuple[int, ...], expected: int, found: int | None) -> None:
    """Refuse data of another length than the header's (`found` None: longer, by an unknown amount)."""
    if found != expected:
        has = "more" if found is None else f"{found:,}"
        raise WeightFileError(
            f"{path}: header says {shape} = {expected:,} bytes of data, the file has {has}"
            " (truncated or corrupt; download it again)"
        )


def _read_at_most(f: BinaryIO, n: int) -> bytes:
    """Up to `n` bytes, read a chunk at a time (a gzip header's size is only a claim until read)."""
    chunks, total = [], 0
    while total < n:
        chunk = f.read(min(n - total, 1 << 24))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks)


def _find(directory: Path, name: str) -> Path:
    for candidate in (directory / name, directory / f"{name}.gz"):
        if candidate.exists():
            return candidate
    raise WeightFileError(f"{directory}: no {name} (or {name}.gz); MNIST's four IDX files are needed there")


def load_mnist(directory: str | Path, part: str = "train") -> tuple[np.ndarray, np.ndarray]:
    """MNIST from the IDX files in `directory` (part "train" or "test"): f32 [N, 1, 28, 28], i64 [N]."""
    if part not in MNIST_FILES:
        raise ValueError(f"part must be 'train' or 'test', got {part!r}")
    directory = Path(directory)
    if not directory.is_dir():
        raise WeightFileError(f"{directory}: not a directory")
    image_path, label_path = (_find(directory, name) for name in MNIST_FILES[part])
    images = read_idx(image_path, IDX_IMAGES_MAGIC)
    if images.shape[1:] != MNIST_IMAGE:
        raise WeightFileError(
            f"{image_path}: images of {images.shape[1]}x{images.shape[2]} pixels; MNIST's are 28x28"
        )
    labels = read_idx(label_path, IDX_LABELS_MAGIC)
    bad = np.flatnonzero(labels > 9)
    if len(bad):
        raise WeightFileError(
            f"{label_path}: label {labels[bad[0]]} (item {bad[0]}) is not a digit 0-9; "
            f"{len(bad):,} of the {len(labels):,} labels are outside 0-9"
        )
    if len(images) != len(labels):
        raise WeightFileError(
            f"{directory}: {len(images)} images but {len(labels)} labels in the {part} files"
        )
    return (images.astype(np.float32) / 255.0)[:, None], labels.astype(np.int64)

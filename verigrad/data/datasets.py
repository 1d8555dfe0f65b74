"""Datasets: the shipped UCI digits, and a reader for MNIST's IDX files.

Images come as f32 arrays [N, 1, H, W] scaled to [0, 1]; labels as i64 [N].
"""

from __future__ import annotations

import gzip
import struct
import zlib
from importlib import resources
from pathlib import Path

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
MNIST_FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}


def read_idx(path: str | Path, magic: int) -> np.ndarray:
    """An IDX file (optionally gzipped) as a uint8 array; a wrong magic or a short file is an error."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise WeightFileError(f"{path}: no such file") from None
    except (OSError, EOFError, zlib.error) as e:  # a truncated or corrupt .gz raises the last two
        raise WeightFileError(f"{path}: cannot be read ({e})") from None
    ndim = magic & 0xFF
    header = 4 + 4 * ndim
    found = struct.unpack(">I", data[:4])[0] if len(data) >= 4 else None
    if found is not None and found != magic:  # before the length: a wrong file is named as such
        raise WeightFileError(
            f"{path}: magic number 0x{found:08x}, expected 0x{magic:08x} (is this the right IDX file?)"
        )
    if len(data) < header:
        raise WeightFileError(f"{path}: {len(data)} bytes is shorter than the {header}-byte IDX header")
    shape = struct.unpack(f">{ndim}I", data[4:header])
    expected = int(np.prod(shape))
    if len(data) - header != expected:
        raise WeightFileError(
            f"{path}: header says {shape} = {expected} bytes of data, the file has {len(data) - header}"
            " (truncated or corrupt; download it again)"
        )
    return np.frombuffer(data, dtype=np.uint8, offset=header).reshape(shape)


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
    image_name, label_name = MNIST_FILES[part]
    images = read_idx(_find(directory, image_name), IDX_IMAGES_MAGIC)
    labels = read_idx(_find(directory, label_name), IDX_LABELS_MAGIC)
    if len(images) != len(labels):
        raise WeightFileError(
            f"{directory}: {len(images)} images but {len(labels)} labels in the {part} files"
        )
    return (images.astype(np.float32) / 255.0)[:, None], labels.astype(np.int64)

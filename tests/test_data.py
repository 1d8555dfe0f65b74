"""verigrad.data: the DataLoader's batches and seeded shuffling (verigrad.utils.data's DataLoader
underneath), the shipped digits, the split, and the MNIST IDX reader on files written here (plain and
gzipped, whole, truncated and wrong)."""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np
import pytest

import verigrad
from verigrad.data import DataLoader, Dataset, TensorDataset, load_digits, load_mnist, read_idx, split
from verigrad.data.datasets import IDX_IMAGES_MAGIC, IDX_LABELS_MAGIC

N = 23  # items in the loader tests: not a multiple of the batch size


def epoch(loader: DataLoader) -> list[tuple[np.ndarray, ...]]:
    return [tuple(t.numpy() for t in batch) for batch in loader]


def order_of(loader: DataLoader) -> np.ndarray:
    return np.concatenate([b[0] for b in epoch(loader)])


# DataLoader ---------------------------------------------------------------------------------------
def test_batches_in_order_without_shuffle():
    x, y = np.arange(N * 2, dtype=np.float32).reshape(N, 2), np.arange(N)
    loader = DataLoader(x, y, batch_size=5)
    batches = epoch(loader)
    assert len(loader) == len(batches) == 5
    assert [len(b[1]) for b in batches] == [5, 5, 5, 5, 3]
    np.testing.assert_array_equal(np.concatenate([b[0] for b in batches]), x)
    np.testing.assert_array_equal(np.concatenate([b[1] for b in batches]), y)
    assert epoch(loader)[0][1].tolist() == [0, 1, 2, 3, 4]  # the same every epoch


def test_drop_last_gives_only_full_batches():
    loader = DataLoader(np.arange(N), batch_size=5, drop_last=True)
    batches = epoch(loader)
    assert len(loader) == len(batches) == 4 and all(len(b[0]) == 5 for b in batches)
    assert len(DataLoader(np.arange(20), batch_size=5, drop_last=True)) == 4
    assert len(DataLoader(np.arange(20), batch_size=5)) == 4
    assert len(DataLoader(np.arange(3), batch_size=5, drop_last=True)) == 0
    assert len(DataLoader(np.arange(3), batch_size=5)) == 1


def test_same_seed_same_batches_each_epoch_reshuffled():
    a = DataLoader(np.arange(N), batch_size=4, shuffle=True, seed=11)
    b = DataLoader(np.arange(N), batch_size=4, shuffle=True, seed=11)
    a1, a2 = order_of(a), order_of(a)
    b1, b2 = order_of(b), order_of(b)
    assert np.array_equal(a1, b1) and np.array_equal(a2, b2)
    assert not np.array_equal(a1, a2)  # a new order each epoch
    for order in (a1, a2):  # each epoch is a permutation: every item once
        assert sorted(order.tolist()) == list(range(N))
    assert not np.array_equal(a1, np.arange(N))


def test_different_seed_different_order():
    orders = [order_of(DataLoader(np.arange(N), batch_size=4, shuffle=True, seed=s)) for s in range(4)]
    assert all(not np.array_equal(orders[0], o) for o in orders[1:])


def test_shuffled_drop_last_draws_distinct_items_and_keeps_arrays_aligned():
    x = np.arange(N, dtype=np.float64) * 10
    y = np.arange(N)
    loader = DataLoader(x, y, batch_size=6, shuffle=True, seed=2, drop_last=True)
    seen = []
    for xb, yb in loader:
        assert tuple(xb.shape) == (6,)
        np.testing.assert_array_equal(xb.numpy(), yb.numpy() * 10)  # pairs stay together
        seen += yb.numpy().tolist()
    assert len(seen) == 18 == len(set(seen))


def test_batch_dtypes():
    x = np.ones((4, 3), np.float64)
    y = np.arange(4)
    xb, yb = next(iter(DataLoader(x, y, batch_size=2)))
    assert xb.dtype.name == "f64" and yb.dtype.name == "i64"
    xb, yb = next(iter(DataLoader(x, y, batch_size=2, dtype="f32")))
    assert xb.dtype.name == "f32" and yb.dtype.name == "i64"  # only floats are converted


def test_loader_arguments_are_checked():
    with pytest.raises(ValueError, match="at least one array"):
        DataLoader()
    with pytest.raises(ValueError, match="differ in length"):
        DataLoader(np.zeros(3), np.zeros(4))
    with pytest.raises(ValueError, match="batch_size"):
        DataLoader(np.zeros(3), batch_size=0)


# digits and split -----------------------------------------------------------------------------------
def test_load_digits():
    images, labels = load_digits()
    assert images.shape == (1797, 1, 8, 8) and images.dtype == np.float32
    assert labels.shape == (1797,) and labels.dtype == np.int64
    assert images.min() == 0.0 and images.max() == 1.0
    assert np.array_equal(images * 16, np.round(images * 16))  # the 0..16 grey levels, scaled
    counts = np.bincount(labels)
    assert len(counts) == 10 and all(170 <= c <= 190 for c in counts)
    assert counts.tolist() == [178, 182, 177, 183, 181, 182, 181, 179, 174, 180]  # the UCI test set
    assert labels[:10].tolist() == list(range(10))
    assert (images[0, 0, 0] * 16).tolist() == [0, 0, 5, 13, 9, 1, 0, 0]  # the first image, a zero


def test_split_is_fixed_by_seed_disjoint_and_aligned():
    index = np.arange(1797)
    tr_x, tr_y, te_x, te_y = split(index * 2, index, test_fraction=0.2, seed=0)
    assert len(te_x) == 359 and len(tr_x) == 1438
    assert np.array_equal(tr_x, tr_y * 2) and np.array_equal(te_x, te_y * 2)
    assert sorted(np.concatenate([tr_y, te_y]).tolist()) == index.tolist()
    again = split(index * 2, index, test_fraction=0.2, seed=0)
    assert np.array_equal(again[3], te_y) and np.array_equal(again[1], tr_y)
    other = split(index * 2, index, test_fraction=0.2, seed=1)
    assert not np.array_equal(other[3], te_y)
    assert len(split(index, index, test_fraction=0.1)[2]) == 180  # 179.7 rounded
    for bad in (0.0, 1.0, -0.2, 1.5):
        with pytest.raises(ValueError, match="test_fraction"):
            split(index, index, test_fraction=bad)


def test_split_of_the_digits_keeps_every_class_in_the_test_part():
    _, _, _, test_y = split(*load_digits(), seed=0)
    assert set(np.unique(test_y).tolist()) == set(range(10))


# MNIST IDX --------------------------------------------------------------------------------------------
def idx_bytes(array: np.ndarray, magic: int) -> bytes:
    return struct.pack(">I", magic) + struct.pack(f">{array.ndim}I", *array.shape) + array.tobytes()


def write(path: Path, blob: bytes) -> Path:
    path.write_bytes(gzip.compress(blob) if path.suffix == ".gz" else blob)
    return path


@pytest.fixture
def idx_images(rng) -> np.ndarray:
    return rng.integers(0, 256, size=(5, 28, 28), dtype=np.uint8)


@pytest.mark.parametrize("name", ["images-idx3-ubyte", "images-idx3-ubyte.gz"])
def test_read_idx_round_trip(tmp_path, idx_images, name):
    path = write(tmp_path / name, idx_bytes(idx_images, IDX_IMAGES_MAGIC))
    got = read_idx(path, IDX_IMAGES_MAGIC)
    assert got.dtype == np.uint8 and got.shape == (5, 28, 28)
    np.testing.assert_array_equal(got, idx_images)
    labels = np.array([3, 1, 4, 1, 5], np.uint8)
    lpath = write(tmp_path / ("l" + name), idx_bytes(labels, IDX_LABELS_MAGIC))
    np.testing.assert_array_equal(read_idx(lpath, IDX_LABELS_MAGIC), labels)


@pytest.mark.parametrize("name", ["images-idx3-ubyte", "images-idx3-ubyte.gz"])
@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (lambda b: b[:-100], "truncated"),  # data cut short
        (lambda b: b + b"\0" * 7, "truncated or corrupt"),  # more data than the header says
        (lambda b: b[:10], "shorter than the 16-byte IDX header"),
        (lambda b: struct.pack(">I", IDX_LABELS_MAGIC) + b[4:], "magic number 0x00000801"),
        (lambda b: b"PK\3\4" + b[4:], "expected 0x00000803"),
    ],
    ids=["short_data", "long_data", "short_header", "labels_magic", "zip_magic"],
)
def test_read_idx_refuses_damaged_files_naming_them(tmp_path, idx_images, name, damage, reason):
    path = write(tmp_path / name, damage(idx_bytes(idx_images, IDX_IMAGES_MAGIC)))
    with pytest.raises(verigrad.WeightFileError) as info:
        read_idx(path, IDX_IMAGES_MAGIC)
    assert str(path) in str(info.value) and reason in str(info.value)


@pytest.mark.parametrize(
    "damage",
    [
        lambda z: z[: len(z) // 2],  # the compressed stream ends early
        lambda z: z[:20] + b"\xff" * 10 + z[30:],  # corrupt deflate data
        lambda z: z[:-4] + b"\0\0\0\0",  # wrong length in the trailer
        lambda z: b"not gzip at all" * 10,
    ],
    ids=["cut", "corrupt", "bad_trailer", "not_gzip"],
)
def test_read_idx_refuses_broken_gzip_naming_the_file(tmp_path, idx_images, damage):
    path = tmp_path / "t10k-images-idx3-ubyte.gz"
    path.write_bytes(damage(gzip.compress(idx_bytes(idx_images, IDX_IMAGES_MAGIC))))
    with pytest.raises(verigrad.WeightFileError, match=r"t10k-images-idx3-ubyte\.gz"):
        read_idx(path, IDX_IMAGES_MAGIC)


def test_read_idx_missing_file(tmp_path):
    with pytest.raises(verigrad.WeightFileError, match="nothing-here: no such file"):
        read_idx(tmp_path / "nothing-here", IDX_LABELS_MAGIC)


def make_mnist(directory: Path, rng, n_train: int = 6, n_test: int = 4, gz: bool = True) -> dict:
    """The four MNIST files (the images gzipped when `gz`, the labels plain); returns what they hold."""
    directory.mkdir(parents=True, exist_ok=True)
    held = {}
    for part, n, image_name, label_name in (
        ("train", n_train, "train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
        ("test", n_test, "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
    ):
        images = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
        labels = rng.integers(0, 10, size=n, dtype=np.uint8)
        write(directory / (image_name + (".gz" if gz else "")), idx_bytes(images, IDX_IMAGES_MAGIC))
        write(directory / label_name, idx_bytes(labels, IDX_LABELS_MAGIC))
        held[part] = (images, labels)
    return held


@pytest.mark.parametrize("gz", [True, False])
def test_load_mnist_reads_both_parts(tmp_path, rng, gz):
    held = make_mnist(tmp_path, rng, gz=gz)
    for part in ("train", "test"):
        images, labels = load_mnist(tmp_path, part)
        assert images.dtype == np.float32 and images.shape == (len(held[part][0]), 1, 28, 28)
        assert labels.dtype == np.int64
        np.testing.assert_array_equal(images[:, 0] * 255, held[part][0].astype(np.float32))
        np.testing.assert_array_equal(labels, held[part][1])
        assert images.min() >= 0 and images.max() <= 1


def test_load_mnist_errors_name_what_is_wrong(tmp_path, rng):
    with pytest.raises(verigrad.WeightFileError, match="not a directory"):
        load_mnist(tmp_path / "absent")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(verigrad.WeightFileError, match=r"no train-images-idx3-ubyte \(or .*\.gz\)"):
        load_mnist(empty)
    with pytest.raises(ValueError, match="part must be"):
        load_mnist(empty, "validation")
    uneven = tmp_path / "uneven"
    make_mnist(uneven, rng)
    labels = np.zeros(5, np.uint8)  # 6 images, 5 labels
    write(uneven / "train-labels-idx1-ubyte", idx_bytes(labels, IDX_LABELS_MAGIC))
    with pytest.raises(verigrad.WeightFileError, match="6 images but 5 labels"):
        load_mnist(uneven, "train")
    swapped = tmp_path / "swapped"
    make_mnist(swapped, rng, gz=False)
    (swapped / "t10k-labels-idx1-ubyte").rename(swapped / "tmp")
    (swapped / "t10k-images-idx3-ubyte").rename(swapped / "t10k-labels-idx1-ubyte")
    (swapped / "tmp").rename(swapped / "t10k-images-idx3-ubyte")
    with pytest.raises(verigrad.WeightFileError, match="t10k-images-idx3-ubyte: magic number"):
        load_mnist(swapped, "test")


def test_pytorchs_datasets_give_the_same_batches() -> None:
    """DataLoader(TensorDataset(x, y)) as DataLoader(x, y); tensors as arrays; any dataset with len and
    [i] is stacked item by item (tuples field by field, single arrays into one batch)."""
    x, y = np.arange(40, dtype=np.float32).reshape(10, 4), np.arange(10)
    plain = list(DataLoader(x, y, batch_size=4, shuffle=True, seed=3))
    from_dataset = list(DataLoader(TensorDataset(verigrad.tensor(x), y), batch_size=4, shuffle=True, seed=3))

    class Squares(Dataset):
        def __len__(self):
            return 10

        def __getitem__(self, i):
            return x[i], y[i] * y[i]

    class Rows:
        def __len__(self):
            return 10

        def __getitem__(self, i):
            return x[i]

    generic = list(DataLoader(Squares(), batch_size=4, shuffle=True, seed=3))
    rows = list(DataLoader(Rows(), batch_size=4))
    assert len(plain) == len(from_dataset) == len(generic) == 3
    for (xa, ya), (xb, yb), (xc, yc) in zip(plain, from_dataset, generic):
        np.testing.assert_array_equal(xa.numpy(), xb.numpy())
        np.testing.assert_array_equal(ya.numpy(), yb.numpy())
        np.testing.assert_array_equal(xa.numpy(), xc.numpy())
        np.testing.assert_array_equal(ya.numpy() ** 2, yc.numpy())
    assert isinstance(rows[0], verigrad.Tensor) and rows[0].shape == (4, 4) and rows[-1].shape == (2, 4)
    dataset = TensorDataset(x, y)
    assert len(dataset) == 10 and dataset[3][1] == 3
    with pytest.raises(ValueError, match="differ in length"):
        TensorDataset(x, y[:5])


def test_dtype_converts_the_float_batches_of_any_dataset() -> None:
    class Items(Dataset):
        def __len__(self):
            return 3

        def __getitem__(self, i):
            return np.full(2, i, np.float64), i

    xb, yb = next(iter(DataLoader(Items(), batch_size=3, dtype="f32")))
    assert xb.dtype.name == "f32" and xb.numpy().tolist() == [[0, 0], [1, 1], [2, 2]]
    assert yb.dtype.name == "i64" and yb.numpy().tolist() == [0, 1, 2]
    xb, yb = next(iter(DataLoader(TensorDataset(np.zeros((2, 1)), np.arange(2)), batch_size=2, dtype="f32")))
    assert xb.dtype.name == "f32" and yb.dtype.name == "i64"


def test_load_mnist_refuses_labels_that_are_not_digits(tmp_path, rng):
    """Fuzzed label files with a byte past 9 loaded as classes 10..255, indexing past a 10-way output."""
    make_mnist(tmp_path, rng, gz=False)
    write(
        tmp_path / "train-labels-idx1-ubyte",
        idx_bytes(np.array([1, 2, 3, 77, 4, 200], np.uint8), IDX_LABELS_MAGIC),
    )
    with pytest.raises(verigrad.WeightFileError) as info:
        load_mnist(tmp_path, "train")
    message = str(info.value)
    assert message.startswith(str(tmp_path / "train-labels-idx1-ubyte"))
    assert "label 77 (item 3) is not a digit 0-9; 2 of the 6 labels are outside 0-9" in message


def test_load_mnist_refuses_images_that_are_not_28x28(tmp_path, rng):
    make_mnist(tmp_path, rng, gz=False)
    write(tmp_path / "t10k-images-idx3-ubyte", idx_bytes(np.zeros((4, 5, 7), np.uint8), IDX_IMAGES_MAGIC))
    with pytest.raises(
        verigrad.WeightFileError, match=r"t10k-images-idx3-ubyte: images of 5x7 pixels; MNIST's"
    ):
        load_mnist(tmp_path, "test")


@pytest.mark.parametrize("name", ["images-idx3-ubyte", "images-idx3-ubyte.gz"])
def test_header_sizes_are_python_ints_not_int64(tmp_path, name):
    """2**31 * 2**31 * 4 is 0 in int64: the old check passed an empty file, then reshape raised a bare
    ValueError (or, with data, a wrapped size matched the wrong length)."""
    header = struct.pack(">I3I", IDX_IMAGES_MAGIC, 2**31, 2**31, 4)
    path = write(tmp_path / name, header)
    with pytest.raises(
        verigrad.WeightFileError,
        match=r"header says \(2147483648, 2147483648, 4\) = "
        r"18,446,744,073,709,551,616 bytes of data, the file has 0",
    ):
        read_idx(path, IDX_IMAGES_MAGIC)


def test_a_plain_file_is_measured_before_its_data_is_read(tmp_path, monkeypatch):
    """A header claiming 4 GiB in a 20-byte file is refused from its length, without reading the data."""
    path = write(tmp_path / "labels", struct.pack(">II", IDX_LABELS_MAGIC, 2**32 - 1) + b"\1" * 12)
    from verigrad.data import datasets

    def no_read(*args):
        raise AssertionError("the data was read")

    monkeypatch.setattr(datasets, "_read_at_most", no_read)
    with pytest.raises(verigrad.WeightFileError, match=r"4,294,967,295 bytes of data, the file has 12 "):
        read_idx(path, IDX_LABELS_MAGIC)


@pytest.mark.parametrize(
    ("magic", "says"),
    [
        (0x00000D03, "0x00000d03"),
        (0x00000804, "0x00000804"),
        (0x00000802, "0x00000802"),
        (0x01000803, "0x01000803"),
    ],
    ids=["float_data", "four_dims", "two_dims", "nonzero_lead"],
)
def test_the_data_type_and_dimension_count_are_checked(tmp_path, idx_images, magic, says):
    path = write(
        tmp_path / "x-idx3-ubyte", struct.pack(">I", magic) + idx_bytes(idx_images, IDX_IMAGES_MAGIC)[4:]
    )
    with pytest.raises(
        verigrad.WeightFileError, match=f"x-idx3-ubyte: magic number {says}, expected 0x00000803"
    ):
        read_idx(path, IDX_IMAGES_MAGIC)

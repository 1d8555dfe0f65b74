"""verigrad.utils.data by hand: default_collate and default_convert, the datasets, random_split, the
samplers and the DataLoader (batching, samplers, iterable datasets, the options it accepts and refuses),
and verigrad.data's loader being the same implementation."""

from __future__ import annotations

import collections

import numpy as np
import pytest

import verigrad
import verigrad.data
from verigrad.utils.data import (
    BatchSampler,
    ChainDataset,
    ConcatDataset,
    DataLoader,
    Dataset,
    IterableDataset,
    RandomSampler,
    Sampler,
    SequentialSampler,
    Subset,
    SubsetRandomSampler,
    TensorDataset,
    WeightedRandomSampler,
    default_collate,
    default_convert,
    get_worker_info,
    random_split,
)

Point = collections.namedtuple("Point", "x y")


def values(t: verigrad.Tensor) -> tuple[str, list]:
    return t.dtype.name, t.numpy().tolist()


# default_collate --------------------------------------------------------------------------------------
def test_collate_numbers_strings_and_arrays() -> None:
    assert values(default_collate([1, 2, 3])) == ("i64", [1, 2, 3])
    assert values(default_collate([1.5, 2.0])) == ("f64", [1.5, 2.0])  # Python floats are f64, as PyTorch's
    assert values(default_collate([True, False])) == ("bool", [True, False])
    assert default_collate(["a", "b"]) == ["a", "b"]
    assert values(default_collate([np.float32(1.5), np.float32(2.0)])) == ("f32", [1.5, 2.0])
    assert values(default_collate([np.ones(2, np.int32), np.zeros(2, np.int32)])) == ("i32", [[1, 1], [0, 0]])
    assert values(default_collate([verigrad.tensor([1.0]), verigrad.tensor([2.0])])) == (
        "f32",
        [[1.0], [2.0]],
    )


def test_collate_containers() -> None:
    batch = default_collate([(1, "x", 2.0), (2, "y", 3.0)])
    assert isinstance(batch, list) and len(batch) == 3  # tuples give a list of batches, as PyTorch's
    assert (
        values(batch[0]) == ("i64", [1, 2])
        and batch[1] == ("x", "y")
        and values(batch[2]) == ("f64", [2.0, 3.0])
    )
    lists = default_collate([[1, 2], [3, 4]])
    assert [values(b) for b in lists] == [("i64", [1, 3]), ("i64", [2, 4])]
    nested = default_collate([{"a": {"b": [1, 2.5]}, "s": "p"}, {"a": {"b": [3, 4.5]}, "s": "q"}])
    assert list(nested) == ["a", "s"] and nested["s"] == ["p", "q"]
    assert values(nested["a"]["b"][0]) == ("i64", [1, 3]) and values(nested["a"]["b"][1]) == (
        "f64",
        [2.5, 4.5],
    )
    point = default_collate([Point(1, 2.0), Point(3, 4.0)])
    assert (
        type(point) is Point and values(point.x) == ("i64", [1, 3]) and values(point.y) == ("f64", [2.0, 4.0])
    )
    ordered = default_collate([collections.OrderedDict(z=1, a=2), collections.OrderedDict(z=3, a=4)])
    assert type(ordered) is collections.OrderedDict and list(ordered) == ["z", "a"]
    counts = default_collate([collections.defaultdict(int, k=1), collections.defaultdict(int, k=2)])
    assert (
        type(counts) is collections.defaultdict
        and values(counts["k"]) == ("i64", [1, 2])
        and counts["new"] == 0
    )


def test_collate_refusals() -> None:
    with pytest.raises(RuntimeError, match="equal size"):
        default_collate([[1, 2], [3]])
    for bad in ([object()], [np.array(["a"])], [None]):
        with pytest.raises(TypeError, match="default_collate: batch must contain"):
            default_collate(bad)
    with pytest.raises(verigrad.ShapeError):
        default_collate([verigrad.zeros(2), verigrad.zeros(3)])


def test_convert() -> None:
    assert default_convert(3) == 3 and default_convert("s") == "s"
    assert values(default_convert(np.arange(3))) == ("i64", [0, 1, 2])
    assert values(default_convert(np.float32(2.5))) == ("f32", 2.5)
    converted = default_convert((np.zeros(1), 1.5, {"k": [np.ones(1, np.int32)]}))
    assert isinstance(converted, list) and converted[1] == 1.5
    assert values(converted[0]) == ("f64", [0.0]) and values(converted[2]["k"][0]) == ("i32", [1])
    strings = np.array(["a"])
    assert default_convert(strings) is strings


# datasets -----------------------------------------------------------------------------------------------
def test_tensor_dataset() -> None:
    x, y = np.arange(6.0).reshape(3, 2), np.array([7, 8, 9])
    dataset = TensorDataset(verigrad.tensor(x), y)
    assert len(dataset) == 3 and isinstance(dataset, Dataset)
    row, label = dataset[1]
    assert values(row) == ("f64", [2.0, 3.0]) and values(label) == ("i64", 8)
    assert values(dataset[-1][1]) == ("i64", 9)
    with pytest.raises(ValueError, match=r"differ in length \(size mismatch\): \[3, 2\]"):
        TensorDataset(x, y[:2])
    with pytest.raises(ValueError, match="at least one"):
        TensorDataset()


def test_subset_concat_and_chain() -> None:
    subset = Subset(list("abcdef"), [4, 0, 2])
    assert len(subset) == 3 and [subset[i] for i in range(3)] == ["e", "a", "c"]
    assert subset.__getitems__([2, 0]) == ["c", "e"]
    both = ConcatDataset([list("ab"), list("cde")])
    assert len(both) == 5 and both.cumulative_sizes == [2, 5]
    assert [both[i] for i in range(5)] == list("abcde") and both[-1] == "e" and both[-5] == "a"
    with pytest.raises(ValueError, match="should not exceed"):
        both[-6]
    summed = TensorDataset(np.arange(2)) + TensorDataset(np.arange(5, 8))
    assert isinstance(summed, ConcatDataset) and [int(summed[i][0]) for i in range(5)] == [0, 1, 5, 6, 7]
    with pytest.raises(ValueError, match="empty"):
        ConcatDataset([])
    with pytest.raises(TypeError, match="IterableDataset"):
        ConcatDataset([Counting(2)])
    chained = Counting(2) + Counting(3)
    assert isinstance(chained, ChainDataset) and list(chained) == [0, 1, 0, 1, 2] and len(chained) == 5


class Counting(IterableDataset):
    def __init__(self, n: int, with_length: bool = True) -> None:
        self.n, self.with_length = n, with_length

    def __iter__(self):
        return iter(range(self.n))

    def __len__(self) -> int:
        if not self.with_length:
            raise TypeError("no length")
        return self.n


@pytest.mark.parametrize(
    ("n", "lengths", "sizes"),
    [
        (10, [3, 7], [3, 7]),
        (10, [0.3, 0.3, 0.4], [3, 3, 4]),
        (11, [0.3, 0.3, 0.4], [4, 3, 4]),  # floors 3, 3, 4; the one left goes to the first
        (7, [0.5, 0.5], [4, 3]),
        (6, [0.1, 0.1, 0.8], [1, 1, 4]),  # floors 0, 0, 4; the two left go to the first two
    ],
)
def test_random_split_sizes(n, lengths, sizes) -> None:
    parts = random_split(range(n), lengths, generator=verigrad.Generator(4))
    assert [len(p) for p in parts] == sizes and all(isinstance(p, Subset) for p in parts)
    assert sorted(i for p in parts for i in p) == list(range(n))
    again = random_split(range(n), lengths, generator=verigrad.Generator(4))
    assert [list(p) for p in parts] == [list(p) for p in again]  # the same generator, the same split


def test_random_split_refusals_and_warning() -> None:
    with pytest.raises(ValueError, match="do not add up"):
        random_split(range(10), [3, 3])
    with pytest.raises(ValueError, match="index 0 is not between 0 and 1"):
        random_split(range(10), [-0.2, 1.2])
    with pytest.warns(UserWarning, match="index 1 is 0"):
        random_split(range(3), [0.1, 0.1, 0.8])


# samplers -------------------------------------------------------------------------------------------------
def test_samplers() -> None:
    assert list(SequentialSampler(range(4))) == [0, 1, 2, 3] and len(SequentialSampler(range(4))) == 4
    seeded = [list(RandomSampler(range(8), generator=verigrad.Generator(2))) for _ in range(2)]
    assert seeded[0] == seeded[1] and sorted(seeded[0]) == list(range(8)) and seeded[0] != list(range(8))
    reused = RandomSampler(range(8), generator=verigrad.Generator(2))
    assert list(reused) != list(reused)  # a new order each epoch from the same generator
    repeated = list(RandomSampler(range(3), num_samples=7))
    assert sorted(repeated[:6]) == [0, 0, 1, 1, 2, 2] and len(repeated) == 7
    drawn = list(RandomSampler(range(3), replacement=True, num_samples=50))
    assert len(drawn) == 50 and set(drawn) == {0, 1, 2} and all(type(i) is int for i in drawn)
    assert sorted(SubsetRandomSampler([9, 4, 6])) == [4, 6, 9]
    weighted = list(WeightedRandomSampler([0.0, 1.0, 0.0, 3.0], 40))
    assert len(weighted) == 40 and set(weighted) == {1, 3}
    assert sorted(WeightedRandomSampler([1.0, 0.5, 2.0], 3, replacement=False)) == [0, 1, 2]
    assert list(BatchSampler(range(7), 3, False)) == [[0, 1, 2], [3, 4, 5], [6]]
    assert list(BatchSampler(range(7), 3, True)) == [[0, 1, 2], [3, 4, 5]]
    assert len(BatchSampler(range(7), 3, False)) == 3 and len(BatchSampler(range(7), 3, True)) == 2


@pytest.mark.parametrize(
    ("make", "error", "message"),
    [
        (lambda: RandomSampler(range(3), replacement=1), TypeError, "replacement should be a boolean"),
        (lambda: RandomSampler(range(3), num_samples=0), ValueError, "num_samples should be a positive"),
        (lambda: RandomSampler([]), ValueError, "num_samples=0"),
        (lambda: WeightedRandomSampler([1.0], 0), ValueError, "num_samples should be a positive"),
        (lambda: WeightedRandomSampler([1.0], 1, replacement="yes"), ValueError, "replacement should be"),
        (lambda: WeightedRandomSampler([[1.0]], 1), ValueError, "1d sequence"),
        (lambda: BatchSampler(range(3), 0, False), ValueError, "batch_size should be a positive"),
        (lambda: BatchSampler(range(3), True, False), ValueError, "batch_size should be a positive"),
        (lambda: BatchSampler(range(3), 2, None), ValueError, "drop_last should be a boolean"),
    ],
)
def test_sampler_refusals(make, error, message) -> None:
    with pytest.raises(error, match=message):
        make()


# DataLoader -----------------------------------------------------------------------------------------------
X = np.arange(14.0, dtype=np.float32).reshape(7, 2)
Y = np.arange(7) * 10


def test_loader_batches() -> None:
    loader = DataLoader(TensorDataset(X, Y), batch_size=3)
    assert len(loader) == 3 and loader.batch_size == 3 and loader.drop_last is False
    batches = list(loader)
    assert all(isinstance(b, list) and len(b) == 2 for b in batches)
    assert [values(b[1]) for b in batches] == [("i64", [0, 10, 20]), ("i64", [30, 40, 50]), ("i64", [60])]
    assert values(batches[2][0]) == ("f32", [[12.0, 13.0]])
    dropped = DataLoader(TensorDataset(X, Y), 3, drop_last=True)
    assert len(dropped) == 2 and [values(b[1])[1] for b in dropped] == [[0, 10, 20], [30, 40, 50]]
    assert len(DataLoader(TensorDataset(X))) == 7  # batch_size 1 by default, as PyTorch's


def test_loader_of_tensor_dataset_is_collated_as_any_dataset() -> None:
    """The rows of a TensorDataset are gathered at once; a subclass (read row by row) gives the same."""

    class RowByRow(TensorDataset):
        pass

    fast = list(DataLoader(TensorDataset(X, Y), batch_size=4, sampler=[6, 0, 3, 3, 1]))
    slow = list(DataLoader(RowByRow(X, Y), batch_size=4, sampler=[6, 0, 3, 3, 1]))
    for a, b in zip(fast, slow, strict=True):
        for ta, tb in zip(a, b, strict=True):
            assert values(ta) == values(tb)
    assert values(fast[0][1]) == ("i64", [60, 0, 30, 30])


def test_loader_options() -> None:
    dataset = TensorDataset(X, Y)
    unbatched = list(DataLoader(dataset, batch_size=None))
    assert len(unbatched) == 7 and values(unbatched[2][1]) == ("i64", 20)  # items as they are, made tensors
    by_sampler = DataLoader(dataset, batch_size=2, sampler=SubsetRandomSampler([1, 5], verigrad.Generator(0)))
    assert sorted(v for b in by_sampler for v in b[1].numpy().tolist()) == [10, 50]
    by_batches = DataLoader(dataset, batch_sampler=[[4, 1], [0]])
    assert by_batches.batch_size is None and len(by_batches) == 2
    assert [values(b[1])[1] for b in by_batches] == [[40, 10], [0]]
    sizes = DataLoader(dataset, batch_size=3, collate_fn=len)
    assert list(sizes) == [3, 3, 1]
    calls = []
    quiet = DataLoader(
        dataset,
        batch_size=4,
        num_workers=2,
        pin_memory=True,
        timeout=5,
        worker_init_fn=calls.append,
        prefetch_factor=2,
        persistent_workers=True,
        multiprocessing_context="spawn",
    )
    with pytest.warns(UserWarning, match="pin_memory=True has no effect"):
        assert [values(b[1])[1] for b in quiet] == [[0, 10, 20, 30], [40, 50, 60]] and calls == []
    assert get_worker_info() is None
    rows = list(DataLoader([{"v": 1.5, "s": "a"}, {"v": 2.5, "s": "b"}], batch_size=2))
    assert values(rows[0]["v"]) == ("f64", [1.5, 2.5]) and rows[0]["s"] == ["a", "b"]


def test_shuffle_is_seeded_by_manual_seed_or_the_generator() -> None:
    def order(loader: DataLoader) -> list[int]:
        return [v for b in loader for v in b[0].numpy().tolist()]

    dataset = TensorDataset(np.arange(20))
    verigrad.manual_seed(7)
    first = order(DataLoader(dataset, batch_size=6, shuffle=True))
    verigrad.manual_seed(7)
    assert order(DataLoader(dataset, batch_size=6, shuffle=True)) == first
    assert sorted(first) == list(range(20)) and first != list(range(20))
    a = DataLoader(dataset, batch_size=6, shuffle=True, generator=verigrad.Generator(3))
    b = DataLoader(dataset, batch_size=6, shuffle=True, generator=verigrad.Generator(3))
    assert order(a) == order(b) and order(a) == order(b)  # epoch by epoch


def test_loader_over_iterable_datasets() -> None:
    loader = DataLoader(Counting(7), batch_size=3)
    assert len(loader) == 3 and [values(b)[1] for b in loader] == [[0, 1, 2], [3, 4, 5], [6]]
    dropped = DataLoader(Counting(7), batch_size=3, drop_last=True)
    assert len(dropped) == 2 and [values(b)[1] for b in dropped] == [[0, 1, 2], [3, 4, 5]]
    assert list(DataLoader(Counting(3), batch_size=None)) == [0, 1, 2]  # default_convert leaves ints
    endless = DataLoader(Counting(4, with_length=False), batch_size=2)
    assert [values(b)[1] for b in endless] == [[0, 1], [2, 3]]
    with pytest.raises(TypeError, match="no length"):
        len(endless)
    for option in ({"shuffle": True}, {"sampler": [0]}, {"batch_sampler": [[0]]}):
        with pytest.raises(ValueError, match="IterableDataset: expected unspecified"):
            DataLoader(Counting(3), **option)
    with pytest.raises(NotImplementedError, match="num_workers=0"):
        DataLoader(Counting(3), num_workers=2)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"batch_size": 0}, "batch_size should be a positive"),
        ({"drop_last": 1}, "drop_last should be a boolean"),
        ({"shuffle": True, "sampler": [0]}, "mutually exclusive with shuffle"),
        ({"batch_sampler": [[0]], "batch_size": 2}, "batch_sampler option is mutually exclusive"),
        ({"batch_sampler": [[0]], "shuffle": True}, "batch_sampler option is mutually exclusive"),
        ({"batch_size": None, "drop_last": True}, "mutually exclusive with drop_last"),
        ({"num_workers": -1}, "num_workers option should be non-negative"),
        ({"timeout": -1}, "timeout option should be non-negative"),
        ({"prefetch_factor": 2}, "prefetch_factor needs num_workers > 0"),
        ({"persistent_workers": True}, "persistent_workers option needs num_workers > 0"),
    ],
)
def test_loader_refusals(kwargs, message) -> None:
    with pytest.raises(ValueError, match=message):
        DataLoader(TensorDataset(X), **kwargs)


def test_verigrad_data_is_the_same_implementation() -> None:
    assert issubclass(verigrad.data.DataLoader, DataLoader) and verigrad.data.TensorDataset is TensorDataset
    assert verigrad.data.Dataset is Dataset and verigrad.utils.data.DataLoader is DataLoader
    legacy = verigrad.data.DataLoader(X, Y, batch_size=3, shuffle=True, seed=5)
    expected = np.random.default_rng(5).permutation(7)  # its order: NumPy's PCG64 seeded with `seed`
    assert [v for b in legacy for v in b[1].numpy().tolist()] == (expected * 10).tolist()
    assert isinstance(legacy.sampler, Sampler) and len(legacy) == 3

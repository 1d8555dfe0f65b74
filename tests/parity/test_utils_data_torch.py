"""`verigrad.utils.data` against `torch.utils.data`: the same program text gives the same batches
(values, dtypes, shapes, container types) wherever no random order is drawn, `default_collate` and
`default_convert` give the same nested structures, and `random_split` and the samplers the same sizes.
Shuffled orders are verigrad's own (another generator), so only their shape is compared."""

from __future__ import annotations

import collections
import warnings

import numpy as np
import pytest
import torch
import torch.utils.data as tdata

import verigrad
import verigrad.utils.data as vdata

Point = collections.namedtuple("Point", "x y")


def dtype_name(dtype) -> str:
    if isinstance(dtype, torch.dtype):
        return str(dtype).removeprefix("torch.")
    return dtype.np.name


def assert_same(ours, theirs) -> None:
    """The same nested structure: container types, and tensors of the same shape, dtype and values."""
    if isinstance(theirs, torch.Tensor):
        assert isinstance(ours, verigrad.Tensor), type(ours)
        assert tuple(ours.shape) == tuple(theirs.shape) and dtype_name(ours.dtype) == dtype_name(theirs.dtype)
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    elif isinstance(theirs, dict):
        assert type(ours) is type(theirs) and list(ours) == list(theirs)
        for key in theirs:
            assert_same(ours[key], theirs[key])
    elif isinstance(theirs, list | tuple):
        assert type(ours) is type(theirs) and len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            assert_same(a, b)
    else:
        assert type(ours) is type(theirs) and ours == theirs


def both(make):
    """make(lib, data) with (verigrad, verigrad.utils.data) and (torch, torch.utils.data)."""
    return make(verigrad, vdata), make(torch, tdata)


X = np.arange(22, dtype=np.float32).reshape(11, 2)
Y = np.arange(11) % 3


class Pairs:
    """A map-style dataset of dicts, tuples, named tuples, strings, NumPy values and Python numbers."""

    def __init__(self, lib, n: int = 7) -> None:
        self.lib, self.n = lib, n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        t = self.lib
        return {
            "image": t.tensor(X[i]),
            "label": int(Y[i]),
            "weight": 0.5 * i,
            "flag": i % 2 == 0,
            "name": f"item{i}",
            "array": np.full((2, 2), i, dtype=np.float64),
            "scalar": np.int32(i),
            "pair": (t.tensor([i, -i]), [float(i), 1.0]),
            "point": Point(i, t.tensor(float(i))),
        }


def Stream(lib, base, n: int):
    """An iterable dataset of `n` (tensor, int) items."""

    class Stream(base):
        def __iter__(self):
            return iter((lib.tensor([float(i)]), i) for i in range(n))

        def __len__(self) -> int:
            return n

    return Stream()


LOADERS = {
    "tensor dataset": lambda t, d: d.DataLoader(d.TensorDataset(t.tensor(X), t.tensor(Y)), batch_size=4),
    "drop_last": lambda t, d: d.DataLoader(d.TensorDataset(t.tensor(X)), batch_size=3, drop_last=True),
    "positional batch size": lambda t, d: d.DataLoader(d.TensorDataset(t.tensor(X), t.tensor(Y)), 5),
    "workers and options": lambda t, d: d.DataLoader(
        d.TensorDataset(t.tensor(X)), batch_size=4, num_workers=0, pin_memory=False, timeout=0
    ),
    "batch_size None": lambda t, d: d.DataLoader(d.TensorDataset(t.tensor(X), t.tensor(Y)), batch_size=None),
    "dict items": lambda t, d: d.DataLoader(Pairs(t), batch_size=3),
    "dict items unbatched": lambda t, d: d.DataLoader(Pairs(t), batch_size=None),
    "sampler": lambda t, d: d.DataLoader(d.TensorDataset(t.tensor(X)), batch_size=2, sampler=[5, 1, 7]),
    "sequential sampler": lambda t, d: d.DataLoader(
        Pairs(t), batch_size=2, sampler=d.SequentialSampler(range(5))
    ),
    "batch_sampler": lambda t, d: d.DataLoader(
        d.TensorDataset(t.tensor(X)), batch_sampler=d.BatchSampler(d.SequentialSampler(range(7)), 3, False)
    ),
    "batch_sampler lists": lambda t, d: d.DataLoader(
        d.TensorDataset(t.tensor(Y)), batch_sampler=[[3, 0], [2]]
    ),
    "collate_fn": lambda t, d: d.DataLoader(
        d.TensorDataset(t.tensor(X)), batch_size=4, collate_fn=lambda items: len(items)
    ),
    "subset": lambda t, d: d.DataLoader(d.Subset(d.TensorDataset(t.tensor(X)), [4, 2, 9]), batch_size=2),
    "concat": lambda t, d: d.DataLoader(
        d.ConcatDataset([d.TensorDataset(t.tensor(X[:3])), d.TensorDataset(t.tensor(X[3:5]))]), batch_size=4
    ),
    "dataset sum": lambda t, d: d.DataLoader(
        d.TensorDataset(t.tensor(Y[:2])) + d.TensorDataset(t.tensor(Y[5:8])), batch_size=2
    ),
    "plain list": lambda t, d: d.DataLoader([(1, 2.0), (3, 4.0), (5, 6.0)], batch_size=2),
    "numpy rows": lambda t, d: d.DataLoader(list(X[:5]), batch_size=2),
    "iterable": lambda t, d: d.DataLoader(Stream(t, d.IterableDataset, 7), batch_size=3),
    "iterable drop_last": lambda t, d: d.DataLoader(
        Stream(t, d.IterableDataset, 7), batch_size=3, drop_last=True
    ),
    "iterable unbatched": lambda t, d: d.DataLoader(Stream(t, d.IterableDataset, 3), batch_size=None),
    "chain": lambda t, d: d.DataLoader(
        Stream(t, d.IterableDataset, 2) + Stream(t, d.IterableDataset, 3), batch_size=2
    ),
}


@pytest.mark.parametrize("make", LOADERS.values(), ids=LOADERS.keys())
def test_loader_batches_as_pytorchs(make) -> None:
    ours, theirs = both(make)
    assert len(ours) == len(theirs) and ours.batch_size == theirs.batch_size
    ours_batches, theirs_batches = list(ours), list(theirs)
    assert len(ours_batches) == len(theirs_batches) == len(theirs)
    assert_same(ours_batches, theirs_batches)
    assert_same(list(ours), theirs_batches)  # a second epoch: the same


COLLATED = {
    "ints": [1, 2, 3],
    "floats": [1.5, 2.0],
    "bools": [True, False],
    "strings": ["a", "b"],
    "numpy scalars": [np.float32(1.5), np.float32(2)],
    "numpy i64": [np.int64(4), np.int64(-1)],
    "numpy arrays": [np.ones((2, 3), np.int32), np.zeros((2, 3), np.int32)],
    "0-d arrays": [np.array(1.5), np.array(2.5)],
    "tuples": [(1, "x", 2.0), (2, "y", 3.0)],
    "lists": [[1, 2], [3, 4]],
    "nested dicts": [{"a": {"b": [1, 2.0]}, "c": "s"}, {"a": {"b": [3, 4.0]}, "c": "t"}],
    "named tuples": [Point(1, 2.0), Point(3, 4.0)],
    "ordered dicts": [collections.OrderedDict(z=1, a=2.0), collections.OrderedDict(z=3, a=4.0)],
    "defaultdicts": [collections.defaultdict(list, k=1.5), collections.defaultdict(list, k=2.5)],
}


@pytest.mark.parametrize("batch", COLLATED.values(), ids=COLLATED.keys())
def test_default_collate_as_pytorchs(batch) -> None:
    assert_same(vdata.default_collate(batch), tdata.default_collate(batch))


def test_default_collate_of_tensors_and_errors_as_pytorchs() -> None:
    ours, theirs = both(lambda t, d: d.default_collate([t.tensor([[1, 2]]), t.tensor([[3, 4]])]))
    assert_same(ours, theirs)
    ours, theirs = both(lambda t, d: d.default_collate([(t.tensor(1.5), {"k": t.tensor([True])})] * 2))
    assert_same(ours, theirs)
    for bad, error in (
        ([[1, 2], [3]], RuntimeError),
        ([object()], TypeError),
        ([np.array(["a"])], TypeError),
    ):
        with pytest.raises(error):
            tdata.default_collate(bad)
        with pytest.raises(error):
            vdata.default_collate(bad)


CONVERTED = {
    "number": 3,
    "array": np.arange(3.0),
    "numpy scalar": np.float32(2.5),
    "tuple": (np.arange(2), 1.5, "s"),
    "dict": {"a": np.ones(2, np.int32), "b": [np.zeros(1)]},
    "named tuple": Point(np.arange(2), 3),
    "string array": np.array(["a", "b"]),
}


@pytest.mark.parametrize("data", CONVERTED.values(), ids=CONVERTED.keys())
def test_default_convert_as_pytorchs(data) -> None:
    ours, theirs = vdata.default_convert(data), tdata.default_convert(data)
    if isinstance(theirs, np.ndarray):
        assert ours is data and theirs is data
    else:
        assert_same(ours, theirs)


@pytest.mark.parametrize(
    ("n", "lengths"),
    [
        (10, [3, 7]),
        (10, [0.3, 0.3, 0.4]),
        (11, [0.3, 0.3, 0.4]),
        (7, [0.5, 0.5]),
        (5, [1.0]),
        (3, [0.1, 0.9]),
        (3, [0.1, 0.1, 0.8]),
    ],
)
def test_random_split_sizes_as_pytorchs(n, lengths) -> None:
    """Fractions floored, the remainder handed out from the first; a split of length 0 is warned of."""
    with warnings.catch_warnings(record=True) as ours_warned:
        warnings.simplefilter("always")
        ours = vdata.random_split(range(n), lengths, generator=verigrad.Generator(0))
    with warnings.catch_warnings(record=True) as theirs_warned:
        warnings.simplefilter("always")
        theirs = tdata.random_split(range(n), lengths, generator=torch.Generator().manual_seed(0))
    assert [len(s) for s in ours] == [len(s) for s in theirs]
    assert len(ours_warned) == len(theirs_warned) == (0 in [len(s) for s in theirs])
    assert sorted(i for s in ours for i in s) == list(range(n))  # a partition


def test_random_split_refusals_as_pytorchs() -> None:
    for lengths in ([3, 3], [0.5, 0.6], [-0.2, 1.2]):
        with pytest.raises(ValueError):
            tdata.random_split(range(10), lengths)
        with pytest.raises(ValueError):
            vdata.random_split(range(10), lengths)


SAMPLERS = {
    "sequential": lambda t, d: d.SequentialSampler(range(5)),
    "random": lambda t, d: d.RandomSampler(range(6)),
    "random num_samples": lambda t, d: d.RandomSampler(range(4), num_samples=10),
    "random replacement": lambda t, d: d.RandomSampler(range(4), replacement=True, num_samples=70),
    "random generator": lambda t, d: d.RandomSampler(range(5), generator=t.Generator().manual_seed(1)),
    "subset random": lambda t, d: d.SubsetRandomSampler([7, 3, 9]),
    "weighted": lambda t, d: d.WeightedRandomSampler([0.1, 0.0, 0.9], 40),
    "weighted no replacement": lambda t, d: d.WeightedRandomSampler(
        [0.2, 0.5, 0.3, 0.0], 3, replacement=False
    ),
    "batch": lambda t, d: d.BatchSampler(d.RandomSampler(range(10)), 3, False),
    "batch drop_last": lambda t, d: d.BatchSampler(range(10), 4, True),
}


@pytest.mark.parametrize("name", SAMPLERS)
def test_samplers_lengths_and_draws_as_pytorchs(name) -> None:
    """The same length and the same set of possible indices; random orders are verigrad's own."""
    ours, theirs = both(SAMPLERS[name])
    ours_list, theirs_list = list(ours), list(theirs)
    assert len(ours) == len(theirs) == len(ours_list) == len(theirs_list)
    flat = [i for item in ours_list for i in (item if isinstance(item, list) else [item])]
    assert all(type(i) is int for i in flat)
    if name in ("sequential", "batch drop_last"):
        assert ours_list == theirs_list
    elif name.startswith("batch"):
        assert [len(b) for b in ours_list] == [len(b) for b in theirs_list] and sorted(flat) == list(
            range(10)
        )
    elif name == "weighted":
        assert set(flat) <= {0, 2}  # weight 0 is never drawn
    elif name == "weighted no replacement":
        assert sorted(flat) == [0, 1, 2]
    elif name == "subset random":
        assert sorted(flat) == [3, 7, 9]
    elif name == "random replacement":
        assert set(flat) <= set(range(4))
    elif name == "random num_samples":  # two permutations, then 2 distinct items of a third
        assert sorted(flat[:8]) == sorted(list(range(4)) * 2) and len(set(flat[8:])) == 2
    else:
        assert sorted(flat) == sorted(theirs_list)  # a permutation


def test_loader_refusals_as_pytorchs() -> None:
    cases = [
        {"batch_size": 0},
        {"shuffle": True, "sampler": [0, 1]},
        {"batch_sampler": [[0]], "batch_size": 2},
        {"batch_sampler": [[0]], "drop_last": True},
        {"batch_size": None, "drop_last": True},
        {"num_workers": -1},
        {"timeout": -1},
        {"prefetch_factor": 2},
        {"persistent_workers": True},
    ]
    for kwargs in cases:
        with pytest.raises(ValueError):
            tdata.DataLoader(tdata.TensorDataset(torch.zeros(4)), **kwargs)
        with pytest.raises(ValueError):
            vdata.DataLoader(vdata.TensorDataset(verigrad.zeros(4)), **kwargs)
    for t, d in ((torch, tdata), (verigrad, vdata)):
        with pytest.raises(ValueError):
            d.DataLoader(Stream(t, d.IterableDataset, 3), shuffle=True)
        with pytest.raises(TypeError):  # an iterable dataset without a length
            len(d.DataLoader(iter_without_len(d)))


def iter_without_len(d):
    class Endless(d.IterableDataset):
        def __iter__(self):
            return iter(range(3))

    return Endless()


def test_shuffled_loader_gives_every_item_once_per_epoch() -> None:
    """The order differs from PyTorch's (another generator); the batches partition the data all the same,
    and `manual_seed` fixes the order as `torch.manual_seed` fixes PyTorch's."""
    orders = []
    for _ in range(2):
        verigrad.manual_seed(5)
        loader = vdata.DataLoader(
            vdata.TensorDataset(verigrad.tensor(Y), verigrad.arange(11)), 4, shuffle=True
        )
        batches = list(loader)
        assert [len(b[1]) for b in batches] == [len(b) for b in tdata.DataLoader(range(11), 4, shuffle=True)]
        order = np.concatenate([b[1].numpy() for b in batches])
        assert sorted(order.tolist()) == list(range(11))
        np.testing.assert_array_equal(np.concatenate([b[0].numpy() for b in batches]), Y[order])
        orders.append(order)
    np.testing.assert_array_equal(orders[0], orders[1])

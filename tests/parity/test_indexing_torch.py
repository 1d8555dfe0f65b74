"""Indexing against PyTorch: reads x[key] over a table of keys (values, shapes, dtypes, gradients),
writes x[key] = v, index_put(_) with and without accumulate, index_copy, index_fill, masked_scatter,
take_along_dim, and the errors PyTorch raises."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import verigrad
from tests.parity.gradients import check_values_and_gradients

X = np.arange(60.0).reshape(3, 4, 5) * 0.5 - 7.0
MASK_0 = np.array([True, False, True])
MASK_01 = (np.arange(12).reshape(3, 4) % 3) == 1
E = Ellipsis
ALL = slice(None)

# keys as plain Python and NumPy: np arrays become each library's tensor, lists stay lists
READ_KEYS = [
    (np.array([2, 0, 2]),),
    ([0, 2], [1, 1]),
    (np.array([[0], [2]]), np.array([1, -1])),  # broadcast among themselves
    (0, ALL, [1, 2]),  # the int is a basic index: [1, 2] stays in place (PyTorch's, not NumPy's)
    ([0, 1], ALL, [1, 2]),  # apart: the indexed axes go in front
    (ALL, [0, 1], [1, 2]),  # together: in place
    ([0, 1], 0, [1, 2]),
    ([0, 1], None, [1, 2]),
    (ALL, 0, [1, 2]),
    (E, [0, 0, 4]),
    (E, np.array([[4], [0]])),
    ([[0, 1], [2, 2]],),
    (1, None, slice(1, 3), [-1, -5]),
    (slice(1, None), np.array([0, -1]), slice(None, None, 2)),
    (MASK_0,),
    (MASK_01,),
    (MASK_0, slice(1, 3)),
    (ALL, np.array([True, False, True, True]), 2),
    (MASK_01, [0, 4, 1, 2]),
    (True,),
    (False,),
    (0, True),
    ([0, 1], True),
    ([],),
    (np.array([], dtype=np.int64), ALL, 0),
    (ALL, ALL, np.array([[1, 1], [1, 3]])),  # repeated positions: their gradients add up
    (np.array(0), ALL, [-1]),  # a 0-d integer tensor selects as an int: [-1] stays in place
    (np.array(2), E, False),
]
ZERO_D_INDEX = (np.array(1),)  # a 0-d integer tensor: as an int, but a copy


def _key(key: tuple, lib) -> tuple:
    def one(k):
        if isinstance(k, np.ndarray):
            return lib.from_numpy(k.copy())
        if isinstance(k, bool):
            return lib.tensor(k)
        return k

    return tuple(one(k) for k in key)


@pytest.mark.parametrize("key", [*READ_KEYS, ZERO_D_INDEX], ids=repr)
def test_reads_values_shapes_and_gradients(key) -> None:
    check_values_and_gradients(
        {"x": X.copy()},
        lambda x: x[_key(key, verigrad)],
        lambda x: x[_key(key, torch)],
    )


@pytest.mark.parametrize("key", READ_KEYS, ids=repr)
def test_reads_of_integer_tensors_keep_the_dtype(key) -> None:
    ours = verigrad.from_numpy(np.arange(60).reshape(3, 4, 5))[_key(key, verigrad)]
    theirs = torch.from_numpy(np.arange(60).reshape(3, 4, 5))[_key(key, torch)]
    assert ours.dtype.name == "i64" and ours.shape == tuple(theirs.shape)
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def _write_values(shape: tuple) -> list:
    """A number, a 0-d tensor, a tensor of the indexed shape and one of its last axis (broadcast)."""
    full = np.arange(float(np.prod(shape))).reshape(shape) + 100.0
    values = [3.5, np.array(-2.0), full]
    if shape and full.size:
        values.append(full.reshape(-1)[: shape[-1]].copy())
    return values


WRITE_KEYS = [
    *READ_KEYS,
    (np.array([1, 1, 0, 1]),),  # repeated: the last write stays, as PyTorch's on the CPU
    ([0, 0], [3, 3], [1, 1]),
    ZERO_D_INDEX,
]


@pytest.mark.parametrize("key", WRITE_KEYS, ids=repr)
def test_writes_match(key) -> None:
    shape = tuple(torch.from_numpy(X)[_key(key, torch)].shape)
    for value in _write_values(shape):
        ours, theirs = verigrad.from_numpy(X.copy()), torch.from_numpy(X.copy())
        as_ours = verigrad.from_numpy(value.copy()) if isinstance(value, np.ndarray) else value
        as_theirs = torch.from_numpy(value.copy()) if isinstance(value, np.ndarray) else value
        ours[_key(key, verigrad)] = as_ours
        theirs[_key(key, torch)] = as_theirs
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


@pytest.mark.parametrize("key", WRITE_KEYS, ids=repr)
def test_in_place_add_through_a_key_does_not_accumulate(key) -> None:
    ours, theirs = verigrad.from_numpy(X.copy()), torch.from_numpy(X.copy())
    ours[_key(key, verigrad)] += 1.5
    theirs[_key(key, torch)] += 1.5
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_written_tensors_must_have_the_dtype_numbers_are_cast() -> None:
    for lib in (torch, verigrad):
        x = lib.zeros(4, dtype=lib.int64)
        x[[1, 3]] = 2.7  # a number is cast
        x[x > 0] = lib.tensor(-1.5, dtype=lib.float64)  # one value where a mask of x's shape holds: cast
        assert x.tolist() == [0, -1, 0, -1]
        for key in ([1, 3], x < 0):
            with pytest.raises(RuntimeError, match="dtype"):
                x[key] = lib.tensor([2.7, -1.2], dtype=lib.float64)
        with pytest.raises(RuntimeError, match="dtype"):
            x.index_put_((lib.tensor([0]),), lib.tensor([2.5]))


def test_writes_into_bf16_and_integer_tensors() -> None:
    for name in ("bfloat16", "int32", "bool"):
        ours = verigrad.zeros(5, dtype=getattr(verigrad, name))
        theirs = torch.zeros(5, dtype=getattr(torch, name))
        for x, lib in ((ours, verigrad), (theirs, torch)):
            x[[1, 1, 3]] = lib.tensor([1.5, 2.5, 3.0]).to(x.dtype)
            x[lib.tensor([True, False, False, False, True])] = 1
        np.testing.assert_array_equal(ours.float().numpy(), theirs.float().numpy())


INDEX_PUT_CASES = [  # into a [6, 10]
    ((np.array([1, 1, 3, 0]),), (4, 10)),  # a row repeated: without accumulate, the last stays
    ((np.array([2, 0, 2]), np.array([4, 4, 4])), (3,)),
    ((np.array([[0], [2]]), np.array([1, 2, 1])), (2, 3)),
    ((np.array([True, False, True, True, False, False]),), (3, 10)),
    ((np.array([1, 1]), np.array([0, 0])), (1,)),
    ((np.array([5, -1, 0]), np.array([9, 9, -10])), (3,)),
]


@pytest.mark.parametrize("accumulate", [False, True])
@pytest.mark.parametrize("case", INDEX_PUT_CASES, ids=repr)
def test_index_put_values_and_gradients(case, accumulate: bool) -> None:
    indices, shape = case
    x = X.reshape(6, 10).copy()
    v = np.linspace(-3.0, 4.0, int(np.prod(shape))).reshape(shape)
    check_values_and_gradients(
        {"x": x, "v": v},
        lambda x, v: verigrad.index_put(x * 1.0, _key(indices, verigrad), v, accumulate=accumulate),
        lambda x, v: torch.index_put(x * 1.0, _key(indices, torch), v, accumulate=accumulate),
    )


def test_index_put_in_place_method() -> None:
    idx = np.array([0, 2, 0])
    ours, theirs = verigrad.zeros(3, 2, dtype="f64"), torch.zeros(3, 2, dtype=torch.float64)
    v = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    for acc in (True, False):
        assert ours.index_put_((verigrad.from_numpy(idx),), verigrad.from_numpy(v), accumulate=acc) is ours
        theirs.index_put_((torch.from_numpy(idx),), torch.from_numpy(v), accumulate=acc)
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_a_write_into_a_leaf_that_requires_grad_raises_as_torch() -> None:
    ours, theirs = verigrad.zeros(3, requires_grad=True), torch.zeros(3, requires_grad=True)
    with pytest.raises(RuntimeError):
        theirs[[0, 1]] = 1.0
    with pytest.raises(RuntimeError):
        ours[[0, 1]] = 1.0
    with verigrad.no_grad():
        ours[[0, 1]] = 1.0
    assert ours.numpy().tolist() == [1.0, 1.0, 0.0]


def test_a_value_that_requires_grad_written_into_one_that_does_not_is_recorded_as_torch() -> None:
    writes = (
        lambda out, x: out.__setitem__([0, 2], x[:2] * 2),
        lambda out, x: out.__setitem__(0, x[0]),
        lambda out, x: out.copy_(x),
        lambda out, x: out.index_put_((x.new_tensor([1]).long(),), x[:1]),
    )
    for write in writes:
        grads = []
        for lib in (torch, verigrad):
            x = lib.tensor([1.0, 2.0, 3.0], dtype=lib.float64, requires_grad=True)
            out = lib.zeros(3, dtype=lib.float64)
            write(out, x)
            assert out.requires_grad
            (out * out).sum().backward()
            grads.append((out.tolist(), x.grad.tolist()))
        assert grads[0] == grads[1]


@pytest.mark.parametrize(
    "key",
    [
        (np.array([3]),),
        (0, np.array([5])),
        (np.array([-4]),),
        ([0, 1], [0, 1, 1]),
        (np.array([True, False]),),
        (ALL, np.array([[True, False]])),
        (0, 0, 0, 0),
    ],
    ids=repr,
)
def test_bad_keys_raise_index_error_as_torch(key) -> None:
    with pytest.raises(IndexError):
        torch.from_numpy(X)[_key(key, torch)]
    with pytest.raises(IndexError):
        verigrad.from_numpy(X)[_key(key, verigrad)]
    with pytest.raises(IndexError):
        verigrad.from_numpy(X.copy())[_key(key, verigrad)] = 1.0


@pytest.mark.parametrize("position", [-1, 3])
def test_positions_of_scatter_and_index_functions_are_never_negative(position: int) -> None:
    calls = [
        lambda lib, x, i: x.scatter(0, i.reshape(1, 1), 1.0),
        lambda lib, x, i: x.scatter_add(0, i.reshape(1, 1), lib.ones(1, 1, dtype=lib.float64)),
        lambda lib, x, i: x.index_select(0, i),
        lambda lib, x, i: x.index_add(0, i, lib.ones(1, 4, dtype=lib.float64)),
        lambda lib, x, i: x.index_copy(0, i, lib.ones(1, 4, dtype=lib.float64)),
    ]
    for call in calls:
        with pytest.raises((IndexError, RuntimeError)):
            call(torch, torch.from_numpy(X[0]).reshape(4, 5)[:3, :4], torch.tensor([position]))
        with pytest.raises(IndexError, match="out of range"):
            call(verigrad, verigrad.from_numpy(X[0]).reshape(4, 5)[:3, :4], verigrad.tensor([position]))


def test_float_indices_and_dims_out_of_range_raise_index_error_as_torch() -> None:
    for lib in (torch, verigrad):
        x = lib.zeros(3, 4)
        calls = (lambda: x[lib.tensor([0.0, 1.0])], lambda: x.sum(2), lambda: x.softmax(-3), lambda: x[1.5])
        for call in calls:
            with pytest.raises(IndexError):
                call()


def test_out_of_range_raises_before_any_work() -> None:
    ours = verigrad.from_numpy(X.copy())
    with pytest.raises(IndexError, match="index 7 is out of range for dimension 1 of size 4"):
        ours[[0, 1], [2, 7]] = 100.0
    np.testing.assert_array_equal(ours.numpy(), X)


def test_index_copy_values_and_gradients() -> None:
    index = np.array([3, 0])
    check_values_and_gradients(
        {"x": X[0].copy(), "s": np.arange(10.0).reshape(2, 5)},
        lambda x, s: (x * 1.0).index_copy(0, verigrad.from_numpy(index), s),
        lambda x, s: (x * 1.0).index_copy(0, torch.from_numpy(index), s),
    )
    check_values_and_gradients(
        {"x": X[0].copy(), "s": np.arange(8.0).reshape(4, 2)},
        lambda x, s: verigrad.index_copy(x, 1, verigrad.from_numpy(np.array([4, 1])), s),
        lambda x, s: torch.index_copy(x, 1, torch.from_numpy(np.array([4, 1])), s),
    )


def test_index_fill_values_and_gradients() -> None:
    index = np.array([3, 0, 3])
    check_values_and_gradients(
        {"x": X.copy()},
        lambda x: x.index_fill(1, verigrad.from_numpy(index), -1.5),
        lambda x: x.index_fill(1, torch.from_numpy(index), -1.5),
    )


def test_index_fill_with_a_0d_tensor_value_differentiates_it() -> None:
    index = np.array([3, 0])  # (PyTorch's backward to the value refuses a negative position)
    check_values_and_gradients(
        {"x": X[0].copy(), "v": np.array(2.5)},
        lambda x, v: x.index_fill(0, verigrad.from_numpy(index), v),
        lambda x, v: x.index_fill(0, torch.from_numpy(index), v),
    )


def test_masked_scatter_values_and_gradients() -> None:
    mask = X[0] > 0
    check_values_and_gradients(
        {"x": X[0].copy(), "s": np.arange(30.0)},
        lambda x, s: x.masked_scatter(verigrad.from_numpy(mask), s.reshape(5, 6)),
        lambda x, s: x.masked_scatter(torch.from_numpy(mask), s.reshape(5, 6)),
    )
    row = np.array([True, False, True, True, False])  # broadcast over the rows
    check_values_and_gradients(
        {"x": X[0].copy(), "s": np.arange(12.0)},
        lambda x, s: verigrad.masked_scatter(x, verigrad.from_numpy(row), s),
        lambda x, s: torch.masked_scatter(x, torch.from_numpy(row), s),
    )


@pytest.mark.parametrize("dim", [None, 0, 1, -1])
def test_take_along_dim_values_and_gradients(dim) -> None:
    a = X[0].copy()  # [4, 5]
    if dim is None:
        index = np.array([[19, 0], [3, 3]])
    elif dim == 0:
        index = np.array([[3, 0, 1, 1, 2]])  # broadcast over nothing: one row
    else:
        index = np.array([[4, 0], [1, 1], [0, 0], [2, 3]])
    check_values_and_gradients(
        {"x": a},
        lambda x: verigrad.take_along_dim(x, verigrad.from_numpy(index), dim),
        lambda x: torch.take_along_dim(x, torch.from_numpy(index), dim),
    )
    broadcast = np.array([[[2], [0], [4], [4]]])
    check_values_and_gradients(
        {"x": X[:2, 0].copy()[:, None, :]},  # [2, 1, 5] with indices [1, 4, 1]: broadcast to [2, 4, 1]
        lambda x: verigrad.take_along_dim(x, verigrad.from_numpy(broadcast), -1),
        lambda x: torch.take_along_dim(x, torch.from_numpy(broadcast), -1),
    )


def test_take_along_dim_refuses_what_torch_refuses() -> None:
    for lib in (torch, verigrad):
        with pytest.raises((RuntimeError, ValueError)):
            lib.take_along_dim(lib.zeros(2, 3), lib.zeros(3, dtype=lib.int64), 1)


# ops of the family: logcumsumexp, unfold, einsum's diagonals, the stable sort, flatten ---------------
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_logcumsumexp_values_and_gradients(dim: int) -> None:
    check_values_and_gradients(
        {"x": X[0].copy()},
        lambda x: verigrad.logcumsumexp(x, dim),
        lambda x: torch.logcumsumexp(x, dim),
    )


def test_logcumsumexp_of_infinities_and_large_values() -> None:
    x = np.array([[-np.inf, 0.5, 800.0, -np.inf, 1.0], [-np.inf, -np.inf, 2.0, np.inf, 3.0]])
    ours = verigrad.from_numpy(x.copy()).logcumsumexp(1)
    theirs = torch.from_numpy(x.copy()).logcumsumexp(1)
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    f32 = verigrad.from_numpy(x.astype(np.float32)).logcumsumexp(1)
    assert f32.dtype.name == "f32"
    np.testing.assert_array_equal(f32.numpy(), torch.from_numpy(x.astype(np.float32)).logcumsumexp(1).numpy())
    with pytest.raises(NotImplementedError):
        torch.arange(3).logcumsumexp(0)
    with pytest.raises(TypeError, match="logcumsumexp needs an f16, f32 or f64 tensor"):
        verigrad.arange(3).logcumsumexp(0)


@pytest.mark.parametrize(
    ("dim", "size", "step"), [(1, 3, 2), (1, 4, 1), (0, 1, 1), (-1, 2, 3), (1, 0, 2), (2, 5, 5), (0, 3, 1)]
)
def test_unfold_values_and_gradients(dim: int, size: int, step: int) -> None:
    check_values_and_gradients(
        {"x": X.copy()},
        lambda x: x.unfold(dim, size, step),
        lambda x: x.unfold(dim, size, step),
    )


@pytest.mark.parametrize(("size", "step"), [(6, 1), (2, 0), (-1, 1)])
def test_unfold_refuses_what_torch_refuses(size: int, step: int) -> None:
    with pytest.raises(RuntimeError):
        torch.from_numpy(X).unfold(2, size, step)
    with pytest.raises(ValueError, match="unfold"):
        verigrad.from_numpy(X).unfold(2, size, step)


@pytest.mark.parametrize(
    ("equation", "shapes"),
    [
        ("ii->i", [(4, 4)]),
        ("ii", [(4, 4)]),
        ("iij->j", [(3, 3, 2)]),
        ("bii->bi", [(2, 3, 3)]),
        ("iji->j", [(3, 2, 3)]),
        ("iii->i", [(3, 3, 3)]),
        ("ii,ij->j", [(3, 3), (3, 4)]),
        ("bii,bj->bij", [(2, 3, 3), (2, 4)]),
        ("...ii->...i", [(2, 3, 3)]),
    ],
)
def test_einsum_with_a_repeated_letter(equation: str, shapes: list) -> None:
    rng = np.random.default_rng(5)
    arrays = {f"a{k}": rng.standard_normal(s) for k, s in enumerate(shapes)}
    check_values_and_gradients(
        arrays,
        lambda **a: verigrad.einsum(equation, *a.values()),
        lambda **a: torch.einsum(equation, *a.values()),
    )


TIES = np.array([[1.0, 2.0, 1.0, np.nan, 2.0, 0.5, 1.0], [3.0, 3.0, 3.0, -1.0, np.nan, np.nan, 3.0]])


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_stable_sort_keeps_torch_tie_order(dim: int, descending: bool) -> None:
    ours, theirs = verigrad.from_numpy(TIES.copy()), torch.from_numpy(TIES.copy())
    a = ours.sort(dim=dim, descending=descending, stable=True)
    b = theirs.sort(dim=dim, descending=descending, stable=True)
    np.testing.assert_array_equal(a.values.numpy(), b.values.numpy())
    np.testing.assert_array_equal(a.indices.numpy(), b.indices.numpy())
    for fn in (lambda lib, x: lib.argsort(x, dim=dim, descending=descending, stable=True),
               lambda lib, x: x.argsort(dim=dim, descending=descending, stable=True)):  # fmt: skip
        np.testing.assert_array_equal(fn(verigrad, ours).numpy(), fn(torch, theirs).numpy())
    check_values_and_gradients(
        {"x": np.nan_to_num(TIES, nan=7.0)},
        lambda x: x.sort(dim=dim, descending=descending, stable=True).values,
        lambda x: x.sort(dim=dim, descending=descending, stable=True).values,
    )


@pytest.mark.parametrize(("start", "end"), [(0, -1), (1, 2), (0, 1), (-2, -1), (1, 1), (2, 2)])
def test_flatten_start_and_end_dims(start: int, end: int) -> None:
    check_values_and_gradients(
        {"x": X.copy()},
        lambda x: x.flatten(start, end),
        lambda x: x.flatten(start, end),
    )
    ours = verigrad.flatten(verigrad.from_numpy(X), start_dim=start, end_dim=end)
    assert ours.shape == tuple(torch.flatten(torch.from_numpy(X), start_dim=start, end_dim=end).shape)


def test_flatten_refuses_what_torch_refuses() -> None:
    for start, end in [(2, 1), (0, 3)]:
        with pytest.raises((RuntimeError, IndexError)):
            torch.from_numpy(X).flatten(start, end)
        with pytest.raises(ValueError, match="flatten"):
            verigrad.from_numpy(X).flatten(start, end)


def _random_item(rng: np.random.Generator, size: int):
    """One index item of every kind PyTorch takes, at random."""
    kind = rng.integers(9)
    if kind == 0:
        return slice(rng.choice([None, 0, 1]), rng.choice([None, -1, size]), rng.choice([None, 1, 2]))
    if kind == 1:
        return int(rng.integers(-size, size))
    if kind in (2, 3):
        shapes = [(2,), (1,), (2, 1), (3,), ()]
        return rng.integers(-size, size, shapes[rng.integers(len(shapes))])
    if kind == 4:
        return rng.random(size) > 0.5
    if kind == 5:
        return None
    if kind == 6:
        return [int(i) for i in rng.integers(0, size, 2)]
    if kind == 7:
        return bool(rng.integers(2))
    return Ellipsis


def test_random_keys_read_and_write_as_torch() -> None:
    """Keys drawn at random from every kind of item: the same values and shapes read, the same tensor
    after a write of values of the read's shape, or an IndexError from both (or from verigrad alone
    where PyTorch reads nothing, out of range: its result is empty)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 4, 5, 2))
    for _ in range(600):
        key, dim = [], 0
        for _ in range(rng.integers(1, 5)):
            if dim >= x.ndim:
                break
            item = _random_item(rng, x.shape[dim])
            if item is Ellipsis and any(k is Ellipsis for k in key):
                continue
            key.append(item)
            dim += item is not None and item is not Ellipsis and not isinstance(item, bool)
        key = tuple(key)
        try:
            expected = torch.from_numpy(x.copy())[_key(key, torch)]
        except IndexError:
            with pytest.raises(IndexError):
                verigrad.from_numpy(x.copy())[_key(key, verigrad)]
            continue
        try:
            got = verigrad.from_numpy(x.copy())[_key(key, verigrad)]
        except IndexError:
            assert expected.numel() == 0, key
            continue
        assert got.shape == tuple(expected.shape), key
        np.testing.assert_array_equal(got.numpy(), expected.numpy(), err_msg=repr(key))
        values = rng.standard_normal(tuple(expected.shape))
        ours, theirs = verigrad.from_numpy(x.copy()), torch.from_numpy(x.copy())
        ours[_key(key, verigrad)] = verigrad.from_numpy(values.copy())
        theirs[_key(key, torch)] = torch.from_numpy(values.copy())
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy(), err_msg=repr(key))


@pytest.mark.parametrize(("start", "length"), [(-2, 2), (1, 3), (4, 0), (0, 4), (3, 2), (-5, 1), (2, -1)])
def test_narrow_as_torch(start: int, length: int) -> None:
    try:
        expected = torch.from_numpy(X).narrow(2, start, length)
    except (IndexError, RuntimeError) as e:
        with pytest.raises(IndexError if isinstance(e, IndexError) else ValueError, match="narrow"):
            verigrad.from_numpy(X).narrow(2, start, length)
        return
    check_values_and_gradients(
        {"x": X.copy()}, lambda x: x.narrow(2, start, length), lambda x: x.narrow(2, start, length)
    )
    assert expected.shape[2] == length


def test_repeat_interleave_with_a_tensor_of_counts() -> None:
    counts = np.array([2, 0, 1])
    check_values_and_gradients(
        {"x": X[:, 0].copy()},
        lambda x: x.repeat_interleave(verigrad.from_numpy(counts), dim=0),
        lambda x: x.repeat_interleave(torch.from_numpy(counts), dim=0),
    )
    check_values_and_gradients(
        {"x": X[0, :3, :2].copy()},
        lambda x: verigrad.repeat_interleave(x, verigrad.tensor([1, 3, 0, 2, 1, 1])),
        lambda x: torch.repeat_interleave(x, torch.tensor([1, 3, 0, 2, 1, 1])),
    )
    check_values_and_gradients(
        {"x": X[0].copy()},
        lambda x: x.repeat_interleave(verigrad.tensor([2]), dim=1),
        lambda x: x.repeat_interleave(torch.tensor([2]), dim=1),
    )

"""Advanced indexing, index_put and its relatives, by hand-computed values: reads, writes, gradients,
errors, traced and abstract shapes."""

from __future__ import annotations

import numpy as np
import pytest

import verigrad

M = np.arange(12.0).reshape(3, 4)  # [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]


def _m(requires_grad: bool = False) -> verigrad.Tensor:
    return verigrad.from_numpy(M.copy()).requires_grad_(requires_grad)


def test_several_integer_arrays_pick_elements() -> None:
    assert _m()[[0, 2], [1, 1]].tolist() == [1.0, 9.0]
    assert _m()[verigrad.tensor([2, -3]), verigrad.tensor([-1, 0])].tolist() == [11.0, 0.0]
    assert _m()[[[0], [2]], [0, 3]].tolist() == [[0.0, 3.0], [8.0, 11.0]]  # broadcast to [2, 2]


def test_where_the_indexed_axes_go() -> None:
    cube = verigrad.arange(24.0).reshape(2, 3, 4)
    assert cube[[0, 1], :, [0, 3]].tolist() == [[0.0, 4.0, 8.0], [15.0, 19.0, 23.0]]  # apart: in front
    assert cube[:, [0, 2], [1, 1]].tolist() == [[1.0, 9.0], [13.0, 21.0]]  # together: in place
    assert cube[1, :, [0, 3]].shape == (3, 2)  # an int is a basic index (PyTorch's, not NumPy's (2, 3))
    assert cube[[0, 1], None, [1, 2]].shape == (2, 1, 4)


def test_bool_masks_and_0d_bools() -> None:
    rows = verigrad.tensor([True, False, True])
    assert _m()[rows, 1:3].tolist() == [[1.0, 2.0], [9.0, 10.0]]
    assert _m()[_m() > 8].tolist() == [9.0, 10.0, 11.0]
    assert _m()[:, verigrad.tensor([False, True, False, True])].tolist() == [
        [1.0, 3.0],
        [5.0, 7.0],
        [9.0, 11.0],
    ]
    assert _m()[True].shape == (1, 3, 4) and _m()[verigrad.tensor(False)].shape == (0, 3, 4)
    assert _m()[1, True].tolist() == [[4.0, 5.0, 6.0, 7.0]]


def test_read_gradients_add_up_at_repeated_positions() -> None:
    x = _m(True)
    x[[0, 0, 2], [1, 1, 3]].sum().backward()
    expected = np.zeros((3, 4))
    expected[0, 1], expected[2, 3] = 2.0, 1.0
    assert x.grad.tolist() == expected.tolist()


def test_writes_keep_the_last_value_at_a_repeated_position() -> None:
    x = _m()
    x[[0, 0, 1], [1, 1, 2]] = verigrad.tensor([10.0, 20.0, 30.0], dtype="f64")
    assert x[0, 1].item() == 20.0 and x[1, 2].item() == 30.0
    x[[2], :] = 0.5  # a number, broadcast to the row
    assert x[2].tolist() == [0.5] * 4
    y = _m()
    y[[1, 1, 1]] += 1.0  # read, add, write: once, not three times (PyTorch's)
    assert y[1].tolist() == [5.0, 6.0, 7.0, 8.0]
    w = _m()
    w[True] = -1.0  # a Python bool: a 0-d bool index (a new axis), as PyTorch's
    w[0, False] = 5.0  # writes nothing
    assert w.tolist() == (-np.ones((3, 4))).tolist()
    z = _m()
    z[verigrad.tensor([True, False, True]), 0] = verigrad.tensor([-1.0, -2.0], dtype="f64")
    assert z[:, 0].tolist() == [-1.0, 4.0, -2.0]


def test_index_put_accumulates_or_keeps_the_last() -> None:
    x = verigrad.zeros(4, dtype="f64")
    idx = (verigrad.tensor([1, 1, 3]),)
    v = verigrad.tensor([1.0, 2.0, 4.0], dtype="f64")
    assert verigrad.index_put(x, idx, v, accumulate=True).tolist() == [0.0, 3.0, 0.0, 4.0]
    assert verigrad.index_put(x, idx, v).tolist() == [0.0, 2.0, 0.0, 4.0]
    assert x.index_put_(idx, v, accumulate=True) is x and x.tolist() == [0.0, 3.0, 0.0, 4.0]


def test_index_put_gradients() -> None:
    x = verigrad.zeros(4, dtype="f64").requires_grad_()
    v = verigrad.tensor([1.0, 2.0, 4.0], dtype="f64").requires_grad_()
    out = verigrad.index_put(x, (verigrad.tensor([1, 1, 3]),), v)
    (out * verigrad.tensor([1.0, 2.0, 3.0, 4.0], dtype="f64")).sum().backward()
    assert x.grad.tolist() == [1.0, 0.0, 3.0, 0.0]  # written positions take nothing from x
    assert v.grad.tolist() == [2.0, 2.0, 4.0]  # every value gets its position's gradient


def test_index_copy_masked_scatter_take_along_dim() -> None:
    x = verigrad.zeros(3, 2, dtype="f64")
    src = verigrad.tensor([[1.0, 2.0], [3.0, 4.0]], dtype="f64")
    assert x.index_copy(0, verigrad.tensor([2, 0]), src).tolist() == [[3.0, 4.0], [0.0, 0.0], [1.0, 2.0]]
    mask = verigrad.tensor([[True, False], [False, True], [True, True]])
    got = x.masked_scatter(mask, verigrad.arange(1.0, 7.0, dtype="f64"))
    assert got.tolist() == [[1.0, 0.0], [0.0, 2.0], [3.0, 4.0]]
    assert verigrad.take_along_dim(_m(), verigrad.tensor([[3], [0], [1]]), 1).tolist() == [
        [3.0],
        [4.0],
        [9.0],
    ]
    assert verigrad.take_along_dim(_m(), verigrad.tensor([11, 0])).tolist() == [11.0, 0.0]


def test_bad_keys_raise_before_any_work() -> None:
    x = _m()
    with pytest.raises(IndexError, match="index 4 is out of range for dimension 1 of size 4"):
        x[[0, 1], [0, 4]] = 100.0
    with pytest.raises(IndexError, match="could not be broadcast together"):
        x[[0, 1], [0, 1, 2]]
    with pytest.raises(IndexError, match=r"the shape of the mask \[2\] does not match"):
        x[verigrad.tensor([True, False])]
    with pytest.raises(RuntimeError, match="must have the dtype"):
        x[[0]] = verigrad.ones(4, dtype="f32")
    assert x.tolist() == M.tolist()


def test_traced_and_abstract_shapes() -> None:
    spec = verigrad.spec
    assert verigrad.check(
        lambda a, i, j: a[i, :, j], spec(["n", "m", 3]), spec(["k", 1], "i64"), spec(["k"], "i64")
    ) == spec(["k", "k", "m"])
    i, j = verigrad.tensor([0, 2]), verigrad.tensor([1, -1])
    step = verigrad.compile(lambda a, i, j: a[i, j] * 2)
    for _ in range(2):
        assert step(_m(), i, j).tolist() == [2.0, 22.0]


def test_logcumsumexp_unfold_and_flatten_by_hand() -> None:
    x = verigrad.from_numpy(np.array([0.0, 0.0, np.log(2.0)]))
    np.testing.assert_allclose(x.logcumsumexp(0).numpy(), np.log([1.0, 2.0, 4.0]), rtol=1e-15)
    assert verigrad.tensor([-np.inf, 1.0]).logcumsumexp(0).tolist() == [-np.inf, 1.0]
    w = verigrad.arange(5.0).requires_grad_()
    windows = w.unfold(0, 3, 1)
    assert windows.tolist() == [[0.0, 1.0, 2.0], [1.0, 2.0, 3.0], [2.0, 3.0, 4.0]]
    windows.sum().backward()
    assert w.grad.tolist() == [1.0, 2.0, 3.0, 2.0, 1.0]  # overlapping windows add up
    assert verigrad.zeros(2, 3, 4, 5).flatten(1, 2).shape == (2, 12, 5)
    assert verigrad.flatten(verigrad.zeros(2, 3, 4), start_dim=1).shape == (2, 12)
    with pytest.raises(verigrad.ShapeError, match="start_dim 2 comes after end_dim 1"):
        verigrad.zeros(2, 3, 4).flatten(2, 1)


def test_0d_tensors_take_dim_0_and_minus_1() -> None:
    s = verigrad.tensor(2.0)
    assert s.softmax(-1).item() == 1.0 and s.log_softmax(0).item() == 0.0
    assert s.cumsum(-1).item() == 2.0 and s.squeeze(-1).shape == () and s.unsqueeze(-1).shape == (1,)
    assert s.argsort(-1).item() == 0 and s.flatten().shape == (1,) and s.T.shape == ()
    assert s.nonzero().shape == (1, 0) and [t.tolist() for t in s.nonzero(as_tuple=True)] == [[0]]
    empty = verigrad.zeros(0, 3, dtype="f64")
    assert np.isnan(empty.mean().item()) and np.isnan(empty.var(0).numpy()).all()
    assert empty.logsumexp(0).tolist() == [-np.inf] * 3 and empty.prod(0).tolist() == [1.0] * 3

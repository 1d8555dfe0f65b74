"""`verigrad.Size`, PyTorch's `torch.Size`: what `Tensor.shape` and `Tensor.size()` give for a concrete shape.

A symbolic shape stays a plain tuple of `Dim`s and ints; tensors made from a `Size` take it as a shape.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import verigrad
from verigrad import Size
from verigrad.shapes import Spec, as_size, dims, spec


def test_shape_and_size_are_a_size_equal_to_the_tuple() -> None:
    x = verigrad.zeros(2, 3)
    assert type(x.shape) is Size and type(x.size()) is Size
    assert isinstance(x.shape, tuple)
    assert x.shape == (2, 3) and (2, 3) == x.shape and x.shape != [2, 3]  # noqa: SIM300
    assert hash(x.shape) == hash((2, 3)) and {(2, 3): "a"}[x.shape] == "a"
    assert x.shape is x.shape  # made once per spec, not per call


def test_indexing_gives_ints_and_slicing_gives_a_size() -> None:
    s = verigrad.zeros(2, 3, 4).shape
    assert type(s[0]) is int and s[-1] == 4
    assert type(s[1:]) is Size and s[1:] == (3, 4)
    assert type(s[::-1]) is Size and s[::-1] == (4, 3, 2)
    assert type(s[5:]) is Size and s[5:] == ()
    with pytest.raises(IndexError):
        s[3]
    assert s.count(3) == 1 and s.index(4) == 2 and list(s) == [2, 3, 4] and len(s) == 3


def test_numel_repr_and_str() -> None:
    assert Size([2, 3]).numel() == 6 and Size().numel() == 1 and Size([4, 0]).numel() == 0
    assert repr(Size([2, 3])) == "verigrad.Size([2, 3])" and str(Size([])) == "verigrad.Size([])"
    assert repr(verigrad.zeros(()).shape) == "verigrad.Size([])"


def test_adding_and_repeating_give_a_size() -> None:
    s = Size([2, 3])
    for got, want in [(s + (4,), (2, 3, 4)), ((1,) + s, (1, 2, 3)), (s + s, (2, 3, 2, 3)),  # noqa: RUF005
                      (s * 2, (2, 3, 2, 3)), (2 * s, (2, 3, 2, 3)), (s * 0, ())]:  # fmt: skip
        assert type(got) is Size and got == want
    with pytest.raises(TypeError):
        s + [4]  # noqa: RUF005


def test_the_constructor_takes_an_iterable_of_ints() -> None:
    assert Size((np.int64(2), 3)) == (2, 3) and type(Size((np.int64(2),))[0]) is int
    assert Size(verigrad.tensor([4, 5])) == (4, 5)  # 0-d integer tensors are indices
    assert Size(iter([1, 2])) == (1, 2) and Size([-1]) == (-1,)  # negative sizes, as torch.Size
    with pytest.raises(TypeError, match=r"item 0 is float"):
        Size([2.0])
    with pytest.raises(TypeError, match="iterable of ints, not int"):
        Size(3)
    with pytest.raises(TypeError, match="item 1 is Dim"):
        Size([2, dims("n")])


def test_pickles_and_copies_as_a_size() -> None:
    s = verigrad.zeros(2, 3).shape
    back = pickle.loads(pickle.dumps(s))
    assert type(back) is Size and back == s
    spec_back = pickle.loads(pickle.dumps(Spec(s)))
    assert spec_back == Spec((2, 3)) and type(spec_back.size) is Size


def test_size_with_a_dim_argument() -> None:
    x = verigrad.zeros(2, 3)
    assert x.size(0) == 2 and x.size(-1) == 3 and x.size(dim=1) == 3 and x.size(-2) == 2
    with pytest.raises(IndexError, match=r"size\(2\): dimension out of range .* in \[-2, 1\]"):
        x.size(2)
    with pytest.raises(IndexError, match=r"size\(-3\)"):
        x.size(-3)
    with pytest.raises(IndexError, match=r"size\(0\).*0 dimensions"):
        verigrad.tensor(1.0).size(0)
    with pytest.raises(TypeError, match="not both"):
        x.size(0, dim=0)
    with pytest.raises(TypeError, match="must be an int, not float"):
        x.size(1.0)


def test_a_symbolic_shape_stays_a_tuple_of_dims() -> None:
    n, d = dims("n d")
    assert as_size((n, 3)) == (n, 3) and type(as_size((n, 3))) is tuple
    with verigrad.abstract():
        x = verigrad.zeros(n, d)
        y = verigrad.zeros(2, 3)
    assert type(x.shape) is tuple and x.shape == (n, d) and x.size(0) == n and x.size() == (n, d)
    assert type(y.shape) is Size and y.shape == (2, 3)
    assert spec("n 3").size == (n, 3) and x.numel() == n * d


def test_a_size_is_taken_as_a_shape() -> None:
    x = verigrad.arange(6.0).reshape(2, 3)
    for made in [verigrad.zeros(x.shape), verigrad.ones(x.shape), verigrad.empty(x.shape),
                 verigrad.full(x.shape, 2.0), verigrad.randn(x.shape), x.new_empty(x.shape),
                 x.new_zeros(x.shape), x.new_ones(x.shape), x.reshape(x.shape), x.view(x.shape),
                 x[:1].expand(x.shape)]:  # fmt: skip
        assert made.shape == (2, 3) and type(made.shape) is Size
    assert x.reshape(x.shape[::-1]).shape == (3, 2)
    held = verigrad.tensor(x.shape)  # as torch.tensor(torch.Size([2, 3])): the numbers, in i64
    assert held.tolist() == [2, 3] and held.dtype is verigrad.i64
    assert Spec(x.shape) == Spec((2, 3)) and hash(Spec(x.shape)) == hash(Spec((2, 3)))


def test_numpy_integers_given_to_an_op_show_as_ints_in_the_size() -> None:
    x = verigrad.arange(6.0).reshape(np.int64(2), 3)
    x.spec = Spec((np.int64(2), 3))  # as the op makes it when no equal spec was made before it
    assert type(x.shape) is Size and x.shape == (2, 3) and type(x.shape[0]) is int and type(x.size(0)) is int
    assert type(x.numel()) is int and x.numel() == 6

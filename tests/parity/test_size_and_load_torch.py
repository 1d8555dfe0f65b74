"""`verigrad.Size` as `torch.Size`, and `verigrad.save` / `verigrad.load` with PyTorch's signatures and
checkpoints, in both directions (`torch.load(weights_only=True)` reads what verigrad writes)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch

import verigrad
from verigrad import Size

SHAPES = [(), (0,), (2, 3), (1, 4, 1), (2, 0, 3)]


def _size_ops(s: tuple) -> list:
    """What a program does with a shape; each result with its type's name, as torch.Size's and Size's
    answers must agree on both."""
    out = [s[1:], s[::-1], s[:0], s + (5,), (5,) + s, s * 2, 2 * s, s.numel(), len(s), list(s)]  # noqa: RUF005
    out.append(s == tuple(s))
    out += [s[0], s[-1]] if len(s) else []
    return [(type(v).__name__.replace("Size", "S"), tuple(v) if isinstance(v, tuple) else v) for v in out]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_size_behaves_as_torch_size(shape: tuple) -> None:
    ours, theirs = verigrad.zeros(shape).shape, torch.zeros(shape).shape
    assert _size_ops(ours) == _size_ops(theirs)
    assert repr(ours) == repr(theirs).replace("torch", "verigrad") and str(ours) == repr(ours)
    assert hash(ours) == hash(theirs) and ours == theirs and verigrad.zeros(shape).size() == theirs


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_a_size_is_a_shape_to_the_factories_as_in_torch(shape: tuple) -> None:
    x, t = verigrad.zeros(shape), torch.zeros(shape)
    for ours, theirs in [
        (verigrad.zeros(x.shape), torch.zeros(t.shape)),
        (verigrad.ones(x.shape), torch.ones(t.shape)),
        (verigrad.full(x.shape, 2.0), torch.full(t.shape, 2.0)),
        (x.new_empty(x.shape), t.new_empty(t.shape)),
        (x.new_zeros(x.shape), t.new_zeros(t.shape)),
        (x.reshape(x.shape), t.reshape(t.shape)),
    ]:
        assert ours.shape == theirs.shape and type(ours.shape) is Size
    assert verigrad.tensor(x.shape).tolist() == torch.tensor(t.shape).tolist()  # the numbers, as data


def test_size_constructor_and_pickle_as_torch() -> None:
    for arg in [[2, 3], (np.int64(4),), [], [-1]]:
        assert tuple(Size(arg)) == tuple(torch.Size(arg))
    for bad in [[2.0], 3]:
        with pytest.raises(TypeError):
            torch.Size(bad)
        with pytest.raises(TypeError):
            Size(bad)
    assert type(pickle.loads(pickle.dumps(Size([2, 3])))) is Size


@pytest.mark.parametrize("dim", [0, 1, -1, -2, 2, -3])
def test_size_of_a_dim_as_torch(dim: int) -> None:
    x, t = verigrad.zeros(2, 3), torch.zeros(2, 3)
    if -2 <= dim < 2:
        assert x.size(dim) == t.size(dim) and x.size(dim=dim) == t.size(dim=dim)
    else:
        with pytest.raises(IndexError):
            t.size(dim)
        with pytest.raises(IndexError):
            x.size(dim)

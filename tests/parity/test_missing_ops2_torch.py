"""More functions PyTorch's OpInfo suite found missing from verigrad (`tools/opinfo_sweep.py --list-missing`),
against torch on the same inputs: values, dtypes and gradients in f64."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gradients import check_values_and_gradients

import verigrad

RNG = np.random.default_rng(12)

SEGMENTS = [
    # (reduce, data shape, axis, lengths, initial): empty runs, ties, a batch of lengths per row
    ("sum", (6,), 0, [2, 0, 3, 1], None),
    ("mean", (6, 2), 0, [2, 0, 3, 1], None),
    ("mean", (6,), 0, [2, 0, 3, 1], 1.5),
    ("max", (6, 2), 0, [2, 0, 3, 1], None),
    ("min", (6,), 0, [2, 0, 3, 1], 0.25),
    ("prod", (6,), 0, [2, 0, 3, 1], 2.0),
    ("sum", (2, 5, 3), 1, [[1, 4, 0], [0, 2, 3]], None),
    ("max", (2, 5), 1, [[1, 4, 0], [0, 2, 3]], 0.5),
]


@pytest.mark.parametrize("reduce,shape,axis,lengths,initial", SEGMENTS)
@pytest.mark.parametrize("by", ["lengths", "offsets"])
def test_segment_reduce_against_torch(reduce, shape, axis, lengths, initial, by):
    x = np.random.default_rng(3).permutation(np.prod(shape)).reshape(shape) / 4 - 1  # no ties: see below
    runs = np.array(lengths)
    starts = np.zeros((*runs.shape[:-1], 1), int)
    given = runs if by == "lengths" else np.concatenate([starts, runs.cumsum(-1)], -1)

    def call(t, x):
        return t._segment_reduce(x, reduce, **{by: t.from_numpy(given)}, axis=axis, initial=initial)

    check_values_and_gradients({"x": x}, lambda x: call(verigrad, x), lambda x: call(torch, x))


@pytest.mark.parametrize("reduce", ["max", "min"])
def test_segment_reduce_shares_a_positive_gradient_among_ties_as_torch(reduce):
    # PyTorch divides a run's gradient among its tied entries only where it is positive (README)
    x = np.array([2.0, -3.0, -2.0, -2.0, -2.0, 2.0, 2.0])
    ours = verigrad.from_numpy(x.copy()).requires_grad_()
    theirs = torch.from_numpy(x.copy()).requires_grad_()
    verigrad.segment_reduce(ours, reduce, lengths=verigrad.tensor([2, 0, 3, 2])).sum().backward()
    torch.segment_reduce(theirs, reduce, lengths=torch.tensor([2, 0, 3, 2])).sum().backward()
    np.testing.assert_array_equal(ours.grad.numpy(), theirs.grad.numpy())


def test_segment_reduce_refuses_lengths_not_covering_the_axis():
    x = verigrad.from_numpy(np.ones(4))
    with pytest.raises(verigrad.ShapeError, match="sum to the 4 entries"):
        verigrad.segment_reduce(x, "sum", lengths=verigrad.tensor([1, 2]))
    with pytest.raises(ValueError, match="non-negative"):
        verigrad.segment_reduce(x, "sum", lengths=verigrad.tensor([5, -1]))
    with pytest.raises(ValueError, match="reduce must be one of"):
        verigrad.segment_reduce(x, "median", lengths=verigrad.tensor([4]))
    with pytest.raises(verigrad.ShapeError, match="last axis"):
        verigrad.segment_reduce(x.reshape(2, 2), "sum", lengths=verigrad.tensor([1, 1]), axis=1)


@pytest.mark.parametrize(
    "shapes,dim,chunks",
    [
        ([(2, 5), (2, 3)], 1, 2),
        ([(1, 2, 3), (1, 2, 3)], -1, 5),
        ([(3, 3, 2), (1, 4, 2)], 0, 2),
        ([(4, 2, 3)], 1, 3),
    ],
)
def test_chunk_cat_against_torch(shapes, dim, chunks):
    arrays = [RNG.standard_normal(s) for s in shapes]
    ours = verigrad._chunk_cat([verigrad.from_numpy(a) for a in arrays], dim, chunks)
    theirs = torch._chunk_cat([torch.from_numpy(a) for a in arrays], dim, chunks)
    assert ours.shape == tuple(theirs.shape)
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_chunk_cat_refuses_mismatched_leading_sizes():
    with pytest.raises(verigrad.ShapeError, match="before dim 1"):
        verigrad._chunk_cat([verigrad.zeros(2, 3), verigrad.zeros(3, 3)], 1, 2)
    with pytest.raises(ValueError, match="num_chunks"):
        verigrad._chunk_cat([verigrad.zeros(2, 3)], 1, 0)

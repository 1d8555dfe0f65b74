"""Embedding's options, embedding_bag and one_hot against hand-computed values and refusals."""

from __future__ import annotations

import numpy as np
import pytest

import verigrad
import verigrad.nn.functional as F

TABLE = np.array([[3.0, 4.0], [1.0, 0.0], [0.0, 2.0]])


def test_max_norm_scales_only_the_rows_looked_up() -> None:
    w = verigrad.tensor(TABLE.copy())
    out = F.embedding(verigrad.tensor([0, 1]), w, max_norm=1.0)
    np.testing.assert_allclose(w.numpy()[0], [3 / (5 + 1e-7), 4 / (5 + 1e-7)], rtol=1e-15)
    np.testing.assert_array_equal(w.numpy()[1:], TABLE[1:])  # row 1 is within; row 2 not looked up
    np.testing.assert_array_equal(out.numpy(), w.numpy()[:2])


def test_scale_grad_by_freq_divides_by_the_lookups() -> None:
    w = verigrad.tensor(TABLE.copy()).requires_grad_()
    out = F.embedding(verigrad.tensor([0, 0, 2]), w, scale_grad_by_freq=True)
    np.testing.assert_array_equal(out.numpy(), TABLE[[0, 0, 2]])
    out.sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), [[1, 1], [0, 0], [1, 1]], rtol=1e-15)


def test_embedding_refusals() -> None:
    with pytest.raises(ValueError, match="sparse"):
        F.embedding(verigrad.tensor([0]), verigrad.tensor(TABLE), sparse=True)
    with pytest.raises(ValueError, match="padding_idx"):
        F.embedding(verigrad.tensor([0]), verigrad.tensor(TABLE), padding_idx=3)


def test_embedding_bag_by_hand() -> None:
    w, idx, offsets = verigrad.tensor(TABLE), verigrad.tensor([0, 1, 2, 2]), verigrad.tensor([0, 2, 2])
    np.testing.assert_allclose(F.embedding_bag(idx, w, offsets, mode="sum").numpy(), [[4, 4], [0, 0], [0, 4]])
    np.testing.assert_allclose(F.embedding_bag(idx, w, offsets).numpy(), [[2, 2], [0, 0], [0, 2]])
    np.testing.assert_allclose(F.embedding_bag(idx, w, offsets, mode="max").numpy(), [[3, 4], [0, 0], [0, 2]])
    mean_without_padding = F.embedding_bag(idx, w, offsets, padding_idx=1)
    np.testing.assert_allclose(mean_without_padding.numpy(), [[3, 4], [0, 0], [0, 2]])


def test_embedding_bag_refusals() -> None:
    w, idx = verigrad.tensor(TABLE), verigrad.tensor([0, 1])
    with pytest.raises(ValueError, match="mode"):
        F.embedding_bag(idx, w, verigrad.tensor([0]), mode="median")
    with pytest.raises(ValueError, match="offsets"):
        F.embedding_bag(idx, w)
    with pytest.raises(ValueError, match=r"offsets\[0\] has to be 0"):
        F.embedding_bag(idx, w, verigrad.tensor([1]))
    with pytest.raises(ValueError, match="offsets must be None"):
        F.embedding_bag(verigrad.tensor([[0, 1]]), w, verigrad.tensor([0]))


def test_one_hot_refusals() -> None:
    with pytest.raises(ValueError, match="non-negative"):
        F.one_hot(verigrad.tensor([0, -1]))
    with pytest.raises(ValueError, match="smaller than num_classes"):
        F.one_hot(verigrad.tensor([0, 3]), 3)
    np.testing.assert_array_equal(F.one_hot(verigrad.tensor([2, 0]), 3).numpy(), [[0, 0, 1], [1, 0, 0]])

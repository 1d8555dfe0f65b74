"""Distances, Unflatten and pad_sequence against hand-computed values."""

from __future__ import annotations

import math

import numpy as np
import pytest

import verigrad
import verigrad.nn.functional as F
from verigrad import nn
from verigrad.nn.utils.rnn import pad_sequence


def t(values) -> verigrad.Tensor:
    return verigrad.tensor(np.array(values, dtype=np.float64))


def test_cosine_similarity_by_hand() -> None:
    out = F.cosine_similarity(t([[1, 0], [3, 4]]), t([[0, 2], [6, 8]]))
    np.testing.assert_allclose(out.numpy(), [0, 1], atol=1e-15)
    tiny = F.cosine_similarity(t([1e-9, 0]), t([1, 0]), dim=0, eps=1e-3)  # the tiny norm is clamped
    assert math.isclose(tiny.item(), 1e-9 / 1e-3, rel_tol=1e-12)
    assert F.cosine_similarity(t([[1, 0]]), t([[1, 0], [0, 1]])).shape == (2,)  # broadcast
    assert nn.CosineSimilarity(dim=0)(t([1, 0]), t([1, 0])).item() == 1


def test_pairwise_distance_by_hand() -> None:
    out = F.pairwise_distance(t([[0, 0]]), t([[3, 4]]), eps=0.0)
    np.testing.assert_allclose(out.numpy(), [5], rtol=1e-15)
    assert nn.PairwiseDistance(p=1.0, eps=0.0, keepdim=True)(t([[0, 0]]), t([[3, 4]])).numpy().tolist() == [
        [7]
    ]


def test_unflatten_by_hand() -> None:
    x = verigrad.arange(0, 12).reshape(2, 6)
    assert nn.Unflatten(1, (2, 3))(x).shape == (2, 2, 3)
    assert nn.Unflatten(-1, [3, -1])(x).shape == (2, 3, 2)
    with pytest.raises(TypeError, match="unflattened_size"):
        nn.Unflatten(1, 6)


def test_pad_sequence_by_hand() -> None:
    a, b = t([1, 2, 3]), t([4])
    np.testing.assert_array_equal(pad_sequence([a, b]).numpy(), [[1, 4], [2, 0], [3, 0]])
    np.testing.assert_array_equal(
        pad_sequence([a, b], batch_first=True, padding_value=-1, padding_side="left").numpy(),
        [[1, 2, 3], [-1, -1, 4]],
    )
    with pytest.raises(ValueError, match="empty"):
        pad_sequence([])
    with pytest.raises(verigrad.ShapeError, match="every sequence"):
        pad_sequence([t([[1, 2]]), t([[1, 2, 3]])])


def test_alpha_dropout_keeps_a_standard_normal_standard_and_is_the_identity_in_eval() -> None:
    x = verigrad.randn(400_000, dtype=verigrad.float64, generator=verigrad.manual_seed(3))
    y = F.alpha_dropout(x, 0.2, training=True, generator=verigrad.manual_seed(4))
    assert abs(float(y.mean())) < 0.01 and abs(float(y.var()) - 1.0) < 0.01
    alpha = 1.7580993408473766
    a = 1 / math.sqrt((alpha * alpha * 0.2 + 1) * 0.8)
    dropped = np.isclose(y.numpy(), -alpha * a * 0.8, rtol=0, atol=1e-12)  # a dropped element's value
    assert 0.19 < dropped.mean() < 0.21
    assert F.alpha_dropout(x, 0.2) is x and F.alpha_dropout(x, 0.2, training=False) is x
    with pytest.raises(ValueError):
        F.alpha_dropout(x, 1.5, training=True)


@pytest.mark.parametrize("drop", [F.dropout, F.dropout2d, F.alpha_dropout])
def test_functional_dropouts_take_inplace_fourth_as_pytorch(drop):
    """F.dropout(x, p, training, inplace): the fourth argument was read as the generator (an
    AttributeError), and alpha_dropout's inplace=True left x as it was, silently."""
    x = verigrad.ones(2, 3, 4, 4)
    y = drop(x, 0.5, True, True)
    assert y is x
    assert (x.numpy() != 1.0).any()
    z = verigrad.ones(2, 3, 4, 4)
    assert drop(z, 0.5, True, False) is not z and (z.numpy() == 1.0).all()


def test_feature_alpha_dropout_of_fewer_than_two_axes_only_refuses_a_draw() -> None:
    # PyTorch: outside training, or with p = 0 or 1, any shape; a draw needs channels [N, C, ...]
    x = verigrad.tensor([1.0, -2.0, 3.0])
    for p, training in ((0.5, False), (0.0, True)):
        assert F.feature_alpha_dropout(x, p, training) is x
    assert F.feature_alpha_dropout(verigrad.tensor(2.0), 0.5, False).item() == 2.0
    np.testing.assert_array_equal(F.feature_alpha_dropout(x, 1.0, True).numpy(), [0.0, 0.0, 0.0])
    with pytest.raises(verigrad.ShapeError, match="at least 2 dimensions"):
        F.feature_alpha_dropout(x, 0.5, True)

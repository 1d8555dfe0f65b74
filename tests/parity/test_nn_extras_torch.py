"""Embedding's options, EmbeddingBag, one_hot's refusals, distances, Unflatten, pad_sequence and the
initialisers against PyTorch's: values, dtypes, shapes and f64 gradients."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from gradients import check_values_and_gradients as _check

import verigrad
import verigrad.nn.functional as F
from verigrad import nn

RNG = np.random.default_rng(31)
TIGHT = {"rtol": 1e-12, "atol": 1e-12}


def _both(x: np.ndarray) -> tuple[verigrad.Tensor, torch.Tensor]:
    return verigrad.tensor(x), torch.from_numpy(np.array(x))


@pytest.mark.parametrize(
    ("values", "num_classes", "message"),
    [
        ([0, -1], -1, "Class values must be non-negative"),
        ([0, 3], 2, "Class values must be smaller than num_classes"),
        ([], -1, "Can not infer total number of classes from empty tensor"),
    ],
)
def test_one_hot_refuses_as_torch(values, num_classes, message) -> None:
    with pytest.raises(RuntimeError, match=message):
        TF.one_hot(torch.tensor(values, dtype=torch.int64), num_classes)
    with pytest.raises(ValueError, match=message):
        F.one_hot(verigrad.tensor(np.array(values, dtype=np.int64)), num_classes)


def test_one_hot_values_and_dtype() -> None:
    ours, theirs = _both(np.array([[2, 0], [1, 1]]))
    out, expected = F.one_hot(ours, 4), TF.one_hot(theirs, 4)
    assert out.dtype.name == "i64" and out.shape == tuple(expected.shape)
    np.testing.assert_array_equal(out.numpy(), expected.numpy())
    assert F.one_hot(verigrad.tensor(np.zeros(0, np.int64)), 3).shape == (0, 3)
    with pytest.raises(TypeError, match="integer classes of dtype i64"):
        F.one_hot(verigrad.tensor([0.0, 1.0]))


IDX = np.array([[0, 2, 4], [2, 2, 1]])


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"padding_idx": 2},
        {"padding_idx": -1},
        {"scale_grad_by_freq": True},
        {"scale_grad_by_freq": True, "padding_idx": 1},
    ],
)
def test_embedding_options(kwargs) -> None:
    w = RNG.standard_normal((5, 3))
    ours_idx, theirs_idx = _both(IDX)
    _check(
        {"w": w},
        lambda w: F.embedding(ours_idx, w, **kwargs),
        lambda w: TF.embedding(theirs_idx, w, **kwargs),
    )


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0])
def test_embedding_max_norm_renormalises_the_used_rows_in_place(norm_type) -> None:
    w = RNG.standard_normal((5, 3)) * 2
    ours_w, theirs_w = _both(w)
    ours_idx, theirs_idx = _both(IDX)
    out = F.embedding(ours_idx, ours_w, max_norm=1.5, norm_type=norm_type)
    expected = TF.embedding(theirs_idx, theirs_w, max_norm=1.5, norm_type=norm_type)
    np.testing.assert_allclose(out.numpy(), expected.numpy(), **TIGHT)
    np.testing.assert_allclose(ours_w.numpy(), theirs_w.numpy(), **TIGHT)  # row 3 untouched
    np.testing.assert_array_equal(ours_w.numpy()[3], w[3])


def test_embedding_module_options() -> None:
    torch.manual_seed(0)
    theirs = torch.nn.Embedding(5, 3, padding_idx=0, max_norm=1.0, scale_grad_by_freq=True).double()
    ours = nn.Embedding(5, 3, padding_idx=0, max_norm=1.0, scale_grad_by_freq=True, dtype="f64")
    ours.load_state_dict({"weight": theirs.weight.detach().numpy().copy()})
    assert repr(ours) == repr(theirs)
    out, expected = ours(verigrad.tensor(IDX)), theirs(torch.from_numpy(IDX))
    np.testing.assert_allclose(out.numpy(), expected.detach().numpy(), **TIGHT)
    (out * out).sum().backward()
    (expected * expected).sum().backward()
    np.testing.assert_allclose(ours.weight.grad.numpy(), theirs.weight.grad.numpy(), **TIGHT)
    with pytest.raises(ValueError, match="sparse"):
        nn.Embedding(5, 3, sparse=True)


BAG_INPUT = np.array([1, 2, 4, 5, 4, 3, 2, 0])


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize(
    ("offsets", "include_last_offset"),
    [([0, 3, 3, 5], False), ([0, 2, 8], True), ([0], False)],
)
@pytest.mark.parametrize(("padding_idx", "scale_grad_by_freq"), [(None, False), (2, False)])
def test_embedding_bag_with_offsets(
    mode, offsets, include_last_offset, padding_idx, scale_grad_by_freq
) -> None:
    w = RNG.standard_normal((6, 3))
    ours_input, theirs_input = _both(BAG_INPUT)
    ours_offsets, theirs_offsets = _both(np.array(offsets))
    settings = {
        "mode": mode,
        "include_last_offset": include_last_offset,
        "padding_idx": padding_idx,
        "scale_grad_by_freq": scale_grad_by_freq,
    }
    _check(
        {"w": w},
        lambda w: F.embedding_bag(ours_input, w, ours_offsets, **settings),
        lambda w: TF.embedding_bag(theirs_input, w, theirs_offsets, **settings),
    )


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_2d_input(mode) -> None:
    w = RNG.standard_normal((6, 3))
    ours_input, theirs_input = _both(np.array([[1, 2, 4], [5, 5, 0]]))
    _check(
        {"w": w},
        lambda w: F.embedding_bag(ours_input, w, mode=mode),
        lambda w: TF.embedding_bag(theirs_input, w, mode=mode),
    )


def test_embedding_bag_per_sample_weights() -> None:
    w, psw = RNG.standard_normal((6, 3)), RNG.standard_normal(8)
    ours_input, theirs_input = _both(BAG_INPUT)
    ours_offsets, theirs_offsets = _both(np.array([0, 3, 6]))
    _check(
        {"w": w, "psw": psw},
        lambda w, psw: F.embedding_bag(ours_input, w, ours_offsets, mode="sum", per_sample_weights=psw),
        lambda w, psw: TF.embedding_bag(theirs_input, w, theirs_offsets, mode="sum", per_sample_weights=psw),
    )
    with pytest.raises(ValueError, match="per_sample_weights"):
        F.embedding_bag(ours_input, verigrad.tensor(w), ours_offsets, per_sample_weights=verigrad.tensor(psw))
    with pytest.raises(ValueError, match="scale_grad_by_freq"):
        F.embedding_bag(ours_input, verigrad.tensor(w), ours_offsets, scale_grad_by_freq=True)


def test_embedding_bag_module() -> None:
    torch.manual_seed(0)
    theirs = torch.nn.EmbeddingBag(6, 3, mode="max", padding_idx=1).double()
    ours = nn.EmbeddingBag(6, 3, mode="max", padding_idx=1, dtype="f64")
    ours.load_state_dict({"weight": theirs.weight.detach().numpy().copy()})
    assert repr(ours) == repr(theirs)
    out = ours(verigrad.tensor(BAG_INPUT), verigrad.tensor(np.array([0, 4])))
    expected = theirs(torch.from_numpy(BAG_INPUT), torch.from_numpy(np.array([0, 4])))
    np.testing.assert_allclose(out.numpy(), expected.detach().numpy(), **TIGHT)
    assert out.dtype.name == "f64" and out.shape == tuple(expected.shape)


@pytest.mark.parametrize(
    ("sa", "sb", "dim"),
    [((4, 3), (4, 3), 1), ((1, 3), (4, 3), 1), ((2, 3, 4), (2, 3, 4), -1), ((5,), (5,), 0)],
)
def test_cosine_similarity(sa, sb, dim) -> None:
    a, b = RNG.standard_normal(sa), RNG.standard_normal(sb)
    _check(
        {"a": a, "b": b},
        lambda a, b: F.cosine_similarity(a, b, dim),
        lambda a, b: TF.cosine_similarity(a, b, dim),
    )
    ours, theirs = nn.CosineSimilarity(dim, eps=1e-3), torch.nn.CosineSimilarity(dim, eps=1e-3)
    _check({"a": a, "b": b}, lambda a, b: ours(a, b), lambda a, b: theirs(a, b))


def test_cosine_similarity_clamps_small_norms_as_torch() -> None:
    a, b = RNG.standard_normal((3, 4)) * 1e-9, RNG.standard_normal((3, 4))
    a[0] = 0.0
    _check({"a": a, "b": b}, lambda a, b: F.cosine_similarity(a, b), lambda a, b: TF.cosine_similarity(a, b))


@pytest.mark.parametrize(("p", "keepdim"), [(2.0, False), (1.0, True), (3.0, False), (math.inf, False)])
@pytest.mark.parametrize(("sa", "sb"), [((4, 3), (4, 3)), ((3,), (2, 3)), ((2, 1, 3), (4, 3))])
def test_pairwise_distance(p, keepdim, sa, sb) -> None:
    a, b = RNG.standard_normal(sa), RNG.standard_normal(sb)
    _check(
        {"a": a, "b": b},
        lambda a, b: F.pairwise_distance(a, b, p, 1e-6, keepdim),
        lambda a, b: TF.pairwise_distance(a, b, p, 1e-6, keepdim),
    )
    ours, theirs = nn.PairwiseDistance(p, keepdim=keepdim), torch.nn.PairwiseDistance(p, keepdim=keepdim)
    _check({"a": a, "b": b}, lambda a, b: ours(a, b), lambda a, b: theirs(a, b))


def test_unflatten() -> None:
    x = RNG.standard_normal((2, 12))
    for dim, sizes in ((1, (3, 4)), (-1, [2, -1, 3]), (0, (1, 2))):
        ours, theirs = nn.Unflatten(dim, sizes), torch.nn.Unflatten(dim, sizes)
        _check({"x": x}, lambda x: ours(x), lambda x: theirs(x))
    assert repr(nn.Unflatten(1, (3, 4))) == repr(torch.nn.Unflatten(1, (3, 4)))


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("padding_side", ["right", "left"])
def test_pad_sequence(batch_first, padding_side) -> None:
    arrays = {
        "a": RNG.standard_normal((3, 2)),
        "b": RNG.standard_normal((1, 2)),
        "c": RNG.standard_normal((4, 2)),
    }
    settings = {"batch_first": batch_first, "padding_value": -1.5, "padding_side": padding_side}
    _check(
        arrays,
        lambda a, b, c: nn.utils.rnn.pad_sequence([a, b, c], **settings),
        lambda a, b, c: torch.nn.utils.rnn.pad_sequence([a, b, c], **settings),
    )
    ints = [np.arange(3), np.arange(2)]
    out = nn.utils.rnn.pad_sequence([verigrad.tensor(v) for v in ints], True)
    expected = torch.nn.utils.rnn.pad_sequence([torch.tensor(v) for v in ints], True)
    assert out.dtype.name == "i64" and expected.dtype == torch.int64
    np.testing.assert_array_equal(out.numpy(), expected.numpy())
    from verigrad.nn.utils.rnn import pad_sequence

    with pytest.raises(ValueError, match="padding_side"):
        pad_sequence([verigrad.ones(2)], padding_side="middle")


GAINS = [
    ("linear", None),
    ("conv1d", None),
    ("conv2d", None),
    ("conv3d", None),
    ("conv_transpose1d", None),
    ("conv_transpose2d", None),
    ("conv_transpose3d", None),
    ("sigmoid", None),
    ("tanh", None),
    ("relu", None),
    ("leaky_relu", None),
    ("leaky_relu", 0.2),
    ("leaky_relu", 3),
    ("selu", None),
]


@pytest.mark.parametrize(("name", "param"), GAINS)
def test_calculate_gain(name, param) -> None:
    assert nn.init.calculate_gain(name, param) == torch.nn.init.calculate_gain(name, param)


@pytest.mark.parametrize(
    ("name", "param"), [("identity", None), ("gelu", None), ("leaky_relu", True), ("leaky_relu", "x")]
)
def test_calculate_gain_refuses_as_torch(name, param) -> None:
    with pytest.raises(ValueError):
        torch.nn.init.calculate_gain(name, param)
    with pytest.raises(ValueError):
        nn.init.calculate_gain(name, param)


def _moments(values: np.ndarray) -> tuple[float, float, float, float]:
    return values.mean(), values.std(), values.min(), values.max()


def test_trunc_normal_matches_torchs_distribution() -> None:
    ours = nn.init.trunc_normal_(verigrad.empty(400, 500), 0.5, 2.0, -1.0, 3.0).numpy()
    theirs = torch.nn.init.trunc_normal_(torch.empty(400, 500), 0.5, 2.0, -1.0, 3.0).numpy()
    assert ours.dtype == theirs.dtype == np.float32
    np.testing.assert_allclose(_moments(ours), _moments(theirs), atol=0.02)
    assert ours.min() >= -1.0 and ours.max() <= 3.0


@pytest.mark.parametrize("shape", [(3, 5), (5, 3), (4, 2, 3)])
def test_orthogonal_(shape) -> None:
    ours = nn.init.orthogonal_(verigrad.empty(*shape, dtype="f64"), gain=2.0).numpy().reshape(shape[0], -1)
    theirs = (
        torch.nn.init.orthogonal_(torch.empty(*shape, dtype=torch.float64), gain=2.0)
        .numpy()
        .reshape(shape[0], -1)
    )
    small = min(ours.shape)
    for q in (ours, theirs):
        gram = q @ q.T if q.shape[0] == small else q.T @ q
        np.testing.assert_allclose(gram, 4 * np.eye(small), atol=1e-12)


def test_sparse_() -> None:
    ours = nn.init.sparse_(verigrad.empty(10, 6), 0.25, std=0.5).numpy()
    theirs = torch.nn.init.sparse_(torch.empty(10, 6), 0.25, std=0.5).numpy()
    np.testing.assert_array_equal((ours == 0).sum(0), (theirs == 0).sum(0))


@pytest.mark.parametrize(
    ("fn", "kwargs"),
    [
        ("xavier_uniform_", {"gain": 2.0}),
        ("xavier_normal_", {"gain": 0.5}),
        ("kaiming_uniform_", {"a": 0.3, "mode": "fan_out", "nonlinearity": "leaky_relu"}),
        ("kaiming_normal_", {"mode": "fan_in", "nonlinearity": "relu"}),
        ("kaiming_uniform_", {"nonlinearity": "conv_transpose2d"}),
    ],
)
def test_fan_initialisers_match_torchs_spread(fn, kwargs) -> None:
    generator = verigrad.Generator().manual_seed(3)
    ours = getattr(nn.init, fn)(verigrad.empty(300, 40, 3), generator=generator, **kwargs).numpy()
    theirs = getattr(torch.nn.init, fn)(torch.empty(300, 40, 3), **kwargs).numpy()
    np.testing.assert_allclose(ours.std(), theirs.std(), rtol=0.03)
    if "uniform" in fn:
        np.testing.assert_allclose(np.abs(ours).max(), np.abs(theirs).max(), rtol=0.01)


def test_eye_and_constant_() -> None:
    np.testing.assert_array_equal(
        nn.init.eye_(verigrad.empty(2, 3)).numpy(), torch.nn.init.eye_(torch.empty(2, 3)).numpy()
    )
    np.testing.assert_array_equal(
        nn.init.constant_(verigrad.empty(2), val=0.5).numpy(),
        torch.nn.init.constant_(torch.empty(2), val=0.5).numpy(),
    )


def test_one_hot_num_classes_as_torch_reads_it() -> None:
    """A NumPy integer is read through __index__ (it failed in the C call); a float is a TypeError."""
    ours, theirs = _both(np.array([0, 2, 1]))
    np.testing.assert_array_equal(
        F.one_hot(ours, np.int64(3)).numpy(), TF.one_hot(theirs, np.int64(3)).numpy()
    )
    with pytest.raises(TypeError):
        TF.one_hot(theirs, 3.0)
    with pytest.raises(TypeError, match="num_classes must be an int"):
        F.one_hot(ours, 3.0)

"""Normalization layers' and functions' options against hand-computed values: BatchNorm's cumulative
average (momentum=None) and step count, its refusals, RMSNorm's default eps, F.rms_norm's signature,
F.batch_norm and local_response_norm."""

from __future__ import annotations

import numpy as np
import pytest

import verigrad
import verigrad.nn.functional as F
from verigrad import nn


def test_momentum_none_is_the_cumulative_average() -> None:
    bn = nn.BatchNorm1d(1, momentum=None, dtype="f64")
    for batch in ([1.0, 3.0], [5.0, 9.0], [0.0, 0.0]):  # means 2, 7, 0; unbiased variances 2, 8, 0
        bn(verigrad.tensor(np.array(batch)[:, None]))
    assert int(bn.num_batches_tracked.item()) == 3
    np.testing.assert_allclose(bn.running_mean.numpy(), [3.0], rtol=1e-15)
    np.testing.assert_allclose(bn.running_var.numpy(), [10.0 / 3], rtol=1e-15)


def test_step_count_is_not_moved_in_eval_or_without_running_stats() -> None:
    bn = nn.BatchNorm1d(2)
    bn(verigrad.ones(3, 2))
    bn.eval()
    bn(verigrad.ones(3, 2))
    assert bn.num_batches_tracked.dtype.name == "i64" and int(bn.num_batches_tracked.item()) == 1
    free = nn.BatchNorm1d(2, track_running_stats=False).eval()
    assert free.running_mean is None and list(free.state_dict()) == ["weight", "bias"]
    y = free(verigrad.tensor([[1.0, 2.0], [3.0, 6.0]]))  # batch statistics even in eval
    np.testing.assert_allclose(y.numpy(), [[-1, -1], [1, 1]], atol=1e-4)


def test_affine_false_has_no_parameters() -> None:
    bn = nn.BatchNorm2d(2, affine=False)
    assert bn.weight is None and bn.bias is None and list(bn.parameters()) == []


def test_one_value_per_channel_in_training_is_refused() -> None:
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        nn.BatchNorm1d(2)(verigrad.ones(1, 2))
    with pytest.raises(ValueError, match="running_mean and running_var"):
        F.batch_norm(verigrad.ones(2, 2), None, None)


def test_functional_batch_norm_in_eval_uses_the_running_statistics() -> None:
    x = verigrad.tensor([[1.0, 2.0], [3.0, 4.0]], dtype="f64")
    mean, var = verigrad.tensor([1.0, 0.0], dtype="f64"), verigrad.tensor([4.0, 1.0], dtype="f64")
    y = F.batch_norm(x, mean, var, verigrad.tensor([2.0, 1.0], dtype="f64"), eps=0.0)
    np.testing.assert_allclose(y.numpy(), [[0.0, 2.0], [2.0, 4.0]], rtol=1e-15)


def test_rms_norm_eps_defaults_to_the_dtypes_epsilon() -> None:
    x = np.array([[1e-3, 2e-3]])
    eps = float(np.finfo(np.float32).eps)
    expected = x / np.sqrt((x * x).mean() + eps)
    np.testing.assert_allclose(nn.RMSNorm(2)(verigrad.tensor(x, dtype="f32")).numpy(), expected, rtol=1e-6)
    assert nn.RMSNorm((2,)).eps is None


def test_functional_rms_norm_reads_the_shape_second() -> None:
    x = verigrad.tensor([[3.0, 4.0], [1.0, 1.0]], dtype="f64")
    y = F.rms_norm(x, (2, 2), eps=0.0)  # over all four values: mean square 27 / 4
    np.testing.assert_allclose(y.numpy(), x.numpy() / np.sqrt(27 / 4), rtol=1e-15)
    with pytest.raises(TypeError, match="normalized_shape"):
        F.rms_norm(x, verigrad.ones(2))


def test_local_response_norm_by_hand() -> None:
    x = verigrad.tensor([[[1.0], [2.0], [3.0]]], dtype="f64")  # size 2: each channel and the one before
    y = F.local_response_norm(x, 2, alpha=1.0, beta=1.0, k=1.0)
    np.testing.assert_allclose(y.numpy()[0, :, 0], [1 / 1.5, 2 / 3.5, 3 / 7.5], rtol=1e-15)
    with pytest.raises(ValueError, match="size"):
        F.local_response_norm(x, 0)


def test_local_response_norm_of_integers_truncates_the_window_mean_as_pytorch() -> None:
    # size 2: windows (0 + 1, 1 + 4, 4 + 9) / 2 truncated to 0, 2, 6 (PyTorch's avg_pool of integers)
    x = verigrad.tensor([[[1], [2], [3]]])
    out = verigrad.nn.functional.local_response_norm(x, 2, alpha=1.0, beta=1.0, k=1.0)
    np.testing.assert_allclose(out.numpy()[0, :, 0], [1.0, 2 / 3, 3 / 7], rtol=1e-6)
    empty = verigrad.zeros((0, 1, 2))
    assert verigrad.nn.functional.local_response_norm(empty, 3) is empty


@pytest.mark.parametrize("layer", [nn.InstanceNorm1d, nn.InstanceNorm2d, nn.BatchNorm1d])
def test_untracked_statistics_are_none_buffers_as_pytorchs(layer) -> None:
    """PyTorch's _NormBase registers the running statistics as None buffers where they are not tracked
    (instance norm's default): `m.running_mean is None` reads, the state dict leaves them out."""
    m = layer(3, track_running_stats=False)
    assert m.running_mean is None and m.running_var is None and m.num_batches_tracked is None
    assert list(m._buffers) == ["running_mean", "running_var", "num_batches_tracked"]
    assert "running_mean" not in m.state_dict()

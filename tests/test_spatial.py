"""Spatial layers against hand-computed values: 3-D, adaptive and integer pooling, negative padding,
interpolation's source positions, and their refusals."""

from __future__ import annotations

import numpy as np
import pytest

import verigrad
import verigrad.nn as nn
import verigrad.nn.functional as F


def t64(a) -> verigrad.Tensor:
    return verigrad.tensor(np.asarray(a, dtype=np.float64), requires_grad=True)


def test_max_pool3d_values_indices_and_gradient() -> None:
    x = t64(np.arange(2 * 2 * 4).reshape(1, 1, 2, 2, 4))
    values, indices = F.max_pool3d(x, 2, return_indices=True)
    np.testing.assert_array_equal(values.numpy(), [[[[[13.0, 15.0]]]]])
    np.testing.assert_array_equal(indices.numpy(), [[[[[13, 15]]]]])  # d H W + h W + w
    values.sum().backward()
    expect = np.zeros(16)
    expect[[13, 15]] = 1
    np.testing.assert_array_equal(x.grad.numpy().reshape(-1), expect)


def test_max_pool_ties_send_the_gradient_to_the_first_maximum() -> None:
    x = t64(np.zeros((1, 1, 3, 3)))
    out, idx = F.adaptive_max_pool2d(x, 2, return_indices=True)  # windows rows/cols [0, 2) and [1, 3)
    np.testing.assert_array_equal(idx.numpy(), [[[[0, 1], [3, 4]]]])
    out.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy()[0, 0], [[1, 1, 0], [1, 1, 0], [0, 0, 0]])


def test_avg_pool3d_divisors() -> None:
    x = t64(np.ones((1, 1, 2, 2, 2)))
    # a 3-wide window at -1 covers 2 elements and 1 padding per axis: 8 of 27 with padding counted
    np.testing.assert_allclose(F.avg_pool3d(x, 3, 2, 1).numpy(), 8 / 27)
    np.testing.assert_allclose(F.avg_pool3d(x, 3, 2, 1, count_include_pad=False).numpy(), 1.0)
    np.testing.assert_allclose(F.avg_pool3d(x, 2, divisor_override=3).numpy(), 8 / 3)


def test_adaptive_avg_pool_uneven_windows() -> None:
    x = t64(np.arange(5.0).reshape(1, 1, 5))
    # PyTorch's windows for 5 -> 3: [0, 2), [1, 4), [3, 5)
    np.testing.assert_allclose(F.adaptive_avg_pool1d(x, 3).numpy(), [[[0.5, 2.0, 3.5]]])
    np.testing.assert_allclose(
        nn.AdaptiveAvgPool3d((1, 1, 3))(x.reshape(1, 1, 1, 1, 5)).numpy().ravel(), [0.5, 2, 3.5]
    )


def test_integer_max_pool_keeps_the_dtype() -> None:
    x = verigrad.tensor(np.array([[[[-5, -7], [-9, -6]]]], dtype=np.int64))
    out = F.max_pool2d(x, 2, padding=1)
    assert out.dtype.name == "i64"
    np.testing.assert_array_equal(out.numpy(), [[[[-5, -7], [-9, -6]]]])  # padding never wins


def test_pooling_refusals() -> None:
    with pytest.raises(ValueError, match=r"max_pool3d: padding .* at most half the kernel_size"):
        F.max_pool3d(verigrad.ones(1, 1, 4, 4, 4), 2, padding=2)
    with pytest.raises(TypeError, match="avg_pool3d takes a float tensor, got i64"):
        F.avg_pool3d(verigrad.tensor(np.ones((1, 1, 2, 2, 2), dtype=np.int64)), 2)
    with pytest.raises(ValueError, match="adaptive_avg_pool3d: output_size must be an int or 3 sizes"):
        F.adaptive_avg_pool3d(verigrad.ones(1, 1, 2, 2, 2), (1, 1))
    with pytest.raises(verigrad.ShapeError, match=r"max_pool3d takes \[N, C, \*3 spatial sizes\]"):
        F.max_pool3d(verigrad.ones(2, 2), 1)

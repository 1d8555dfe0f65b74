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
    x = t64(np.ones((1, 1, 3, 3, 3)))  # not smaller than the kernel: PyTorch's avg_pool3d refuses that
    # a 3-wide window at -1 or 1 covers 2 elements and 1 padding per axis: 8 of 27 with padding counted
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


def test_integer_average_pooling_truncates_an_i64_sum_toward_zero() -> None:
    # PyTorch's i64 kernel: the window's sum (wrapping) divided by its count, rounded toward zero
    x = verigrad.tensor(np.array([[[-7, 2, 5, -1, 4, 3, -3]]], dtype=np.int64))
    assert F.avg_pool1d(x, 2).tolist() == [[[-2, 2, 3]]]  # -5 / 2, 4 / 2, 7 / 2
    assert F.avg_pool1d(x, 3, 2, 1, count_include_pad=False).tolist() == [[[-2, 2, 2, 0]]]
    assert F.avg_pool1d(x, 3, 2, 1, ceil_mode=True).tolist() == [[[-1, 2, 2, 0]]]  # -5 / 3 with the pad
    square = x[..., :6].reshape(1, 1, 2, 3)  # [[-7, 2, 5], [-1, 4, 3]]
    assert F.avg_pool2d(square, 2, divisor_override=-2).tolist() == [[[[1]]]]  # -2 / -2
    assert F.avg_pool3d(square.unsqueeze(0), (1, 2, 2)).tolist() == [[[[[0]]]]]  # -2 / 4
    big = verigrad.tensor(np.array([[[2**62, 2**62, 2**62]]], dtype=np.int64))
    assert F.avg_pool1d(big, 2, 1).tolist() == [[[-(2**62), -(2**62)]]]  # 2^63 wraps to -2^63


def test_float_pooling_takes_a_divisor_below_zero_and_pytorchs_short_sizes() -> None:
    x = verigrad.arange(16.0).reshape(1, 1, 4, 4)
    want = F.avg_pool2d(x, 2).numpy() * -2.0
    np.testing.assert_allclose(F.avg_pool2d(x, (2, 2), (), (0,), False, True, -2).numpy(), want)
    np.testing.assert_allclose(F.avg_pool2d(x, 2, padding=(1,), ceil_mode=True).numpy()[0, 0, 0, 0], 0.0)


def test_pooling_of_an_empty_batch_is_empty() -> None:
    assert F.avg_pool3d(verigrad.zeros(0, 1, 4, 5, 4), (2, 3, 1)).shape == (0, 1, 2, 1, 4)
    assert F.adaptive_avg_pool1d(verigrad.zeros(0, 8, 8), 5).shape == (0, 8, 5)
    assert F.adaptive_avg_pool3d(verigrad.zeros(0, 2, 4, 4, 4), 2).shape == (0, 2, 2, 2, 2)


def test_pooling_refusals() -> None:
    with pytest.raises(TypeError, match="max_pool1d of i64 needs return_indices=True"):
        F.max_pool1d(verigrad.tensor(np.ones((1, 1, 4), dtype=np.int64)), 2)
    with pytest.raises(ValueError, match=r"max_pool3d: padding .* at most half the kernel_size"):
        F.max_pool3d(verigrad.ones(1, 1, 4, 4, 4), 2, padding=2)
    with pytest.raises(TypeError, match="avg_pool3d of i32: PyTorch has a kernel for float and i64"):
        F.avg_pool3d(verigrad.tensor(np.ones((1, 1, 2, 2, 2), dtype=np.int32)), 2)
    with pytest.raises(ValueError, match="avg_pool2d: divisor_override must be a non-zero integer, got 0"):
        F.avg_pool2d(verigrad.ones(1, 1, 2, 2), 2, divisor_override=0)
    with pytest.raises(ValueError, match="adaptive_avg_pool3d: output_size must be an int or 3 sizes"):
        F.adaptive_avg_pool3d(verigrad.ones(1, 1, 2, 2, 2), (1, 1))
    with pytest.raises(verigrad.ShapeError, match=r"max_pool3d takes \[N, C, \*3 spatial sizes\]"):
        F.max_pool3d(verigrad.ones(2, 2), 1)


def test_interpolate_source_positions() -> None:
    x = t64(np.arange(7.0).reshape(1, 1, 7))
    # nearest: floor(i / 1.1) for scale_factor 1.1 (size 7 kept): PyTorch's 1-D kernel moves pixels
    np.testing.assert_array_equal(F.interpolate(x, scale_factor=1.1).numpy().ravel(), [0, 0, 1, 2, 3, 4, 5])
    # with recompute_scale_factor the step is 7 / 7: a copy
    out = F.interpolate(x, scale_factor=1.1, recompute_scale_factor=True)
    np.testing.assert_array_equal(out.numpy().ravel(), np.arange(7.0))
    # nearest-exact: floor((i + 0.5) * 7 / 3) = 1, 3, 5
    np.testing.assert_array_equal(F.interpolate(x, size=3, mode="nearest-exact").numpy().ravel(), [1, 3, 5])
    # linear, align_corners=False: source (i + 0.5) * 7 / 2 - 0.5 = 1.25, 4.75
    np.testing.assert_allclose(F.interpolate(x, size=2, mode="linear").numpy().ravel(), [1.25, 4.75])
    # align_corners=True: the corners meet, i * 6 / 3
    out = F.interpolate(x, size=4, mode="linear", align_corners=True)
    np.testing.assert_allclose(out.numpy().ravel(), [0, 2, 4, 6])
    # area: adaptive means over [0, 3), [2, 5), [4, 7)
    np.testing.assert_allclose(F.interpolate(x, size=3, mode="area").numpy().ravel(), [1, 3, 5])


def test_interpolate_bicubic_weights() -> None:
    # a 2x upsampling reads at t = 0.25 / 0.75 past a pixel: Keys' weights with A = -0.75
    a, t = -0.75, 0.25
    far = ((a * (1 + t) - 5 * a) * (1 + t) + 8 * a) * (1 + t) - 4 * a
    near = ((a + 2) * t - (a + 3)) * t * t + 1
    x = np.zeros((1, 1, 1, 8))
    x[0, 0, 0, 3] = 1.0
    out = F.interpolate(t64(x), size=(1, 16), mode="bicubic").numpy().ravel()
    # output 8 reads at 3.75 (floor 3, t 0.75): pixel 3 weighs near(0.75); output 9 at 4.25: far(1.25)
    np.testing.assert_allclose(out[8], ((a + 2) * 0.75 - (a + 3)) * 0.75 * 0.75 + 1)
    np.testing.assert_allclose(out[9], far)
    np.testing.assert_allclose(out[7], near)  # 3.25: t = 0.25 past pixel 3


def test_interpolate_antialias_averages_what_it_covers() -> None:
    # 6 -> 2: scale 3, so a triangle 3 wide each side of the centres 1.5 and 4.5; output 0 weighs inputs
    # 0..3 by 2/3, 1, 2/3, 1/3 (normalised: 1/4, 3/8, 1/4, 1/8), output 1 inputs 2..5 by 1/8, 1/4, 3/8, 1/4
    x = t64(np.arange(6.0).reshape(1, 1, 1, 6))
    out = F.interpolate(x, size=(1, 2), mode="bilinear", antialias=True)
    np.testing.assert_allclose(out.numpy().ravel(), [1.25, 3.75], rtol=1e-15)


def test_interpolate_refusals() -> None:
    x = verigrad.ones(1, 2, 4, 4)
    with pytest.raises(ValueError, match="anti-alias option is restricted to bilinear and bicubic"):
        F.interpolate(x, size=2, mode="nearest", antialias=True)
    with pytest.raises(ValueError, match="align_corners option can only be set"):
        F.interpolate(x, size=2, align_corners=False)
    with pytest.raises(ValueError, match="only one of size or scale_factor"):
        F.interpolate(x, size=2, scale_factor=2)
    with pytest.raises(ValueError, match="same number of spatial dimensions"):
        F.interpolate(x, size=(2, 2, 2))
    with pytest.raises(TypeError, match="mode 'nearest' takes a float or u8 tensor"):
        F.interpolate(verigrad.tensor(np.ones((1, 1, 2, 2), dtype=np.int64)), size=3)
    with pytest.raises(TypeError, match="mode 'bilinear' takes a float tensor"):
        F.interpolate(verigrad.tensor(np.ones((1, 1, 2, 2), dtype=np.int64)), size=3, mode="bilinear")


def test_negative_padding_crops() -> None:
    x = t64(np.arange(6.0).reshape(1, 6))
    np.testing.assert_array_equal(F.pad(x, (-1, 2)).numpy(), [[1, 2, 3, 4, 5, 0, 0]])
    np.testing.assert_array_equal(F.pad(x, (1, -2), mode="reflect").numpy(), [[1, 0, 1, 2, 3]])
    np.testing.assert_array_equal(F.pad(x, (2, -1), mode="replicate").numpy(), [[0, 0, 0, 1, 2, 3, 4]])
    # circular wraps around what the crop leaves: [0..4], so the two before are 3 and 4
    np.testing.assert_array_equal(F.pad(x, (2, -1), mode="circular").numpy(), [[3, 4, 0, 1, 2, 3, 4]])
    F.pad(x, (2, -1), mode="circular").sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[1, 1, 1, 2, 2, 0]])


def test_padding_layers_and_refusals() -> None:
    x = verigrad.ones(1, 1, 2, 2, 2)
    assert nn.ConstantPad3d((1, 0, 0, 1, 2, 0), 3.0)(x).shape == (1, 1, 4, 3, 3)
    assert nn.ReflectionPad1d(1)(verigrad.ones(1, 3)).shape == (1, 5)
    with pytest.raises(ValueError, match="ZeroPad2d: padding must be an int or 4 ints"):
        nn.ZeroPad2d((1, 2))
    with pytest.raises(ValueError, match="doesn't take in value argument"):
        F.pad(x, (1, 1), mode="replicate", value=1.0)
    with pytest.raises(NotImplementedError, match="padding size 2 is not supported for 5D input"):
        F.pad(x, (1, 1), mode="replicate")
    with pytest.raises(ValueError, match="would have a negative size"):
        F.pad(x, (-2, -1))


def test_conv3d_and_grouped_conv1d_by_hand() -> None:
    x = t64(np.arange(8.0).reshape(1, 1, 2, 2, 2))
    w = t64(np.ones((1, 1, 2, 1, 1)))  # sums the two depth slices
    np.testing.assert_array_equal(F.conv3d(x, w).numpy(), [[[[[4, 6], [8, 10]]]]])
    # depthwise conv1d: each channel with its own filter
    x1 = t64([[[1.0, 2.0, 3.0], [10.0, 20.0, 30.0]]])
    w1 = t64([[[1.0, 1.0]], [[1.0, -1.0]]])
    np.testing.assert_array_equal(F.conv1d(x1, w1, groups=2).numpy(), [[[3, 5], [-10, -10]]])


def test_conv_transpose3d_is_conv3ds_adjoint() -> None:
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((1, 2, 5, 3, 5)), rng.standard_normal((3, 2, 2, 2, 3))
    g = rng.standard_normal((1, 3, 3, 1, 3))  # depth 5 -> 3, and back to 5 with output_padding 1
    window = {"stride": (2, 1, 2), "padding": (1, 0, 1), "dilation": (1, 2, 1)}
    left = (F.conv3d(t64(x), t64(w), **window).numpy() * g).sum()
    right = (F.conv_transpose3d(t64(g), t64(w), **window, output_padding=(1, 0, 0)).numpy() * x).sum()
    np.testing.assert_allclose(left, right, rtol=1e-12)


def test_conv_layers_padding_mode_by_hand() -> None:
    conv = nn.Conv1d(1, 1, 3, padding=1, bias=False, padding_mode="circular", dtype="f64")
    conv.load_state_dict({"weight": verigrad.tensor(np.array([[[1.0, 0.0, 0.0]]]))})  # reads x[i - 1]
    np.testing.assert_array_equal(
        conv(verigrad.tensor([[[1.0, 2.0, 3.0]]], dtype="f64")).numpy(), [[[3, 1, 2]]]
    )
    with pytest.raises(ValueError, match="Conv2d: padding_mode must be one of"):
        nn.Conv2d(1, 1, 3, padding_mode="mirror")

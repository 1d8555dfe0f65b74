"""angle of real tensors, grid_sampler_2d's codes, and the aten ops PyTorch exposes under torch.*
(_softmax_backward_data, _unsafe_masked_index, _unsafe_masked_index_put_accumulate), against values
derived by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

import verigrad
from verigrad import DTypeError


def test_angle_of_real_numbers() -> None:
    x = verigrad.tensor([-2.0, -0.0, 0.0, 3.0, -math.inf, math.nan], requires_grad=True)
    out = verigrad.angle(x)
    np.testing.assert_array_equal(out.numpy()[:5], np.float32([math.pi, 0, 0, 0, math.pi]))
    assert math.isnan(out.numpy()[5])
    out.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.zeros(6))  # 0 at NaN too, as PyTorch's
    assert verigrad.tensor([-1, 2]).angle().dtype is verigrad.float32
    assert verigrad.angle(verigrad.tensor([True])).dtype is verigrad.float32
    with pytest.raises(TypeError, match="verigrad has no complex numbers"):
        verigrad.angle(np.array([1j]))


def test_softmax_backward_data_is_softmaxs_gradient() -> None:
    x = verigrad.tensor([[0.5, -1.0, 2.0], [0.0, 0.0, 1.0]], requires_grad=True)
    g = verigrad.tensor([[1.0, 2.0, -1.0], [0.5, 0.0, 0.0]])
    y = verigrad.softmax(x, -1)
    (y * g).sum().backward()
    got = verigrad._softmax_backward_data(g, y.detach(), 1, verigrad.float64)
    assert got.dtype is verigrad.float64
    np.testing.assert_allclose(got.numpy(), x.grad.numpy(), rtol=1e-6)


def test_unsafe_masked_index_clamps_where_masked_off() -> None:
    x = verigrad.tensor([[1.0, 2.0], [3.0, 4.0]])
    rows = verigrad.tensor([[0], [5]])  # 5 is out of range, under a False mask
    cols = verigrad.tensor([[1, 0]])
    mask = verigrad.tensor([[True, True], [False, False]])
    out = verigrad._unsafe_masked_index(x, mask, [rows, cols], -7.0)
    np.testing.assert_array_equal(out.numpy(), [[2.0, 1.0], [-7.0, -7.0]])
    with pytest.raises(DTypeError, match="mask must be a bool tensor"):
        verigrad._unsafe_masked_index(x, rows, [rows, cols], 0.0)


def test_unsafe_masked_index_put_accumulate_adds_what_the_mask_keeps() -> None:
    x = verigrad.zeros(2, 2)
    rows, cols = verigrad.tensor([[0], [9]]), verigrad.tensor([[1, 1]])
    mask = verigrad.tensor([[True, True], [False, True]])
    values = verigrad.tensor([[1.0, 2.0], [4.0, 8.0]])
    out = verigrad._unsafe_masked_index_put_accumulate(x, mask, [rows, cols], values)
    np.testing.assert_array_equal(out.numpy(), [[0.0, 3.0], [0.0, 8.0]])  # row 9 clamped to 1


def test_grid_sampler_2d_codes() -> None:
    rng = np.random.default_rng(0)
    image = verigrad.from_numpy(rng.standard_normal((1, 2, 4, 5)))
    grid = verigrad.from_numpy(rng.uniform(-1.2, 1.2, (1, 3, 3, 2)))
    for mode, mode_name in enumerate(["bilinear", "nearest", "bicubic"]):
        for padding, padding_name in enumerate(["zeros", "border", "reflection"]):
            want = verigrad.nn.functional.grid_sample(image, grid, mode_name, padding_name, True)
            got = verigrad.grid_sampler_2d(image, grid, mode, padding, True)
            np.testing.assert_array_equal(got.numpy(), want.numpy())
    with pytest.raises(ValueError, match="padding_mode must be one of"):
        verigrad.grid_sampler_2d(image, grid, 0, 3, False)


def test_grid_sampler_3d_reads_the_volume() -> None:
    volume = verigrad.arange(0, 8, dtype=verigrad.float64).reshape(1, 1, 2, 2, 2)  # value = 4 z + 2 y + x
    corners = [[-1.0, -1.0, -1.0], [1.0, 1.0, 1.0], [1.0, -1.0, 1.0], [0.0, 0.0, 0.0], [3.0, 0.0, 0.0]]
    grid = verigrad.tensor(corners, dtype=verigrad.float64).reshape(1, 1, 1, 5, 3)
    out = verigrad.grid_sampler_3d(volume, grid, 0, 0, True).numpy().ravel()
    # align_corners: -1 and 1 are the corners' centres; the centre is the mean; x = 3 lies outside (zeros)
    np.testing.assert_allclose(out, [0.0, 7.0, 5.0, 3.5, 0.0])
    border = verigrad.grid_sampler_3d(volume, grid, 0, 1, True).numpy().ravel()
    assert border[4] == 4 * 0.5 + 2 * 0.5 + 1  # x clamped to the border
    nearest = verigrad.grid_sampler_3d(volume, grid, 1, 0, True).numpy().ravel()
    np.testing.assert_array_equal(nearest[:3], [0.0, 7.0, 5.0])
    with pytest.raises(verigrad.ShapeError, match="bicubic takes a 4-D input"):  # as PyTorch's
        verigrad.grid_sampler_3d(volume, grid, 2, 0, True)
    with pytest.raises(verigrad.ShapeError, match="grid_sampler_3d takes input"):
        verigrad.grid_sampler_3d(volume, grid[..., :2], 0, 0, True)


@pytest.mark.parametrize(
    "call",
    [
        lambda: verigrad.complex(verigrad.tensor([1.0]), verigrad.tensor([2.0])),
        lambda: verigrad.polar(verigrad.tensor([1.0]), verigrad.tensor([2.0])),
        lambda: verigrad.view_as_complex(verigrad.zeros(2, 2)),
        lambda: verigrad.view_as_real(verigrad.zeros(2)),
        lambda: verigrad.zeros(2).cfloat(),
        lambda: verigrad.zeros(2).cdouble(),
    ],
)
def test_complex_entry_points_say_complex_numbers_are_unsupported(call) -> None:
    with pytest.raises(NotImplementedError, match="verigrad has no complex numbers"):
        call()

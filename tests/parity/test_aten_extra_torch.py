"""angle, grid_sampler_2d, _softmax_backward_data, _unsafe_masked_index and
_unsafe_masked_index_put_accumulate against PyTorch's: values, dtypes and gradients."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import verigrad


def _v(a: np.ndarray, grad: bool = False) -> verigrad.Tensor:
    t = verigrad.from_numpy(a.copy())
    return t.requires_grad_(True) if grad else t


def _t(a: np.ndarray, grad: bool = False) -> torch.Tensor:
    t = torch.from_numpy(a.copy())
    return t.requires_grad_(True) if grad else t


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.int16, np.uint8, np.bool_])
def test_angle(dtype) -> None:
    x = np.array([-3, -1, 0, 1, 2, 7]).astype(dtype)
    if dtype in (np.float32, np.float64):
        x = np.append(x, [-0.0, math.inf, -math.inf, math.nan]).astype(dtype)
    ours, theirs = verigrad.angle(_v(x)), torch.angle(_t(x))
    assert str(theirs.dtype).removeprefix("torch.") == {"f32": "float32", "f64": "float64"}[ours.dtype.name]
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_angle_gradient() -> None:
    x = np.array([-2.0, 0.0, 3.0, math.nan])
    xv, xt = _v(x, True), _t(x, True)
    verigrad.angle(xv).sum().backward()
    torch.angle(xt).sum().backward()
    np.testing.assert_array_equal(xv.grad.numpy(), xt.grad.numpy())


@pytest.mark.parametrize("dim", [0, -1])
def test_softmax_backward_data(dim) -> None:
    rng = np.random.default_rng(0)
    g, y = rng.standard_normal((4, 5)), rng.uniform(0.0, 1.0, (4, 5))
    ours = verigrad._softmax_backward_data(_v(g), _v(y), dim, verigrad.float64)
    theirs = torch._softmax_backward_data(_t(g), _t(y), dim, torch.float64)
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-13, atol=1e-15)


def _masked_case(rng: np.random.Generator):
    x = rng.standard_normal((5, 5))
    rows = rng.integers(-7, 7, (6, 1))
    cols = rng.integers(-7, 7, (1, 6))
    inside = (rows >= -5) & (rows < 5) & (cols >= -5) & (cols < 5)
    mask = inside & (rng.uniform(size=(6, 6)) < 0.7)
    return x, mask, rows, cols


def test_unsafe_masked_index_and_gradient() -> None:
    x, mask, rows, cols = _masked_case(np.random.default_rng(1))
    xv, xt = _v(x, True), _t(x, True)
    ours = verigrad._unsafe_masked_index(xv, _v(mask), [_v(rows), _v(cols)], 2.5)
    theirs = torch._unsafe_masked_index(xt, _t(mask), [_t(rows), _t(cols)], 2.5)
    np.testing.assert_array_equal(ours.numpy(), theirs.detach().numpy())
    g = np.random.default_rng(2).standard_normal((6, 6))
    (ours * _v(g)).sum().backward()
    (theirs * _t(g)).sum().backward()
    np.testing.assert_allclose(xv.grad.numpy(), xt.grad.numpy(), rtol=1e-14, atol=1e-15)


def test_unsafe_masked_index_put_accumulate_and_gradients() -> None:
    x, mask, rows, cols = _masked_case(np.random.default_rng(3))
    values = np.random.default_rng(4).standard_normal((6, 6))
    xv, xt, vv, vt = _v(x, True), _t(x, True), _v(values, True), _t(values, True)
    ours = verigrad._unsafe_masked_index_put_accumulate(xv, _v(mask), [_v(rows), _v(cols)], vv)
    theirs = torch._unsafe_masked_index_put_accumulate(xt, _t(mask), [_t(rows), _t(cols)], vt)
    np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), rtol=1e-14, atol=1e-15)
    g = np.random.default_rng(5).standard_normal((5, 5))
    (ours * _v(g)).sum().backward()
    (theirs * _t(g)).sum().backward()
    np.testing.assert_allclose(xv.grad.numpy(), xt.grad.numpy(), rtol=1e-14)
    np.testing.assert_allclose(vv.grad.numpy(), vt.grad.numpy(), rtol=1e-14)


@pytest.mark.parametrize("mode", [0, 1, 2])
@pytest.mark.parametrize("padding", [0, 1, 2])
@pytest.mark.parametrize("align", [False, True])
def test_grid_sampler_2d(mode, padding, align) -> None:
    rng = np.random.default_rng(6)
    image, grid = rng.standard_normal((2, 3, 4, 6)), rng.uniform(-1.3, 1.3, (2, 5, 3, 2))
    iv, it = _v(image, True), _t(image, True)
    ours = verigrad.grid_sampler_2d(iv, _v(grid), mode, padding, align)
    theirs = torch.grid_sampler_2d(it, _t(grid), mode, padding, align)
    np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), rtol=1e-12, atol=1e-14)
    ours.sum().backward()
    theirs.sum().backward()
    np.testing.assert_allclose(iv.grad.numpy(), it.grad.numpy(), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("mode", [0, 1])
@pytest.mark.parametrize("padding", [0, 1, 2])
@pytest.mark.parametrize("align", [False, True])
def test_grid_sampler_3d(mode, padding, align) -> None:
    rng = np.random.default_rng(7)
    volume, grid = rng.standard_normal((2, 3, 4, 5, 6)), rng.uniform(-1.3, 1.3, (2, 3, 4, 2, 3))
    vv, vt, gv, gt = _v(volume, True), _t(volume, True), _v(grid, True), _t(grid, True)
    ours = verigrad.grid_sampler_3d(vv, gv, mode, padding, align)
    theirs = torch.grid_sampler_3d(vt, gt, mode, padding, align)
    np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), rtol=1e-12, atol=1e-14)
    cot = rng.standard_normal(tuple(theirs.shape))
    (ours * _v(cot)).sum().backward()
    (theirs * _t(cot)).sum().backward()
    np.testing.assert_allclose(vv.grad.numpy(), vt.grad.numpy(), rtol=1e-12, atol=1e-14)
    ours_grid = gv.grad.numpy() if gv.grad is not None else np.zeros(grid.shape)  # nearest: none
    np.testing.assert_allclose(ours_grid, gt.grad.numpy(), rtol=1e-10, atol=1e-12)

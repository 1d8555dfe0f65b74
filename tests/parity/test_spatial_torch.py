"""Spatial layers against PyTorch in f64: pooling (1-D, 2-D, 3-D, adaptive, lp, integer), padding,
convolutions and interpolation: values, dtypes, shapes, indices and the gradients of sum(out * g)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn as tnn
import torch.nn.functional as TF

import verigrad
import verigrad.nn as vnn
import verigrad.nn.functional as VF

RTOL = 1e-12
DTYPES = {torch.float64: "f64", torch.float32: "f32", torch.int64: "i64", torch.uint8: "u8"}


def _both(x: np.ndarray, grad: bool) -> tuple[verigrad.Tensor, torch.Tensor]:
    ours = verigrad.from_numpy(x.copy())
    theirs = torch.from_numpy(x.copy())
    return (ours.requires_grad_(True), theirs.requires_grad_(True)) if grad else (ours, theirs)


def check(call: Callable[[Any, Any], Any], *arrays: np.ndarray, grad: bool = True) -> None:
    """call(F, *inputs) run with verigrad's functional (and nn) and PyTorch's: equal values, dtypes and
    shapes, equal indices where it returns (values, indices), and equal gradients of sum(out * g)."""
    pairs = [_both(a, grad) for a in arrays]
    out = call(VF, *(p[0] for p in pairs))
    expected = call(TF, *(p[1] for p in pairs))
    if isinstance(expected, tuple):
        np.testing.assert_array_equal(out[1].numpy(), expected[1].numpy())
        assert out[1].dtype.name == "i64" and expected[1].dtype == torch.int64
        out, expected = out[0], expected[0]
    assert out.shape == tuple(expected.shape)
    assert out.dtype.name == DTYPES[expected.dtype]
    np.testing.assert_allclose(out.numpy(), expected.detach().numpy(), rtol=RTOL, atol=0)
    if not grad:
        return
    g = np.random.default_rng(3).standard_normal(out.shape)
    out.backward(verigrad.from_numpy(g.copy()))
    expected.backward(torch.from_numpy(g.copy()))
    for (ours, theirs), _ in zip(pairs, arrays):
        np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=RTOL, atol=1e-15)


def _module(name: str, *args: Any, **kwargs: Any) -> Callable[[Any, Any], Any]:
    """The layer `name` of verigrad.nn or torch.nn, picked by which functional module is passed."""
    return lambda F, x: (vnn if F is VF else tnn).__dict__[name](*args, **kwargs)(x)


RNG = np.random.default_rng(0)
X5 = RNG.standard_normal((2, 3, 5, 6, 7))
TIES5 = np.maximum(np.round(X5), 0)  # ReLU-like: windows full of equal maxima
INPUTS = pytest.mark.parametrize("x5", [X5, TIES5], ids=["random", "ties"])


# pooling ------------------------------------------------------------------------------------------
@INPUTS
@pytest.mark.parametrize(
    "window",
    [
        {"kernel_size": 2},
        {"kernel_size": 3, "stride": 2, "padding": 1},
        {"kernel_size": (2, 3, 2), "stride": (1, 2, 3), "ceil_mode": True},
        {"kernel_size": 3, "dilation": 2, "padding": 1},
        {"kernel_size": 2, "stride": 2, "ceil_mode": True, "return_indices": True},
        {"kernel_size": (3, 1, 2), "padding": (1, 0, 1), "return_indices": True},
    ],
)
def test_max_pool3d(x5: np.ndarray, window: dict) -> None:
    check(lambda F, x: F.max_pool3d(x, **window), x5)
    check(lambda F, x: F.max_pool3d(x, **window), x5[0])  # unbatched
    check(_module("MaxPool3d", **window), x5)


@INPUTS
@pytest.mark.parametrize(
    "window",
    [
        {"kernel_size": 2},
        {"kernel_size": 3, "stride": 2, "padding": 1},
        {"kernel_size": 3, "stride": 2, "padding": 1, "count_include_pad": False},
        {"kernel_size": (2, 3, 2), "stride": (1, 2, 3), "ceil_mode": True},
        {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True, "count_include_pad": False},
        {"kernel_size": 2, "divisor_override": 3},
    ],
)
def test_avg_pool3d(x5: np.ndarray, window: dict) -> None:
    check(lambda F, x: F.avg_pool3d(x, **window), x5)
    check(_module("AvgPool3d", **window), x5)


@INPUTS
@pytest.mark.parametrize("size", [1, 2, 3, (4, None, 5), (7, 8, 9)])
def test_adaptive_pool3d(x5: np.ndarray, size: Any) -> None:
    check(lambda F, x: F.adaptive_avg_pool3d(x, size), x5)
    check(lambda F, x: F.adaptive_max_pool3d(x, size, True), x5)
    check(_module("AdaptiveAvgPool3d", size), x5)
    check(_module("AdaptiveMaxPool3d", size), x5)


@INPUTS
@pytest.mark.parametrize("size", [1, 3, (4, 5), (5, 2), (None, 3), 8])
def test_adaptive_pool2d_any_size(x5: np.ndarray, size: Any) -> None:
    """Windows that do not divide the input; max: the gradient to each window's first maximum."""
    check(lambda F, x: F.adaptive_avg_pool2d(x, size), x5[0])
    check(lambda F, x: F.adaptive_max_pool2d(x, size, True), x5[0])
    check(lambda F, x: F.adaptive_max_pool2d(x, size), x5[0, 0])  # unbatched


@INPUTS
@pytest.mark.parametrize("size", [1, 3, 5, 9])
def test_adaptive_pool1d(x5: np.ndarray, size: int) -> None:
    check(lambda F, x: F.adaptive_avg_pool1d(x, size), x5[0, 0])
    check(lambda F, x: F.adaptive_max_pool1d(x, size, True), x5[0, 0])
    check(_module("AdaptiveMaxPool1d", size), x5[0, 0])


@INPUTS
@pytest.mark.parametrize(
    "window",
    [
        {"kernel_size": 2},
        {
            "kernel_size": 3,
            "stride": 2,
            "padding": 1,
            "dilation": 2,
            "ceil_mode": True,
            "return_indices": True,
        },
        {"kernel_size": 3, "stride": 2, "padding": 1, "return_indices": True},
    ],
)
def test_max_pool1d_options(x5: np.ndarray, window: dict) -> None:
    check(lambda F, x: F.max_pool1d(x, **window), x5[0, 0])
    check(_module("MaxPool1d", **window), x5[0, 0])


@pytest.mark.parametrize(
    "window", [{"kernel_size": 2}, {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True}]
)
@pytest.mark.parametrize("count_include_pad", [True, False])
def test_avg_pool1d_options(window: dict, count_include_pad: bool) -> None:
    check(lambda F, x: F.avg_pool1d(x, **window, count_include_pad=count_include_pad), X5[0, 0])
    check(_module("AvgPool1d", **window, count_include_pad=count_include_pad), X5[0, 0])


@pytest.mark.parametrize("window", [{"kernel_size": 2}, {"kernel_size": 3, "stride": 2, "ceil_mode": True}])
def test_lp_pool(window: dict) -> None:
    x = np.abs(X5[0]) + 0.1
    check(lambda F, x: F.lp_pool2d(x, 2.5, **window), x)
    check(lambda F, x: F.lp_pool1d(x, 3, **window), x[0])
    check(_module("LPPool2d", 2, **window), x)
    check(_module("LPPool1d", 1.5, **window), x[0])


@pytest.mark.parametrize("dtype", [np.int64, np.uint8])
@pytest.mark.parametrize(
    "window",
    [
        {"kernel_size": 2},
        {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True, "return_indices": True},
        {"kernel_size": 2, "dilation": 2, "return_indices": True},
    ],
)
def test_integer_max_pool(dtype: type, window: dict) -> None:
    """PyTorch's CPU max pools integers in their own dtype (its padding never wins)."""
    x = RNG.integers(-50 if dtype is np.int64 else 0, 50, (2, 3, 6, 7)).astype(dtype)
    check(lambda F, x: F.max_pool2d(x, **window), x, grad=False)
    check(lambda F, x: F.max_pool3d(x, **window), x[None], grad=False)


def test_max_pool3d_all_minus_inf_indices() -> None:
    """A window of -inf only: PyTorch's index is its first element inside the input, not the padding."""
    x = np.full((1, 1, 2, 3, 3), -np.inf)
    check(lambda F, x: F.max_pool3d(x, 3, 2, 1, return_indices=True), x)

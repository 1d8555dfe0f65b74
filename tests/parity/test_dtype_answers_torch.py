"""Calls where verigrad raised and PyTorch answers, or answered where PyTorch raises, and errors that named
another function than the one called; each against torch 2.13 on the same inputs."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import verigrad

RNG = np.random.default_rng(5)


def _same(ours, theirs) -> None:
    assert ours.dtype.name == {torch.float32: "f32", torch.float64: "f64", torch.bool: "bool"}[theirs.dtype]
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


@pytest.mark.parametrize(
    "output_size,kernel,kwargs",
    [((3, 3), (2, 2), {}), ((5, 4), (2, 3), {"stride": (1, 1), "padding": 1}), ((6, 6), 3, {"dilation": 2})],
)
def test_fold_of_bool_is_true_where_any_block_is(output_size, kernel, kwargs):
    x = torch.nn.functional.unfold(torch.from_numpy(RNG.random((2, 3, *output_size)) > 0.6), kernel, **kwargs)
    x = torch.from_numpy(RNG.random(tuple(x.shape)) > 0.7)
    ours = verigrad.nn.functional.fold(verigrad.from_numpy(x.numpy()), output_size, kernel, **kwargs)
    _same(ours, torch.nn.functional.fold(x, output_size, kernel, **kwargs))


@pytest.mark.parametrize("margin", [0, 0.5, 2])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint8])
def test_margin_ranking_loss_of_integers_is_a_float_loss(margin, reduction, dtype):
    a, b = RNG.integers(0, 9, (2, 6)).astype(dtype)
    target = RNG.choice([-1, 1], 6)

    def call(t):
        args = [t.from_numpy(v.copy()) for v in (a, b, target)]
        return t.nn.functional.margin_ranking_loss(*args, margin=margin, reduction=reduction)

    _same(call(verigrad), call(torch))


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint8, np.bool_])
def test_special_round_refuses_integers_as_torch(dtype):
    x = np.array([1, 0, 1]).astype(dtype)
    with pytest.raises(NotImplementedError):
        torch.special.round(torch.from_numpy(x))
    with pytest.raises(verigrad.DTypeError, match=r"special\.round"):
        verigrad.special.round(verigrad.from_numpy(x))
    if dtype is not np.bool_:  # torch.round takes integers (and refuses bool, as verigrad.round)
        rounded = verigrad.round(verigrad.from_numpy(x)).numpy(), torch.round(torch.from_numpy(x)).numpy()
        np.testing.assert_array_equal(*rounded)


@pytest.mark.parametrize("decimals", [0, 1, -1])
def test_special_round_exp2_log1p_of_floats(decimals):
    x = RNG.standard_normal(20) * 30
    ours, theirs = verigrad.from_numpy(x.copy()), torch.from_numpy(x.copy())
    _same(verigrad.special.round(ours, decimals=decimals), torch.special.round(theirs, decimals=decimals))
    np.testing.assert_allclose(
        verigrad.special.exp2(ours / 10).numpy(), torch.special.exp2(theirs / 10).numpy(), rtol=1e-15
    )
    np.testing.assert_allclose(
        verigrad.special.log1p(ours.abs()).numpy(), torch.special.log1p(theirs.abs()).numpy(), rtol=1e-15
    )


CONV_ERRORS = [
    # (function, x shape, weight shape, bias shape, kwargs): PyTorch raises for each
    ("conv1d", (1, 2, 5), (3, 3, 3), None, {}),
    ("conv1d", (1, 2, 2), (3, 2, 5), None, {}),
    ("conv1d", (2, 5), (3, 2, 3), (4,), {}),
    ("conv1d", (1, 4, 5), (3, 2, 3), None, {"groups": 2}),
    ("conv1d", (1, 2, 5), (3, 2), None, {}),
    ("conv1d", (1, 2, 5), (3, 2, 5), None, {"padding": 1, "dilation": 2}),
    ("conv3d", (1, 2, 5, 5, 5), (3, 3, 3, 3, 3), None, {}),
    ("conv3d", (1, 2, 2, 5, 5), (3, 2, 3, 3, 3), None, {}),
    ("conv_transpose1d", (1, 2, 5), (3, 2, 3), None, {}),
    ("conv_transpose1d", (1, 2, 5), (2, 2, 3), (3,), {}),
    ("conv_transpose2d", (1, 2, 5, 5), (3, 2, 3, 3), None, {}),
    ("conv_transpose3d", (1, 2, 5, 5, 5), (3, 2, 3, 3, 3), None, {}),
    ("conv2d", (1, 2, 5, 5), (3, 2, 7, 7), None, {}),
]


@pytest.mark.parametrize("name,xs,ws,bs,kwargs", CONV_ERRORS)
def test_convolution_errors_name_the_function_called(name, xs, ws, bs, kwargs):
    def call(t):
        args = [t.ones(*xs), t.ones(*ws), t.ones(*bs) if bs else None]
        return getattr(t.nn.functional, name)(*args, **kwargs)

    with pytest.raises(RuntimeError):
        call(torch)
    with pytest.raises(verigrad.ShapeError) as caught:
        call(verigrad)
    assert str(caught.value).startswith(name), str(caught.value)


@pytest.mark.parametrize("name,nd", [("conv1d", 1), ("conv_transpose1d", 1)])
def test_conv1d_dtype_errors_name_conv1d(name, nd):
    x, w = verigrad.ones(1, 2, 5), verigrad.ones(2, 2, 3, dtype=verigrad.f64)
    with pytest.raises(verigrad.DTypeError, match=f"^{name}"):
        getattr(verigrad.nn.functional, name)(x, w)

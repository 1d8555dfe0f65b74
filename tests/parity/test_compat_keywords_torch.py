"""PyTorch's keywords that verigrad refused: factories' `layout=` (torch.strided accepted, a sparse layout a
clear NotImplementedError) and nn.functional's `input=` (`F.pad(input=x, pad=...)`), each against torch."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import verigrad

RNG = np.random.default_rng(45)


def _same(ours, theirs) -> None:
    assert tuple(ours.shape) == tuple(theirs.shape)
    assert ours.dtype.name == {torch.float32: "f32", torch.float64: "f64", torch.int64: "i64"}[theirs.dtype]
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-6, atol=1e-6)


FACTORIES = {  # deterministic ones: the values too
    "zeros": lambda t, **k: t.zeros(2, 3, **k),
    "ones": lambda t, **k: t.ones((2,), **k),
    "empty": lambda t, **k: t.empty(2, **k).zero_(),
    "full": lambda t, **k: t.full((2,), 1.5, **k),
    "zeros_like": lambda t, **k: t.zeros_like(t.ones(2, dtype=t.float64), **k),
    "ones_like": lambda t, **k: t.ones_like(t.ones(2), **k),
    "empty_like": lambda t, **k: t.empty_like(t.ones(2), **k).zero_(),
    "full_like": lambda t, **k: t.full_like(t.ones(2), 7, **k),
    "arange": lambda t, **k: t.arange(5, **k),
    "linspace": lambda t, **k: t.linspace(0, 1, 4, **k),
    "logspace": lambda t, **k: t.logspace(0, 2, 3, **k),
    "eye": lambda t, **k: t.eye(3, **k),
    "empty_strided": lambda t, **k: t.empty_strided((2, 2), (2, 1), **k).zero_(),
    "hann_window": lambda t, **k: t.hann_window(5, **k),
    "hamming_window": lambda t, **k: t.hamming_window(5, **k),
    "kaiser_window": lambda t, **k: t.kaiser_window(5, **k),
}
RANDOM = {  # PyTorch's draws are not verigrad's: shape and dtype
    "rand": lambda t, **k: t.rand(2, 3, **k),
    "randn": lambda t, **k: t.randn(2, **k),
    "rand_like": lambda t, **k: t.rand_like(t.ones(2, dtype=t.float64), **k),
    "randn_like": lambda t, **k: t.randn_like(t.ones(2), **k),
    "randint": lambda t, **k: t.randint(0, 5, (3,), **k),
    "randint_like": lambda t, **k: t.randint_like(t.ones(2), 5, **k),
    "randperm": lambda t, **k: t.randperm(4, **k),
}


@pytest.mark.parametrize("name", sorted({**FACTORIES, **RANDOM}))
def test_factories_take_layout_strided_and_refuse_sparse(name):
    make = {**FACTORIES, **RANDOM}[name]
    ours, theirs = make(verigrad, layout=verigrad.strided), make(torch, layout=torch.strided)
    if name in FACTORIES:
        _same(ours, theirs)
    else:
        assert tuple(ours.shape) == tuple(theirs.shape) and ours.layout is verigrad.strided
    assert repr(verigrad.sparse_coo) == repr(torch.sparse_coo) == "torch.sparse_coo"
    with pytest.raises(NotImplementedError, match=r"layout=torch\.sparse_coo is not supported"):
        make(verigrad, layout=verigrad.sparse_coo)
    with pytest.raises(NotImplementedError, match="dense"):
        make(verigrad, layout=verigrad.sparse_csr)


X4 = RNG.standard_normal((2, 3, 6, 6))
X3 = RNG.standard_normal((2, 3, 8))
X5 = RNG.standard_normal((1, 2, 4, 4, 4))
W2 = RNG.standard_normal((4, 3, 3, 3))
W1 = RNG.standard_normal((4, 3, 3))
WT = RNG.standard_normal((3, 2, 3, 3))
BILINEAR = RNG.standard_normal((5, 3, 4))
CALLS = {  # F.<name>(input=..., ...) as public programs write it
    "pad": lambda F, t, x: F.pad(input=x, pad=(1, 2), mode="constant", value=0.5),
    "normalize": lambda F, t, x: F.normalize(input=x, p=1.0, dim=-1),
    "unfold": lambda F, t, x: F.unfold(input=x, kernel_size=2, stride=2),
    "fold": lambda F, t, x: F.fold(input=F.unfold(x, 2), output_size=(6, 6), kernel_size=2),
    "linear": lambda F, t, x: F.linear(
        input=x, weight=t.from_numpy(W2[:, 0].reshape(4, 9)[:, :6].copy()).to(x.dtype)
    ),
    "bilinear": lambda F, t, x: F.bilinear(
        input1=x[0, 0, :, :3], input2=x[1, 0, :, :4], weight=t.from_numpy(BILINEAR.copy()).to(x.dtype)
    ),
    "conv1d": lambda F, t, x: F.conv1d(
        input=t.from_numpy(X3.copy()).to(x.dtype), weight=t.from_numpy(W1.copy()).to(x.dtype)
    ),
    "conv2d": lambda F, t, x: F.conv2d(input=x, weight=t.from_numpy(W2.copy()).to(x.dtype), padding=1),
    "conv_transpose2d": lambda F, t, x: F.conv_transpose2d(
        input=x, weight=t.from_numpy(WT.copy()).to(x.dtype)
    ),
    "conv3d": lambda F, t, x: F.conv3d(
        input=t.from_numpy(X5.copy()).to(x.dtype), weight=t.ones(1, 2, 2, 2, 2, dtype=x.dtype)
    ),
    "avg_pool2d": lambda F, t, x: F.avg_pool2d(input=x, kernel_size=2),
    "max_pool2d": lambda F, t, x: F.max_pool2d(input=x, kernel_size=3, stride=2),
    "max_pool1d": lambda F, t, x: F.max_pool1d(input=t.from_numpy(X3.copy()).to(x.dtype), kernel_size=2),
    "lp_pool2d": lambda F, t, x: F.lp_pool2d(input=x.abs(), norm_type=2, kernel_size=2),
    "adaptive_avg_pool2d": lambda F, t, x: F.adaptive_avg_pool2d(input=x, output_size=(2, 3)),
    "adaptive_max_pool2d": lambda F, t, x: F.adaptive_max_pool2d(input=x, output_size=2),
    "group_norm": lambda F, t, x: F.group_norm(input=x, num_groups=3),
    "instance_norm": lambda F, t, x: F.instance_norm(input=x),
    "layer_norm": lambda F, t, x: F.layer_norm(input=x, normalized_shape=(6,)),
    "rms_norm": lambda F, t, x: F.rms_norm(input=x, normalized_shape=(6, 6)),
    "pixel_shuffle": lambda F, t, x: F.pixel_shuffle(input=x[:, :1].repeat(1, 4, 1, 1), upscale_factor=2),
    "pixel_unshuffle": lambda F, t, x: F.pixel_unshuffle(input=x, downscale_factor=2),
    "one_hot": lambda F, t, x: F.one_hot(input=t.tensor([0, 2, 1]), num_classes=4),
}


@pytest.mark.parametrize("name", sorted(CALLS))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_functional_takes_input_by_name(name, dtype):
    x = X4.astype(dtype)
    ours = CALLS[name](verigrad.nn.functional, verigrad, verigrad.from_numpy(x.copy()))
    theirs = CALLS[name](torch.nn.functional, torch, torch.from_numpy(x.copy()))
    _same(ours, theirs)


def test_max_unpool_takes_input_by_name():
    F, TF = verigrad.nn.functional, torch.nn.functional
    x = X4.astype(np.float32)
    out, idx = F.max_pool2d(verigrad.from_numpy(x.copy()), 2, return_indices=True)
    tout, tidx = TF.max_pool2d(torch.from_numpy(x.copy()), 2, return_indices=True)
    _same(
        F.max_unpool2d(input=out, indices=idx, kernel_size=2),
        TF.max_unpool2d(input=tout, indices=tidx, kernel_size=2),
    )

"""nn's lazy layers against torch 2.13: the input size read from the first forward (or a checkpoint), the
module then its layer (type Linear, Conv2d, ...), an optimizer made before holding the parameters, the
same outputs and gradients once both hold the same weights."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import verigrad


def _net(t):
    nn = t.nn
    return nn.Sequential(
        nn.LazyConv2d(4, 3, padding=1),
        nn.LazyBatchNorm2d(),
        nn.ReLU(),
        nn.LazyConvTranspose2d(2, 2, stride=2),
        nn.Flatten(),
        nn.LazyLinear(5),
    )


def test_lazy_network_materialises_as_torchs():
    x = np.random.default_rng(0).standard_normal((2, 3, 6, 6)).astype(np.float32)
    theirs, ours = _net(torch), _net(verigrad)
    opt = verigrad.optim.SGD(ours.parameters(), lr=0.1)  # before the parameters have a shape
    theirs(torch.from_numpy(x))
    ours(verigrad.from_numpy(x))
    assert [type(m).__name__ for m in ours] == [type(m).__name__ for m in theirs]
    for attr in ("in_channels", "num_features", "in_features"):
        for o, t in zip(ours, theirs):
            assert getattr(o, attr, None) == getattr(t, attr, None)
    assert sorted(ours.state_dict()) == sorted(theirs.state_dict())
    ours.load_state_dict({k: verigrad.from_numpy(v.numpy().copy()) for k, v in theirs.state_dict().items()})
    a, b = ours(verigrad.from_numpy(x)), theirs(torch.from_numpy(x))
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-5, atol=1e-5)
    a.sum().backward()
    b.sum().backward()
    np.testing.assert_allclose(
        ours[5].weight.grad.numpy(), theirs[5].weight.grad.numpy(), rtol=1e-5, atol=1e-5
    )
    before = ours[5].weight.numpy().copy()
    opt.step()  # the optimizer made before the first forward updates the materialised weight
    np.testing.assert_allclose(ours[5].weight.numpy(), before - 0.1 * ours[5].weight.grad.numpy(), rtol=1e-6)


@pytest.mark.parametrize(
    "name,args,checkpoint",
    [
        ("LazyLinear", (3,), lambda t: t.nn.Linear(7, 3)),
        ("LazyConv1d", (4, 3), lambda t: t.nn.Conv1d(6, 4, 3)),
        ("LazyBatchNorm1d", (), lambda t: t.nn.BatchNorm1d(5)),
    ],
)
def test_lazy_layer_takes_its_size_from_a_checkpoint(name, args, checkpoint):
    theirs = checkpoint(torch)
    ours = getattr(verigrad.nn, name)(*args)
    ours.load_state_dict({k: verigrad.from_numpy(v.numpy().copy()) for k, v in theirs.state_dict().items()})
    for key, value in theirs.state_dict().items():
        np.testing.assert_array_equal(ours.state_dict()[key].numpy(), value.numpy())

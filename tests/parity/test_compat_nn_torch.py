"""aten.gelu_backward and nn.UninitializedParameter / UninitializedBuffer (and torch.nn.parameter.is_lazy)
against PyTorch's."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import verigrad

RNG = np.random.default_rng(46)
TOLERANCE = {np.float32: 1e-6, np.float64: 1e-12}  # gelu's derivative rounds as the kernels state


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("shape", [(3, 4), (), (0, 2)])
def test_aten_gelu_backward(dtype, approximate, shape):
    x = np.asarray(RNG.standard_normal(shape) * 3, dtype=dtype)
    g = np.asarray(RNG.standard_normal(shape), dtype=dtype)
    ours = verigrad.ops.aten.gelu_backward.default(
        verigrad.from_numpy(g.copy()), verigrad.from_numpy(x.copy()), approximate=approximate
    )
    theirs = torch.ops.aten.gelu_backward.default(
        torch.from_numpy(g), torch.from_numpy(x), approximate=approximate
    )
    assert ours.dtype.name == {np.float32: "f32", np.float64: "f64"}[dtype] and ours.shape == theirs.shape
    tol = TOLERANCE[dtype]
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=tol, atol=tol)
    # the same bits as backward() through F.gelu
    leaf = verigrad.from_numpy(x.copy()).requires_grad_(True)
    verigrad.nn.functional.gelu(leaf, approximate=approximate).backward(verigrad.from_numpy(g.copy()))
    np.testing.assert_array_equal(leaf.grad.numpy(), ours.numpy())


def test_aten_gelu_backward_refusals():
    x = verigrad.ones(3)
    with pytest.raises(ValueError, match="approximate"):
        verigrad.ops.aten.gelu_backward(x, x, approximate="erf")
    with pytest.raises(verigrad.ShapeError, match="grad_output"):
        verigrad.ops.aten.gelu_backward(verigrad.ones(2), x)


@pytest.mark.parametrize("lib", [torch, verigrad])
def test_uninitialized_parameter_and_buffer(lib):
    nn = lib.nn
    p = nn.UninitializedParameter()
    assert isinstance(p, nn.UninitializedParameter) and isinstance(p, nn.Parameter)
    assert not isinstance(p, nn.UninitializedBuffer) and nn.parameter.is_lazy(p)
    assert p.requires_grad and p.dtype == lib.float32
    assert nn.UninitializedParameter(requires_grad=False, dtype=lib.float64).dtype == lib.float64
    p.materialize((2, 3))
    assert tuple(p.shape) == (2, 3) and p.requires_grad and p.dtype == lib.float32
    assert not isinstance(p, nn.UninitializedParameter) and isinstance(p, nn.Parameter)
    assert not nn.parameter.is_lazy(p)
    b = nn.UninitializedBuffer()
    assert isinstance(b, nn.UninitializedBuffer) and not isinstance(b, nn.UninitializedParameter)
    assert not b.requires_grad
    b.materialize(4, dtype=lib.float64)
    assert tuple(b.shape) == (4,) and b.dtype == lib.float64 and not isinstance(b, nn.UninitializedBuffer)
    assert not nn.parameter.is_lazy(lib.ones(2))


@pytest.mark.parametrize("lib", [torch, verigrad])
def test_lazy_layers_hold_uninitialized_parameters(lib):
    nn = lib.nn
    layer, norm = nn.LazyLinear(3), nn.LazyBatchNorm1d()
    assert isinstance(layer.weight, nn.UninitializedParameter) and isinstance(
        layer.bias, nn.UninitializedParameter
    )
    assert isinstance(norm.running_mean, nn.UninitializedBuffer)
    counted = sum(p.numel() for p in layer.parameters() if not isinstance(p, nn.UninitializedParameter))
    assert counted == 0
    layer(lib.ones(2, 5))
    norm(lib.ones(4, 2))
    assert not isinstance(layer.weight, nn.UninitializedParameter) and tuple(layer.weight.shape) == (3, 5)
    assert not isinstance(norm.running_mean, nn.UninitializedBuffer)

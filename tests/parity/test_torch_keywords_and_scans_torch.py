"""Differences from PyTorch fixed together, each against torch: the running sums' signed zeros (cumsum and
logcumsumexp start from +0 / -inf, so a -0 becomes +0; a 0-d input is returned as it is), special.gammainc
and gammaincc refusing numbers, x.new_zeros(..., layout=), PyTorch's keywords for the operands of
torch.* functions (torch.sum(input=x), torch.mm(input=a, mat2=b), torch.stack(tensors=...)), and the
modules torch.autograd.grad_mode, .graph and .forward_ad."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
import torch

import verigrad

SIGNED = [-0.0, -0.0, 1.0, -1.0, -0.0, 2.5, -np.inf, np.nan]


def _bits(ours, theirs) -> None:
    want, got = theirs.detach().numpy(), ours.detach().numpy()
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


@pytest.mark.parametrize("name", ["cumsum", "cumprod", "logcumsumexp"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(8,), (2, 4), ()])
def test_running_ops_give_torchs_signed_zeros(name, dtype, shape):
    x = np.array(SIGNED, dtype=dtype)[: int(np.prod(shape))].reshape(shape)
    for dim in range(-len(shape), len(shape)) if shape else [0]:
        ours = getattr(verigrad, name)(verigrad.from_numpy(x.copy()), dim)
        _bits(ours, getattr(torch, name)(torch.from_numpy(x.copy()), dim))


@pytest.mark.parametrize("name", ["gammainc", "gammaincc"])
def test_special_gammainc_refuses_numbers_as_torch(name):
    x = np.array([0.5, 2.0])
    ours, theirs = getattr(verigrad.special, name), getattr(torch.special, name)
    for args in [(x, 2.0), (2.0, x)]:
        with pytest.raises(TypeError) as want:
            theirs(*[torch.from_numpy(a) if isinstance(a, np.ndarray) else a for a in args])
        with pytest.raises(TypeError) as got:
            ours(*[verigrad.from_numpy(a) if isinstance(a, np.ndarray) else a for a in args])
        assert str(got.value) == str(want.value)
    got = ours(input=verigrad.from_numpy(x), other=verigrad.from_numpy(x[::-1].copy()))
    want = theirs(input=torch.from_numpy(x), other=torch.from_numpy(x[::-1].copy()))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-14)  # not exact (ops/special_gamma.py)


@pytest.mark.parametrize("name", ["new_zeros", "new_ones", "new_empty"])
def test_new_factories_take_layout(name):
    def make(t):
        return getattr(t.ones(1, dtype=t.float64), name)((2, 3), layout=t.strided, pin_memory=False)

    ours, theirs = make(verigrad), make(torch)
    assert tuple(ours.shape) == tuple(theirs.shape) and ours.dtype.name == "f64"
    if name != "new_empty":
        _bits(ours, theirs)
    with pytest.raises(NotImplementedError, match="sparse_coo"):
        getattr(verigrad.ones(1), name)(2, layout=verigrad.sparse_coo)
    full = verigrad.ones(1).new_full((2,), 3.0, layout=verigrad.strided)
    _bits(full, torch.ones(1).new_full((2,), 3.0, layout=torch.strided))


X = np.array([[1.0, -2.0, 0.5], [3.0, 0.25, -1.0]])
CALLS = {  # torch.<name> with PyTorch's keywords, as public programs write them
    "add": lambda t, x: t.add(input=x, other=x, alpha=2),
    "sub_number": lambda t, x: t.sub(input=x, other=2.0),
    "pow": lambda t, x: t.pow(input=x, exponent=2),
    "exp": lambda t, x: t.exp(input=x),
    "sum": lambda t, x: t.sum(input=x, dim=1, keepdim=True),
    "mean": lambda t, x: t.mean(input=x, dim=0, dtype=t.float32),
    "std": lambda t, x: t.std(input=x, dim=0),
    "max": lambda t, x: t.max(input=x, dim=1).values,
    "argmax": lambda t, x: t.argmax(input=x, dim=1),
    "mm": lambda t, x: t.mm(input=x, mat2=x.T),
    "addmm": lambda t, x: t.addmm(input=x[:, :2], mat1=x, mat2=x.T),
    "where": lambda t, x: t.where(condition=x > 0, input=x, other=-x),
    "clamp": lambda t, x: t.clamp(input=x, min=0.0),
    "transpose": lambda t, x: t.transpose(x, dim0=0, dim1=1),
    "unsqueeze": lambda t, x: t.unsqueeze(input=x, dim=0),
    "index_select": lambda t, x: t.index_select(input=x, dim=1, index=t.tensor([2, 0])),
    "permute": lambda t, x: t.permute(input=x, dims=(1, 0)),
    "stack": lambda t, x: t.stack(tensors=[x, x], dim=1),
    "cat": lambda t, x: t.cat(tensors=[x, x], dim=0),
    "topk": lambda t, x: t.topk(input=x, k=2, dim=1).values,
    "gather": lambda t, x: t.gather(input=x, dim=1, index=t.tensor([[2], [0]])),
    "masked_fill": lambda t, x: t.masked_fill(input=x, mask=x < 0, value=0.0),
    "lerp": lambda t, x: t.lerp(input=x, end=2 * x, weight=0.5),
    "outer": lambda t, x: t.outer(input=x[0], vec2=x[1]),
    "dot": lambda t, x: t.dot(input=x[0], tensor=x[1]),
    "eq": lambda t, x: t.eq(input=x, other=x[0]),
    "softmax": lambda t, x: t.softmax(input=x, dim=1),
    "flatten": lambda t, x: t.flatten(input=x),
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_torch_functions_take_torchs_keywords(name):
    call = CALLS[name]
    _bits(call(verigrad, verigrad.from_numpy(X.copy())), call(torch, torch.from_numpy(X.copy())))


def test_keywords_keep_refusing_what_torch_refuses():
    x = verigrad.from_numpy(X.copy())
    with pytest.raises(TypeError):
        verigrad.sum(input=x, bogus=1)
    with pytest.raises(TypeError):
        verigrad.mm(input=x)


def test_autograd_submodules_import_as_torchs():
    grad_mode = importlib.import_module("verigrad.autograd.grad_mode")
    graph = importlib.import_module("verigrad.autograd.graph")
    forward_ad = importlib.import_module("verigrad.autograd.forward_ad")
    x = verigrad.ones(2, requires_grad=True)
    with graph.save_on_cpu(pin_memory=False):
        y = (x * x).sum()
    assert isinstance(y.grad_fn, graph.Node)
    y.backward()
    _bits(x.grad, torch.full((2,), 2.0))
    with grad_mode.no_grad():
        assert not (x * 2).requires_grad
    with pytest.raises(NotImplementedError, match="pack/unpack"):
        graph.saved_tensors_hooks(lambda t: t, lambda t: t)
    with pytest.raises(NotImplementedError, match="forward-mode AD"):
        forward_ad.make_dual(x, x)
    with pytest.raises(NotImplementedError, match="forward-mode AD"), forward_ad.dual_level():
        pass

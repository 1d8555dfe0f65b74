"""torch.autograd.functional against torch 2.13 in f64: jacobian (tensor and tuple inputs and outputs),
hessian, vjp, jvp, vhp, hvp, their create_graph forms differentiable again, and the module importable."""

from __future__ import annotations

import numpy as np
import torch

import verigrad

RNG = np.random.default_rng(0)
X, Y, V = RNG.standard_normal(3), RNG.standard_normal((2, 3)), RNG.standard_normal(3)


def _flat(value):
    if isinstance(value, tuple):
        return [a for v in value for a in _flat(v)]
    return [value.detach().numpy()]


def _calls(t):
    F = t.autograd.functional
    x, y, v = (t.from_numpy(a.copy()) for a in (X, Y, V))

    def pair(a, b):
        return (a.sin() * b).sum(0), (a**2).sum() * b[0, 0]

    def scalar(a):
        return (a.sin() ** 2).sum() * a.prod()

    return [
        F.jacobian(pair, (x, y)),
        F.jacobian(lambda a: a.exp() * a.sum(), x),
        F.jacobian(lambda a: (a.tanh(), a.sum()), x),
        F.hessian(scalar, x),
        F.hessian(lambda a, b: (a * b.sum(0)).sum() ** 2, (x, y)),
        F.vjp(lambda a: a.sin() * a, x, v),
        F.vjp(pair, (x, y), (v, t.tensor(2.0, dtype=t.float64))),
        F.jvp(lambda a: a.sin() * a, x, v),
        F.vhp(scalar, x, v),
        F.hvp(scalar, x, v),
    ]


def test_autograd_functional_against_torch():
    for got, want in zip(_calls(verigrad), _calls(torch), strict=True):
        flat_got, flat_want = _flat(got), _flat(want)
        assert len(flat_got) == len(flat_want)
        for a, b in zip(flat_got, flat_want):
            assert a.shape == b.shape
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


def test_create_graph_results_differentiate_again_and_the_module_imports():
    from verigrad.autograd.functional import jacobian  # as `from torch.autograd.functional import jacobian`

    grads = []
    for t, jac in ((torch, torch.autograd.functional.jacobian), (verigrad, jacobian)):
        x = t.from_numpy(X.copy()).requires_grad_()
        j = jac(lambda a: a.sin() * a.sum(), x, create_graph=True)
        assert j.requires_grad
        j.sum().backward()
        grads.append(x.grad.numpy())
        j_plain = jac(lambda a: a.sin() * a.sum(), x)
        assert not j_plain.requires_grad
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-12)

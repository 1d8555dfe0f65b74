"""torch.func against torch 2.13: functional_call (a MAML step's second-order gradients, tied weights,
buffers, strict, the module's own tensors back after the call), grad and grad_and_value; vmap refused."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import verigrad

RNG = np.random.default_rng(11)
X, Y, X2 = RNG.standard_normal((5, 3)), RNG.standard_normal((5, 1)), RNG.standard_normal((5, 3))


def _model(t):
    nn = t.nn
    return nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1)).double()


def _same_state(ours, theirs):
    ours.load_state_dict(
        {k: verigrad.from_numpy(v.detach().numpy().copy()) for k, v in theirs.state_dict().items()}
    )


def test_functional_call_maml_step_against_torch():
    theirs = _model(torch)
    ours = _model(verigrad)
    _same_state(ours, theirs)
    results = []
    for t, m in ((torch, theirs), (verigrad, ours)):
        params = dict(m.named_parameters())
        pred = t.func.functional_call(m, params, (t.from_numpy(X),))
        loss = ((pred - t.from_numpy(Y)) ** 2).mean()
        grads = t.autograd.grad(loss, list(params.values()), create_graph=True)
        fast = {n: p - 0.1 * g for (n, p), g in zip(params.items(), grads)}
        outer = ((t.func.functional_call(m, fast, t.from_numpy(X2)) - t.from_numpy(Y)) ** 2).mean()
        outer.backward()
        after = m(t.from_numpy(X)).detach().numpy()  # the module's own parameters again
        results.append([outer.item(), after] + [p.grad.numpy() for p in m.parameters()])
    for got, want in zip(results[1], results[0]):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)


def test_functional_call_ties_buffers_strict_and_restores():
    from verigrad.func import functional_call  # as `from torch.func import functional_call`

    for t, call in ((torch, torch.func.functional_call), (verigrad, functional_call)):
        nn = t.nn
        tied = nn.Sequential(nn.Embedding(4, 3), nn.Linear(3, 4, bias=False))
        tied[1].weight = tied[0].weight
        table = t.ones(4, 3, dtype=tied[0].weight.dtype)
        out = call(tied, {"0.weight": table}, (t.tensor([1, 2]),))
        assert out.detach().numpy().tolist() == [[3.0] * 4] * 2  # both names took the given tensor
        untied = call(tied, {"0.weight": table}, (t.tensor([1, 2]),), tie_weights=False)
        assert untied.detach().numpy().tolist() != out.detach().numpy().tolist()

        bn = nn.BatchNorm1d(2).eval()
        shifted = call(bn, {"running_mean": t.full((2,), 1.0)}, (t.ones(3, 2),))
        assert np.allclose(shifted.detach().numpy(), 0.0) and bn.running_mean.tolist() == [0.0, 0.0]

        lin = nn.Linear(2, 2)
        with pytest.raises(RuntimeError):
            call(lin, {"weight": t.ones(2, 2)}, (t.ones(1, 2),), strict=True)
        with pytest.raises((RuntimeError, ValueError)):  # verigrad's ShapeError is a ValueError
            call(lin, {"weight": t.ones(2, 2)}, (t.ones(1, 3),))  # the call itself fails ...
        assert not np.array_equal(lin.weight.detach().numpy(), np.ones((2, 2)))  # ... and the weight is back


def test_grad_and_grad_and_value_against_torch_func():
    x = RNG.standard_normal(4)

    def f(t):
        return lambda v, w: ((v**3).sum() * w, v.sum())

    for argnums in (0, (0, 1)):
        ours = verigrad.func.grad_and_value(f(verigrad), argnums=argnums, has_aux=True)(
            verigrad.from_numpy(x), verigrad.tensor(2.0, dtype=verigrad.float64)
        )
        theirs = torch.func.grad_and_value(f(torch), argnums=argnums, has_aux=True)(
            torch.from_numpy(x), torch.tensor(2.0, dtype=torch.float64)
        )
        (og, (ov, oa)), (tg, (tv, ta)) = ours, theirs
        for a, b in zip(og if isinstance(og, tuple) else (og,), tg if isinstance(tg, tuple) else (tg,)):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-14)
        np.testing.assert_allclose([ov.item(), oa.item()], [tv.item(), ta.item()], rtol=1e-14)
    g_ours = verigrad.func.grad(lambda v: (v.sin() ** 2).sum())(verigrad.from_numpy(x))
    g_theirs = torch.func.grad(lambda v: (v.sin() ** 2).sum())(torch.from_numpy(x))
    np.testing.assert_allclose(g_ours.numpy(), g_theirs.numpy(), rtol=1e-14)
    with pytest.raises(NotImplementedError, match=r"^vmap: verigrad has no batching transform"):
        verigrad.vmap(lambda v: v.sum())(verigrad.ones(3, 2))

"""What PyTorch programs reach for that verigrad lacked, against PyTorch 2.13: Adafactor, Muon and
SparseAdam, CyclicLR, packed sequences through the recurrent layers, MultiheadAttention with other key and
value widths, AdaptiveLogSoftmaxWithLoss, nn.init.dirac_, linalg.lstsq's drivers and pinv(hermitian=True)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import verigrad

# optimizers ---------------------------------------------------------------------------------------


def _train(lib, name: str, kwargs: dict, inits, grads, dtype: str):
    params = [lib.tensor(a, dtype=getattr(lib, dtype), requires_grad=True) for a in inits]
    opt = getattr(lib.optim, name)(params, **kwargs)
    for step in grads:
        for p, g in zip(params, step):
            p.grad = lib.tensor(g, dtype=getattr(lib, dtype))
        opt.step()
    return [p.detach().numpy().copy() for p in params], opt


OPTIMIZERS = {
    "Adafactor": ({}, [(4, 5), (3,), (2, 3, 4), ()]),
    "Adafactor options": (
        {
            "lr": 0.1,
            "beta2_decay": -0.5,
            "eps": (1e-5, 1e-2),
            "d": 1.5,
            "weight_decay": 0.1,
            "foreach": True,
            "maximize": True,
        },
        [(4, 5), (3,), (2, 3, 4)],
    ),
    "Adafactor eps1 0": ({"eps": (0.0, 0.0), "lr": 0.5}, [(3, 2), (5,)]),
    "Muon": ({}, [(4, 6), (7, 3), (5, 5)]),
    "Muon options": (
        {
            "lr": 0.02,
            "nesterov": False,
            "adjust_lr_fn": "match_rms_adamw",
            "ns_steps": 3,
            "momentum": 0.9,
            "weight_decay": 0.0,
            "ns_coefficients": (3.0, -3.2, 1.2),
            "eps": 1e-5,
        },
        [(4, 6), (7, 3)],
    ),
    "Muon original": ({"adjust_lr_fn": "original", "weight_decay": 0.3}, [(9, 2)]),
}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", OPTIMIZERS)
def test_optimizer_steps_equal_pytorchs(name: str, dtype: str) -> None:
    kwargs, shapes = OPTIMIZERS[name]
    rng = np.random.default_rng(len(name))
    inits = [rng.standard_normal(s) for s in shapes]
    grads = [[rng.standard_normal(s) for s in shapes] for _ in range(6)]
    cls = name.split()[0]
    ours, opt = _train(verigrad, cls, kwargs, inits, grads, dtype)
    theirs, topt = _train(torch, cls, kwargs, inits, grads, dtype)
    tol = 1e-12 if dtype == "float64" else 1e-6
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)
    ours_state, their_state = opt.state_dict(), topt.state_dict()
    assert ours_state["param_groups"] == their_state["param_groups"]
    for k, entry in their_state["state"].items():
        assert set(ours_state["state"][k]) == set(entry)
        for key, value in entry.items():
            np.testing.assert_allclose(ours_state["state"][k][key].numpy(), value.numpy(), rtol=tol, atol=tol)


def test_muon_is_pytorchs_bf16_newton_schulz_to_the_bit() -> None:
    from torch.optim._muon import _zeropower_via_newtonschulz

    from verigrad.optim.muon import zeropower_via_newtonschulz

    rng = np.random.default_rng(3)
    for shape in [(4, 6), (6, 4), (8, 8), (16, 5), (3, 20), (32, 24)]:
        g = rng.standard_normal(shape)
        theirs = _zeropower_via_newtonschulz(torch.from_numpy(g), (3.4445, -4.775, 2.0315), 5, 1e-7)
        ours = zeropower_via_newtonschulz(verigrad.tensor(g), (3.4445, -4.775, 2.0315), 5, 1e-7)
        np.testing.assert_array_equal(ours.numpy(), theirs.float().numpy())


def test_state_dict_loads_from_pytorchs_adafactor() -> None:
    rng = np.random.default_rng(0)
    inits = [rng.standard_normal((3, 4)), rng.standard_normal(5)]
    grads = [[rng.standard_normal(a.shape) for a in inits] for _ in range(4)]
    _, topt = _train(torch, "Adafactor", {}, inits, grads[:2], "float64")
    params = [verigrad.tensor(a, requires_grad=True) for a in _train(torch, "Adafactor", {}, inits, grads[:2],
                                                                      "float64")[0]]  # fmt: skip
    opt = verigrad.optim.Adafactor(params)
    saved = topt.state_dict()
    opt.load_state_dict({"state": {k: {n: verigrad.tensor(v.numpy()) for n, v in s.items()}
                                   for k, s in saved["state"].items()},
                         "param_groups": saved["param_groups"]})  # fmt: skip
    tparams = topt.param_groups[0]["params"]
    for step in grads[2:]:
        for p, tp, g in zip(params, tparams, step):
            p.grad, tp.grad = verigrad.tensor(g), torch.tensor(g)
        opt.step()
        topt.step()
    for p, tp in zip(params, tparams):
        np.testing.assert_allclose(p.detach().numpy(), tp.detach().numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("lib", [torch, verigrad], ids=["torch", "verigrad"])
def test_optimizer_refusals_are_pytorchs(lib) -> None:
    vector = lib.zeros(3, requires_grad=True)
    with pytest.raises(ValueError, match="Muon only supports 2D parameters"):
        lib.optim.Muon([vector])
    with pytest.raises(ValueError, match="Adjust learning rate function"):
        lib.optim.Muon([lib.zeros(2, 2, requires_grad=True)], adjust_lr_fn="nope")
    with pytest.raises(ValueError, match="beta2_decay should be <= 0"):
        lib.optim.Adafactor([vector], beta2_decay=0.5)
    with pytest.raises(ValueError, match="Clipping threshold d should be >= 1"):
        lib.optim.Adafactor([vector], d=0.5)
    opt = lib.optim.SparseAdam([vector])
    vector.grad = lib.ones(3)
    with pytest.raises(RuntimeError, match="SparseAdam does not support dense gradients"):
        opt.step()

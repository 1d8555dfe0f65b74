"""Every optimizer against `torch.optim` with two parameter groups of different settings, on a small
model in f64: 20 steps of the same model, data and loss in both frameworks; the parameters must agree
to 1e-12 after every step, and the state (`optimizer.state[p]`: names, dtypes, values) and
`state_dict()["param_groups"]` must be PyTorch's. Then the state dicts cross over: a PyTorch
optimizer's state dict loads into verigrad's, and verigrad's, saved with `verigrad.save`, loads into
PyTorch's, and both go on as the uninterrupted optimizer does. PyTorch runs its single-tensor
implementation (its CPU default); its kernels fuse multiply-adds, so the two differ by an ulp here and
there, which 1e-12 leaves room for and nothing else.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import verigrad
from verigrad import nn, optim

RTOL = ATOL = 1e-12
STEPS = 20

# id -> (class name, defaults, the weights' group settings, the biases' group settings)
CONFIGS: dict[str, tuple[str, dict[str, Any], dict[str, Any], dict[str, Any]]] = {
    "sgd": ("SGD", {"lr": 0.1, "momentum": 0.9}, {"weight_decay": 0.01, "nesterov": True},
            {"lr": 0.05, "momentum": 0.5, "dampening": 0.2}),
    "sgd-maximize": ("SGD", {"lr": 0.02}, {"maximize": True, "weight_decay": 0.1}, {"momentum": 0.3}),
    "adam": ("Adam", {"lr": 0.01}, {"weight_decay": 0.1, "amsgrad": True},
             {"lr": 0.02, "betas": (0.8, 0.99), "maximize": True}),
    "adam-decoupled": ("Adam", {"lr": 0.01, "decoupled_weight_decay": True}, {"weight_decay": 0.1},
                       {"eps": 1e-3}),
    "adamw": ("AdamW", {"lr": 0.01}, {"weight_decay": 0.1}, {"weight_decay": 0.0, "amsgrad": True}),
    "adamax": ("Adamax", {"lr": 0.02}, {"weight_decay": 0.05},
               {"betas": (0.8, 0.95), "maximize": True}),
    "nadam": ("NAdam", {"lr": 0.01}, {"decoupled_weight_decay": True, "weight_decay": 0.1},
              {"momentum_decay": 0.01, "weight_decay": 0.02}),
    "radam": ("RAdam", {"lr": 0.01}, {"decoupled_weight_decay": True, "weight_decay": 0.1},
              {"betas": (0.8, 0.99)}),
    "rmsprop": ("RMSprop", {"lr": 0.01}, {"centered": True, "momentum": 0.5},
                {"alpha": 0.9, "weight_decay": 0.1}),
    "adagrad": ("Adagrad", {"lr": 0.1}, {"lr_decay": 0.01},
                {"initial_accumulator_value": 0.1, "weight_decay": 0.05}),
    "adadelta": ("Adadelta", {"lr": 1.0}, {"rho": 0.8}, {"lr": 0.5, "weight_decay": 0.1, "eps": 1e-4}),
    "rprop": ("Rprop", {"lr": 0.01}, {"etas": (0.3, 1.5)}, {"step_sizes": (1e-4, 0.05), "lr": 0.02}),
    "rprop-maximize": ("Rprop", {"lr": 0.01, "maximize": True}, {}, {"lr": 0.003}),
    "asgd": ("ASGD", {"lr": 0.05}, {"t0": 5.0, "lambd": 1e-3},
             {"lr": 0.02, "alpha": 0.5, "weight_decay": 0.01}),
}  # fmt: skip


def _models() -> tuple[Any, Any]:
    """The same two-layer model in both frameworks, in f64."""
    rng = np.random.default_rng(0)
    weights = [rng.standard_normal((6, 4)) * 0.5, rng.standard_normal(6) * 0.1]
    weights += [rng.standard_normal((3, 6)) * 0.5, rng.standard_normal(3) * 0.1]
    ours = nn.Sequential(nn.Linear(4, 6, dtype="f64"), nn.Tanh(), nn.Linear(6, 3, dtype="f64"))
    theirs = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.Tanh(), torch.nn.Linear(6, 3)).double()
    with torch.no_grad():
        for p, q, w in zip(ours.parameters(), theirs.parameters(), weights):
            p.data = verigrad.tensor(w.copy())
            q.copy_(torch.from_numpy(w))
    return ours, theirs


def _groups(model: Any, weights: dict[str, Any], biases: dict[str, Any]) -> list[dict[str, Any]]:
    params = list(model.parameters())
    return [{"params": params[0::2], **weights}, {"params": params[1::2], **biases}]


def _pair(config: str) -> tuple[Any, Any, Any, Any]:
    name, defaults, weights, biases = CONFIGS[config]
    ours, theirs = _models()
    ours_opt = getattr(optim, name)(_groups(ours, weights, biases), **defaults)
    theirs_opt = getattr(torch.optim, name)(_groups(theirs, weights, biases), **defaults)
    return ours, theirs, ours_opt, theirs_opt


def _batch(step: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(100 + step)
    return rng.standard_normal((8, 4)), rng.standard_normal((8, 3))


def _step(model: Any, opt: Any, step: int, lib: Any, extra: Any = None) -> None:
    x, y = (lib.tensor(a) for a in _batch(step))
    opt.zero_grad()
    ((model(x) - y) ** 2).mean().backward()
    if extra is not None:  # a parameter outside the model, with a gradient of its own
        extra.grad = lib.tensor(np.full(3, 0.1 * step - 0.3))
    opt.step()


def _assert_params(ours: Any, theirs: Any, when: str) -> None:
    for i, (p, q) in enumerate(zip(ours.parameters(), theirs.parameters())):
        assert p.dtype.name == "f64" and p.shape == tuple(q.shape)
        np.testing.assert_allclose(
            p.numpy(), q.detach().numpy(), rtol=RTOL, atol=ATOL, err_msg=f"{i}, {when}"
        )


def _dtype_name(t: torch.Tensor) -> str:
    return {torch.float64: "f64", torch.float32: "f32"}[t.dtype]


def _assert_state(ours: Any, theirs: Any, ours_opt: Any, theirs_opt: Any) -> None:
    for i, (p, q) in enumerate(zip(ours.parameters(), theirs.parameters())):
        mine, want = ours_opt.state[p], theirs_opt.state[q]
        assert list(mine) == list(want), f"parameter {i}: state names"
        for name, value in want.items():
            got = mine[name]
            assert got.dtype.name == _dtype_name(value), f"parameter {i}: {name}'s dtype"
            np.testing.assert_allclose(
                got.numpy(), value.numpy(), rtol=RTOL, atol=ATOL, err_msg=f"{i}: {name}"
            )
    groups, their_groups = ours_opt.state_dict()["param_groups"], theirs_opt.state_dict()["param_groups"]
    assert groups == their_groups


@pytest.mark.parametrize("config", list(CONFIGS))
def test_two_groups_match_torch_step_for_step(config: str) -> None:
    ours, theirs, ours_opt, theirs_opt = _pair(config)
    start = [p.numpy().copy() for p in ours.parameters()]
    for step in range(STEPS):
        if step == 10:  # a schedule written by hand: takes effect at the next step
            for opt in (ours_opt, theirs_opt):
                for group in opt.param_groups:
                    group["lr"] *= 0.5
        _step(ours, ours_opt, step, verigrad)
        _step(theirs, theirs_opt, step, torch)
        _assert_params(ours, theirs, f"after step {step + 1}")
    _assert_state(ours, theirs, ours_opt, theirs_opt)
    assert repr(ours_opt) == repr(theirs_opt)
    moved = max(float(np.abs(p.numpy() - s).max()) for p, s in zip(ours.parameters(), start))
    assert moved > 1e-2, "the parameters barely moved; the comparison would prove little"


def _to_verigrad(value: Any) -> Any:
    """A PyTorch state dict with its tensors made verigrad tensors (`verigrad.tensor(t.numpy())`)."""
    if isinstance(value, torch.Tensor):
        return verigrad.tensor(value.numpy())
    if isinstance(value, dict):
        return {k: _to_verigrad(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_to_verigrad(v) for v in value]
    return value


@pytest.mark.parametrize("config", list(CONFIGS))
def test_a_torch_state_dict_loads_and_the_steps_go_on_as_torchs(config: str) -> None:
    """PyTorch takes 10 steps; a fresh verigrad optimizer on its model loads its state dict; both take
    10 more and agree."""
    ours, theirs, ours_opt, theirs_opt = _pair(config)
    for step in range(10):
        _step(theirs, theirs_opt, step, torch)
    for p, q in zip(ours.parameters(), theirs.parameters()):
        p.data = verigrad.tensor(q.detach().numpy().copy())
    ours_opt.load_state_dict(_to_verigrad(theirs_opt.state_dict()))
    # loading casts floating state to the parameter's dtype (NAdam's mu_product, ASGD's eta and mu
    # become f64): PyTorch's own optimizer loads its state dict too, so the two stay comparable
    theirs_opt.load_state_dict(theirs_opt.state_dict())
    for step in range(10, STEPS):
        _step(ours, ours_opt, step, verigrad)
        _step(theirs, theirs_opt, step, torch)
        _assert_params(ours, theirs, f"after step {step + 1}")
    _assert_state(ours, theirs, ours_opt, theirs_opt)


@pytest.mark.parametrize("config", list(CONFIGS))
def test_a_saved_verigrad_state_dict_loads_in_torch(config: str, tmp_path: Path) -> None:
    """verigrad takes 10 steps and saves its state dict with `verigrad.save`; `torch.load` reads it
    (weights_only) into a fresh PyTorch optimizer, and both take 10 more and agree."""
    ours, theirs, ours_opt, theirs_opt = _pair(config)
    for step in range(10):
        _step(ours, ours_opt, step, verigrad)
    with torch.no_grad():
        for p, q in zip(ours.parameters(), theirs.parameters()):
            q.copy_(torch.from_numpy(p.numpy()))
    verigrad.save(ours_opt.state_dict(), tmp_path / "opt.pt")
    theirs_opt.load_state_dict(torch.load(tmp_path / "opt.pt", weights_only=True))
    ours_opt.load_state_dict(ours_opt.state_dict())  # the same casts as PyTorch's load made
    for step in range(10, STEPS):
        _step(ours, ours_opt, step, verigrad)
        _step(theirs, theirs_opt, step, torch)
        _assert_params(ours, theirs, f"after step {step + 1}")
    _assert_state(ours, theirs, ours_opt, theirs_opt)


def test_a_group_added_while_training_is_stepped_as_torchs() -> None:
    ours, theirs, ours_opt, theirs_opt = _pair("adam")
    extra = np.random.default_rng(7).standard_normal(3)
    ours_extra = verigrad.tensor(extra.copy()).requires_grad_()
    theirs_extra = torch.tensor(extra.copy(), requires_grad=True)
    for step in range(8):
        if step == 3:
            ours_opt.add_param_group({"params": ours_extra, "lr": 0.05})
            theirs_opt.add_param_group({"params": theirs_extra, "lr": 0.05})
        _step(ours, ours_opt, step, verigrad, ours_extra)
        _step(theirs, theirs_opt, step, torch, theirs_extra)
        _assert_params(ours, theirs, f"after step {step + 1}")
        np.testing.assert_allclose(ours_extra.numpy(), theirs_extra.detach().numpy(), rtol=RTOL, atol=ATOL)
    assert ours_opt.state_dict()["param_groups"] == theirs_opt.state_dict()["param_groups"]


OPTIMIZERS = ["SGD", "Adam", "AdamW", "Adamax", "NAdam", "RAdam", "RMSprop", "Adagrad", "Adadelta", "Rprop",
              "ASGD", "LBFGS"]  # fmt: skip
SCHEDULES = ["StepLR", "MultiStepLR", "ExponentialLR", "CosineAnnealingLR", "CosineAnnealingWarmRestarts",
             "LinearLR", "LambdaLR", "SequentialLR", "OneCycleLR", "ReduceLROnPlateau"]  # fmt: skip


@pytest.mark.parametrize(
    "name", [f"optim.{n}" for n in OPTIMIZERS] + [f"optim.lr_scheduler.{n}" for n in SCHEDULES]
)
def test_signatures_are_pytorchs(name: str) -> None:
    """The same parameters in the same order, positional or keyword-only as PyTorch's, with the same
    defaults, and the same `defaults` dict (keys in PyTorch's order, values) for each optimizer."""
    import inspect

    ours, theirs = verigrad, torch
    for part in name.split("."):
        ours, theirs = getattr(ours, part), getattr(theirs, part)
    mine, want = inspect.signature(ours).parameters, inspect.signature(theirs).parameters
    assert list(mine) == list(want)
    for key, p in want.items():
        assert (mine[key].kind, mine[key].default) == (p.kind, p.default), key
    if name.startswith("optim.lr_scheduler"):
        return
    ours_opt = ours([verigrad.zeros(2, requires_grad=True)])
    theirs_opt = theirs([torch.zeros(2, requires_grad=True)])
    assert list(ours_opt.defaults.items()) == list(theirs_opt.defaults.items())

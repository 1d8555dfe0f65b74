"""Gradient clipping, learning-rate schedules, parameter vectors and AMSGrad, against PyTorch's."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import verigrad
from verigrad import nn
from verigrad.cli.trainer import training_step
from verigrad.optim import lr_scheduler

RNG = np.random.default_rng(11)


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.5, math.inf])
@pytest.mark.parametrize("max_norm", [0.5, 100.0])
def test_clip_grad_norm(norm_type, max_norm) -> None:
    grads = [RNG.standard_normal((3, 4)), RNG.standard_normal(7), RNG.standard_normal(())]
    ours = [verigrad.zeros(*g.shape, dtype="f64", requires_grad=True) for g in grads]
    theirs = [torch.zeros(g.shape, dtype=torch.float64, requires_grad=True) for g in grads]
    for o, t, g in zip(ours, theirs, grads):
        o.grad, t.grad = verigrad.tensor(g), torch.from_numpy(g.copy())
    norm = nn.utils.clip_grad_norm_(ours, max_norm, norm_type)
    expected = torch.nn.utils.clip_grad_norm_(theirs, max_norm, norm_type)
    np.testing.assert_allclose(norm.numpy(), expected.numpy(), rtol=1e-14)
    for o, t in zip(ours, theirs):
        np.testing.assert_allclose(o.grad.numpy(), t.grad.numpy(), rtol=1e-14, atol=1e-300)
    for o, t, g in zip(ours, theirs, grads):
        o.grad, t.grad = verigrad.tensor(g), torch.from_numpy(g.copy())
    nn.utils.clip_grad_value_(ours, 0.1)
    torch.nn.utils.clip_grad_value_(theirs, 0.1)
    for o, t in zip(ours, theirs):
        np.testing.assert_array_equal(o.grad.numpy(), t.grad.numpy())


SCHEDULES = [
    ("StepLR", {"step_size": 7, "gamma": 0.5}),
    ("MultiStepLR", {"milestones": [3, 10, 10, 20], "gamma": 0.3}),
    ("ExponentialLR", {"gamma": 0.93}),
    ("CosineAnnealingLR", {"T_max": 9, "eta_min": 0.001}),
    ("CosineAnnealingLR", {"T_max": 1}),
    ("LinearLR", {"start_factor": 0.2, "end_factor": 1.0, "total_iters": 6}),
    ("LinearLR", {}),
    ("LambdaLR", {"lr_lambda": lambda epoch: 0.95**epoch / (1 + epoch % 3)}),
]


@pytest.mark.parametrize(
    ("name", "settings"), SCHEDULES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(SCHEDULES)]
)
def test_learning_rate_schedules_give_pytorchs_floats(name, settings) -> None:
    ours_opt = verigrad.optim.SGD([verigrad.zeros(2, requires_grad=True)], lr=0.1)
    theirs_opt = torch.optim.SGD([torch.zeros(2, requires_grad=True)], lr=0.1)
    ours = getattr(lr_scheduler, name)(ours_opt, **settings)
    theirs = getattr(torch.optim.lr_scheduler, name)(theirs_opt, **settings)
    for _ in range(45):
        assert ours.get_last_lr() == theirs.get_last_lr()  # the same floats, not just close ones
        assert ours_opt.param_groups[0]["lr"] == theirs_opt.param_groups[0]["lr"]
        ours_opt.step()
        theirs_opt.step()
        ours.step()
        theirs.step()


SEQUENCES = [
    ([("LinearLR", {"start_factor": 0.1, "total_iters": 4}), ("ExponentialLR", {"gamma": 0.9})], [5]),
    (
        [
            ("ExponentialLR", {"gamma": 0.8}),
            ("StepLR", {"step_size": 3}),
            ("CosineAnnealingLR", {"T_max": 7}),
        ],
        [4, 11],
    ),
    (
        [
            ("LambdaLR", {"lr_lambda": lambda epoch: 0.5 if epoch < 5 else 1.0}),
            ("LambdaLR", {"lr_lambda": lambda e: 1 / (e + 1)}),
        ],
        [2],
    ),
]


@pytest.mark.parametrize(("parts", "milestones"), SEQUENCES, ids=["warmup", "three", "lambda"])
def test_sequential_schedules_give_pytorchs_floats(parts, milestones) -> None:
    ours_opt = verigrad.optim.SGD([verigrad.zeros(2, requires_grad=True)], lr=0.1)
    theirs_opt = torch.optim.SGD([torch.zeros(2, requires_grad=True)], lr=0.1)
    ours = lr_scheduler.SequentialLR(
        ours_opt, [getattr(lr_scheduler, n)(ours_opt, **s) for n, s in parts], milestones
    )
    theirs = torch.optim.lr_scheduler.SequentialLR(
        theirs_opt, [getattr(torch.optim.lr_scheduler, n)(theirs_opt, **s) for n, s in parts], milestones
    )
    for _ in range(25):
        assert ours.get_last_lr() == theirs.get_last_lr()
        ours_opt.step()
        theirs_opt.step()
        ours.step()
        theirs.step()
    with pytest.raises(ValueError, match="one milestone fewer"):
        lr_scheduler.SequentialLR(ours_opt, [lr_scheduler.ExponentialLR(ours_opt, 0.9)], [3])


ONE_CYCLE = [
    ("SGD", {"lr": 0.1, "momentum": 0.9}, {"max_lr": 1.0, "total_steps": 20}),
    ("Adam", {}, {"max_lr": 0.01, "epochs": 3, "steps_per_epoch": 7, "three_phase": True}),
    (
        "RMSprop",
        {"momentum": 0.5},
        {"max_lr": 0.1, "total_steps": 9, "anneal_strategy": "linear", "pct_start": 0.5},
    ),
    ("AdamW", {}, {"max_lr": 0.1, "total_steps": 11, "cycle_momentum": False, "div_factor": 5.0}),
]


@pytest.mark.parametrize(("name", "settings", "schedule"), ONE_CYCLE, ids=[o for o, _, _ in ONE_CYCLE])
def test_one_cycle_gives_pytorchs_rates_and_momenta(name, settings, schedule) -> None:
    """The same floats for the rate and the momentum (SGD's and RMSprop's, or Adam's beta1) every step."""
    ours_opt = getattr(verigrad.optim, name)([verigrad.zeros(2, requires_grad=True)], **settings)
    theirs_opt = getattr(torch.optim, name)([torch.zeros(2, requires_grad=True)], **settings)
    ours = lr_scheduler.OneCycleLR(ours_opt, **schedule)
    theirs = torch.optim.lr_scheduler.OneCycleLR(theirs_opt, **schedule)
    key = "betas" if "betas" in theirs_opt.defaults else "momentum"
    for _ in range(theirs.total_steps):
        assert ours.get_last_lr() == theirs.get_last_lr()
        assert ours_opt.param_groups[0][key] == theirs_opt.param_groups[0][key]
        ours_opt.step()
        theirs_opt.step()
        ours.step()
        theirs.step()


def test_one_cycle_training_follows_pytorch_compiled() -> None:
    """SGD with Nesterov momentum under 1cycle, compiled (traced once) against PyTorch eager."""
    rng = np.random.default_rng(3)
    x, y = rng.standard_normal((16, 5)).astype(np.float32), rng.integers(0, 3, 16)
    verigrad.manual_seed(0)
    ours_model = nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 3))
    theirs_model = torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    with torch.no_grad():
        for o, t in zip(ours_model.parameters(), theirs_model.parameters()):
            t.copy_(torch.from_numpy(o.numpy().copy()))
    ours_opt = verigrad.optim.SGD(ours_model.parameters(), lr=0.1, momentum=0.9, nesterov=True)
    theirs_opt = torch.optim.SGD(theirs_model.parameters(), lr=0.1, momentum=0.9, nesterov=True)
    ours_schedule = lr_scheduler.OneCycleLR(ours_opt, max_lr=0.5, total_steps=12)
    theirs_schedule = torch.optim.lr_scheduler.OneCycleLR(theirs_opt, max_lr=0.5, total_steps=12)

    compiled = verigrad.compile(training_step(ours_model, ours_opt, nn.CrossEntropyLoss()))
    for _ in range(12):
        ours_loss = compiled(verigrad.tensor(x), verigrad.tensor(y))
        theirs_loss = torch.nn.functional.cross_entropy(
            theirs_model(torch.from_numpy(x)), torch.from_numpy(y)
        )
        theirs_opt.zero_grad()
        theirs_loss.backward()
        theirs_opt.step()
        np.testing.assert_allclose(ours_loss.item(), theirs_loss.item(), rtol=1e-5)
        ours_schedule.step()
        theirs_schedule.step()
    assert compiled.stats()["traces"] == 1
    for o, t in zip(ours_model.parameters(), theirs_model.parameters()):
        np.testing.assert_allclose(o.numpy(), t.detach().numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "settings",
    [
        {},
        {"mode": "max", "factor": 0.5, "patience": 1},
        {"threshold_mode": "abs", "threshold": 0.05, "cooldown": 2},
    ],
)
def test_reduce_lr_on_plateau_gives_pytorchs_rates(settings) -> None:
    metrics = [1.0, 0.9, 0.95, 0.96, 0.97, 0.89, 0.9, 0.91, 0.92, 0.93] * 3
    settings = {"patience": 2, **settings}
    ours = lr_scheduler.ReduceLROnPlateau(
        verigrad.optim.SGD([verigrad.zeros(1, requires_grad=True)], lr=0.1), **settings
    )
    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
    theirs = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, **settings)
    for m in metrics:
        ours.step(verigrad.tensor(m))
        theirs.step(m)
        assert ours.get_last_lr() == theirs.get_last_lr()
    assert ours.get_last_lr()[0] < 0.1  # it did cut


def test_parameters_to_vector_and_back() -> None:
    ours, theirs = nn.Linear(3, 2).double(), torch.nn.Linear(3, 2).double()
    with torch.no_grad():
        for a, b in zip(ours.parameters(), theirs.parameters()):
            b.copy_(torch.from_numpy(a.numpy()))
    flat = nn.utils.parameters_to_vector(ours.parameters())
    expected = torch.nn.utils.parameters_to_vector(theirs.parameters())
    np.testing.assert_array_equal(flat.numpy(), expected.detach().numpy())
    nn.utils.vector_to_parameters(flat * 2, ours.parameters())
    torch.nn.utils.vector_to_parameters(expected * 2, theirs.parameters())
    for a, b in zip(ours.parameters(), theirs.parameters()):
        np.testing.assert_array_equal(a.numpy(), b.detach().numpy())


def test_cosine_annealing_with_warm_restarts_gives_pytorchs_rates() -> None:
    ours = lr_scheduler.CosineAnnealingWarmRestarts(
        verigrad.optim.SGD([verigrad.zeros(1, requires_grad=True)], lr=0.1), T_0=3, T_mult=2, eta_min=0.01
    )
    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
    theirs = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=3, T_mult=2, eta_min=0.01)
    for _ in range(25):
        assert ours.get_last_lr() == theirs.get_last_lr()
        ours.step()
        opt.step()
        theirs.step()


@pytest.mark.parametrize("compiled", [False, True])
@pytest.mark.parametrize("kind", ["Adam", "AdamW"])
def test_amsgrad(kind, compiled) -> None:
    """Ten steps with gradients that jump (the largest second moment matters), eagerly and compiled."""
    rng = np.random.default_rng(3)
    w0 = rng.standard_normal(5)
    p, tp = verigrad.tensor(w0.copy()).requires_grad_(), torch.tensor(w0.copy(), requires_grad=True)
    ours = getattr(verigrad.optim, kind)([p], lr=0.1, amsgrad=True)
    theirs = getattr(torch.optim, kind)([tp], lr=0.1, amsgrad=True)

    def step(g):
        ours.zero_grad()
        (p * g).sum().backward()
        ours.step()
        return p.sum()

    run = verigrad.compile(step) if compiled else step
    for i in range(10):
        g = rng.standard_normal(5) * (10.0 if i % 3 == 0 else 0.1)
        run(verigrad.tensor(g))
        tp.grad = torch.tensor(g)
        theirs.step()
        np.testing.assert_allclose(p.numpy(), tp.detach().numpy(), rtol=1e-12, atol=1e-14)

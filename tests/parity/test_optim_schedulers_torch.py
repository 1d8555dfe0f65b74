"""Learning-rate schedules on an optimizer with two parameter groups of different rates (and momenta),
against `torch.optim.lr_scheduler`: every step the same floats in `get_last_lr()` and in each group's
"lr" (and OneCycleLR's momentum), not just close ones; and a schedule resumed from its and the
optimizer's state dicts going on as the uninterrupted one does."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch

import verigrad
from verigrad.optim import lr_scheduler

STEPS = 40

# id -> (schedule, its settings; a callable setting is called with the library's scheduler module)
SCHEDULES: dict[str, tuple[str, dict[str, Any]]] = {
    "step": ("StepLR", {"step_size": 7, "gamma": 0.5}),
    "multistep": ("MultiStepLR", {"milestones": [3, 10, 10, 20], "gamma": 0.3}),
    "exponential": ("ExponentialLR", {"gamma": 0.93}),
    "cosine": ("CosineAnnealingLR", {"T_max": 9, "eta_min": 0.001}),
    "warm-restarts": ("CosineAnnealingWarmRestarts", {"T_0": 3, "T_mult": 2, "eta_min": 0.002}),
    "lambda-one": ("LambdaLR", {"lr_lambda": lambda epoch: 0.95**epoch / (1 + epoch % 3)}),
    "lambda-per-group": ("LambdaLR", {"lr_lambda": [lambda e: 0.9**e, lambda e: 1 / (e + 1)]}),
    "linear": ("LinearLR", {"start_factor": 0.2, "end_factor": 1.0, "total_iters": 6}),
    "one-cycle": ("OneCycleLR", {"max_lr": [1.0, 0.3], "total_steps": STEPS + 1}),
    "one-cycle-three-phase": (
        "OneCycleLR",
        {
            "max_lr": [0.5, 0.2],
            "total_steps": STEPS + 1,
            "three_phase": True,
            "anneal_strategy": "linear",
            "base_momentum": [0.8, 0.7],
            "max_momentum": [0.9, 0.95],
        },
    ),
}


def _optimizer(lib: Any) -> Any:
    params = [lib.zeros(2, requires_grad=True), lib.zeros(3, requires_grad=True)]
    groups = [{"params": params[:1]}, {"params": params[1:], "lr": 0.03, "momentum": 0.5}]
    return (verigrad.optim if lib is verigrad else torch.optim).SGD(groups, lr=0.1, momentum=0.9)


def _module(lib: Any) -> Any:
    return lr_scheduler if lib is verigrad else torch.optim.lr_scheduler


def _make(lib: Any, name: str, settings: dict[str, Any]) -> tuple[Any, Any]:
    opt = _optimizer(lib)
    return opt, getattr(_module(lib), name)(opt, **settings)


def _assert_same(ours_opt: Any, ours: Any, theirs_opt: Any, theirs: Any, when: str) -> None:
    assert ours.get_last_lr() == theirs.get_last_lr(), when
    for mine, want in zip(ours_opt.param_groups, theirs_opt.param_groups):
        assert (mine["lr"], mine["momentum"]) == (want["lr"], want["momentum"]), when
        assert mine.lr.item() == want["lr"], when  # the tensor compiled steps read


def _step(opt: Any, schedule: Any) -> None:
    opt.step()
    schedule.step()


@pytest.mark.parametrize("config", list(SCHEDULES))
def test_schedules_set_each_groups_rate_as_torchs(config: str) -> None:
    ours_opt, ours = _make(verigrad, *SCHEDULES[config])
    theirs_opt, theirs = _make(torch, *SCHEDULES[config])
    for step in range(STEPS):
        _assert_same(ours_opt, ours, theirs_opt, theirs, f"step {step}")
        _step(ours_opt, ours)
        _step(theirs_opt, theirs)
    assert len(set(theirs.get_last_lr())) == 2  # the groups' rates differ
    for key in ("base_lrs", "last_epoch", "_step_count", "_last_lr"):
        assert ours.state_dict()[key] == theirs.state_dict()[key], key


@pytest.mark.parametrize("config", ["step", "cosine", "warm-restarts", "lambda-per-group", "one-cycle"])
def test_a_schedule_resumed_from_state_dicts_goes_on_as_torchs(config: str) -> None:
    """Half the steps, then a new optimizer and schedule load the first's state dicts (the optimizer's
    first, then the schedule's, as PyTorch's documentation does it); PyTorch does not stop."""
    ours_opt, ours = _make(verigrad, *SCHEDULES[config])
    theirs_opt, theirs = _make(torch, *SCHEDULES[config])
    for _ in range(STEPS // 2):
        _step(ours_opt, ours)
        _step(theirs_opt, theirs)
    opt_state, schedule_state = copy.deepcopy(ours_opt.state_dict()), copy.deepcopy(ours.state_dict())
    ours_opt, ours = _make(verigrad, *SCHEDULES[config])
    ours_opt.load_state_dict(opt_state)
    ours.load_state_dict(schedule_state)
    for step in range(STEPS // 2, STEPS):
        _assert_same(ours_opt, ours, theirs_opt, theirs, f"step {step}")
        _step(ours_opt, ours)
        _step(theirs_opt, theirs)


SEQUENCES = [
    ([("LinearLR", {"start_factor": 0.1, "total_iters": 4}), ("ExponentialLR", {"gamma": 0.9})], [5]),
    ([("ExponentialLR", {"gamma": 0.8}), ("StepLR", {"step_size": 3}), ("CosineAnnealingLR", {"T_max": 7})],
     [4, 11]),
    ([("LambdaLR", {"lr_lambda": [lambda e: 0.5, lambda e: 0.25]}), ("MultiStepLR", {"milestones": [4, 9]})],
     [2]),
]  # fmt: skip


@pytest.mark.parametrize(("parts", "milestones"), SEQUENCES, ids=["warmup", "three", "lambda"])
def test_sequential_schedules_set_each_groups_rate_as_torchs(parts: list, milestones: list[int]) -> None:
    made = []
    for lib in (verigrad, torch):
        opt = _optimizer(lib)
        schedules = [getattr(_module(lib), n)(opt, **s) for n, s in parts]
        made.append((opt, _module(lib).SequentialLR(opt, schedules, milestones)))
    (ours_opt, ours), (theirs_opt, theirs) = made
    for step in range(25):
        _assert_same(ours_opt, ours, theirs_opt, theirs, f"step {step}")
        _step(ours_opt, ours)
        _step(theirs_opt, theirs)


@pytest.mark.parametrize("min_lr", [0.0, [0.02, 0.01]])
def test_reduce_on_plateau_cuts_each_groups_rate_as_torchs(min_lr: Any) -> None:
    made = []
    for lib in (verigrad, torch):
        opt = _optimizer(lib)
        made.append((opt, _module(lib).ReduceLROnPlateau(opt, patience=1, factor=0.5, min_lr=min_lr)))
    (ours_opt, ours), (theirs_opt, theirs) = made
    losses = [3.0, 2.0, 2.0, 2.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5]
    for step, loss in enumerate(losses):
        ours_opt.step()
        theirs_opt.step()
        ours.step(loss)
        theirs.step(loss)
        _assert_same(ours_opt, ours, theirs_opt, theirs, f"step {step}")
    assert theirs_opt.param_groups[1]["lr"] < 0.03  # it did cut


def test_the_schedules_classes_and_names_are_torchs() -> None:
    """Each schedule an LRScheduler where PyTorch's is one (ReduceLROnPlateau too: code may test for it),
    and `from ... import *` giving the same names."""
    assert sorted(lr_scheduler.__all__) == sorted(torch.optim.lr_scheduler.__all__)
    base = torch.optim.lr_scheduler.LRScheduler
    for name in torch.optim.lr_scheduler.__all__:
        theirs = getattr(torch.optim.lr_scheduler, name)
        if isinstance(theirs, type):
            ours = issubclass(getattr(lr_scheduler, name), lr_scheduler.LRScheduler)
            assert ours == issubclass(theirs, base), name

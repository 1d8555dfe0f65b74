"""Each schedule's state_dict as PyTorch's: the same keys and values after some steps, and a state saved
by either library loaded into the other's schedule continues with the same rates (OneCycleLR's phases,
the lambda schedules' functions, SequentialLR's and ReduceLROnPlateau's keys)."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

import verigrad

SCHEDULES = {
    "OneCycleLR": lambda S, opt: S.OneCycleLR(opt, max_lr=0.1, total_steps=20),
    "OneCycleLR-three-phase": lambda S, opt: S.OneCycleLR(
        opt, max_lr=0.1, total_steps=20, three_phase=True, anneal_strategy="linear"
    ),
    "StepLR": lambda S, opt: S.StepLR(opt, 3, 0.5),
    "MultiStepLR": lambda S, opt: S.MultiStepLR(opt, [2, 5], 0.5),
    "CosineAnnealingWarmRestarts": lambda S, opt: S.CosineAnnealingWarmRestarts(opt, 3, 2),
    "CyclicLR": lambda S, opt: S.CyclicLR(opt, 0.01, 0.1, step_size_up=3),
    "LinearLR": lambda S, opt: S.LinearLR(opt, 0.5, total_iters=4),
    "PolynomialLR": lambda S, opt: S.PolynomialLR(opt, 6, 2.0),
    "LambdaLR": lambda S, opt: S.LambdaLR(opt, lambda e: 0.9**e),
    "MultiplicativeLR": lambda S, opt: S.MultiplicativeLR(opt, lambda e: 0.9),
    "ReduceLROnPlateau": lambda S, opt: S.ReduceLROnPlateau(opt, patience=1),
    "SequentialLR": lambda S, opt: S.SequentialLR(
        opt, [S.LinearLR(opt, 0.5, total_iters=2), S.ExponentialLR(opt, 0.9)], milestones=[2]
    ),
    "ChainedScheduler": lambda S, opt: S.ChainedScheduler(
        [S.ConstantLR(opt, 0.5, total_iters=2), S.ExponentialLR(opt, 0.9)]
    ),
}


def _plain(value):
    """A state value compared across libraries (a function by its being one)."""
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return "function" if callable(value) else value


def _run(lib, name: str, saved: tuple | None = None) -> tuple[list[float], dict, dict]:
    """Six steps of the schedule (after loading `saved`, the schedule's and the optimizer's states): the
    rates, then the schedule's and the optimizer's state dicts."""
    p = lib.nn.Parameter(lib.ones(2))
    opt = lib.optim.SGD([p], lr=0.05, momentum=0.9)
    schedule = SCHEDULES[name](lib.optim.lr_scheduler, opt)
    if saved is not None:
        schedule.load_state_dict(copy.deepcopy(saved[0]))  # (PyTorch's CyclicLR pops keys from it)
        opt.load_state_dict({"state": {}, "param_groups": saved[1]["param_groups"]})
    rates = []
    for _ in range(6):
        opt.step()
        schedule.step(1.0) if name == "ReduceLROnPlateau" else schedule.step()
        rates.append(opt.param_groups[0]["lr"])
    return rates, schedule.state_dict(), opt.state_dict()


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_schedule_state_dicts_are_pytorchs(name) -> None:
    ours, theirs = _run(verigrad, name), _run(torch, name)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-15, atol=0)
    assert _plain(ours[1]) == _plain(theirs[1])
    for load_into, saved_by in ((verigrad, theirs), (torch, ours)):
        rates = _run(load_into, name, saved_by[1:])[0]
        np.testing.assert_allclose(rates, _run(torch, name, theirs[1:])[0], rtol=1e-15, atol=0)

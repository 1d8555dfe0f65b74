"""A parameter group added to the optimizer after its schedule was made (`add_param_group`, as in
fine-tuning recipes that unfreeze a layer later): the schedules PyTorch scales from each group's own rate
scale it too, float for float; those that need the group's initial rate or function raise as PyTorch's
do. And CosineAnnealingWarmRestarts stepped with a fractional epoch, as its documentation shows."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import verigrad

SCHEDULES = {
    "StepLR": lambda s, o: s.StepLR(o, 1, 0.5),
    "MultiStepLR": lambda s, o: s.MultiStepLR(o, [2, 4], 0.5),
    "ExponentialLR": lambda s, o: s.ExponentialLR(o, 0.9),
    "ConstantLR": lambda s, o: s.ConstantLR(o, 0.5, total_iters=4),
    "LinearLR": lambda s, o: s.LinearLR(o, 0.5, total_iters=4),
    "PolynomialLR": lambda s, o: s.PolynomialLR(o, total_iters=4),
    "CosineAnnealingLR": lambda s, o: s.CosineAnnealingLR(o, T_max=2),
    "LambdaLR": lambda s, o: s.LambdaLR(o, lambda e: 0.9**e),
    "MultiplicativeLR": lambda s, o: s.MultiplicativeLR(o, lambda e: 0.9),
    "CosineAnnealingWarmRestarts": lambda s, o: s.CosineAnnealingWarmRestarts(o, T_0=2),
    "CyclicLR": lambda s, o: s.CyclicLR(o, 0.01, 0.1, step_size_up=2),
    "ReduceLROnPlateau": lambda s, o: s.ReduceLROnPlateau(o, patience=0, factor=0.5),
    "ReduceLROnPlateau min_lr list": lambda s, o: s.ReduceLROnPlateau(o, patience=0, min_lr=[0.01]),
    "ChainedScheduler": lambda s, o: s.ChainedScheduler([s.StepLR(o, 2, 0.5), s.ExponentialLR(o, 0.9)]),
    "SequentialLR": lambda s, o: s.SequentialLR(
        o, [s.LinearLR(o, 0.5, total_iters=2), s.ExponentialLR(o, 0.9)], milestones=[3]
    ),
}


def _rates(lib: Any, make: Any) -> tuple[list[list[float]], str | None]:
    """Each step's rates, a group added after the first step; and the error's type if one was raised."""
    w, b = lib.zeros(3, requires_grad=True), lib.zeros(2, requires_grad=True)
    opt = lib.optim.SGD([w], lr=0.1, momentum=0.9)
    schedule = make(lib.optim.lr_scheduler, opt)
    rates: list[list[float]] = []
    try:
        for i in range(7):
            if i == 1:
                opt.add_param_group({"params": [b], "lr": 0.3})
            opt.step()
            plateau = isinstance(schedule, lib.optim.lr_scheduler.ReduceLROnPlateau)
            schedule.step(1.0) if plateau else schedule.step()
            rates.append([g["lr"] for g in opt.param_groups])
            assert schedule.get_last_lr() == rates[-1]
    except (ValueError, RuntimeError) as error:
        return rates, type(error).__name__
    return rates, None


@pytest.mark.parametrize("name", SCHEDULES)
def test_a_group_added_later_is_scheduled_as_in_pytorch(name: str) -> None:
    theirs, their_error = _rates(torch, SCHEDULES[name])
    ours, our_error = _rates(verigrad, SCHEDULES[name])
    assert our_error == their_error
    assert ours == theirs  # the same floats, up to the step that raised


def test_the_chainable_schedules_do_scale_the_added_group() -> None:
    rates, error = _rates(verigrad, SCHEDULES["StepLR"])
    assert error is None and rates[-1][1] == 0.3 * 0.5**6


def _warm_restarts(lib: Any, epochs: list[float], t_mult: int) -> list[float]:
    opt = lib.optim.SGD([lib.zeros(2, requires_grad=True)], lr=0.1)
    schedule = lib.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=3, T_mult=t_mult, eta_min=0.001)
    out = []
    for epoch in epochs:
        opt.step()
        schedule.step(epoch)
        out += [opt.param_groups[0]["lr"], schedule.last_epoch, schedule.T_cur, schedule.T_i]
    return out


@pytest.mark.parametrize("t_mult", [1, 2])
def test_warm_restarts_take_a_fractional_epoch(t_mult: int) -> None:
    epochs = [e + i / 4 for e in range(8) for i in range(4)] + [2.0, 20.5, 0.0]
    theirs = _warm_restarts(torch, epochs, t_mult)
    np.testing.assert_array_equal(_warm_restarts(verigrad, epochs, t_mult), theirs)
    with pytest.raises(ValueError, match="non-negative"):
        _warm_restarts(verigrad, [-1.0], t_mult)

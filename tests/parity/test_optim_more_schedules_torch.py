"""MultiplicativeLR, ConstantLR and PolynomialLR give PyTorch's rates, float for float, on two groups,
alone and after SequentialLR's switch (their closed forms)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import verigrad


def _rates(lib, make, epochs: int = 12) -> list[list[float]]:
    a = lib.zeros(2, requires_grad=True)
    b = lib.zeros(3, requires_grad=True)
    opt = lib.optim.SGD([{"params": [a], "lr": 0.1}, {"params": [b], "lr": 0.03}])
    schedule = make(lib.optim.lr_scheduler, opt)
    out = [list(schedule.get_last_lr())]
    for _ in range(epochs):
        opt.step()
        schedule.step()
        out.append(list(schedule.get_last_lr()))
    return out


MAKERS = {
    "MultiplicativeLR": lambda s, o: s.MultiplicativeLR(o, lambda e: 0.9 + 0.01 * e),
    "MultiplicativeLR per group": lambda s, o: s.MultiplicativeLR(o, [lambda e: 0.95, lambda e: 0.8]),
    "ConstantLR": lambda s, o: s.ConstantLR(o, factor=0.3, total_iters=4),
    "ConstantLR default": lambda s, o: s.ConstantLR(o),
    "PolynomialLR": lambda s, o: s.PolynomialLR(o, total_iters=7, power=2.0),
    "PolynomialLR linear": lambda s, o: s.PolynomialLR(o),
    "SequentialLR of ConstantLR and PolynomialLR": lambda s, o: s.SequentialLR(
        o, [s.ConstantLR(o, factor=0.5, total_iters=3), s.PolynomialLR(o, total_iters=6, power=0.5)], [3]
    ),
}


@pytest.mark.parametrize("name", MAKERS)
def test_rates_equal_pytorchs(name) -> None:
    assert _rates(verigrad, MAKERS[name]) == _rates(torch, MAKERS[name])


def test_constant_factor_out_of_range_is_refused_as_in_pytorch() -> None:
    for lib in (verigrad, torch):
        opt = lib.optim.SGD([lib.zeros(1, requires_grad=True)], lr=0.1)
        with pytest.raises(ValueError):
            lib.optim.lr_scheduler.ConstantLR(opt, factor=1.5)
    assert np.isclose(_rates(verigrad, MAKERS["PolynomialLR"])[-1][0], 0.0)

"""ASGD (averaged SGD, Polyak and Juditsky), PyTorch's update rule, written with ops like the others."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from ..dtypes import f32
from ..ops import maximum, tensor, where
from ..tensor import Tensor
from .optimizer import Hyperparameters, Optimizer, check_lr
from .rmsprop import check_at_least_zero


class ASGD(Optimizer):
    """p *= 1 - lambd eta; p -= eta g; the average `ax` follows p from step t0 on (ax += mu (p - ax));
    then eta = lr / (1 + lambd lr t)^alpha and mu = 1 / max(1, t - t0). eta and mu are kept in f32, as
    PyTorch keeps them (its default dtype), whatever the parameter's. weight_decay adds wd * p to g."""

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-2,
        lambd: float = 1e-4,
        alpha: float = 0.75,
        t0: float = 1e6,
        weight_decay: float = 0,
        foreach: bool | None = None,
        maximize: bool = False,
        differentiable: bool = False,
        capturable: bool = False,
    ) -> None:
        check_lr(lr)
        check_at_least_zero(**{"weight_decay value": weight_decay})
        settings = {"lr": lr, "lambd": lambd, "alpha": alpha, "t0": t0, "weight_decay": weight_decay,
                    "foreach": foreach, "maximize": maximize, "differentiable": differentiable,
                    "capturable": capturable}  # fmt: skip
        super().__init__(params, settings)

    def state_names(self, group: Mapping[str, Any]) -> tuple[str, ...]:
        return ("ax",)

    def _fresh_state(self, p: Tensor, group: Mapping[str, Any]) -> dict[str, Tensor]:
        state = super()._fresh_state(p, group)
        # eta is set to the rate at the first update (the rate may change before it)
        eta, mu = (tensor(np.array(value, dtype=np.float32)) for value in (0.0, 1.0))
        return {"step": state.pop("step"), "eta": eta, "mu": mu, **state}

    def update(self, p: Tensor, g: Tensor, group: Hyperparameters, state: dict[str, Tensor]) -> None:
        lambd, alpha, t0 = group["lambd"], group["alpha"], group["t0"]
        t, eta, mu, ax = self.count(state), state["eta"], state["mu"], state["ax"]
        lr = group.lr
        eta.assign(where(t == 1, lr.cast(f32).cast(eta.dtype), eta))
        if group["weight_decay"]:
            g = g + p * group["weight_decay"]
        rate = eta.cast(lr.dtype)
        p.assign(p * self.scalar(1 - lambd * rate, p))
        p.assign(p + g * self.scalar(-rate, p))
        ax.assign(where(mu == 1, p, ax + (p - ax) * mu.cast(p.dtype)))
        # PyTorch makes the new values f32 tensors (its default dtype), then copies them into its state
        # (which a loaded state dict has made the parameter's dtype)
        eta.assign((lr / (1 + lr * lambd * t) ** alpha).cast(f32).cast(eta.dtype))
        mu.assign((1 / maximum(t - t0, 1.0)).cast(f32).cast(mu.dtype))

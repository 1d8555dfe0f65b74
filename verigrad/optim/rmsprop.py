"""RMSprop and Adagrad (PyTorch's update rules), written with ops like the others."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from ..tensor import Tensor
from .optimizer import Hyperparameters, Optimizer, check_lr


def check_at_least_zero(**values: float) -> None:
    """PyTorch's checks of settings that must be >= 0 (NaN is refused too), in its words."""
    for name, value in values.items():
        if not value >= 0.0:
            raise ValueError(f"Invalid {name}: {value}")


class RMSprop(Optimizer):
    """v = alpha v + (1 - alpha) g^2; p -= lr g / (sqrt(v) + eps); `centered` subtracts the squared
    running mean of g from v first; with momentum, b = momentum b + g / (sqrt(v) + eps), p -= lr b."""

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-2,
        alpha: float = 0.99,
        eps: float = 1e-8,
        weight_decay: float = 0,
        momentum: float = 0,
        centered: bool = False,
        capturable: bool = False,
        foreach: bool | None = None,
        maximize: bool = False,
        differentiable: bool = False,
    ) -> None:
        check_lr(lr)
        check_at_least_zero(**{"epsilon value": eps, "momentum value": momentum,
                               "weight_decay value": weight_decay, "alpha value": alpha})  # fmt: skip
        settings = {"lr": lr, "momentum": momentum, "alpha": alpha, "eps": eps, "centered": centered,
                    "weight_decay": weight_decay, "capturable": capturable, "foreach": foreach,
                    "maximize": maximize, "differentiable": differentiable}  # fmt: skip
        super().__init__(params, settings)

    def state_names(self, group: Mapping[str, Any]) -> tuple[str, ...]:
        return (
            ("square_avg",)
            + (("momentum_buffer",) if group["momentum"] > 0 else ())
            + (("grad_avg",) if group["centered"] else ())
        )

    def update(self, p: Tensor, g: Tensor, group: Hyperparameters, state: dict[str, Tensor]) -> None:
        if any(name not in state for name in self.state_names(group)):  # momentum or centered turned on
            state.update(self._fresh_state(p, group) | {k: v for k, v in state.items()})
        alpha = group["alpha"]
        if group["weight_decay"]:
            g = g + p * group["weight_decay"]
        square = state["square_avg"]
        square.assign(square * alpha + g * g * (1 - alpha))
        if group["centered"]:
            mean = state["grad_avg"]
            mean.assign(mean + (g - mean) * (1 - alpha))
            avg = (square - mean * mean).sqrt() + group["eps"]
        else:
            avg = square.sqrt() + group["eps"]
        step = g / avg
        if group["momentum"] > 0:
            buf = state["momentum_buffer"]
            buf.assign(buf * self.scalar(group.tensors["momentum"], p) + step)
            step = buf
        p.assign(p + step * self.scalar(-group.lr, p))


class Adagrad(Optimizer):
    """s += g^2; p -= lr / (1 + (t - 1) lr_decay) * g / (sqrt(s) + eps), s starting at
    initial_accumulator_value (the optimizer's, in every group, as PyTorch's)."""

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-2,
        lr_decay: float = 0,
        weight_decay: float = 0,
        initial_accumulator_value: float = 0,
        eps: float = 1e-10,
        foreach: bool | None = None,
        *,
        maximize: bool = False,
        differentiable: bool = False,
        fused: bool | None = None,
    ) -> None:
        check_lr(lr)
        check_at_least_zero(**{"lr_decay value": lr_decay, "weight_decay value": weight_decay,
                               "initial_accumulator_value value": initial_accumulator_value,
                               "epsilon value": eps})  # fmt: skip
        if fused and differentiable:
            raise RuntimeError("`fused` does not support `differentiable`")
        settings = {"lr": lr, "lr_decay": lr_decay, "eps": eps, "weight_decay": weight_decay,
                    "initial_accumulator_value": initial_accumulator_value, "foreach": foreach,
                    "maximize": maximize, "differentiable": differentiable, "fused": fused}  # fmt: skip
        super().__init__(params, settings)
        self._made_with = {id(p) for p in self.params}  # whose state PyTorch makes with the optimizer

    def state_names(self, group: Mapping[str, Any]) -> tuple[str, ...]:
        return ("sum",)

    def _fresh_state(self, p: Tensor, group: Mapping[str, Any]) -> dict[str, Tensor]:
        state = super()._fresh_state(p, group)
        # PyTorch fills every group's sums with the optimizer's value (a group's own is not read)
        np.copyto(state["sum"].payload, self.defaults["initial_accumulator_value"])
        return state

    def _has_state(self, p: Tensor, slot: dict[str, Tensor]) -> bool:
        # PyTorch's Adagrad makes the state of the parameters it is made with at once, of those added
        # later at their first update
        return id(p) in self._made_with or super()._has_state(p, slot)

    def update(self, p: Tensor, g: Tensor, group: Hyperparameters, state: dict[str, Tensor]) -> None:
        if group["weight_decay"]:
            g = g + p * group["weight_decay"]
        total = state["sum"]
        total.assign(total + g * g)
        # PyTorch's rate lr / (1 + (t - 1) lr_decay), in f64 as it computes it
        rate = self.scalar(-group.lr / ((self.count(state) - 1) * group["lr_decay"] + 1), p)
        p.assign(p + g / (total.sqrt() + group["eps"]) * rate)

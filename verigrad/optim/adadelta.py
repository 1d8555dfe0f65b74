"""Adadelta (Zeiler), PyTorch's update rule, written with ops like the others."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..tensor import Tensor
from .optimizer import Hyperparameters, Optimizer, check_lr
from .rmsprop import check_at_least_zero


class Adadelta(Optimizer):
    """v = rho v + (1 - rho) g^2; delta = sqrt(u + eps) / sqrt(v + eps) * g; u = rho u + (1 - rho)
    delta^2; p -= lr delta (v is `square_avg`, u `acc_delta`). weight_decay adds wd * p to g."""

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1.0,
        rho: float = 0.9,
        eps: float = 1e-6,
        weight_decay: float = 0,
        foreach: bool | None = None,
        *,
        capturable: bool = False,
        maximize: bool = False,
        differentiable: bool = False,
    ) -> None:
        check_lr(lr)
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        check_at_least_zero(**{"epsilon value": eps, "weight_decay value": weight_decay})
        settings = {"lr": lr, "rho": rho, "eps": eps, "weight_decay": weight_decay,
                    "maximize": maximize, "capturable": capturable, "foreach": foreach,
                    "differentiable": differentiable}  # fmt: skip
        super().__init__(params, settings)

    def state_names(self, group: Mapping[str, Any]) -> tuple[str, ...]:
        return ("square_avg", "acc_delta")

    def update(self, p: Tensor, g: Tensor, group: Hyperparameters, state: dict[str, Tensor]) -> None:
        rho, eps = group["rho"], group["eps"]
        if group["weight_decay"]:
            g = g + p * group["weight_decay"]
        square, acc = state["square_avg"], state["acc_delta"]
        square.assign(square * rho + g * (1 - rho) * g)
        delta = (acc + eps).sqrt() / (square + eps).sqrt() * g
        acc.assign(acc * rho + delta * (1 - rho) * delta)
        p.assign(p + delta * self.scalar(-group.lr, p))

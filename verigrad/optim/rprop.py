"""Rprop (resilient backpropagation), PyTorch's update rule, written with ops like the others."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from ..ops import maximum, minimum, tensor, where
from ..tensor import Tensor
from .optimizer import Hyperparameters, Optimizer, check_lr


class Rprop(Optimizer):
    """Each weight has its own step size (`step_size`, starting at lr): times etaplus while its gradient
    keeps its sign, times etaminus when the sign flips (and that gradient is then taken as 0), clamped to
    `step_sizes`; p -= sign(g) * step size. `prev` is the gradient of the last step."""

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-2,
        etas: tuple[float, float] = (0.5, 1.2),
        step_sizes: tuple[float, float] = (1e-6, 50),
        *,
        capturable: bool = False,
        foreach: bool | None = None,
        maximize: bool = False,
        differentiable: bool = False,
    ) -> None:
        check_lr(lr)
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        settings = {"lr": lr, "etas": etas, "step_sizes": step_sizes, "foreach": foreach,
                    "maximize": maximize, "differentiable": differentiable,
                    "capturable": capturable}  # fmt: skip
        super().__init__(params, settings)

    def state_names(self, group: Mapping[str, Any]) -> tuple[str, ...]:
        return ("prev", "step_size")

    def update(self, p: Tensor, g: Tensor, group: Hyperparameters, state: dict[str, Tensor]) -> None:
        (etaminus, etaplus), (least, most) = group["etas"], group["step_sizes"]
        prev, size = state["prev"], state["step_size"]
        # PyTorch fills the step sizes with the rate at a parameter's first update
        size = where(state["step"] == 1, self.scalar(group.lr, p), size)
        sign = (g * prev).sign()
        one = self.scalar(tensor(np.array(1.0)), p)  # the factors in p's dtype, as PyTorch's
        factor = where(sign > 0, etaplus, where(sign < 0, etaminus, one))
        size = state["step_size"].assign(minimum(maximum(size * factor, least), most))
        g = where(sign < 0, 0.0, g)  # after a sign flip: no step, and no flip next time
        p.assign(p - g.sign() * size)
        prev.assign(g)

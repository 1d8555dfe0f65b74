"""SGD with momentum, dampening, Nesterov momentum and weight decay (PyTorch's update rule)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from ..ops import where
from ..tensor import Tensor
from .optimizer import Hyperparameters, Optimizer, check_lr, fused_kernel


class SGD(Optimizer):
    """p -= lr * g, where g += weight_decay * p and, with momentum, b = momentum * b + (1 - dampening) * g
    (b starting as the first g); nesterov steps along g + momentum * b; maximize ascends."""

    hidden_state = ("step",)  # PyTorch's SGD counts no steps; verigrad's count marks the first

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-3,
        momentum: float = 0,
        dampening: float = 0,
        weight_decay: float = 0,
        nesterov: bool = False,
        *,
        maximize: bool = False,
        foreach: bool | None = None,
        differentiable: bool = False,
        fused: bool | None = None,
    ) -> None:
        check_lr(lr)
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        if fused and differentiable:
            raise RuntimeError("`fused` does not support `differentiable`")
        defaults = {"lr": lr, "momentum": momentum, "dampening": dampening, "weight_decay": weight_decay,
                    "nesterov": nesterov, "maximize": maximize, "foreach": foreach,
                    "differentiable": differentiable, "fused": fused}  # fmt: skip
        super().__init__(params, defaults)

    def state_names(self, group: Mapping[str, Any]) -> tuple[str, ...]:
        return ("momentum_buffer",) if group["momentum"] else ()

    def update(self, p: Tensor, g: Tensor, group: Hyperparameters, state: dict[str, Tensor]) -> None:
        if "momentum_buffer" not in state and group["momentum"]:  # momentum turned on after the start:
            state.update(self._fresh_state(p, group))  # the buffer starts as this gradient, as PyTorch's
            np.copyto(state["step"].payload, 1)  # (SGD's count only marks the buffer's first step)
        if not self._fused_update(p, g, group, state):
            self._op_update(p, g, group, state)

    def _fused_update(self, p: Tensor, g: Tensor, group: Hyperparameters, state: dict[str, Tensor]) -> bool:
        """The backend's whole-vector SGD kernel, in eager mode when it has one: the op-based update's
        settings in f64 (rounded to the dtype by the kernel), then one pass."""
        kernel = fused_kernel("sgd", p)
        if kernel is None:
            return False
        momentum = group["momentum"]
        buf = state["momentum_buffer"].payload if momentum else None
        first = bool(momentum) and float(state["step"].item()) == 1
        settings = [group["weight_decay"], momentum, 1 - group["dampening"], -float(group.lr.item())]
        decay = bool(group["weight_decay"])
        return bool(kernel(p.payload, g.payload, buf, settings, decay=decay, first=first,
                           nesterov=group["nesterov"]))  # fmt: skip

    def _op_update(self, p: Tensor, g: Tensor, group: Hyperparameters, state: dict[str, Tensor]) -> None:
        if group["weight_decay"]:
            g = g + p * group["weight_decay"]
        if group["momentum"]:
            buf = state["momentum_buffer"]
            momentum = self.scalar(group.tensors["momentum"], p)
            first = state["step"] == 1  # the buffer starts as the first gradient
            buf.assign(where(first, g, buf * momentum + g * (1 - group["dampening"])))
            g = g + buf * momentum if group["nesterov"] else buf
        p.assign(p + g * self.scalar(-group.lr, p))

"""Adam and AdamW, with PyTorch's bias-corrected update (and its order of operations).

The update is written in ops (so a traced step shows it); in eager mode on a backend with an Adam kernel
(the cpu backend's, see verigrad/backends/cpu/optim.c) a group's parameters are updated by one kernel call
over all of them (one by one where their step counts or dtypes differ) that gives the same bits.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from ..ops import maximum
from ..tensor import Tensor
from .optimizer import Hyperparameters, Optimizer, check_lr, fused_kernel


def adam_settings(lr: float, betas: tuple[float, float], eps: float, weight_decay: float) -> dict:
    """The settings every Adam-like optimizer has, checked as PyTorch checks them."""
    check_lr(lr)
    if not eps >= 0.0:
        raise ValueError(f"Invalid epsilon value: {eps}")
    for i, beta in enumerate(betas):
        if isinstance(beta, Tensor):
            raise TypeError("Tensor betas are not supported by verigrad; pass floats")
        if not 0.0 <= beta < 1.0:
            raise ValueError(f"Invalid beta parameter at index {i}: {beta}")
    if not weight_decay >= 0.0:
        raise ValueError(f"Invalid weight_decay value: {weight_decay}")
    return {"lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay}


def decay_and_moments(
    opt: Optimizer, p: Tensor, g: Tensor, group: Hyperparameters, state: dict[str, Tensor], beta1: Any
) -> tuple[Tensor, Tensor, Tensor]:
    """Weight decay (decoupled: p *= 1 - lr wd; else g += wd p), then the moments m = lerp(m, g, 1 - beta1)
    and v = beta2 v + (1 - beta2) g^2; returns (g, m, v)."""
    wd = group["weight_decay"]
    if wd and group.get("decoupled_weight_decay"):
        p.assign(p * opt.scalar(1 - group.lr * wd, p))
    elif wd:
        g = g + p * wd
    beta2 = group["betas"][1]
    m, v = state["exp_avg"], state["exp_avg_sq"]
    m.assign(m + (g - m) * opt.scalar(1 - beta1, p))
    v.assign(v * beta2 + g * g * (1 - beta2))
    return g, m, v


class Adam(Optimizer):
    """m = lerp(m, g, 1 - beta1); v = beta2 v + (1 - beta2) g^2;
    p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps). weight_decay adds wd * p to g
    (decoupled_weight_decay: p *= 1 - lr wd first, AdamW); amsgrad uses the largest v so far."""

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0,
        amsgrad: bool = False,
        *,
        foreach: bool | None = None,
        maximize: bool = False,
        capturable: bool = False,
        differentiable: bool = False,
        fused: bool | None = None,
        decoupled_weight_decay: bool = False,
    ) -> None:
        if fused and differentiable:
            raise RuntimeError("`fused` does not support `differentiable`")
        settings = adam_settings(lr, betas, eps, weight_decay)
        settings |= {"amsgrad": amsgrad, "maximize": maximize, "foreach": foreach, "capturable": capturable,
                     "differentiable": differentiable, "fused": fused,
                     "decoupled_weight_decay": decoupled_weight_decay}  # fmt: skip
        super().__init__(params, settings)

    def state_names(self, group: Mapping[str, Any]) -> tuple[str, ...]:
        return ("exp_avg", "exp_avg_sq") + (("max_exp_avg_sq",) if group["amsgrad"] else ())

    def update(self, p: Tensor, g: Tensor, group: Hyperparameters, state: dict[str, Tensor]) -> None:
        if group["amsgrad"] and "max_exp_avg_sq" not in state:  # amsgrad turned on after the start
            state.update(self._fresh_state(p, group) | {k: v for k, v in state.items()})
        if not self._fused_update(p, g, group, state):
            self._op_update(p, g, group, state)

    def update_all(self, params: list[Tensor], group: Hyperparameters) -> bool:
        """The backend's Adam kernel over all `params` in one parallel pass, eagerly, where it has one and
        every parameter is of one dtype and at the same step (the bits of `update` on each)."""
        if not params or group["amsgrad"] or group.get("maximize") or type(self).update is not Adam.update:
            return False  # (a subclass's own update: one by one)
        name = "adamw_all" if group["decoupled_weight_decay"] else "adam_all"
        kernel, dtype = fused_kernel(name, params[0]), params[0].dtype
        slots = [self._slots[id(p)] for p in params]
        step = slots[0]["step"].payload
        if kernel is None or any(
            p.dtype is not dtype or s["step"].payload != step for p, s in zip(params, slots)
        ):
            return False
        settings = self._settings(group, float(step + 1))  # the step as counted below, in its dtype
        payloads = [[p.payload for p in params], [p.grad.payload for p in params]]
        payloads += [[s[key].payload for s in slots] for key in ("exp_avg", "exp_avg_sq")]
        if not kernel(*payloads, settings):
            return False
        self.count_all(params)
        return True

    def _fused_update(self, p: Tensor, g: Tensor, group: Hyperparameters, state: dict[str, Tensor]) -> bool:
        """The backend's whole-vector Adam kernel, in eager mode when it has one: the op-based update's
        settings computed the same way in f64 (rounded to the dtype by the kernel), then one pass."""
        decoupled = group["decoupled_weight_decay"]
        kernel = None if group["amsgrad"] else fused_kernel("adamw" if decoupled else "adam", p)
        if kernel is None:
            return False
        m, v = state["exp_avg"], state["exp_avg_sq"]
        settings = self._settings(group, state["step"].item())
        return bool(kernel(p.payload, g.payload, m.payload, v.payload, settings))

    @staticmethod
    def _settings(group: Hyperparameters, step: float) -> list:
        """The kernels' settings at step `step` (optim.c's order), in f64 as the op-based update's."""
        beta1, beta2 = group["betas"]
        lr, wd = float(group.lr.item()), group["weight_decay"]
        t = np.float64(step)
        return [
            1 - lr * wd,
            wd,
            1 - beta1,
            beta2,
            1 - beta2,
            np.sqrt(1 - np.power(beta2, t)),
            group["eps"],
            -(lr / (1 - np.power(beta1, t))),
        ]

    def _op_update(self, p: Tensor, g: Tensor, group: Hyperparameters, state: dict[str, Tensor]) -> None:
        beta2 = group["betas"][1]
        lr, beta1 = group.lr, group.tensors["beta1"]  # 0-d f64 tensors: PyTorch computes these settings
        # in Python doubles
        g, m, v = decay_and_moments(self, p, g, group, state, beta1)
        t = self.count(state)
        step_size = lr / (1 - beta1**t)
        if group["amsgrad"]:  # the largest second moment so far (PyTorch's AMSGrad)
            largest = state["max_exp_avg_sq"]
            v = largest.assign(maximum(largest, v))
        denom = v.sqrt() / self.scalar((1 - beta2**t).sqrt(), p) + group["eps"]
        p.assign(p + (m / denom) * self.scalar(-step_size, p))


class AdamW(Adam):
    """Adam with decoupled weight decay (default 0.01): p *= 1 - lr * weight_decay before the Adam step."""

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 1e-2,
        amsgrad: bool = False,
        *,
        maximize: bool = False,
        foreach: bool | None = None,
        capturable: bool = False,
        differentiable: bool = False,
        fused: bool | None = None,
    ) -> None:
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach, maximize=maximize,
                         capturable=capturable, differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True)  # fmt: skip

"""Adamax, NAdam and RAdam: PyTorch's update rules, written with ops like Adam's (so a compiled step
follows a learning-rate schedule, and shows the update)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from ..ops import maximum, tensor, where
from ..tensor import Tensor
from .adam import adam_settings, decay_and_moments
from .optimizer import Hyperparameters, Optimizer


class Adamax(Optimizer):
    """m = lerp(m, g, 1 - beta1); u = max(beta2 u, |g| + eps); p -= lr / (1 - beta1^t) * m / u (the
    infinity norm in place of Adam's second moment). weight_decay adds wd * p to g."""

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 2e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0,
        foreach: bool | None = None,
        *,
        maximize: bool = False,
        differentiable: bool = False,
        capturable: bool = False,
    ) -> None:
        settings = adam_settings(lr, betas, eps, weight_decay)
        settings |= {"foreach": foreach, "maximize": maximize, "differentiable": differentiable,
                     "capturable": capturable}  # fmt: skip
        super().__init__(params, settings)

    def state_names(self, group: Mapping[str, Any]) -> tuple[str, ...]:
        return ("exp_avg", "exp_inf")

    def update(self, p: Tensor, g: Tensor, group: Hyperparameters, state: dict[str, Tensor]) -> None:
        beta1, beta2 = group["betas"]
        if group["weight_decay"]:
            g = g + p * group["weight_decay"]
        m, u = state["exp_avg"], state["exp_inf"]
        m.assign(m + (g - m) * (1 - beta1))
        u.assign(maximum(u * beta2, g.abs() + group["eps"]))
        step_size = group.lr / (1 - beta1 ** self.count(state))
        p.assign(p + (m / u) * self.scalar(-step_size, p))


class NAdam(Optimizer):
    """Adam with Nesterov momentum (Dozat), as PyTorch's: mu_t = beta1 (1 - 0.96^(t psi) / 2) for
    psi = momentum_decay, and the update -lr (1 - mu_t) / (1 - prod mu) g / d - lr mu_{t+1} /
    (1 - prod mu * mu_{t+1}) m / d, d = sqrt(v / (1 - beta2^t)) + eps; the running product of the mu_t
    is kept in f32, as PyTorch's state is. weight_decay adds wd * p to g, or with decoupled_weight_decay
    scales p by 1 - lr wd first."""

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 2e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0,
        momentum_decay: float = 4e-3,
        decoupled_weight_decay: bool = False,
        *,
        foreach: bool | None = None,
        maximize: bool = False,
        capturable: bool = False,
        differentiable: bool = False,
    ) -> None:
        settings = adam_settings(lr, betas, eps, weight_decay)
        if not momentum_decay >= 0.0:
            raise ValueError(f"Invalid momentum_decay value: {momentum_decay}")
        settings |= {"momentum_decay": momentum_decay, "decoupled_weight_decay": decoupled_weight_decay,
                     "maximize": maximize, "foreach": foreach, "capturable": capturable,
                     "differentiable": differentiable}  # fmt: skip
        super().__init__(params, settings)

    def state_names(self, group: Mapping[str, Any]) -> tuple[str, ...]:
        return ("exp_avg", "exp_avg_sq")

    def _fresh_state(self, p: Tensor, group: Mapping[str, Any]) -> dict[str, Tensor]:
        # the product of the mu_t, in f32 as PyTorch keeps it (its default scalar dtype, whatever p's)
        state = super()._fresh_state(p, group)
        return {"step": state.pop("step"), "mu_product": tensor(np.array(1.0, dtype=np.float32)), **state}

    def update(self, p: Tensor, g: Tensor, group: Hyperparameters, state: dict[str, Tensor]) -> None:
        beta1, beta2 = group["betas"]
        lr = group.lr
        g, m, v = decay_and_moments(self, p, g, group, state, tensor(np.array(beta1)))
        t = self.count(state)
        decay = group["momentum_decay"]
        mu = (1 - 0.5 * 0.96 ** (t * decay)) * beta1
        mu_next = (1 - 0.5 * 0.96 ** ((t + 1) * decay)) * beta1
        product = state["mu_product"]
        product.assign(product * mu.cast(product.dtype))
        product = product.cast(mu.dtype)
        denom = (v / self.scalar(1 - beta2**t, p)).sqrt() + group["eps"]
        p.assign(p + (g / denom) * self.scalar(-lr * (1 - mu) / (1 - product), p))
        p.assign(p + (m / denom) * self.scalar(-lr * mu_next / (1 - product * mu_next), p))


class RAdam(Optimizer):
    """Adam with the variance of its adaptive rate rectified (Liu et al.), as PyTorch's: while the
    approximated SMA length rho_t is at most 5, p -= lr m / (1 - beta1^t) (momentum only); then the Adam
    step times the rectification r_t. weight_decay adds wd * p to g, or with decoupled_weight_decay
    scales p by 1 - lr wd first."""

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0,
        decoupled_weight_decay: bool = False,
        *,
        foreach: bool | None = None,
        maximize: bool = False,
        capturable: bool = False,
        differentiable: bool = False,
    ) -> None:
        settings = adam_settings(lr, betas, eps, weight_decay)
        settings |= {"maximize": maximize, "foreach": foreach, "capturable": capturable,
                     "decoupled_weight_decay": decoupled_weight_decay,
                     "differentiable": differentiable}  # fmt: skip
        super().__init__(params, settings)

    def state_names(self, group: Mapping[str, Any]) -> tuple[str, ...]:
        return ("exp_avg", "exp_avg_sq")

    def update(self, p: Tensor, g: Tensor, group: Hyperparameters, state: dict[str, Tensor]) -> None:
        beta1, beta2 = group["betas"]
        lr = group.lr
        _, m, v = decay_and_moments(self, p, g, group, state, tensor(np.array(beta1)))
        t = self.count(state)
        correction2 = 1 - beta2**t
        rho_inf = 2 / (1 - beta2) - 1
        rho = rho_inf - 2 * t * beta2**t / correction2
        rectified = rho > 5.0
        # where rho <= 5 the rectification's root has no value; that branch is not taken
        rho_safe = where(rectified, rho, rho_inf)
        rect = ((rho_safe - 4) * (rho_safe - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_safe)).sqrt()
        momentum = m * self.scalar(lr / (1 - beta1**t), p)
        adaptive = momentum * self.scalar(correction2.sqrt() * rect, p) / (v.sqrt() + group["eps"])
        p.assign(p - where(rectified, adaptive, momentum))

"""Adamax, NAdam and RAdam: PyTorch's update rules, written with ops like Adam's (so a compiled step
follows a learning-rate schedule, and shows the update)."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ..ops import maximum, tensor, where
from ..tensor import Tensor
from .adam import adam_settings, decay_and_moments
from .optimizer import Optimizer


class Adamax(Optimizer):
    """m = lerp(m, g, 1 - beta1); u = max(beta2 u, |g| + eps); p -= lr / (1 - beta1^t) * m / u (the
    infinity norm in place of Adam's second moment). weight_decay adds wd * p to g."""

    def __init__(
        self,
        params: Iterable[Tensor],
        lr: float = 2e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
    ) -> None:
        super().__init__(params, adam_settings("Adamax", lr, betas, eps, weight_decay))

    def state_names(self) -> tuple[str, ...]:
        return ("exp_avg", "exp_inf")

    def update(self, index: int, p: Tensor, g: Tensor) -> None:
        beta1, beta2 = self.betas
        if self.weight_decay:
            g = g + p * self.weight_decay
        m, u = self.buffer(index, "exp_avg"), self.buffer(index, "exp_inf")
        m.assign(m + (g - m) * (1 - beta1))
        u.assign(maximum(u * beta2, g.abs() + self.eps))
        step_size = self.defaults.lr / (1 - beta1 ** self.buffer(index, "step"))
        p.assign(p + (m / u) * self.scalar(-step_size, p))


class NAdam(Optimizer):
    """Adam with Nesterov momentum (Dozat), as PyTorch's: mu_t = beta1 (1 - 0.96^(t psi) / 2) for
    psi = momentum_decay, and the update -lr (1 - mu_t) / (1 - prod mu) g / d - lr mu_{t+1} /
    (1 - prod mu * mu_{t+1}) m / d, d = sqrt(v / (1 - beta2^t)) + eps; the running product of the mu_t
    is kept in f32, as PyTorch's state is. weight_decay adds wd * p to g, or with decoupled_weight_decay
    scales p by 1 - lr wd first."""

    def __init__(
        self,
        params: Iterable[Tensor],
        lr: float = 2e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        momentum_decay: float = 4e-3,
        decoupled_weight_decay: bool = False,
    ) -> None:
        if not momentum_decay >= 0:
            raise ValueError(f"invalid NAdam momentum_decay: {momentum_decay}")
        settings = adam_settings("NAdam", lr, betas, eps, weight_decay)
        settings |= {"momentum_decay": momentum_decay, "decoupled_weight_decay": decoupled_weight_decay}
        super().__init__(params, settings)

    def state_names(self) -> tuple[str, ...]:
        return ("exp_avg", "exp_avg_sq")

    def _fresh_state(self, p: Tensor) -> dict[str, Tensor]:
        # the product of the mu_t, in f32 as PyTorch keeps it (its default scalar dtype, whatever p's)
        return {**super()._fresh_state(p), "mu_product": tensor(np.array(1.0, dtype=np.float32))}

    def update(self, index: int, p: Tensor, g: Tensor) -> None:
        beta1, beta2 = self.betas
        lr = self.defaults.lr
        g, m, v = decay_and_moments(self, index, p, g, self.decoupled_weight_decay, tensor(np.array(beta1)))
        t = self.buffer(index, "step")
        mu = (1 - 0.5 * 0.96 ** (t * self.momentum_decay)) * beta1
        mu_next = (1 - 0.5 * 0.96 ** ((t + 1) * self.momentum_decay)) * beta1
        product = self.buffer(index, "mu_product")
        product.assign(product * mu.cast(product.dtype))
        product = product.cast(mu.dtype)
        denom = (v / self.scalar(1 - beta2**t, p)).sqrt() + self.eps
        p.assign(p + (g / denom) * self.scalar(-lr * (1 - mu) / (1 - product), p))
        p.assign(p + (m / denom) * self.scalar(-lr * mu_next / (1 - product * mu_next), p))


class RAdam(Optimizer):
    """Adam with the variance of its adaptive rate rectified (Liu et al.), as PyTorch's: while the
    approximated SMA length rho_t is at most 5, p -= lr m / (1 - beta1^t) (momentum only); then the Adam
    step times the rectification r_t. weight_decay adds wd * p to g, or with decoupled_weight_decay
    scales p by 1 - lr wd first."""

    def __init__(
        self,
        params: Iterable[Tensor],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        decoupled_weight_decay: bool = False,
    ) -> None:
        settings = adam_settings("RAdam", lr, betas, eps, weight_decay)
        super().__init__(params, settings | {"decoupled_weight_decay": decoupled_weight_decay})

    def state_names(self) -> tuple[str, ...]:
        return ("exp_avg", "exp_avg_sq")

    def update(self, index: int, p: Tensor, g: Tensor) -> None:
        beta1, beta2 = self.betas
        lr = self.defaults.lr
        _, m, v = decay_and_moments(self, index, p, g, self.decoupled_weight_decay, tensor(np.array(beta1)))
        t = self.buffer(index, "step")
        correction2 = 1 - beta2**t
        rho_inf = 2 / (1 - beta2) - 1
        rho = rho_inf - 2 * t * beta2**t / correction2
        rectified = rho > 5.0
        # where rho <= 5 the rectification's root has no value; that branch is not taken
        rho_safe = where(rectified, rho, rho_inf)
        rect = ((rho_safe - 4) * (rho_safe - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_safe)).sqrt()
        momentum = m * self.scalar(lr / (1 - beta1**t), p)
        adaptive = momentum * self.scalar(correction2.sqrt() * rect, p) / (v.sqrt() + self.eps)
        p.assign(p - where(rectified, adaptive, momentum))

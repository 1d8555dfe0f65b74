"""Adam and AdamW, with PyTorch's bias-corrected update (and its order of operations).

The update is written in ops (so a traced step shows it); in eager mode on a backend with an Adam kernel
(the cpu backend's, see verigrad/backends/cpu/optim.c) each parameter is updated by one kernel call that
gives the same bits.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from ..ops import maximum
from ..tensor import Tensor
from .optimizer import Optimizer, fused_kernel


def adam_settings(name: str, lr: float, betas: tuple[float, float], eps: float, weight_decay: float) -> dict:
    """The settings every Adam-like optimizer has, checked."""
    if not (lr >= 0 and eps >= 0 and weight_decay >= 0) or not all(0 <= b < 1 for b in betas):
        raise ValueError(f"invalid {name} settings: lr={lr}, betas={betas}, eps={eps}, wd={weight_decay}")
    return {"lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay}


def decay_and_moments(
    opt: Optimizer, index: int, p: Tensor, g: Tensor, decoupled: bool, beta1: Any
) -> tuple[Tensor, Tensor, Tensor]:
    """Weight decay (decoupled: p *= 1 - lr wd; else g += wd p), then the moments m = lerp(m, g, 1 - beta1)
    and v = beta2 v + (1 - beta2) g^2; returns (g, m, v)."""
    if opt.weight_decay and decoupled:
        p.assign(p * opt.scalar(1 - opt.defaults.lr * opt.weight_decay, p))
    elif opt.weight_decay:
        g = g + p * opt.weight_decay
    beta2 = opt.betas[1]
    m, v = opt.buffer(index, "exp_avg"), opt.buffer(index, "exp_avg_sq")
    m.assign(m + (g - m) * opt.scalar(1 - beta1, p))
    v.assign(v * beta2 + g * g * (1 - beta2))
    return g, m, v


class Adam(Optimizer):
    """m = lerp(m, g, 1 - beta1); v = beta2 v + (1 - beta2) g^2;
    p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps). weight_decay adds wd * p to g;
    amsgrad uses the largest v so far."""

    decoupled = False
    default_weight_decay = 0.0

    def __init__(
        self,
        params: Iterable[Tensor],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float | None = None,
        amsgrad: bool = False,
    ) -> None:
        weight_decay = self.default_weight_decay if weight_decay is None else weight_decay
        settings = adam_settings("Adam", lr, betas, eps, weight_decay)
        super().__init__(params, settings | {"amsgrad": amsgrad})

    def state_names(self) -> tuple[str, ...]:
        return ("exp_avg", "exp_avg_sq", "max_exp_avg_sq") if self.amsgrad else ("exp_avg", "exp_avg_sq")

    def update(self, index: int, p: Tensor, g: Tensor) -> None:
        if not self._fused_update(index, p, g):
            self._op_update(index, p, g)

    def _fused_update(self, index: int, p: Tensor, g: Tensor) -> bool:
        """The backend's whole-vector Adam kernel, in eager mode when it has one: the op-based update's
        settings computed the same way in f64 (rounded to the dtype by the kernel), then one pass."""
        kernel = None if self.amsgrad else fused_kernel("adamw" if self.decoupled else "adam", p)
        if kernel is None:
            return False
        beta1, beta2 = self.betas
        lr, wd = float(self.defaults.lr.item()), self.weight_decay
        t = np.float64(self.buffer(index, "step").item())
        settings = [
            1 - lr * wd,
            wd,
            1 - beta1,
            beta2,
            1 - beta2,
            np.sqrt(1 - np.power(beta2, t)),
            self.eps,
            -(lr / (1 - np.power(beta1, t))),
        ]
        m, v = self.buffer(index, "exp_avg"), self.buffer(index, "exp_avg_sq")
        return bool(kernel(p.payload, g.payload, m.payload, v.payload, settings))

    def _op_update(self, index: int, p: Tensor, g: Tensor) -> None:
        beta2 = self.betas[1]
        lr, beta1 = self.defaults.lr, self.defaults.tensors["beta1"]  # 0-d f64 tensors: PyTorch computes
        # these settings in Python doubles
        g, m, v = decay_and_moments(self, index, p, g, self.decoupled, beta1)
        t = self.buffer(index, "step")
        step_size = lr / (1 - beta1**t)
        if self.amsgrad:  # the largest second moment so far (PyTorch's AMSGrad)
            largest = self.buffer(index, "max_exp_avg_sq")
            v = largest.assign(maximum(largest, v))
        denom = v.sqrt() / self.scalar((1 - beta2**t).sqrt(), p) + self.eps
        p.assign(p + (m / denom) * self.scalar(-step_size, p))


class AdamW(Adam):
    """Adam with decoupled weight decay (default 0.01): p *= 1 - lr * weight_decay before the Adam step."""

    decoupled = True
    default_weight_decay = 1e-2

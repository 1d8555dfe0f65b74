"""Adam and AdamW, with PyTorch's bias-corrected update (and its order of operations)."""

from __future__ import annotations

from collections.abc import Iterable

from ..tensor import Tensor
from .optimizer import Optimizer


class Adam(Optimizer):
    """m = lerp(m, g, 1 - beta1); v = beta2 v + (1 - beta2) g^2;
    p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps). weight_decay adds wd * p to g."""

    decoupled = False
    default_weight_decay = 0.0

    def __init__(
        self,
        params: Iterable[Tensor],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float | None = None,
    ) -> None:
        weight_decay = self.default_weight_decay if weight_decay is None else weight_decay
        if not (lr >= 0 and eps >= 0 and weight_decay >= 0) or not all(0 <= b < 1 for b in betas):
            raise ValueError(f"invalid Adam settings: lr={lr}, betas={betas}, eps={eps}, wd={weight_decay}")
        super().__init__(params, {"lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay})

    def state_names(self) -> tuple[str, ...]:
        return ("exp_avg", "exp_avg_sq")

    def update(self, index: int, p: Tensor, g: Tensor) -> None:
        beta1, beta2 = self.betas
        lr = self.defaults.lr  # 0-d f64 tensors: PyTorch computes these settings in Python doubles
        if self.weight_decay and self.decoupled:
            p.assign(p * self.scalar(1 - lr * self.weight_decay, p))
        elif self.weight_decay:
            g = g + p * self.weight_decay
        m, v = self.buffer(index, "exp_avg"), self.buffer(index, "exp_avg_sq")
        m.assign(m + (g - m) * (1 - beta1))
        v.assign(v * beta2 + g * g * (1 - beta2))
        t = self.buffer(index, "step")
        step_size = lr / (1 - beta1**t)
        denom = v.sqrt() / self.scalar((1 - beta2**t).sqrt(), p) + self.eps
        p.assign(p + (m / denom) * self.scalar(-step_size, p))


class AdamW(Adam):
    """Adam with decoupled weight decay (default 0.01): p *= 1 - lr * weight_decay before the Adam step."""

    decoupled = True
    default_weight_decay = 1e-2

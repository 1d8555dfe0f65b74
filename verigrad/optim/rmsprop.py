"""RMSprop and Adagrad (PyTorch's update rules), written with ops like the others."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ..tensor import Tensor
from .optimizer import Optimizer


def _check(**values: float) -> None:
    bad = {k: v for k, v in values.items() if not v >= 0}  # NaN is refused too
    if bad:
        raise ValueError(", ".join(f"{k} must be >= 0, got {v}" for k, v in bad.items()))


class RMSprop(Optimizer):
    """v = alpha v + (1 - alpha) g^2; p -= lr g / (sqrt(v) + eps); `centered` subtracts the squared
    running mean of g from v first; with momentum, b = momentum b + g / (sqrt(v) + eps), p -= lr b."""

    def __init__(
        self,
        params: Iterable[Tensor],
        lr: float = 1e-2,
        alpha: float = 0.99,
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        momentum: float = 0.0,
        centered: bool = False,
    ) -> None:
        _check(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum)
        settings = {"lr": lr, "alpha": alpha, "eps": eps, "weight_decay": weight_decay}
        super().__init__(params, {**settings, "momentum": momentum, "centered": centered})

    def state_names(self) -> tuple[str, ...]:
        return (
            ("square_avg",)
            + (("momentum_buffer",) if self.momentum else ())
            + (("grad_avg",) if self.centered else ())
        )

    def update(self, index: int, p: Tensor, g: Tensor) -> None:
        if self.weight_decay:
            g = g + p * self.weight_decay
        square = self.buffer(index, "square_avg")
        square.assign(square * self.alpha + g * g * (1 - self.alpha))
        if self.centered:
            mean = self.buffer(index, "grad_avg")
            mean.assign(mean + (g - mean) * (1 - self.alpha))
            avg = (square - mean * mean).sqrt() + self.eps
        else:
            avg = square.sqrt() + self.eps
        step = g / avg
        if self.momentum:
            buf = self.buffer(index, "momentum_buffer")
            buf.assign(buf * self.scalar(self.defaults.tensors["momentum"], p) + step)
            step = buf
        p.assign(p + step * self.scalar(-self.defaults.lr, p))


class Adagrad(Optimizer):
    """s += g^2; p -= lr / (1 + (t - 1) lr_decay) * g / (sqrt(s) + eps), s starting at
    initial_accumulator_value."""

    def __init__(
        self,
        params: Iterable[Tensor],
        lr: float = 1e-2,
        lr_decay: float = 0.0,
        weight_decay: float = 0.0,
        initial_accumulator_value: float = 0.0,
        eps: float = 1e-10,
    ) -> None:
        _check(
            lr=lr, lr_decay=lr_decay, weight_decay=weight_decay, eps=eps, initial=initial_accumulator_value
        )
        settings = {"lr": lr, "lr_decay": lr_decay, "weight_decay": weight_decay, "eps": eps}
        super().__init__(params, {**settings, "initial_accumulator_value": initial_accumulator_value})
        for state in self.state:
            np.copyto(state["sum"].payload, initial_accumulator_value)

    def state_names(self) -> tuple[str, ...]:
        return ("sum",)

    def update(self, index: int, p: Tensor, g: Tensor) -> None:
        if self.weight_decay:
            g = g + p * self.weight_decay
        total = self.buffer(index, "sum")
        total.assign(total + g * g)
        steps = self.buffer(index, "step").cast(p.dtype)
        rate = self.scalar(-self.defaults.lr, p) / ((steps - 1) * self.lr_decay + 1)
        p.assign(p + g / (total.sqrt() + self.eps) * rate)

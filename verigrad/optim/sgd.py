"""SGD with momentum, dampening, Nesterov momentum and weight decay (PyTorch's update rule)."""

from __future__ import annotations

from collections.abc import Iterable

from ..ops import where
from ..tensor import Tensor
from .optimizer import Optimizer, fused_kernel


class SGD(Optimizer):
    """p -= lr * g, where g += weight_decay * p and, with momentum, b = momentum * b + (1 - dampening) * g."""

    def __init__(
        self,
        params: Iterable[Tensor],
        lr: float = 1e-3,
        momentum: float = 0.0,
        dampening: float = 0.0,
        weight_decay: float = 0.0,
        nesterov: bool = False,
    ) -> None:
        if not (lr >= 0 and momentum >= 0 and weight_decay >= 0):  # NaN is refused too
            raise ValueError(
                f"lr, momentum and weight_decay must be >= 0, got {lr}, {momentum}, {weight_decay}"
            )
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum needs momentum > 0 and dampening 0")
        super().__init__(
            params,
            {
                "lr": lr,
                "momentum": momentum,
                "dampening": dampening,
                "weight_decay": weight_decay,
                "nesterov": nesterov,
            },
        )

    def state_names(self) -> tuple[str, ...]:
        return ("momentum_buffer",) if self.momentum else ()

    def update(self, index: int, p: Tensor, g: Tensor) -> None:
        if not self._fused_update(index, p, g):
            self._op_update(index, p, g)

    def _fused_update(self, index: int, p: Tensor, g: Tensor) -> bool:
        """The backend's whole-vector SGD kernel, in eager mode when it has one: the op-based update's
        settings in f64 (rounded to the dtype by the kernel), then one pass."""
        kernel = fused_kernel("sgd", p)
        if kernel is None:
            return False
        buf = self.buffer(index, "momentum_buffer").payload if self.momentum else None
        first = self.momentum and float(self.buffer(index, "step").item()) == 1
        settings = [self.weight_decay, self.momentum, 1 - self.dampening, -float(self.defaults.lr.item())]
        return bool(kernel(p.payload, g.payload, buf, settings, decay=bool(self.weight_decay), first=first,
                           nesterov=self.nesterov))  # fmt: skip

    def _op_update(self, index: int, p: Tensor, g: Tensor) -> None:
        if self.weight_decay:
            g = g + p * self.weight_decay
        if self.momentum:
            buf = self.buffer(index, "momentum_buffer")
            momentum = self.scalar(self.defaults.tensors["momentum"], p)
            first = self.buffer(index, "step") == 1  # the buffer starts as the first gradient
            buf.assign(where(first, g, buf * momentum + g * (1 - self.dampening)))
            g = g + buf * momentum if self.nesterov else buf
        p.assign(p + g * self.scalar(-self.defaults.lr, p))

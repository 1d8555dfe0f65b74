"""SparseAdam, PyTorch's `torch.optim.SparseAdam`: Adam for sparse gradients. verigrad has no sparse
tensors, so every gradient is dense, and PyTorch's SparseAdam refuses a dense gradient: `step()` raises
its error (use Adam, whose update SparseAdam's equals on the rows a sparse gradient holds)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from .adam import adam_settings
from .optimizer import Optimizer


class SparseAdam(Optimizer):
    """Made and checked as PyTorch's; a step with a gradient raises PyTorch's RuntimeError."""

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        maximize: bool = False,
    ) -> None:
        settings = adam_settings(lr, betas, eps, 0.0)  # Adam's checks, then SparseAdam's stricter two
        if not lr > 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not eps > 0.0:
            raise ValueError(f"Invalid epsilon value: {eps}")
        super().__init__(params, {"lr": lr, "betas": settings["betas"], "eps": eps, "maximize": maximize})

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Refuse, as PyTorch's does for a dense gradient (every verigrad gradient is dense)."""
        if any(p.grad is not None for p in self.params):
            raise RuntimeError("SparseAdam does not support dense gradients, please consider Adam instead")
        return super().step(closure)

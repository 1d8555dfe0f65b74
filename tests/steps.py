"""The training step the tests compile and run eagerly: PyTorch's loop body as one function."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def training_step(model: Any, opt: Any, loss_fn: Any, *, logits: bool = False) -> Callable:
    """step(x, y): the loss of model(x) against y, its gradients and one optimizer update; returns the
    loss (and the logits with `logits=True`)."""

    def step(x, y):
        out = model(x)
        loss = loss_fn(out, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return (loss, out) if logits else loss

    return step

"""As PyTorch's `torch.optim.swa_utils`: a running average of a model's weights (`AveragedModel`, with
SWA's equal average or an exponential moving average), the SWA learning-rate schedule (`SWALR`) and
`update_bn`, which recomputes the batch-norm statistics for the averaged weights."""

from __future__ import annotations

import copy
import itertools
import math
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from .. import ops
from ..autograd import no_grad
from ..nn.module import Module
from ..nn.normalization import _BatchNorm
from ..tensor import Tensor
from .lerp import lerp
from .lr_scheduler import LRScheduler, _per_group
from .optimizer import Optimizer

__all__ = [
    "SWALR",
    "AveragedModel",
    "get_ema_avg_fn",
    "get_ema_multi_avg_fn",
    "get_swa_avg_fn",
    "get_swa_multi_avg_fn",
    "update_bn",
]


def get_ema_multi_avg_fn(decay: float = 0.999) -> Callable[..., None]:
    """The EMA of several parameters at once: each ema = lerp(ema, current, 1 - decay), in place."""
    if decay < 0.0 or decay > 1.0:
        raise ValueError(f"Invalid decay value {decay} provided. Please provide a value in [0,1] range.")

    def ema_update(ema_params: list[Tensor], current_params: list[Tensor], _: Any) -> None:
        with no_grad():
            for ema, current in zip(ema_params, current_params):
                if ema.dtype.is_float:
                    ema.assign(lerp(ema, current, 1 - decay))
                else:
                    ema.assign(ema * decay + current * (1 - decay))

    return ema_update


def get_swa_multi_avg_fn() -> Callable[..., None]:
    """SWA's equal average of several parameters: each averaged = lerp(averaged, current, 1 / (n + 1))."""

    def swa_update(averaged: list[Tensor], current: list[Tensor], num_averaged: Any) -> None:
        # PyTorch's weight is 1 / (n_averaged + 1) of its int64 buffer: an f32 tensor, read as a number
        weight = float(np.float32(1.0) / np.float32(float(num_averaged) + 1))
        with no_grad():
            for a, c in zip(averaged, current):
                if not a.dtype.is_float:  # PyTorch's addcdiv of integers (a count buffer, use_buffers=True)
                    raise RuntimeError(
                        "Integer division with addcdiv is no longer supported: get_swa_multi_avg_fn cannot "
                        f"average the {a.dtype.name} buffers (use_buffers=True)"
                    )
                a.assign(lerp(a, c, weight))

    return swa_update


def get_ema_avg_fn(decay: float = 0.999) -> Callable[[Tensor, Tensor, Any], Tensor]:
    """The EMA of one parameter: decay * ema + (1 - decay) * current."""
    if decay < 0.0 or decay > 1.0:
        raise ValueError(f"Invalid decay value {decay} provided. Please provide a value in [0,1] range.")

    def ema_update(ema: Tensor, current: Tensor, num_averaged: Any) -> Tensor:
        return decay * ema + (1 - decay) * current

    return ema_update


def get_swa_avg_fn() -> Callable[[Tensor, Tensor, Any], Tensor]:
    """SWA's equal average of one parameter: averaged + (current - averaged) / (n + 1)."""

    def swa_update(averaged: Tensor, current: Tensor, num_averaged: Any) -> Tensor:
        return averaged + (current - averaged) / (num_averaged + 1)

    return swa_update


class AveragedModel(Module):
    """A copy of `model` whose parameters (and buffers, with use_buffers) are the average of the model's
    at each `update_parameters(model)`: SWA's equal average by default, `avg_fn(averaged, current,
    n_averaged)` or `multi_avg_fn(averaged_list, current_list, n_averaged)` otherwise (the first call
    copies). Calling it calls the copy. `n_averaged` is a buffer, as PyTorch's."""

    def __init__(
        self,
        model: Any,
        device: Any = None,
        avg_fn: Callable[[Tensor, Tensor, Any], Tensor] | None = None,
        multi_avg_fn: Callable[..., None] | None = None,
        use_buffers: bool = False,
    ) -> None:
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise AssertionError("Only one of avg_fn and multi_avg_fn should be provided")
        self.module = copy.deepcopy(model)
        self.register_buffer("n_averaged", ops.tensor(np.array(0, dtype=np.int64)))
        self.avg_fn, self.multi_avg_fn, self.use_buffers = avg_fn, multi_avg_fn, use_buffers

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.module(*args, **kwargs)

    def update_parameters(self, model: Any) -> None:
        """Average `model`'s current parameters (and buffers, with use_buffers) into this copy's."""
        if self.use_buffers:
            own = list(itertools.chain(self.module.parameters(), self.module.buffers()))
            theirs = list(itertools.chain(model.parameters(), model.buffers()))
        else:
            own, theirs = list(self.parameters()), list(model.parameters())
        own = [p.detach() for p in own]
        theirs = [p.detach() for p in theirs]
        count = int(self.n_averaged.item())
        with no_grad():
            if count == 0:
                for a, c in zip(own, theirs):
                    a.assign(c)
            elif self.multi_avg_fn is not None:
                self.multi_avg_fn(own, theirs, self.n_averaged)
            else:
                average = self.avg_fn or get_swa_avg_fn()
                for a, c in zip(own, theirs):
                    a.assign(average(a, c, self.n_averaged))
            if not self.use_buffers:  # the buffers follow the model's
                for a, c in zip(self.module.buffers(), model.buffers()):
                    a.assign(c.detach())
            self.n_averaged.assign(self.n_averaged + 1)


def update_bn(loader: Iterable[Any], model: Any, device: Any = None) -> None:
    """Recompute every batch norm's running statistics as the plain average over one pass of `loader`
    (an input, or a list or tuple whose first element is the input), in training mode."""
    momenta = {}
    for module in model.modules():
        if isinstance(module, _BatchNorm):
            module.reset_running_stats()
            momenta[module] = module.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for module in momenta:
        module.momentum = None
    for input in loader:
        if isinstance(input, list | tuple):
            input = input[0]
        if device is not None:
            input = input.to(device)
        model(input)
    for module, momentum in momenta.items():
        module.momentum = momentum
    model.train(was_training)


class SWALR(LRScheduler):
    """Anneals each group's rate to `swa_lr` over `anneal_epochs` steps (along a half cosine, or a line),
    then holds it; PyTorch's formula (from the current rate)."""

    def __init__(
        self,
        optimizer: Optimizer,
        swa_lr: float | list[float],
        anneal_epochs: int = 10,
        anneal_strategy: str = "cos",
        last_epoch: int = -1,
    ) -> None:
        for lr, group in zip(_per_group("swa_lr", optimizer, swa_lr), optimizer.param_groups):
            group["swa_lr"] = lr
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(
                f"anneal_strategy must be one of 'cos' or 'linear', instead got {anneal_strategy}"
            )
        self._anneal_strategy = anneal_strategy
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f"anneal_epochs must be equal or greater than 0, got {anneal_epochs}")
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    def _anneal(self, t: float) -> float:
        return (1 - math.cos(math.pi * t)) / 2 if self._anneal_strategy == "cos" else t

    def rate(self, lr: float, base_lr: float, epoch: int, index: int) -> float:
        swa_lr = self.optimizer.param_groups[index]["swa_lr"]
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        prev_alpha = self._anneal(max(0, min(1, (step - 1) / max(1, self.anneal_epochs))))
        start = swa_lr if prev_alpha == 1 else (lr - prev_alpha * swa_lr) / (1 - prev_alpha)
        alpha = self._anneal(max(0, min(1, step / max(1, self.anneal_epochs))))
        return swa_lr * alpha + start * (1 - alpha)

"""Learning-rate schedules, as PyTorch's `torch.optim.lr_scheduler`: StepLR, MultiStepLR, ExponentialLR,
CosineAnnealingLR, CosineAnnealingWarmRestarts, LinearLR, LambdaLR, OneCycleLR (which also cycles the
momentum), SequentialLR (one schedule after another), and ReduceLROnPlateau (driven by a metric).

A schedule sets the optimizer's learning rate (and OneCycleLR its momentum), which live in tensors
compiled steps read, so a compiled training step follows them without being traced again. Made, a
schedule sets epoch 0's rate; each `step()` (after `optimizer.step()`, once per epoch or per batch)
moves to the next epoch. The rates are formed from the current one by the same arithmetic PyTorch
uses, so the two give the same floats step for step.
"""

from __future__ import annotations

import bisect
import math
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from .optimizer import Optimizer


class LRScheduler:
    """The base: subclasses give `rate(lr, epoch)`, epoch's learning rate from the previous epoch's."""

    def __init__(self, optimizer: Optimizer) -> None:
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"a schedule needs a verigrad optimizer, got {type(optimizer).__name__}")
        self.optimizer, self.base_lr = optimizer, _initial_rate(optimizer)
        self.last_epoch = -1
        self.step()

    def rate(self, lr: float, epoch: int) -> float:
        raise NotImplementedError

    def step(self) -> None:
        self.last_epoch += 1
        self.optimizer.lr = self.rate(self.optimizer.lr, self.last_epoch)

    def get_last_lr(self) -> list[float]:
        """The rate the last `step()` set, one per parameter group (verigrad's optimizers have one)."""
        return [self.optimizer.lr]

    def state_dict(self) -> dict[str, Any]:
        return {"last_epoch": self.last_epoch, "base_lr": self.base_lr, "lr": self.optimizer.lr}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.last_epoch, self.base_lr = int(state["last_epoch"]), float(state["base_lr"])
        self.optimizer.lr = float(state["lr"])


def _initial_rate(optimizer: Optimizer) -> float:
    """The rate before any schedule, kept by the first one made (PyTorch's initial_lr): a later schedule
    of the same optimizer starts from it too, whatever the first has set since."""
    return optimizer.defaults.setdefault("initial_lr", optimizer.lr)


def _positive(name: str, value: Any) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")


class StepLR(LRScheduler):
    """The rate times `gamma` every `step_size` epochs."""

    def __init__(self, optimizer: Optimizer, step_size: int, gamma: float = 0.1) -> None:
        _positive("step_size", step_size)
        self.step_size, self.gamma = step_size, gamma
        super().__init__(optimizer)

    def rate(self, lr: float, epoch: int) -> float:
        return lr * self.gamma if epoch > 0 and epoch % self.step_size == 0 else lr


class MultiStepLR(LRScheduler):
    """The rate times `gamma` at each epoch of `milestones` (a milestone given twice counts twice)."""

    def __init__(self, optimizer: Optimizer, milestones: Iterable[int], gamma: float = 0.1) -> None:
        self.milestones, self.gamma = Counter(int(m) for m in milestones), gamma
        super().__init__(optimizer)

    def rate(self, lr: float, epoch: int) -> float:
        times = self.milestones.get(epoch, 0)
        return lr * self.gamma**times if times else lr


class ExponentialLR(LRScheduler):
    """The rate times `gamma` every epoch."""

    def __init__(self, optimizer: Optimizer, gamma: float) -> None:
        self.gamma = gamma
        super().__init__(optimizer)

    def rate(self, lr: float, epoch: int) -> float:
        return lr * self.gamma if epoch > 0 else lr


class CosineAnnealingLR(LRScheduler):
    """From the initial rate down to `eta_min` along half a cosine over `T_max` epochs, then back up
    (SGDR without restarts): eta_min + (base - eta_min) (1 + cos(pi epoch / T_max)) / 2, reached by
    PyTorch's recurrence from the previous rate."""

    def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0) -> None:
        _positive("T_max", T_max)
        self.T_max, self.eta_min = T_max, eta_min
        super().__init__(optimizer)

    def rate(self, lr: float, epoch: int) -> float:
        period, low = self.T_max, self.eta_min
        if epoch == 0:
            return lr
        if (epoch - 1 - period) % (2 * period) == 0:  # at the bottom: the ratio below would be 0 / 0
            return lr + (self.base_lr - low) * (1 - math.cos(math.pi / period)) / 2
        ratio = (1 + math.cos(math.pi * epoch / period)) / (1 + math.cos(math.pi * (epoch - 1) / period))
        return ratio * (lr - low) + low


class CosineAnnealingWarmRestarts(LRScheduler):
    """SGDR: eta_min + (base - eta_min) (1 + cos(pi T_cur / T_i)) / 2, T_cur counting epochs since the
    last restart, each period T_mult times the last (the first T_0)."""

    def __init__(self, optimizer: Optimizer, T_0: int, T_mult: int = 1, eta_min: float = 0.0) -> None:
        _positive("T_0", T_0)
        _positive("T_mult", T_mult)
        self.T_0, self.T_i, self.T_mult, self.eta_min, self.T_cur = T_0, T_0, T_mult, eta_min, -1
        super().__init__(optimizer)

    def rate(self, lr: float, epoch: int) -> float:
        self.T_cur += 1
        if self.T_cur >= self.T_i:
            self.T_cur, self.T_i = self.T_cur - self.T_i, self.T_i * self.T_mult
        return (
            self.eta_min + (self.base_lr - self.eta_min) * (1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2
        )

    def state_dict(self) -> dict[str, Any]:
        return super().state_dict() | {"T_cur": self.T_cur, "T_i": self.T_i}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.T_cur, self.T_i = int(state["T_cur"]), int(state["T_i"])


class LinearLR(LRScheduler):
    """The initial rate times a factor going linearly from `start_factor` to `end_factor` over
    `total_iters` epochs (a warm-up), then constant."""

    def __init__(
        self, optimizer: Optimizer, start_factor: float = 1 / 3, end_factor: float = 1.0, total_iters: int = 5
    ) -> None:
        if not 0 < start_factor <= 1 or not 0 <= end_factor <= 1:
            raise ValueError(
                f"start_factor must be in (0, 1] and end_factor in [0, 1], got {start_factor}, {end_factor}"
            )
        _positive("total_iters", total_iters)
        self.start_factor, self.end_factor, self.total_iters = start_factor, end_factor, total_iters
        super().__init__(optimizer)

    def rate(self, lr: float, epoch: int) -> float:
        if epoch == 0:
            return lr * self.start_factor
        if epoch > self.total_iters:
            return lr
        change = self.end_factor - self.start_factor
        return lr * (1.0 + change / (self.total_iters * self.start_factor + (epoch - 1) * change))


class LambdaLR(LRScheduler):
    """The initial rate times `lr_lambda(epoch)`."""

    def __init__(self, optimizer: Optimizer, lr_lambda: Callable[[int], float]) -> None:
        if not callable(lr_lambda):
            raise TypeError("lr_lambda must be a function of the epoch")
        self.lr_lambda = lr_lambda
        super().__init__(optimizer)

    def rate(self, lr: float, epoch: int) -> float:
        return self.base_lr * self.lr_lambda(epoch)


class SequentialLR(LRScheduler):
    """`schedulers` (of this optimizer) in turn: the i-th from epoch milestones[i - 1] on, started at its
    epoch 0 from the initial rate, as PyTorch's."""

    def __init__(
        self, optimizer: Optimizer, schedulers: Iterable[LRScheduler], milestones: Iterable[int]
    ) -> None:
        schedulers, milestones = list(schedulers), list(milestones)
        if not schedulers or len(milestones) != len(schedulers) - 1:
            raise ValueError(
                f"SequentialLR needs one milestone fewer than schedulers, got {len(milestones)} "
                f"for {len(schedulers)}"
            )
        if any(s.optimizer is not optimizer for s in schedulers):
            raise ValueError("SequentialLR: every scheduler must be of the optimizer given")
        if milestones != sorted(milestones) or any(not isinstance(m, int) or m <= 0 for m in milestones):
            raise ValueError(
                f"SequentialLR: milestones must be increasing positive integers, got {milestones}"
            )
        self.schedulers, self.milestones = schedulers, milestones
        self.optimizer, self.base_lr = optimizer, _initial_rate(optimizer)
        optimizer.lr = self.base_lr  # undo what the schedulers set when they were made
        for scheduler in schedulers:
            scheduler.last_epoch -= 1
        schedulers[0].step()
        self.last_epoch = 0

    def step(self) -> None:
        self.last_epoch += 1
        index = bisect.bisect_right(self.milestones, self.last_epoch)
        scheduler = self.schedulers[index]
        if index > 0 and self.milestones[index - 1] == self.last_epoch:  # its epoch 0, from the start
            scheduler.last_epoch = 0
            self.optimizer.lr = scheduler.rate(self.base_lr, 0)
        else:
            scheduler.step()

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "schedulers": [s.state_dict() for s in self.schedulers]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        for scheduler, saved in zip(self.schedulers, state["schedulers"]):
            scheduler.load_state_dict(saved)
        self.optimizer.lr = float(state["lr"])


class OneCycleLR(LRScheduler):
    """The 1cycle policy, stepped once per batch: the rate rises from max_lr / div_factor to `max_lr` over
    the first `pct_start` of `total_steps` (or epochs x steps_per_epoch), then falls to the start rate /
    `final_div_factor`, along half cosines (or lines); with `cycle_momentum`, the optimizer's momentum
    (SGD's, RMSprop's, or Adam's beta1) goes the other way between `max_momentum` and `base_momentum`.
    `three_phase`: up, back down to the start rate, then down to the least. PyTorch's formulas; the
    optimizer's own rate is replaced. A step past the last raises."""

    def __init__(
        self,
        optimizer: Optimizer,
        max_lr: float,
        total_steps: int | None = None,
        epochs: int | None = None,
        steps_per_epoch: int | None = None,
        pct_start: float = 0.3,
        anneal_strategy: str = "cos",
        cycle_momentum: bool = True,
        base_momentum: float = 0.85,
        max_momentum: float = 0.95,
        div_factor: float = 25.0,
        final_div_factor: float = 1e4,
        three_phase: bool = False,
    ) -> None:
        if total_steps is None:
            if epochs is None or steps_per_epoch is None:
                raise ValueError("OneCycleLR needs total_steps, or epochs and steps_per_epoch")
            _positive("epochs", epochs)
            _positive("steps_per_epoch", steps_per_epoch)
            total_steps = epochs * steps_per_epoch
        _positive("total_steps", total_steps)
        if not 0 <= pct_start <= 1:
            raise ValueError(f"pct_start must be between 0 and 1, got {pct_start!r}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"anneal_strategy must be 'cos' or 'linear', got {anneal_strategy!r}")
        self.key = "betas" if "betas" in optimizer.defaults else "momentum"
        if cycle_momentum and self.key not in optimizer.defaults:
            name = type(optimizer).__name__
            raise ValueError(f"cycle_momentum needs an optimizer with a momentum or betas; {name} has none")
        self.total_steps, self.cycle_momentum = total_steps, cycle_momentum
        self.anneal = _cosine if anneal_strategy == "cos" else _linear
        start, least = max_lr / div_factor, max_lr / div_factor / final_div_factor
        up = float(pct_start * total_steps) - 1
        # (the step a phase ends at, its rates from and to, its momenta from and to)
        self.phases = (
            [(up, start, max_lr, max_momentum, base_momentum),
             (float(2 * pct_start * total_steps) - 2, max_lr, start, base_momentum, max_momentum),
             (total_steps - 1, start, least, max_momentum, max_momentum)]
            if three_phase
            else [(up, start, max_lr, max_momentum, base_momentum),
                  (total_steps - 1, max_lr, least, base_momentum, max_momentum)]
        )  # fmt: skip
        super().__init__(optimizer)

    def rate(self, lr: float, epoch: int) -> float:
        if epoch > self.total_steps:
            raise ValueError(
                f"stepped {epoch} times; the schedule has {self.total_steps} steps (total_steps)"
            )
        begin = 0.0
        for k, (end, lr_from, lr_to, m_from, m_to) in enumerate(self.phases):
            if epoch <= end or k == len(self.phases) - 1:
                part = (epoch - begin) / (end - begin)
                if self.cycle_momentum:
                    self._momentum(self.anneal(m_from, m_to, part))
                return self.anneal(lr_from, lr_to, part)
            begin = end
        raise AssertionError("unreachable: the last phase takes every step")

    def _momentum(self, value: float) -> None:
        settings = self.optimizer.defaults
        settings[self.key] = (value, *settings["betas"][1:]) if self.key == "betas" else value


def _cosine(start: float, end: float, part: float) -> float:
    return end + (start - end) / 2.0 * (math.cos(math.pi * part) + 1)


def _linear(start: float, end: float, part: float) -> float:
    return (end - start) * part + start


class ReduceLROnPlateau:
    """The rate times `factor` once a metric (`step(metric)`, e.g. each epoch's validation loss) has not
    improved for more than `patience` epochs, as PyTorch's: improved means below best * (1 - threshold)
    for mode "min" ("rel"; best - threshold for "abs"; above for "max"); after a cut, `cooldown` epochs
    count no bad epochs; the rate stops at `min_lr`, and a cut smaller than `eps` is not made."""

    def __init__(
        self,
        optimizer: Optimizer,
        mode: str = "min",
        factor: float = 0.1,
        patience: int = 10,
        threshold: float = 1e-4,
        threshold_mode: str = "rel",
        cooldown: int = 0,
        min_lr: float = 0.0,
        eps: float = 1e-8,
    ) -> None:
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"a schedule needs a verigrad optimizer, got {type(optimizer).__name__}")
        if mode not in ("min", "max") or threshold_mode not in ("rel", "abs"):
            raise ValueError(
                "mode must be 'min' or 'max' and threshold_mode 'rel' or 'abs', "
                f"got {mode!r} and {threshold_mode!r}"
            )
        if not 0.0 <= factor < 1.0:
            raise ValueError(f"factor must be in [0, 1), got {factor}")
        self.optimizer, self.mode, self.factor, self.patience = optimizer, mode, factor, patience
        self.threshold, self.threshold_mode, self.cooldown = threshold, threshold_mode, cooldown
        self.min_lr, self.eps = min_lr, eps
        self.best = math.inf if mode == "min" else -math.inf
        self.num_bad_epochs = self.cooldown_counter = 0
        self.last_epoch = 0

    def is_better(self, value: float) -> bool:
        if self.mode == "min":
            edge = (
                self.best * (1.0 - self.threshold)
                if self.threshold_mode == "rel"
                else self.best - self.threshold
            )
            return value < edge
        edge = (
            self.best * (self.threshold + 1.0) if self.threshold_mode == "rel" else self.best + self.threshold
        )
        return value > edge

    def step(self, metrics: Any) -> None:
        value = float(metrics.item() if hasattr(metrics, "item") else metrics)
        self.last_epoch += 1
        if self.is_better(value):
            self.best, self.num_bad_epochs = value, 0
        else:
            self.num_bad_epochs += 1
        if self.cooldown_counter > 0:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0
        if self.num_bad_epochs > self.patience:
            old = self.optimizer.lr
            new = max(old * self.factor, self.min_lr)
            if old - new > self.eps:
                self.optimizer.lr = new
            self.cooldown_counter, self.num_bad_epochs = self.cooldown, 0

    def get_last_lr(self) -> list[float]:
        return [self.optimizer.lr]

    def state_dict(self) -> dict[str, Any]:
        keys = ("best", "num_bad_epochs", "cooldown_counter", "last_epoch")
        return {k: getattr(self, k) for k in keys} | {"lr": self.optimizer.lr}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for key in ("best", "num_bad_epochs", "cooldown_counter", "last_epoch"):
            setattr(self, key, state[key])
        self.optimizer.lr = float(state["lr"])


__all__ = [
    "CosineAnnealingLR",
    "CosineAnnealingWarmRestarts",
    "ExponentialLR",
    "LRScheduler",
    "LambdaLR",
    "LinearLR",
    "MultiStepLR",
    "OneCycleLR",
    "ReduceLROnPlateau",
    "StepLR",
]

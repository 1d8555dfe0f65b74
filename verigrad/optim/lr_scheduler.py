"""Learning-rate schedules, as PyTorch's `torch.optim.lr_scheduler`: StepLR, MultiStepLR, ExponentialLR,
MultiplicativeLR, ConstantLR, PolynomialLR,
CosineAnnealingLR, CosineAnnealingWarmRestarts, LinearLR, LambdaLR, OneCycleLR and CyclicLR (which also
cycle the momentum), SequentialLR (one schedule after another), ChainedScheduler
(several at once), and ReduceLROnPlateau (driven by a metric).

A schedule sets each parameter group's learning rate (and OneCycleLR its momentum), which live in
tensors compiled steps read, so a compiled training step follows them without being traced again. Made,
a schedule sets epoch 0's rates; each `step()` (after `optimizer.step()`, once per epoch or per batch)
moves to the next epoch. The rates are formed from the current ones by the same arithmetic PyTorch
uses, so the two give the same floats step for step; `state_dict()` is PyTorch's (the schedule's
attributes; the rates themselves are in the optimizer's state dict).
"""

from __future__ import annotations

import bisect
import math
import types
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from .optimizer import Optimizer


class LRScheduler:
    """The base: subclasses give `rate(lr, base_lr, epoch, index)`, group `index`'s learning rate at
    `epoch` from its rate at the previous epoch and its initial rate."""

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1) -> None:
        _check_optimizer(optimizer)
        _only_fresh(type(self).__name__, last_epoch)
        self.optimizer = optimizer
        for group in optimizer.param_groups:  # the rate before any schedule (PyTorch's initial_lr): a
            group.setdefault("initial_lr", group["lr"])  # later schedule starts from it too
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._step_count = 0
        self._get_lr_called_within_step = self._is_initial = False  # PyTorch's flags (state dict keys)
        self.step()

    def rate(self, lr: float, base_lr: float, epoch: int, index: int) -> float:
        raise NotImplementedError

    def advance(self, epoch: int) -> None:
        """What a schedule updates once a step, before each group's rate (none here)."""

    def step(self) -> None:
        """The next epoch's rates (call it after `optimizer.step()`)."""
        self._step_count += 1
        self._next_epoch()

    def _next_epoch(self) -> None:
        self.last_epoch += 1
        self.advance(self.last_epoch)
        self._set_rates(self._rates(self.last_epoch))

    def _rates(self, epoch: int) -> list[float]:
        """Every group's rate, those added after the schedule was made (`add_param_group`) too: PyTorch's
        chainable schedules scale them from their own rate; one that needs a group's initial rate or
        function refuses them (`_initial`)."""
        groups = self.optimizer.param_groups
        bases = self.base_lrs + [None] * (len(groups) - len(self.base_lrs))
        return [self.rate(g["lr"], base, epoch, i) for i, (g, base) in enumerate(zip(groups, bases))]

    def _initial(self, base_lr: float | None) -> float:
        """A group's initial rate, refused for a group the schedule was not made with (PyTorch's strict
        zip)."""
        if base_lr is None:
            raise ValueError(
                f"{type(self).__name__}: the optimizer has {len(self.optimizer.param_groups)} parameter "
                f"groups but the schedule was made for {len(self.base_lrs)}; a group added later has no "
                "initial rate"
            )
        return base_lr

    def _set_rates(self, rates: list[float]) -> None:
        for group, lr in zip(self.optimizer.param_groups, rates):
            group["lr"] = lr
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def restart(self) -> None:
        """Epoch 0 again, from the initial rates (SequentialLR's switch to this schedule, as PyTorch's
        `_update_lr(0)`: the closed form where the schedule has one)."""
        self.last_epoch = 0
        closed = getattr(self, "closed_form", None)
        if len(self.optimizer.param_groups) != len(self.base_lrs):
            self._initial(None)
        if closed is None:
            self._set_rates(self._rates(0))
        else:
            self._set_rates([closed(base, 0) for base in self.base_lrs])

    def get_last_lr(self) -> list[float]:
        """The rates the last `step()` set, one per parameter group."""
        return self._last_lr

    def state_dict(self) -> dict[str, Any]:
        """PyTorch's: the schedule's attributes but the optimizer (whose state dict holds the rates)."""
        return {key: value for key, value in self.__dict__.items() if key != "optimizer"}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.__dict__.update(state_dict)


def _check_optimizer(optimizer: Any) -> None:
    if not isinstance(optimizer, Optimizer):
        raise TypeError(f"a schedule needs a verigrad optimizer, got {type(optimizer).__name__}")


def _only_fresh(name: str, last_epoch: int) -> None:
    if last_epoch != -1:
        raise ValueError(
            f"{name}: last_epoch={last_epoch} (resuming by epoch) is not supported; make the schedule with "
            "last_epoch=-1 and load its state_dict()"
        )


def _per_group(name: str, optimizer: Optimizer, value: Any) -> list[Any]:
    """A setting given once or one per parameter group (PyTorch's `_format_param`)."""
    if isinstance(value, list | tuple):
        if len(value) != len(optimizer.param_groups):
            raise ValueError(f"{name} must have the same length as optimizer.param_groups: "
                             f"{len(optimizer.param_groups)}, got {len(value)}")  # fmt: skip
        return list(value)
    return [value] * len(optimizer.param_groups)


def _positive(name: str, value: Any) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")


class StepLR(LRScheduler):
    """Each rate times `gamma` every `step_size` epochs."""

    def __init__(
        self, optimizer: Optimizer, step_size: int, gamma: float = 0.1, last_epoch: int = -1
    ) -> None:
        _positive("step_size", step_size)
        self.step_size, self.gamma = step_size, gamma
        super().__init__(optimizer, last_epoch)

    def rate(self, lr: float, base_lr: float, epoch: int, index: int) -> float:
        return lr * self.gamma if epoch > 0 and epoch % self.step_size == 0 else lr

    def closed_form(self, base_lr: float, epoch: int) -> float:
        return base_lr * self.gamma ** (epoch // self.step_size)


class _LambdaState:
    """The state dict of a schedule holding functions (`lr_lambdas`), as PyTorch's."""

    def state_dict(self) -> dict[str, Any]:
        """PyTorch's: a function's own attributes are kept (a plain function's are not: None)."""
        state = {k: v for k, v in LRScheduler.state_dict(self).items() if k != "lr_lambdas"}
        state["lr_lambdas"] = [
            None if isinstance(f, types.FunctionType) else dict(vars(f)) for f in self.lr_lambdas
        ]
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        lambdas = state_dict["lr_lambdas"]
        LRScheduler.load_state_dict(self, {k: v for k, v in state_dict.items() if k != "lr_lambdas"})
        for f, saved in zip(self.lr_lambdas, lambdas):
            if saved is not None:
                vars(f).update(saved)


class MultiplicativeLR(_LambdaState, LRScheduler):
    """Each rate times `lr_lambda(epoch)` every epoch (one function, or one per parameter group)."""

    def __init__(
        self, optimizer: Optimizer, lr_lambda: Callable[[int], float] | list, last_epoch: int = -1
    ) -> None:
        self.lr_lambdas = _per_group("lr_lambda", optimizer, lr_lambda)
        super().__init__(optimizer, last_epoch)

    def rate(self, lr: float, base_lr: float | None, epoch: int, index: int) -> float:
        if epoch == 0:
            return lr
        self._initial(None if index >= len(self.lr_lambdas) else base_lr)
        return lr * self.lr_lambdas[index](epoch)


class ConstantLR(LRScheduler):
    """Each rate times `factor` until epoch `total_iters`, then the initial rate again."""

    def __init__(
        self, optimizer: Optimizer, factor: float = 1.0 / 3, total_iters: int = 5, last_epoch: int = -1
    ) -> None:
        if not 0 <= factor <= 1:
            raise ValueError("Constant multiplicative factor expected to be between 0 and 1.")
        self.factor, self.total_iters = factor, total_iters
        super().__init__(optimizer, last_epoch)

    def rate(self, lr: float, base_lr: float, epoch: int, index: int) -> float:
        if epoch == 0:
            return lr * self.factor
        return lr * (1.0 / self.factor) if epoch == self.total_iters else lr

    def closed_form(self, base_lr: float, epoch: int) -> float:
        return base_lr * (self.factor + (epoch >= self.total_iters) * (1 - self.factor))


class PolynomialLR(LRScheduler):
    """Each rate decayed by (1 - epoch / total_iters) ** power, reaching 0 at `total_iters`."""

    def __init__(
        self, optimizer: Optimizer, total_iters: int = 5, power: float = 1.0, last_epoch: int = -1
    ) -> None:
        self.total_iters, self.power = total_iters, power
        super().__init__(optimizer, last_epoch)

    def rate(self, lr: float, base_lr: float, epoch: int, index: int) -> float:
        if epoch == 0 or epoch > self.total_iters:
            return lr
        n = self.total_iters
        return lr * ((1.0 - epoch / n) / (1.0 - (epoch - 1) / n)) ** self.power

    def closed_form(self, base_lr: float, epoch: int) -> float:
        return base_lr * (1.0 - min(self.total_iters, epoch) / self.total_iters) ** self.power


class MultiStepLR(LRScheduler):
    """Each rate times `gamma` at each epoch of `milestones` (a milestone given twice counts twice)."""

    def __init__(
        self, optimizer: Optimizer, milestones: Iterable[int], gamma: float = 0.1, last_epoch: int = -1
    ) -> None:
        self.milestones, self.gamma = Counter(int(m) for m in milestones), gamma
        super().__init__(optimizer, last_epoch)

    def rate(self, lr: float, base_lr: float, epoch: int, index: int) -> float:
        times = self.milestones.get(epoch, 0)
        return lr * self.gamma**times if times else lr

    def closed_form(self, base_lr: float, epoch: int) -> float:
        return base_lr * self.gamma ** bisect.bisect_right(sorted(self.milestones.elements()), epoch)


class ExponentialLR(LRScheduler):
    """Each rate times `gamma` every epoch."""

    def __init__(self, optimizer: Optimizer, gamma: float, last_epoch: int = -1) -> None:
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def rate(self, lr: float, base_lr: float, epoch: int, index: int) -> float:
        return lr * self.gamma if epoch > 0 else lr

    def closed_form(self, base_lr: float, epoch: int) -> float:
        return base_lr * self.gamma**epoch


class CosineAnnealingLR(LRScheduler):
    """From each initial rate down to `eta_min` along half a cosine over `T_max` epochs, then back up
    (SGDR without restarts): eta_min + (base - eta_min) (1 + cos(pi epoch / T_max)) / 2, reached by
    PyTorch's recurrence from the previous rate."""

    def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0, last_epoch: int = -1) -> None:
        _positive("T_max", T_max)
        self.T_max, self.eta_min = T_max, eta_min
        super().__init__(optimizer, last_epoch)

    def rate(self, lr: float, base_lr: float, epoch: int, index: int) -> float:
        period, low = self.T_max, self.eta_min
        if epoch == 0:
            return lr
        if (epoch - 1 - period) % (2 * period) == 0:  # at the bottom: the ratio below would be 0 / 0
            return lr + (self._initial(base_lr) - low) * (1 - math.cos(math.pi / period)) / 2
        ratio = (1 + math.cos(math.pi * epoch / period)) / (1 + math.cos(math.pi * (epoch - 1) / period))
        return ratio * (lr - low) + low

    def closed_form(self, base_lr: float, epoch: int) -> float:
        return self.eta_min + (base_lr - self.eta_min) * (1 + math.cos(math.pi * epoch / self.T_max)) / 2


class CosineAnnealingWarmRestarts(LRScheduler):
    """SGDR: eta_min + (base - eta_min) (1 + cos(pi T_cur / T_i)) / 2, T_cur counting epochs since the
    last restart, each period T_mult times the last (the first T_0)."""

    def __init__(
        self, optimizer: Optimizer, T_0: int, T_mult: int = 1, eta_min: float = 0.0, last_epoch: int = -1
    ) -> None:
        _positive("T_0", T_0)
        _positive("T_mult", T_mult)
        self.T_0, self.T_i, self.T_mult, self.eta_min, self.T_cur = T_0, T_0, T_mult, eta_min, -1
        super().__init__(optimizer, last_epoch)

    def step(self, epoch: float | None = None) -> None:
        """The next epoch's rates; or those at `epoch`, which may be fractional (PyTorch's documented
        `step(epoch + i / iters)` within an epoch). PyTorch's own step, which does not count its calls."""
        if epoch is None:
            self._next_epoch()
            return
        if epoch < 0:
            raise ValueError(f"Expected non-negative epoch, but got {epoch}")
        if epoch >= self.T_0:
            if self.T_mult == 1:
                self.T_cur = epoch % self.T_0
            else:
                n = int(math.log((epoch / self.T_0 * (self.T_mult - 1) + 1), self.T_mult))
                self.T_cur = epoch - self.T_0 * (self.T_mult**n - 1) / (self.T_mult - 1)
                self.T_i = self.T_0 * self.T_mult**n
        else:
            self.T_i, self.T_cur = self.T_0, epoch
        self.last_epoch = math.floor(epoch)
        self._set_rates(self._rates(self.last_epoch))

    def advance(self, epoch: int) -> None:
        self.T_cur += 1
        if self.T_cur >= self.T_i:
            self.T_cur, self.T_i = self.T_cur - self.T_i, self.T_i * self.T_mult

    def rate(self, lr: float, base_lr: float, epoch: int, index: int) -> float:
        base_lr = self._initial(base_lr)
        return self.eta_min + (base_lr - self.eta_min) * (1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2


class LinearLR(LRScheduler):
    """Each initial rate times a factor going linearly from `start_factor` to `end_factor` over
    `total_iters` epochs (a warm-up), then constant."""

    def __init__(
        self,
        optimizer: Optimizer,
        start_factor: float = 1 / 3,
        end_factor: float = 1.0,
        total_iters: int = 5,
        last_epoch: int = -1,
    ) -> None:
        if not 0 < start_factor <= 1 or not 0 <= end_factor <= 1:
            raise ValueError(
                f"start_factor must be in (0, 1] and end_factor in [0, 1], got {start_factor}, {end_factor}"
            )
        _positive("total_iters", total_iters)
        self.start_factor, self.end_factor, self.total_iters = start_factor, end_factor, total_iters
        super().__init__(optimizer, last_epoch)

    def rate(self, lr: float, base_lr: float, epoch: int, index: int) -> float:
        if epoch == 0:
            return lr * self.start_factor
        if epoch > self.total_iters:
            return lr
        change = self.end_factor - self.start_factor
        return lr * (1.0 + change / (self.total_iters * self.start_factor + (epoch - 1) * change))

    def closed_form(self, base_lr: float, epoch: int) -> float:
        change = self.end_factor - self.start_factor
        return base_lr * (self.start_factor + change * min(self.total_iters, epoch) / self.total_iters)


class LambdaLR(_LambdaState, LRScheduler):
    """Each initial rate times `lr_lambda(epoch)` (one function, or one per parameter group)."""

    def __init__(
        self,
        optimizer: Optimizer,
        lr_lambda: Callable[[int], float] | list[Callable[[int], float]],
        last_epoch: int = -1,
    ) -> None:
        count = len(optimizer.param_groups)
        if isinstance(lr_lambda, list | tuple) and len(lr_lambda) != count:
            raise ValueError(f"Expected {count} lr_lambdas, but got {len(lr_lambda)}")
        lambdas = _per_group("lr_lambda", optimizer, lr_lambda)
        if not all(callable(f) for f in lambdas):
            raise TypeError("lr_lambda must be a function of the epoch (or a list of them, one per group)")
        self.lr_lambdas = lambdas
        super().__init__(optimizer, last_epoch)

    def rate(self, lr: float, base_lr: float | None, epoch: int, index: int) -> float:
        return self._initial(base_lr) * self.lr_lambdas[index](epoch)


class _Composite(LRScheduler):
    """A schedule made of `_schedulers`: its state dict holds theirs."""

    _schedulers: list[LRScheduler]

    def state_dict(self) -> dict[str, Any]:
        state = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "_schedulers")}
        return state | {"_schedulers": [s.state_dict() for s in self._schedulers]}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.__dict__.update({k: v for k, v in state_dict.items() if k != "_schedulers"})
        for scheduler, saved in zip(self._schedulers, state_dict["_schedulers"]):
            scheduler.load_state_dict(saved)


class SequentialLR(_Composite):
    """`schedulers` (of this optimizer) in turn: the i-th from epoch milestones[i - 1] on, started at its
    epoch 0 from the initial rates, as PyTorch's."""

    def __init__(
        self,
        optimizer: Optimizer,
        schedulers: Iterable[LRScheduler],
        milestones: Iterable[int],
        last_epoch: int = -1,
    ) -> None:
        _only_fresh("SequentialLR", last_epoch)
        schedulers, milestones = list(schedulers), list(milestones)
        if not schedulers or len(milestones) != len(schedulers) - 1:
            raise ValueError(
                f"SequentialLR needs one milestone fewer than schedulers, got {len(milestones)} "
                f"for {len(schedulers)}"
            )
        if any(isinstance(s, ReduceLROnPlateau) for s in schedulers):
            raise ValueError("SequentialLR does not support ReduceLROnPlateau (its step needs a metric)")
        if any(s.optimizer is not optimizer for s in schedulers):
            raise ValueError("SequentialLR: every scheduler must be of the optimizer given")
        if milestones != sorted(milestones) or any(not isinstance(m, int) or m <= 0 for m in milestones):
            raise ValueError(
                f"SequentialLR: milestones must be increasing positive integers, got {milestones}"
            )
        self.optimizer, self._schedulers, self._milestones = optimizer, schedulers, milestones
        for group in optimizer.param_groups:  # undo what the schedulers set when they were made
            group["lr"] = group["initial_lr"]
        for scheduler in schedulers:
            scheduler.last_epoch -= 1
        schedulers[0]._step_count = 0
        schedulers[0].step()
        self.last_epoch = 0
        self._last_lr = schedulers[0].get_last_lr()

    def step(self) -> None:
        self.last_epoch += 1
        index = bisect.bisect_right(self._milestones, self.last_epoch)
        scheduler = self._schedulers[index]
        if index > 0 and self._milestones[index - 1] == self.last_epoch:  # its epoch 0, from the start
            scheduler.restart()
        else:
            scheduler.step()
        self._last_lr = scheduler.get_last_lr()


class ChainedScheduler(_Composite):
    """Several schedules of one optimizer stepped together, in order, each from the rates the one
    before set (PyTorch's: their effects compose, e.g. a ConstantLR warm-up times an ExponentialLR)."""

    def __init__(self, schedulers: Iterable[LRScheduler], optimizer: Optimizer | None = None) -> None:
        schedulers = list(schedulers)
        name = type(self).__name__
        if len(schedulers) < 1:
            raise ValueError(f"{name} expects at least one scheduler to be chained, but got no scheduler.")
        optimizer = optimizer or schedulers[0].optimizer
        for index, scheduler in enumerate(schedulers):
            if not hasattr(scheduler, "optimizer"):
                raise TypeError(f"{name} at index {index} should have `optimizer` as its attribute.")
            if isinstance(scheduler, ReduceLROnPlateau):
                raise ValueError(
                    f"{name} does not support `ReduceLROnPlateau` scheduler as it requires additional kwargs "
                    f"to be specified when calling `step`, but got one at index {index} in the given "
                    "schedulers sequence."
                )
            if scheduler.optimizer is not optimizer:
                raise ValueError(
                    f"{name} expects all schedulers to belong to the same optimizer, but got scheduler "
                    f"{type(scheduler).__name__} at index {index} has {scheduler.optimizer}, which is "
                    f"different from {type(optimizer).__name__}."
                )
        self._schedulers, self.optimizer = schedulers, optimizer
        self._last_lr = [group["lr"] for group in schedulers[-1].optimizer.param_groups]

    def step(self) -> None:
        for scheduler in self._schedulers:
            scheduler.step()
        self._last_lr = [group["lr"] for group in self._schedulers[-1].optimizer.param_groups]


_PHASE_KEYS = ("end_step", "start_lr", "end_lr", "start_momentum", "end_momentum")


class OneCycleLR(LRScheduler):
    """The 1cycle policy, stepped once per batch: each rate rises from max_lr / div_factor to `max_lr` (one
    for all groups or one per group) over the first `pct_start` of `total_steps` (or epochs x
    steps_per_epoch), then falls to the start rate / `final_div_factor`, along half cosines (or lines);
    with `cycle_momentum`, each group's momentum (SGD's, RMSprop's, or Adam's beta1) goes the other way
    between `max_momentum` and `base_momentum`. `three_phase`: up, back down to the start rate, then down
    to the least. PyTorch's formulas, and its keys in each group (initial_lr, max_lr, min_lr,
    max_momentum, base_momentum); the optimizer's own rate is replaced. A step past the last raises."""

    def __init__(
        self,
        optimizer: Optimizer,
        max_lr: float | list[float],
        total_steps: int | None = None,
        epochs: int | None = None,
        steps_per_epoch: int | None = None,
        pct_start: float = 0.3,
        anneal_strategy: str = "cos",
        cycle_momentum: bool = True,
        base_momentum: float | list[float] = 0.85,
        max_momentum: float | list[float] = 0.95,
        div_factor: float = 25.0,
        final_div_factor: float = 1e4,
        three_phase: bool = False,
        last_epoch: int = -1,
    ) -> None:
        _check_optimizer(optimizer)
        _only_fresh("OneCycleLR", last_epoch)
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
        self.use_beta1 = "betas" in optimizer.defaults
        if cycle_momentum and not self.use_beta1 and "momentum" not in optimizer.defaults:
            name = type(optimizer).__name__
            raise ValueError(f"cycle_momentum needs an optimizer with a momentum or betas; {name} has none")
        self.total_steps, self.cycle_momentum, self._anneal_func_type = (
            total_steps,
            cycle_momentum,
            anneal_strategy,
        )
        for group, top in zip(optimizer.param_groups, _per_group("max_lr", optimizer, max_lr)):
            group["initial_lr"] = top / div_factor
            group["max_lr"] = top
            group["min_lr"] = group["initial_lr"] / final_div_factor
        if cycle_momentum:
            tops = _per_group("max_momentum", optimizer, max_momentum)
            bases = _per_group("base_momentum", optimizer, base_momentum)
            for group, top, base in zip(optimizer.param_groups, tops, bases):
                self._momentum(group, top)
                group["max_momentum"], group["base_momentum"] = top, base
        up, down = float(pct_start * total_steps) - 1, float(2 * pct_start * total_steps) - 2
        # (the step a phase ends at, the group keys of its rates from and to, of its momenta from and to)
        phases = (
            [(up, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
             (down, "max_lr", "initial_lr", "base_momentum", "max_momentum"),
             (total_steps - 1, "initial_lr", "min_lr", "max_momentum", "max_momentum")]
            if three_phase
            else [(up, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                  (total_steps - 1, "max_lr", "min_lr", "base_momentum", "max_momentum")]
        )  # fmt: skip
        self._schedule_phases = [dict(zip(_PHASE_KEYS, phase)) for phase in phases]  # PyTorch's form
        super().__init__(optimizer, last_epoch)

    def rate(self, lr: float, base_lr: float, epoch: int, index: int) -> float:
        if epoch > self.total_steps:
            raise ValueError(
                f"stepped {epoch} times; the schedule has {self.total_steps} steps (total_steps)"
            )
        group = self.optimizer.param_groups[index]
        anneal = _cosine if self._anneal_func_type == "cos" else _linear
        begin = 0.0
        phases = self._schedule_phases
        for k, (end, lr_from, lr_to, m_from, m_to) in enumerate(
            tuple(p[n] for n in _PHASE_KEYS) for p in phases
        ):
            if epoch <= end or k == len(phases) - 1:
                part = (epoch - begin) / (end - begin)
                if self.cycle_momentum:
                    self._momentum(group, anneal(group[m_from], group[m_to], part))
                return anneal(group[lr_from], group[lr_to], part)
            begin = end
        raise AssertionError("unreachable: the last phase takes every step")

    def _momentum(self, group: dict[str, Any], value: float) -> None:
        if self.use_beta1:
            group["betas"] = (value, *group["betas"][1:])
        else:
            group["momentum"] = value


class CyclicLR(LRScheduler):
    """Cyclical learning rates (Smith), stepped once per batch: each group's rate goes from `base_lr` up to
    `max_lr` over `step_size_up` steps and back over `step_size_down` (the same by default), the height
    scaled per cycle ("triangular": 1, "triangular2": halved each cycle) or per step ("exp_range":
    gamma ** step), or by `scale_fn` of the cycle or step (`scale_mode`). With `cycle_momentum`, each
    group's momentum (or Adam's beta1) goes the other way between `max_momentum` and `base_momentum`.
    PyTorch's formulas, group keys (max_momentum, base_momentum) and state dict (a `scale_fn` that is a
    plain function is not saved; a callable object's attributes are)."""

    def __init__(
        self,
        optimizer: Optimizer,
        base_lr: float | list[float],
        max_lr: float | list[float],
        step_size_up: int = 2000,
        step_size_down: int | None = None,
        mode: str = "triangular",
        gamma: float = 1.0,
        scale_fn: Callable[[float], float] | None = None,
        scale_mode: str = "cycle",
        cycle_momentum: bool = True,
        base_momentum: float | list[float] = 0.8,
        max_momentum: float | list[float] = 0.9,
        last_epoch: int = -1,
    ) -> None:
        _check_optimizer(optimizer)
        _only_fresh("CyclicLR", last_epoch)
        base_lrs = _per_group("base_lr", optimizer, base_lr)
        self.max_lrs = _per_group("max_lr", optimizer, max_lr)
        if mode not in ("triangular", "triangular2", "exp_range") and scale_fn is None:
            raise ValueError("mode is invalid and scale_fn is None")
        if scale_mode not in ("cycle", "iterations"):
            raise ValueError(f"CyclicLR: scale_mode must be 'cycle' or 'iterations', got {scale_mode!r}")
        if cycle_momentum and "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
            raise ValueError("optimizer must support momentum or beta1 with `cycle_momentum` option enabled")
        for lr, group in zip(base_lrs, optimizer.param_groups):
            group["lr"] = lr
        step_size_up = float(step_size_up)
        step_size_down = float(step_size_down) if step_size_down is not None else step_size_up
        self.total_size = step_size_up + step_size_down
        self.step_ratio = step_size_up / self.total_size
        self.mode, self.gamma, self.scale_mode = mode, gamma, scale_mode
        self._scale_fn_custom = scale_fn
        self._init_scale_fn()
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            self.use_beta1 = "betas" in optimizer.defaults
            self.base_momentums = _per_group("base_momentum", optimizer, base_momentum)
            self.max_momentums = _per_group("max_momentum", optimizer, max_momentum)
            for top, base, group in zip(self.max_momentums, self.base_momentums, optimizer.param_groups):
                self._momentum(group, top)
                group["max_momentum"], group["base_momentum"] = top, base
        super().__init__(optimizer, last_epoch)
        self.base_lrs = base_lrs  # after the first step, as PyTorch's (which took the initial_lr for it)

    def _init_scale_fn(self) -> None:
        if self._scale_fn_custom is not None:
            return
        if self.mode == "exp_range":
            self.scale_mode = "iterations"
        elif self.mode in ("triangular", "triangular2"):
            self.scale_mode = "cycle"

    def scale_fn(self, x: float) -> float:
        """The height's scale at cycle or step x."""
        if self._scale_fn_custom is not None:
            return self._scale_fn_custom(x)
        if self.mode == "triangular2":
            return 1 / (2.0 ** (x - 1))
        return self.gamma**x if self.mode == "exp_range" else 1.0

    def _scale(self, epoch: int) -> tuple[float, float]:
        """(where in the cycle, 0 to 1 up and back, the scale of the height) at step `epoch`."""
        cycle = math.floor(1 + epoch / self.total_size)
        x = 1.0 + epoch / self.total_size - cycle
        factor = x / self.step_ratio if x <= self.step_ratio else (x - 1) / (self.step_ratio - 1)
        return factor, self.scale_fn(cycle if self.scale_mode == "cycle" else epoch)

    def _rates(self, epoch: int) -> list[float]:
        if len(self.optimizer.param_groups) != len(self.base_lrs):
            self._initial(None)
        factor, scale = self._scale(epoch)
        lrs = [base + (top - base) * factor * scale for base, top in zip(self.base_lrs, self.max_lrs)]
        if self.cycle_momentum:
            pairs = zip(self.base_momentums, self.max_momentums, self.optimizer.param_groups)
            for base, top, group in pairs:
                self._momentum(group, top - (top - base) * factor * scale)
        return lrs

    def _momentum(self, group: dict[str, Any], value: float) -> None:
        if self.use_beta1:
            group["betas"] = (value, *group["betas"][1:])
        else:
            group["momentum"] = value

    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        fn = state.pop("_scale_fn_custom")
        state["_scale_fn_custom"] = None
        if fn is not None and not isinstance(fn, types.FunctionType):
            state["_scale_fn_custom"] = fn.__dict__.copy()
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        state = dict(state_dict)
        fn = state.pop("_scale_fn_custom", None)
        super().load_state_dict(state)
        if fn is not None and self._scale_fn_custom is not None:
            self._scale_fn_custom.__dict__.update(fn)
        self._init_scale_fn()


def _cosine(start: float, end: float, part: float) -> float:
    return end + (start - end) / 2.0 * (math.cos(math.pi * part) + 1)


def _linear(start: float, end: float, part: float) -> float:
    return (end - start) * part + start


class ReduceLROnPlateau(LRScheduler):
    """Each rate times `factor` once a metric (`step(metric)`, e.g. each epoch's validation loss) has not
    improved for more than `patience` epochs, as PyTorch's: improved means below best * (1 - threshold)
    for mode "min" ("rel"; best - threshold for "abs"; above for "max"); after a cut, `cooldown` epochs
    count no bad epochs; a rate stops at its `min_lr` (one, or one per group), and a cut smaller than
    `eps` is not made. An LRScheduler as PyTorch's (its rates, state dict and get_last_lr the base's),
    stepped by a metric instead of a `rate` per epoch."""

    def __init__(
        self,
        optimizer: Optimizer,
        mode: str = "min",
        factor: float = 0.1,
        patience: int = 10,
        threshold: float = 1e-4,
        threshold_mode: str = "rel",
        cooldown: int = 0,
        min_lr: float | list[float] = 0.0,
        eps: float = 1e-8,
    ) -> None:
        _check_optimizer(optimizer)
        if mode not in ("min", "max") or threshold_mode not in ("rel", "abs"):
            raise ValueError(
                "mode must be 'min' or 'max' and threshold_mode 'rel' or 'abs', "
                f"got {mode!r} and {threshold_mode!r}"
            )
        if not factor < 1.0:
            raise ValueError(f"factor must be in [0, 1), got {factor}")
        if isinstance(min_lr, list | tuple) and len(min_lr) != len(optimizer.param_groups):
            raise ValueError(f"expected {len(optimizer.param_groups)} min_lrs, got {len(min_lr)}")
        self.optimizer, self.mode, self.factor, self.patience = optimizer, mode, factor, patience
        self.threshold, self.threshold_mode, self.cooldown = threshold, threshold_mode, cooldown
        self.min_lrs, self.eps = _per_group("min_lr", optimizer, min_lr), eps
        self.default_min_lr = None if isinstance(min_lr, list | tuple) else min_lr
        self.best = self.mode_worse = math.inf if mode == "min" else -math.inf
        self.num_bad_epochs = self.cooldown_counter = 0
        self.last_epoch = 0
        self._last_lr = [group["lr"] for group in optimizer.param_groups]

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
            self._min_lrs_of_every_group()
            for group, least in zip(self.optimizer.param_groups, self.min_lrs):
                old = float(group["lr"])
                new = max(old * self.factor, least)
                if old - new > self.eps:
                    group["lr"] = new
            self.cooldown_counter, self.num_bad_epochs = self.cooldown, 0
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def _min_lrs_of_every_group(self) -> None:
        """One min_lr given applies to groups added later too; a list given per group refuses them."""
        count = len(self.optimizer.param_groups)
        if count == len(self.min_lrs):
            return
        if self.default_min_lr is None:
            raise RuntimeError(
                f"The number of param groups in the `optimizer` ({count}) differs from when "
                f"`ReduceLROnPlateau` was initialized ({len(self.min_lrs)}), usually due to a new param "
                "group being added to the optimizer. Please modify the `min_lrs` field to match the length "
                "of the `optimizer` param groups."
            )
        self.min_lrs = [self.default_min_lr] * count


__all__ = [
    "ChainedScheduler",
    "ConstantLR",
    "CosineAnnealingLR",
    "CosineAnnealingWarmRestarts",
    "CyclicLR",
    "ExponentialLR",
    "LRScheduler",
    "LambdaLR",
    "LinearLR",
    "MultiStepLR",
    "MultiplicativeLR",
    "OneCycleLR",
    "PolynomialLR",
    "ReduceLROnPlateau",
    "SequentialLR",
    "StepLR",
]

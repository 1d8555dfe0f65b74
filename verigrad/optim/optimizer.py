"""The optimizer base: parameters, per-parameter state tensors, `zero_grad`, `step`, `state_dict`.

Each update is written with verigrad ops and written back with `assign`, so the same code runs
eagerly and, traced, becomes part of a compiled training step. Everything an update reads that changes
from step to step lives in tensors made when the optimizer is: the state (moments, momentum), each
parameter's step count, and the settings a schedule changes (the learning rate, the momentum, Adam's
beta1), so a compiled step sees their current values.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from typing import Any

import numpy as np

from .. import modes
from ..autograd import no_grad
from ..backends import get_backend
from ..ops import tensor, zeros_like
from ..tensor import Tensor


def fused_kernel(name: str, p: Tensor) -> Any:
    """The active backend's whole-vector update for optimizer `name` on p's dtype, in eager mode only (a
    traced step keeps the op-based update, so the program shows it); None otherwise."""
    if modes.current().name != "eager" or not isinstance(p.payload, np.ndarray):
        return None
    return get_backend().optimizer_kernel(name, p.dtype.name)


def _count(counter: Tensor, eager: bool) -> None:
    """counter += 1: in place in NumPy eagerly (the same bits as the ops, without their 10-20 us), as ops
    in a trace (so a compiled step counts)."""
    if eager:
        np.add(counter.payload, 1, out=counter.payload)
    else:
        counter.assign(counter + 1)


# the settings a schedule may change while training: each mirrored in a 0-d f64 tensor of this name
MIRRORED = {"lr": "lr", "momentum": "momentum", "betas": "beta1"}  # betas: its first, as OneCycleLR cycles


def _mirrored(key: str, value: Any) -> float:
    return float(value[0] if key == "betas" else value)


class Hyperparameters(dict):
    """An optimizer's settings; "lr", "momentum" and the first of "betas" are mirrored in 0-d f64 tensors
    (`.tensors`, and `.lr`) that compiled steps read, so a schedule of them (a learning-rate schedule,
    OneCycleLR's momentum) works without tracing again."""

    def __init__(self, values: dict[str, Any]) -> None:
        super().__init__(values)
        self.tensors = {
            name: tensor(np.array(_mirrored(key, values[key]), dtype=np.float64))
            for key, name in MIRRORED.items()
            if key in values
        }
        self.lr = self.tensors["lr"]

    def __setitem__(self, key: str, value: Any) -> None:
        super().__setitem__(key, value)
        name = MIRRORED.get(key)
        if name in self.tensors:
            np.copyto(self.tensors[name].numpy(), _mirrored(key, value))

    def update(self, *args: Any, **kwargs: Any) -> None:  # type: ignore[override]
        for key, value in dict(*args, **kwargs).items():
            self[key] = value


class Optimizer:
    """Holds the parameters and their state; subclasses write `update(index, p, g)` in ops."""

    def state_names(self) -> tuple[str, ...]:
        """The state tensors each parameter has (created as zeros with the optimizer)."""
        return ()

    def __init__(self, params: Iterable[Tensor], defaults: dict[str, Any]) -> None:
        self.params = list(params)
        if not self.params:
            raise ValueError("the optimizer got an empty parameter list")
        for i, p in enumerate(self.params):  # a frozen one (requires_grad False) gets no gradient: skipped
            if not isinstance(p, Tensor) or not p.dtype.is_float:
                what = f"a {p.dtype.name} tensor" if isinstance(p, Tensor) else type(p).__name__
                raise ValueError(f"parameter {i} is {what}; optimizers train float tensors")
        if len({id(p) for p in self.params}) < len(self.params):
            warnings.warn(  # as PyTorch's: a parameter listed twice is updated twice a step
                "the optimizer got a parameter more than once (a tied weight listed under each name?); "
                "each copy is updated, so it moves twice a step",
                UserWarning,
                stacklevel=3,
            )
        if not any(p.requires_grad for p in self.params):
            raise ValueError(f"none of the {len(self.params)} parameters requires grad: nothing to train")
        self.defaults = Hyperparameters(defaults)
        self._steps = tensor(np.array(0, dtype=np.int64))  # calls to step(), counted by step() itself
        self.state = [self._fresh_state(p) for p in self.params]

    def _fresh_state(self, p: Tensor) -> dict[str, Tensor]:
        # "step" counts the updates of this parameter (steps where it had a gradient), as PyTorch's
        # per-parameter `step` does: Adam's bias correction uses it
        state = {"step": tensor(np.array(0.0))}
        state.update({name: zeros_like(p.detach()) for name in self.state_names()})
        return state

    def _follow_parameters(self) -> None:
        """Remake the state of a parameter not updated yet whose dtype changed since the optimizer was
        made (`model.double()` after it): PyTorch makes the state at the first step, in the parameter's
        dtype then. State that updates have written is kept as it is."""
        for i, p in enumerate(self.params):
            state = self.state[i]
            if float(state["step"].item()) == 0 and any(
                name != "step" and t.dtype is not p.dtype for name, t in state.items()
            ):
                self.state[i] = self._fresh_state(p)

    @property
    def lr(self) -> float:
        return float(self.defaults["lr"])

    @lr.setter
    def lr(self, value: float) -> None:
        self.defaults["lr"] = value

    @property
    def param_groups(self) -> list[Hyperparameters]:
        """PyTorch's parameter groups: one here, the settings (writing its "lr" sets the rate compiled
        steps read)."""
        return [self.defaults]

    @property
    def steps(self) -> int:
        """How many times step() ran (a tensor underneath, so compiled steps count too)."""
        return int(self._steps.item())

    @steps.setter
    def steps(self, value: int) -> None:
        np.copyto(self._steps.numpy(), int(value))

    @property
    def param_steps(self) -> list[int]:
        return [int(s["step"].item()) for s in self.state]

    def state_tensors(self) -> list[tuple[str, Tensor]]:
        """Every tensor the optimizer reads or updates, by name (compiled steps name their inputs so)."""
        self._follow_parameters()
        out = [("opt.lr", self.defaults.lr), ("opt.steps", self._steps)]
        out += [(f"opt.{name}", t) for name, t in self.defaults.tensors.items() if name != "lr"]
        return out + [(f"opt.{i}.{name}", t) for i, s in enumerate(self.state) for name, t in s.items()]

    def __getattr__(self, name: str) -> Any:
        defaults = self.__dict__.get("defaults", {})
        if name in defaults:
            return defaults[name]
        raise AttributeError(name)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Forget the gradients (PyTorch's default), or with set_to_none=False set them to zeros in place."""
        for p in self.params:
            if set_to_none or p.grad is None:
                p.grad = None
            else:
                with no_grad():
                    p.grad.zero_()

    def buffer(self, index: int, name: str) -> Tensor:
        """The state tensor `name` of parameter `index`."""
        return self.state[index][name]

    def scalar(self, value: Tensor, like: Tensor) -> Tensor:
        """A 0-d f64 setting (the learning rate, a bias correction) in a parameter's dtype."""
        return value.cast(like.dtype)

    @no_grad()
    def step(self) -> None:
        """Apply one update to every parameter that has a gradient."""
        eager = modes.current().name == "eager"
        if eager:
            self._follow_parameters()
        _count(self._steps, eager)
        for i, p in enumerate(self.params):
            if p.grad is not None:
                _count(self.state[i]["step"], eager)
                self.update(i, p, p.grad)

    def update(self, index: int, p: Tensor, g: Tensor) -> None:
        raise NotImplementedError

    def state_dict(self) -> dict[str, Any]:
        """Hyperparameters, the step count, and a copy of every state tensor as `state.<param>.<name>`
        (a snapshot: later steps do not change it)."""
        out: dict[str, Any] = {"defaults": dict(self.defaults), "steps": self.steps}
        out["param_steps"] = self.param_steps
        out["state"] = {f"{i}.{k}": tensor(v) for i, s in enumerate(self.state) for k, v in s.items()}
        return out

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.defaults.update(state["defaults"])
        self.steps = int(state["steps"])
        steps = state.get("param_steps", [self.steps] * len(self.params))
        loaded = [self._fresh_state(p) for p in self.params]
        for i, n in enumerate(steps):
            loaded[i]["step"] = tensor(np.array(float(n)))
        for key, value in state["state"].items():
            index, name = key.split(".", 1)
            loaded[int(index)][name] = tensor(value)  # a copy: the dict's tensors stay unshared
        for own, new in zip(self.state, loaded):
            # values go into the tensors the optimizer already has, which compiled steps read
            for name, t in new.items():
                old = own.get(name)
                if old is not None and old.shape == t.shape and old.dtype is t.dtype:
                    np.copyto(old.payload, t.payload)
                    new[name] = old
        self.state = loaded

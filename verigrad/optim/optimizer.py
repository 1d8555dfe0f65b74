"""The optimizer base: parameters, per-parameter state tensors, `zero_grad`, `step`, `state_dict`.

Each update is written with verigrad ops and written back with `assign`, so the same code runs
eagerly and, traced, becomes part of a compiled training step.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..autograd import no_grad
from ..ops import tensor, zeros_like
from ..tensor import Tensor


class Optimizer:
    """Holds the parameters and their state; subclasses write `update(p, g, state)`."""

    def __init__(self, params: Iterable[Tensor], defaults: dict[str, Any]) -> None:
        self.params = list(params)
        if not self.params:
            raise ValueError("the optimizer got an empty parameter list")
        for i, p in enumerate(self.params):
            if not isinstance(p, Tensor) or not p.requires_grad:
                raise ValueError(f"parameter {i} is not a tensor that requires grad")
        self.defaults = dict(defaults)
        self.state: list[dict[str, Tensor]] = [{} for _ in self.params]
        self.steps = 0  # calls to step()
        # updates of each parameter (steps where it had a gradient): Adam's bias correction counts
        # these, as PyTorch's per-parameter `step` does
        self.param_steps = [0] * len(self.params)

    def __getattr__(self, name: str) -> Any:
        defaults = self.__dict__.get("defaults", {})
        if name in defaults:
            return defaults[name]
        raise AttributeError(name)

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    def buffer(self, index: int, name: str) -> Tensor:
        """The state tensor `name` of parameter `index`, created as zeros on first use."""
        state = self.state[index]
        if name not in state:
            state[name] = zeros_like(self.params[index].detach())
        return state[name]

    @no_grad()
    def step(self) -> None:
        """Apply one update to every parameter that has a gradient."""
        self.steps += 1
        for i, p in enumerate(self.params):
            if p.grad is not None:
                self.param_steps[i] += 1
                self.update(i, p, p.grad)

    def update(self, index: int, p: Tensor, g: Tensor) -> None:
        raise NotImplementedError

    def state_dict(self) -> dict[str, Any]:
        """Hyperparameters, the step count, and a copy of every state tensor as `state.<param>.<name>`
        (a snapshot: later steps do not change it)."""
        out: dict[str, Any] = {"defaults": dict(self.defaults), "steps": self.steps}
        out["param_steps"] = list(self.param_steps)
        out["state"] = {f"{i}.{k}": tensor(v) for i, s in enumerate(self.state) for k, v in s.items()}
        return out

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.defaults.update(state["defaults"])
        self.steps = int(state["steps"])
        self.param_steps = [int(n) for n in state.get("param_steps", [self.steps] * len(self.params))]
        self.state = [{} for _ in self.params]
        for key, value in state["state"].items():
            index, name = key.split(".", 1)
            self.state[int(index)][name] = tensor(value)  # a copy: the dict's tensors stay unshared

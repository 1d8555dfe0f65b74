"""The optimizer base: PyTorch's parameter groups, per-parameter state, `zero_grad`, `step` and its
state dict.

Each update is written with verigrad ops and written back with `assign`, so the same code runs
eagerly and, traced, becomes part of a compiled training step. Everything an update reads that changes
from step to step lives in tensors made when the optimizer (or the group) is: the state (moments,
momentum), each parameter's step count, and the settings a schedule changes (each group's learning
rate, momentum, Adam's beta1), so a compiled step sees their current values.
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import numpy as np

from .. import modes, versions
from ..autograd import enable_grad, no_grad
from ..backends import get_backend
from ..dtypes import f64
from ..ops import tensor, zeros_like
from ..tensor import Tensor
from .hooks import OptimizerHooks


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
    """A parameter group's settings (PyTorch's `param_groups[i]`, its "params" included); "lr",
    "momentum" and the first of "betas" are mirrored in 0-d f64 tensors (`.tensors`, and `.lr`) that
    compiled steps read, so a schedule of them (a learning-rate schedule, OneCycleLR's momentum) works
    without tracing again."""

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

    def setdefault(self, key: str, value: Any = None) -> Any:
        if key not in self:
            self[key] = value
        return self[key]

    @property
    def _traced_settings(self) -> tuple:
        """The settings a compiled step reads when it is traced (all but the parameters and what the
        tensors mirror): where one changes (`weight_decay`, the second beta), it is traced again."""
        kept = []
        for key, value in self.items():
            if key == "betas":
                kept.append((key, tuple(value)[1:]))
            elif key != "params" and key not in MIRRORED:
                kept.append((key, value))
        return tuple(kept)


class StateEntry(dict):
    """`optimizer.state[p]`: p's state tensors by name; a tensor (or, for a scalar, a number) written to a
    name is copied into the optimizer's own (which compiled steps read) where its shape and dtype allow,
    else replaces it."""

    def __init__(self, values: dict[str, Any], slot: dict[str, Any]) -> None:
        super().__init__(values)
        self._slot = slot

    def __setitem__(self, name: str, value: Any) -> None:
        own = self._slot.get(name)
        number = isinstance(value, int | float) and isinstance(own, Tensor) and own.shape == ()
        if number or (
            isinstance(own, Tensor)
            and isinstance(value, Tensor)
            and (own.shape, own.dtype) == (value.shape, value.dtype)
        ):
            np.copyto(own.payload, value if number else value.payload)
        else:
            self._slot[name] = value
            own = value
        super().__setitem__(name, own)


class State(Mapping):
    """`optimizer.state`: PyTorch's mapping from a parameter to its state (`step`, `exp_avg`, ...), with
    an entry for each parameter the optimizer has state for (those updated so far). The tensors are the
    optimizer's own: changing one in place changes the next step."""

    def __init__(self, optimizer: Optimizer) -> None:
        self._optimizer = optimizer

    def __getitem__(self, p: Any) -> dict[str, Any]:
        return self._optimizer._public_state(p) if isinstance(p, Tensor) else {}

    def __iter__(self) -> Iterator[Tensor]:
        return (p for p in self._optimizer._unique_params() if self._optimizer._public_state(p))

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __contains__(self, p: object) -> bool:
        return isinstance(p, Tensor) and bool(self._optimizer._public_state(p))

    def __repr__(self) -> str:
        return repr(dict(self.items()))


def check_keywords(name: str, group: Mapping[str, Any]) -> None:
    """PyTorch's keywords that change nothing on the CPU are accepted; those verigrad cannot honour are
    refused here, before any step."""
    if group.get("differentiable"):
        raise ValueError(
            f"{name}: differentiable=True (autograd through the optimizer step) is not supported by verigrad"
        )
    if group.get("capturable"):
        raise ValueError(f"{name}: capturable=True is for CUDA graphs; verigrad runs on the CPU")
    if group.get("fused") and group.get("foreach"):
        raise RuntimeError("`fused` and `foreach` cannot be `True` together.")


def check_lr(lr: Any) -> None:
    """PyTorch's check of a learning rate (a tensor one is refused: verigrad's rates are numbers)."""
    if isinstance(lr, Tensor):
        raise TypeError("a Tensor lr is not supported by verigrad; pass a float")
    if not lr >= 0.0:
        raise ValueError(f"Invalid learning rate: {lr}")


class Optimizer(OptimizerHooks):
    """Holds the parameter groups and each parameter's state; subclasses write
    `update(p, g, group, state)` in ops (or, as PyTorch's, their own `step`)."""

    hidden_state: tuple[str, ...] = ()  # state verigrad keeps that PyTorch's optimizer has not
    own_state = False  # a verigrad optimizer that keeps its state its own way (LBFGS)

    def state_names(self, group: Mapping[str, Any]) -> tuple[str, ...]:
        """The state tensors each parameter of `group` has (made as zeros with the group)."""
        return ()

    def __init__(self, params: Iterable[Any], defaults: dict[str, Any]) -> None:
        if isinstance(params, Tensor):
            raise TypeError(
                "params argument given to the optimizer should be an iterable of Tensors or dicts, "
                f"but got a Tensor of shape {list(params.shape)}"
            )
        check_keywords(type(self).__name__, defaults)
        self.defaults = dict(defaults)
        self.param_groups: list[Hyperparameters] = []
        self._slots: dict[int, dict[str, Tensor]] = {}  # id(p) -> its state tensors
        self._steps = tensor(np.array(0, dtype=np.int64))  # calls to step(), counted by step() itself
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(group)
        # a subclass written as PyTorch's are (its own step() filling self.state[p]) gets PyTorch's
        # state, a defaultdict; verigrad's own write update() and keep their state in tensors
        self._plain_state = type(self).update is Optimizer.update and not self.own_state
        self.state: Any = defaultdict(dict) if self._plain_state else State(self)

    def __repr__(self) -> str:
        text = f"{type(self).__name__} ("
        for i, group in enumerate(self.param_groups):
            text += f"\nParameter Group {i}\n"
            text += "".join(f"    {key}: {group[key]}\n" for key in sorted(group) if key != "params")
        return text + ")"

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a group (a dict with "params" and any per-group settings; the others are `defaults`)."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group).__name__}")
        params = param_group["params"]
        if isinstance(params, set):
            raise TypeError(
                "optimizer parameters need to be organized in ordered collections, but the ordering of "
                "tensors in sets will change between runs. Please use a list instead."
            )
        params = [params] if isinstance(params, Tensor) else list(params)
        names = [p[0] for p in params if isinstance(p, tuple)]
        params = [p[1] if isinstance(p, tuple) else p for p in params]
        if names and len(names) != len(params):
            raise ValueError(
                "all optimizer params should be with/without names. Some param names are missing"
            )
        for i, p in enumerate(params):
            if not isinstance(p, Tensor):
                raise TypeError(
                    f"optimizer can only optimize Tensors, but one of the params is {type(p).__name__}"
                )
            if not p.dtype.is_float:
                raise ValueError(f"parameter {i} is a {p.dtype.name} tensor; optimizers train float tensors")
            if not p.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
        group = {**param_group, "params": params} | ({"param_names": names} if names else {})
        for name, default in self.defaults.items():
            group.setdefault(name, default)
        check_keywords(type(self).__name__, group)
        if len({id(p) for p in params}) < len(params):
            warnings.warn(  # as PyTorch's: a parameter listed twice is updated twice a step
                "optimizer contains a parameter group with duplicate parameters: one given more than once "
                "(a tied weight listed under each name?) is updated once per listing each step",
                UserWarning,
                stacklevel=3,
            )
        for other in self.param_groups:
            if ("param_names" in group) != ("param_names" in other):
                with_names = "with names" if "param_names" in group else "without names"
                raise ValueError(
                    "all optimizer param groups should be with/without names. "
                    f"cannot add param group {with_names} to the optimizer"
                )
            if {id(p) for p in other["params"]} & {id(p) for p in params}:
                raise ValueError("some parameters appear in more than one parameter group")
        hyper = Hyperparameters(group)
        self.param_groups.append(hyper)
        for p in params:
            self._slots.setdefault(id(p), self._fresh_state(p, hyper))

    # state ------------------------------------------------------------------------------------------
    def _fresh_state(self, p: Tensor, group: Mapping[str, Any]) -> dict[str, Tensor]:
        # "step" counts the updates of this parameter (steps where it had a gradient), as PyTorch's
        # per-parameter `step` does (an f32 scalar, its default dtype): Adam's bias correction uses it
        state = {"step": tensor(np.array(0.0, dtype=np.float32))}
        state.update({name: zeros_like(p.detach()) for name in self.state_names(group)})
        return state

    def _public_state(self, p: Tensor) -> dict[str, Any]:
        """PyTorch's `state[p]`: empty until p's first update, then its state tensors by PyTorch's names
        (writable)."""
        if self._plain_state:
            return self.state.get(p, {})
        slot = self._slots.get(id(p))
        if slot is None or not self._has_state(p, slot):
            return {}
        return StateEntry({k: v for k, v in slot.items() if k not in self.hidden_state}, slot)

    def _has_state(self, p: Tensor, slot: dict[str, Tensor]) -> bool:
        return float(slot["step"].item()) > 0

    def _unique_params(self) -> list[Tensor]:
        return list({id(p): p for p in self.params}.values())

    def _follow_parameters(self) -> None:
        """Remake the state of a parameter not updated yet whose dtype changed since the optimizer was
        made (`model.double()` after it): PyTorch makes the state at the first step, in the parameter's
        dtype then. State that updates have written is kept as it is. A parameter appended to a group's
        "params" gets its state here."""
        for group in self.param_groups:
            for p in group["params"]:
                slot = self._slots.get(id(p))
                if slot is None or (
                    float(slot["step"].item()) == 0
                    and any(
                        name != "step"
                        and isinstance(t, Tensor)
                        and t.shape == p.shape
                        and t.dtype is not p.dtype
                        for name, t in slot.items()
                    )
                ):
                    self._slots[id(p)] = self._fresh_state(p, group)

    @property
    def params(self) -> list[Tensor]:
        """Every group's parameters in order (PyTorch's state-dict numbering)."""
        return [p for g in self.param_groups for p in g["params"]]

    @property
    def lr(self) -> float:
        """The first group's learning rate; setting it sets every group's."""
        return float(self.param_groups[0]["lr"])

    @lr.setter
    def lr(self, value: float) -> None:
        for group in self.param_groups:
            group["lr"] = value

    @property
    def steps(self) -> int:
        """How many times step() ran (a tensor underneath, so compiled steps count too)."""
        return int(self._steps.item())

    @steps.setter
    def steps(self, value: int) -> None:
        np.copyto(self._steps.numpy(), int(value))

    @property
    def param_steps(self) -> list[int]:
        """Each parameter's update count, in `params` order."""
        self._follow_parameters()
        return [int(self._slots[id(p)]["step"].item()) for p in self.params]

    def _indices(self) -> dict[int, int]:
        """PyTorch's state-dict index of each parameter (by id): its first place in `params`."""
        indices: dict[int, int] = {}
        for i, p in enumerate(self.params):
            indices.setdefault(id(p), i)
        return indices

    def state_tensors(self) -> list[tuple[str, Tensor]]:
        """Every tensor the optimizer reads or updates, by name (compiled steps name their inputs so): the
        first group's settings `opt.lr`, `opt.beta1`, ..., the others' `opt.group<k>.lr`, ..., and each
        parameter's state `opt.<index>.<name>`."""
        self._follow_parameters()
        first = self.param_groups[0].tensors
        out = [("opt.lr", first["lr"]), ("opt.steps", self._steps)]
        out += [(f"opt.{name}", t) for name, t in first.items() if name != "lr"]
        for k, group in enumerate(self.param_groups[1:], 1):
            out += [(f"opt.group{k}.{name}", t) for name, t in group.tensors.items()]
        indices = self._indices()
        for p in self._unique_params():
            out += [(f"opt.{indices[id(p)]}.{name}", t) for name, t in self._slots[id(p)].items()]
        return out

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Forget the gradients (PyTorch's default), or with set_to_none=False set them to zeros in place."""
        for p in self.params:
            if set_to_none or p.grad is None:
                p.grad = None
            else:
                with no_grad():
                    p.grad.zero_()

    @staticmethod
    def count(state: dict[str, Tensor]) -> Tensor:
        """A parameter's update count in f64, the precision PyTorch computes its corrections in."""
        return state["step"].cast(f64)

    def scalar(self, value: Tensor, like: Tensor) -> Tensor:
        """A 0-d f64 setting (the learning rate, a bias correction) in a parameter's dtype."""
        return value.cast(like.dtype)

    @no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Apply one update to every parameter that has a gradient; a closure, if given, is called first
        (with gradients on) and its loss returned."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        mode = modes.current()
        eager = mode.name == "eager"
        if eager:
            self._follow_parameters()
        else:
            for group in self.param_groups:
                mode.read_flag(group, "_traced_settings")
        _count(self._steps, eager)
        for group in self.param_groups:
            if eager and self.update_all([p for p in group["params"] if p.grad is not None], group):
                continue
            for p in group["params"]:
                if p.grad is not None:
                    state = self._slots[id(p)]
                    _count(state["step"], eager)
                    self.update(p, -p.grad if group.get("maximize") else p.grad, group, state)
                    if (
                        eager
                    ):  # a write of p, as PyTorch's: a graph that saved p's old value raises in backward
                        versions.note_write(p.payload)
        return loss

    def update(self, p: Tensor, g: Tensor, group: Hyperparameters, state: dict[str, Tensor]) -> None:
        raise NotImplementedError

    def update_all(self, params: list[Tensor], group: Hyperparameters) -> bool:
        """Eagerly, one update of every parameter of `params` (each with a gradient) at once, each one's
        step counted and its memory's write noted, as `step` does one by one; False, with nothing done,
        where this optimizer does not (the default: `step` updates them one by one)."""
        return False

    def count_all(self, params: list[Tensor]) -> None:
        """What `step` does for each parameter besides its update, for `update_all`: its step counted,
        its memory's write noted."""
        for p in params:
            _count(self._slots[id(p)]["step"], True)
            versions.note_write(p.payload)

    # state dict -------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """PyTorch's: {"state": {index: {name: tensor}}, "param_groups": [{settings..., "params": [index,
        ...]}]}; the state tensors are the optimizer's own (as PyTorch's: copy them to keep a snapshot)."""
        indices = self._indices()
        groups = []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            packed["params"] = [indices[id(p)] for p in group["params"]]
            groups.append(packed)
        state = {indices[id(p)]: s for p in self._unique_params() if (s := self._public_state(p))}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Load PyTorch's state dict (this optimizer's, or a PyTorch optimizer's with its tensors made
        verigrad tensors): the groups' settings, and each parameter's state, cast to its dtype (its step
        kept as a count), as PyTorch does."""
        if not isinstance(state_dict, Mapping) or not {"state", "param_groups"} <= set(state_dict):
            got = sorted(state_dict) if isinstance(state_dict, Mapping) else type(state_dict).__name__
            raise ValueError(f"load_state_dict needs PyTorch's {{'state', 'param_groups'}} dict, got {got}")
        saved_groups = state_dict["param_groups"]
        if len(saved_groups) != len(self.param_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(self.param_groups, saved_groups)):
            raise ValueError(
                "loaded state dict contains a parameter group that doesn't match the size of "
                "optimizer's group"
            )
        id_map = {
            k: (p, group)
            for group, saved in zip(self.param_groups, saved_groups)
            for k, p in zip(saved["params"], group["params"])
        }
        for group, saved in zip(self.param_groups, saved_groups):
            params, names = group["params"], group.get("param_names")
            dict.clear(group)
            group.update({**saved, "params": params})  # in its saved place, as PyTorch's
            if names is not None and "param_names" not in saved:
                group["param_names"] = names
            for key, value in self.defaults.items():  # a setting an older PyTorch did not save
                group.setdefault(key, value)
        if self._plain_state:
            self.state = defaultdict(dict)
            for key, values in state_dict["state"].items():
                if key in id_map:  # PyTorch's casts: floating tensors to the parameter's dtype, not the step
                    p = id_map[key][0]
                    self.state[p] = {name: _copy_as(v, p, name != "step") for name, v in values.items()}
            return
        loaded: dict[int, dict[str, Any]] = {}
        for key, values in state_dict["state"].items():
            if key in id_map:
                p, group = id_map[key]
                loaded[id(p)] = self._loaded_state(p, group, values)
        for group in self.param_groups:
            for p in group["params"]:
                self._slots[id(p)] = loaded.get(id(p)) or self._fresh_state(p, group)

    def _loaded_state(self, p: Tensor, group: Hyperparameters, values: Mapping[str, Any]) -> dict[str, Any]:
        """One parameter's loaded state: the optimizer's tensors (compiled steps read them) given the
        saved values where shape and dtype allow, new ones otherwise."""
        own = self._slots.get(id(p), {})
        new = self._fresh_state(p, group)
        # a state PyTorch saved without a count (SGD's) is past step 1
        new["step"] = tensor(np.array(1.0, dtype=np.float32))
        for name, value in values.items():
            if name == "step":
                new["step"] = tensor(np.array(_number(value), dtype=np.float32))
            else:
                new[name] = _copy_as(value, p, True)
        for name, t in new.items():
            old = own.get(name)
            if isinstance(t, Tensor) and old is not None and old.shape == t.shape and old.dtype is t.dtype:
                np.copyto(old.payload, t.payload)
                new[name] = old
        return new


def _copy_as(value: Any, p: Tensor, cast: bool) -> Any:
    """A copy of a loaded tensor (the dict's tensors stay unshared), floating ones in p's dtype if `cast`;
    anything else as it is."""
    if not isinstance(value, Tensor | np.ndarray):
        return value
    copy = tensor(value)
    return copy.cast(p.dtype) if cast and copy.dtype.is_float else copy


def _number(value: Any) -> float:
    return float(value.item()) if hasattr(value, "item") else float(value)

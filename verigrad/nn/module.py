"""`Module`: parameters, buffers and submodules found from attributes, as in PyTorch.

A tensor attribute that requires grad is a parameter; `register_buffer` adds state that is saved
but not trained (BatchNorm's running statistics). Inside `verigrad.abstract()` modules are built from
specs, so a model can be checked for every size with `verigrad.check`. A shape error raised inside a
module's forward names the layer it happened in. Forward hooks (`register_forward_pre_hook`,
`register_forward_hook`) see and may replace a call's arguments and output.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from ..autograd import RemovableHandle, no_grad
from ..dtypes import as_dtype
from ..errors import DTypeError, ShapeError
from ..ops import tensor
from ..shapes import Spec, shape_text
from ..tensor import Tensor

_CALL_STACK: list[Module] = []


class Module:
    """Base class of layers and models: subclass it, assign layers and tensors, write `forward`."""

    training: bool

    def __init__(self) -> None:
        object.__setattr__(self, "_parameters", {})
        object.__setattr__(self, "_buffers", {})
        object.__setattr__(self, "_modules", {})
        object.__setattr__(self, "training", True)

    def __setattr__(self, name: str, value: Any) -> None:
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"{type(self).__name__}.__init__ must call super().__init__() first")
        if isinstance(value, Module):
            target = self._modules
        elif isinstance(value, Tensor):
            target = self._parameters if value.requires_grad else self._buffers
        else:
            target = None
        for table in (self._parameters, self._buffers, self._modules):
            if table is not target:
                table.pop(name, None)
        if target is not None:
            target[name] = value  # a name the table holds keeps its place (and so its order), as in PyTorch
        object.__setattr__(self, name, value)

    def add_module(self, name: str, module: Module) -> None:
        if not isinstance(module, Module):
            raise TypeError(f"add_module needs a Module, got {type(module).__name__}")
        self.__setattr__(name, module)

    def register_buffer(self, name: str, value: Tensor | None) -> None:
        """Keep `value` as state that `state_dict` saves but optimizers do not train."""
        self.__setattr__(name, value)
        self._parameters.pop(name, None)
        self._buffers[name] = value

    # traversal ----------------------------------------------------------------------------------
    # Generators, as PyTorch's. A module or tensor reached twice (tied weights, a layer used in two
    # places) is listed once unless remove_duplicate=False, so an optimizer updates it once a step.
    def named_modules(
        self, memo: set[Module] | None = None, prefix: str = "", remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Module]]:
        """(dotted name, module) for this module and every submodule, depth first, each module once."""
        if memo is None:
            memo = set()
        if self in memo:
            return
        if remove_duplicate:
            memo.add(self)
        yield prefix, self
        for name, child in self._modules.items():
            yield from child.named_modules(memo, _dotted(prefix, name), remove_duplicate)

    def modules(self) -> Iterator[Module]:
        for _, m in self.named_modules():
            yield m

    def named_children(self) -> Iterator[tuple[str, Module]]:
        """(name, module) for the direct submodules, a module held under two names listed once."""
        seen: set[int] = set()
        for name, child in self._modules.items():
            if id(child) not in seen:
                seen.add(id(child))
                yield name, child

    def children(self) -> Iterator[Module]:
        for _, child in self.named_children():
            yield child

    def apply(self, fn: Any) -> Module:
        """fn(module) for every submodule, children first, then this one (as PyTorch, e.g. to initialize)."""
        for child in self.children():
            child.apply(fn)
        fn(self)
        return self

    def named_parameters(
        self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Tensor]]:
        """(dotted name, parameter) for this module's parameters and, with `recurse`, its submodules'."""
        yield from self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(
        self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Tensor]]:
        """(dotted name, buffer) for this module's buffers and, with `recurse`, its submodules'."""
        yield from self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def _named_members(
        self, table: str, prefix: str, recurse: bool, remove_duplicate: bool
    ) -> Iterator[tuple[str, Tensor]]:
        modules = (
            self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate)
            if recurse
            else [(prefix, self)]
        )
        seen: set[int] = set()  # by identity: a tensor's == compares elements
        for module_prefix, module in modules:
            for name, t in getattr(module, table).items():
                if t is None or id(t) in seen:  # a buffer registered as None is no state yet, as in PyTorch
                    continue
                if remove_duplicate:
                    seen.add(id(t))
                yield _dotted(module_prefix, name), t

    def requires_grad_(self, flag: bool = True) -> Module:
        """Freeze (False) or unfreeze every parameter: a frozen one gets no gradient, and an optimizer
        given it leaves it as it is."""
        for p in self.parameters():
            p.requires_grad_(flag)
        return self

    # state ----------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Tensor]:
        """Every parameter and buffer by its dotted name (the tensors themselves, not copies), in PyTorch's
        order: a module's parameters, then its buffers, then its children's. A tied tensor is under each
        of its names, as in PyTorch."""
        state: dict[str, Tensor] = {}
        self._save_state(state, "")
        return state

    def _save_state(self, state: dict[str, Tensor], prefix: str) -> None:
        for table in (self._parameters, self._buffers):
            state.update((prefix + name, t) for name, t in table.items() if t is not None)
        for name, child in self._modules.items():
            child._save_state(state, f"{prefix}{name}.")

    def load_state_dict(self, state: dict[str, Any], strict: bool = True) -> None:
        """Copy values in; with `strict`, any missing, extra, mis-shaped or mis-typed entry is an error
        that names every offending tensor, and nothing is copied."""
        own = self.state_dict()
        problems = []
        if strict:
            # a norm layer's step count may be missing, as PyTorch admits (checkpoints from before it had one)
            problems += [f"missing: {k}" for k in own if k not in state and not _step_count(k)]
            problems += [f"unexpected: {k}" for k in state if k not in own]
        for k, target in own.items():
            if k not in state:
                continue
            value = state[k]
            shape, dtype = tuple(value.shape), getattr(value, "dtype", None)
            dtype_name = getattr(dtype, "name", str(dtype))
            if shape != tuple(target.shape):
                problems.append(
                    f"{k}: shape {shape_text(shape)} in the state, {shape_text(target.shape)} in the model"
                )
            elif dtype_name not in (target.dtype.name, target.dtype.np.name):
                problems.append(f"{k}: dtype {dtype_name} in the state, {target.dtype.name} in the model")
        if problems:
            raise ValueError("load_state_dict refused:\n  " + "\n  ".join(problems))
        with no_grad():
            for k, target in own.items():
                if k in state:
                    target.assign(state[k] if isinstance(state[k], Tensor) else tensor(state[k]))

    # dtypes ---------------------------------------------------------------------------------------
    def to(self, dtype: Any) -> Module:
        """Every float parameter and buffer converted to `dtype` in place (the same tensor objects); make
        the optimizer after it, as its state takes the parameters' dtype when it is made. "cpu", the
        only device, changes nothing."""
        if isinstance(dtype, str) and dtype == "cpu":
            return self
        target = as_dtype(dtype)
        if not target.is_float or target.name in ("f16", "bf16"):
            raise DTypeError(f"modules compute in f32 or f64, not {target.name}")
        for t in [*self.parameters(), *self.buffers()]:
            if t.dtype.is_float and t.dtype is not target:
                if isinstance(t.payload, np.ndarray):
                    t.payload = t.payload.astype(target.np)
                t.spec = Spec(t.spec.shape, target)
                t.grad = None
        return self

    def float(self) -> Module:
        return self.to("f32")

    def double(self) -> Module:
        return self.to("f64")

    def cpu(self) -> Module:
        return self

    def cuda(self, *args: Any, **kwargs: Any) -> Module:
        raise ValueError(
            "verigrad runs on the CPU: there is no CUDA device (code written for PyTorch can drop .cuda())"
        )

    # modes ----------------------------------------------------------------------------------------
    def train(self, mode: bool = True) -> Module:
        for m in self.modules():
            object.__setattr__(m, "training", mode)
        return self

    def eval(self) -> Module:
        return self.train(False)

    def zero_grad(self) -> None:
        for p in self.parameters():
            p.grad = None

    # calling ------------------------------------------------------------------------------------
    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} has no forward()")

    def register_forward_pre_hook(self, hook: Callable, *, with_kwargs: bool = False) -> RemovableHandle:
        """Call `hook(module, args)` before each forward (`hook(module, args, kwargs)` with_kwargs); what it
        returns, if not None, replaces the arguments: a tuple (a single value is made one), or with_kwargs
        a pair (args, kwargs)."""
        return self._add_hook("_forward_pre_hooks", hook, with_kwargs)

    def register_forward_hook(self, hook: Callable, *, with_kwargs: bool = False) -> RemovableHandle:
        """Call `hook(module, args, output)` after each forward (`hook(module, args, kwargs, output)`
        with_kwargs); what it returns, if not None, replaces the output."""
        return self._add_hook("_forward_hooks", hook, with_kwargs)

    def _add_hook(self, table: str, hook: Callable, with_kwargs: bool) -> RemovableHandle:
        if not callable(hook):
            raise TypeError(f"a module hook must be a function, not {type(hook).__name__}")
        hooks = self.__dict__.setdefault(table, [])
        entry = (hook, with_kwargs)
        hooks.append(entry)
        return RemovableHandle(hooks, entry)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.__dict__.get("_forward_pre_hooks") or self.__dict__.get("_forward_hooks"):
            return self._hooked_call(args, kwargs)
        return self._call(args, kwargs)

    def _hooked_call(self, args: tuple, kwargs: dict) -> Any:
        for hook, with_kwargs in list(self.__dict__.get("_forward_pre_hooks", ())):
            changed = hook(self, args, kwargs) if with_kwargs else hook(self, args)
            if changed is not None and with_kwargs:
                args, kwargs = changed
            elif changed is not None:
                args = changed if isinstance(changed, tuple) else (changed,)
        output = self._call(args, kwargs)
        for hook, with_kwargs in list(self.__dict__.get("_forward_hooks", ())):
            changed = hook(self, args, kwargs, output) if with_kwargs else hook(self, args, output)
            if changed is not None:
                output = changed
        return output

    def _call(self, args: tuple, kwargs: dict) -> Any:
        _CALL_STACK.append(self)
        try:
            return self.forward(*args, **kwargs)
        except (ShapeError, DTypeError) as e:
            if getattr(e, "layer", None) is None:
                e.layer = self  # the innermost module where it happened
            if len(_CALL_STACK) == 1:  # the outermost module names the layer by its path
                _name_layer(self, e)
            raise
        finally:
            _CALL_STACK.pop()

    def extra_repr(self) -> str:
        return ""

    def __repr__(self) -> str:
        lines = [
            f"  ({name}): {repr(m).replace(chr(10), chr(10) + '  ')}" for name, m in self._modules.items()
        ]
        head = f"{type(self).__name__}({self.extra_repr()}"
        return head + ("\n" + "\n".join(lines) + "\n)" if lines else ")")


def _dotted(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def _step_count(key: str) -> bool:
    return key.rpartition(".")[2] == "num_batches_tracked"


def _name_layer(root: Module, error: Any) -> None:
    layer = error.layer
    path = next((name for name, m in root.named_modules() if m is layer), None)
    if isinstance(layer, Module):
        where = f"in layer {path or type(root).__name__} ({layer!r})" if path else f"in {layer!r}"
        error.layer = where
        error.args = (str(error),)

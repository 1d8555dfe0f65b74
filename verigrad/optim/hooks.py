"""PyTorch's optimizer hooks: before and after `step()`, around `state_dict()` and `load_state_dict()`.

Each `register_*` returns a handle whose `remove()` takes the hook off; `prepend=True` puts it first.
A subclass's own `step` (or state-dict method) runs the hooks too, once per call even when it calls its
base class's.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from ..autograd import RemovableHandle


def _hooks(optimizer: Any, kind: str) -> list[Callable]:
    return optimizer.__dict__.setdefault(f"_{kind}_hooks", [])


def _outermost(name: str, around: Callable) -> Callable[[Callable], Callable]:
    """Wrap method `name` so that `around(self, call, args, kwargs)` runs it, in the outermost call only."""

    def wrap(method: Callable) -> Callable:
        @functools.wraps(method)
        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            flag = f"_in_{name}"
            if self.__dict__.get(flag):
                return method(self, *args, **kwargs)
            self.__dict__[flag] = True
            try:
                return around(self, lambda *a, **k: method(self, *a, **k), args, kwargs)
            finally:
                self.__dict__[flag] = False

        wrapper.hooked = True  # type: ignore[attr-defined]
        return wrapper

    return wrap


def _step(self: Any, call: Callable, args: tuple, kwargs: dict) -> Any:
    for hook in list(_hooks(self, "step_pre")):
        result = hook(self, args, kwargs)
        if result is not None:
            if not (isinstance(result, tuple) and len(result) == 2):
                raise RuntimeError(
                    "optimizer_pre_hook must return None or a tuple of (new_args, new_kwargs), "
                    f"but got {result}."
                )
            args, kwargs = result
    out = call(*args, **kwargs)
    for hook in list(_hooks(self, "step_post")):
        hook(self, args, kwargs)
    return out


def _state_dict(self: Any, call: Callable, args: tuple, kwargs: dict) -> Any:
    for hook in list(_hooks(self, "state_dict_pre")):
        hook(self)
    state = call(*args, **kwargs)
    for hook in list(_hooks(self, "state_dict_post")):
        result = hook(self, state)
        state = state if result is None else result
    return state


def _load_state_dict(self: Any, call: Callable, args: tuple, kwargs: dict) -> Any:
    state = args[0] if args else kwargs.pop("state_dict")
    for hook in list(_hooks(self, "load_state_dict_pre")):
        result = hook(self, state)
        state = state if result is None else result
    call(state)
    for hook in list(_hooks(self, "load_state_dict_post")):
        hook(self)


_WRAPPED = {"step": _step, "state_dict": _state_dict, "load_state_dict": _load_state_dict}


class OptimizerHooks:
    """PyTorch's `register_*_hook` methods, mixed into `Optimizer`."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name, around in _WRAPPED.items():
            method = cls.__dict__.get(name)
            if callable(method) and not getattr(method, "hooked", False):
                setattr(cls, name, _outermost(name, around)(method))

    def _register(self, kind: str, hook: Callable, prepend: bool) -> RemovableHandle:
        if not callable(hook):
            raise TypeError(f"an optimizer hook must be callable, got {type(hook).__name__}")
        hooks = _hooks(self, kind)
        hooks.insert(0, hook) if prepend else hooks.append(hook)
        return RemovableHandle(hooks, hook)

    def register_step_pre_hook(self, hook: Callable) -> RemovableHandle:
        """hook(optimizer, args, kwargs) before each step; it may return new (args, kwargs)."""
        return self._register("step_pre", hook, False)

    def register_step_post_hook(self, hook: Callable) -> RemovableHandle:
        """hook(optimizer, args, kwargs) after each step."""
        return self._register("step_post", hook, False)

    def register_state_dict_pre_hook(self, hook: Callable, prepend: bool = False) -> RemovableHandle:
        """hook(optimizer) before state_dict()."""
        return self._register("state_dict_pre", hook, prepend)

    def register_state_dict_post_hook(self, hook: Callable, prepend: bool = False) -> RemovableHandle:
        """hook(optimizer, state_dict) after state_dict(); it may return the state dict to give instead."""
        return self._register("state_dict_post", hook, prepend)

    def register_load_state_dict_pre_hook(self, hook: Callable, prepend: bool = False) -> RemovableHandle:
        """hook(optimizer, state_dict) before load_state_dict(); it may return the state dict to load."""
        return self._register("load_state_dict_pre", hook, prepend)

    def register_load_state_dict_post_hook(self, hook: Callable, prepend: bool = False) -> RemovableHandle:
        """hook(optimizer) after load_state_dict()."""
        return self._register("load_state_dict_post", hook, prepend)

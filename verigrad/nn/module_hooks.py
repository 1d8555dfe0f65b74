"""A module call with hooks, as PyTorch's `Module._call_impl`: the global hooks
(`nn.modules.module.register_module_forward_pre_hook`, ...) before the module's own, forward pre-hooks,
backward hooks set on the arguments, forward, forward hooks, backward hooks set on the output; a forward
hook registered with `always_call=True` runs even when forward raises.

A hook entry is (hook, with_kwargs, always_call).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

from ..autograd import RemovableHandle, is_grad_enabled
from ..ir.guards import modules_changed
from .backward_hooks import run_with_backward_hooks

TABLES = ("_forward_pre_hooks", "_forward_hooks", "_backward_hooks", "_backward_pre_hooks")
# the global hooks, by the module table they come before
GLOBAL: dict[str, list[tuple[Callable, bool, bool]]] = {name: [] for name in TABLES}


class HookHandle(RemovableHandle):
    """A module hook's handle: removing the hook changes what a compiled call's guards read."""

    def remove(self) -> None:
        super().remove()
        modules_changed()


def add_hook(
    hooks: list, hook: Callable, with_kwargs: bool = False, prepend: bool = False, always_call: bool = False
) -> RemovableHandle:
    """Put `hook` in `hooks` (first with prepend) and return its handle."""
    if not callable(hook):
        raise TypeError(f"a module hook must be a function, not {type(hook).__name__}")
    entry = (hook, with_kwargs, always_call)
    hooks.insert(0 if prepend else len(hooks), entry)
    modules_changed()
    return HookHandle(hooks, entry)


def any_global() -> bool:
    return any(GLOBAL.values())


def register_module_forward_pre_hook(hook: Callable) -> RemovableHandle:
    """hook(module, args) before every module's forward, before the module's own pre-hooks."""
    return add_hook(GLOBAL["_forward_pre_hooks"], hook)


def register_module_forward_hook(
    hook: Callable, *, with_kwargs: bool = False, always_call: bool = False
) -> RemovableHandle:
    """hook(module, args, output) after every module's forward, before the module's own hooks."""
    return add_hook(GLOBAL["_forward_hooks"], hook, with_kwargs, always_call=always_call)


def register_module_full_backward_pre_hook(hook: Callable) -> RemovableHandle:
    """hook(module, grad_output) for every module, before the module's own backward pre-hooks."""
    return add_hook(GLOBAL["_backward_pre_hooks"], hook)


def register_module_full_backward_hook(hook: Callable) -> RemovableHandle:
    """hook(module, grad_input, grad_output) for every module, before the module's own backward hooks."""
    return add_hook(GLOBAL["_backward_hooks"], hook)


def register_module_backward_hook(hook: Callable) -> RemovableHandle:
    """PyTorch's deprecated global backward hook, which may see the wrong gradients: refused."""
    raise NotImplementedError(
        "register_module_backward_hook is not supported (PyTorch deprecated it): use "
        "register_module_full_backward_hook"
    )


def hooks_of(module: Any, table: str) -> list[tuple[Callable, bool, bool]]:
    """The global hooks of `table`, then the module's."""
    return [*GLOBAL[table], *module.__dict__.get(table, ())]


def hooked_call(module: Any, args: tuple, kwargs: dict, call: Callable[[tuple, dict], Any]) -> Any:
    """call(args, kwargs) (the module's forward) with the hooks around it."""
    for hook, with_kwargs, _ in hooks_of(module, "_forward_pre_hooks"):
        changed = hook(module, args, kwargs) if with_kwargs else hook(module, args)
        if changed is not None and with_kwargs:
            if not (isinstance(changed, tuple) and len(changed) == 2):
                raise RuntimeError(
                    "forward pre-hook must return None or a tuple of (new_args, new_kwargs), but got "
                    f"{changed}."
                )
            args, kwargs = changed
        elif changed is not None:
            args = changed if isinstance(changed, tuple) else (changed,)
    forward_hooks = hooks_of(module, "_forward_hooks")
    called: set[int] = set()
    result = None

    def run(hook: Callable, with_kwargs: bool, args: tuple) -> None:
        nonlocal result
        changed = hook(module, args, kwargs, result) if with_kwargs else hook(module, args, result)
        if changed is not None:
            result = changed

    def forward(args: tuple) -> Any:
        nonlocal result
        result = call(args, kwargs)
        for i, (hook, with_kwargs, _) in enumerate(forward_hooks):
            called.add(i)
            run(hook, with_kwargs, args)
        return result

    backward = [e[0] for e in hooks_of(module, "_backward_hooks")]
    backward_pre = [e[0] for e in hooks_of(module, "_backward_pre_hooks")]
    try:
        if (backward or backward_pre) and is_grad_enabled():
            return run_with_backward_hooks(module, args, forward, backward_pre, backward)
        return forward(args)
    except Exception:
        for i, (hook, with_kwargs, always_call) in enumerate(forward_hooks):
            if always_call and i not in called:
                try:
                    run(hook, with_kwargs, args)
                except Exception as e:
                    warnings.warn(
                        "module forward hook with ``always_call=True`` raised an exception that was silenced "
                        f"as another error was raised in forward: {e}",
                        UserWarning,
                        stacklevel=3,
                    )
        raise

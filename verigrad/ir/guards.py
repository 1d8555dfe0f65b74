"""Checking a program's guards (`Program.guards`) before each compiled call.

A compiled LLM's decode step reads every module's `_traced_state` (its `training` flag and hooks): about
270 guards, each a property read through a weak reference (~0.7 us; ~0.2 ms a call). Each module called
has a second guard, `ModuleAttributes`: its plain numbers and strings (`eps`, `self.k`, which forward
reads as constants of the program) and which modules its children are. nn.Module bumps
`MODULES_CHANGED` after each change of that state made through its API (an attribute set or deleted,
`train()`/`eval()`, a hook added or removed), and a guarded module's death bumps it too, so `checker`
reads the module guards again only when it has moved since they last held (or a module's class no longer
reads the state nn.Module's way); every other guard (grad mode, numbers in closures and globals, an
optimizer's settings) is read at each call. Not seen: a write that goes around nn.Module's API
(`object.__setattr__(m, "training", ...)`, `m.__dict__[...] = ...`, a hook list changed in place)
until the counter moves for another reason."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

GONE = object()  # what a guard reads where the object or name it read is gone
SCALARS = (bool, int, float, complex, str, type(None))  # the Python values a guard keeps
_SCALAR_TYPES = frozenset(SCALARS)  # a set's lookup: half the time of the tuple's in module_attributes

# bumped after each change through nn.Module's API of what a module guard reads (`training`, the hooks,
# its numbers and children: any attribute set or deleted, `train()`, a hook added or removed) and when a
# guarded module dies: while it is unchanged, a program's module guards hold if they held at its last check.
# No lock: a change is made before its bump, and `holds` reads the counter before the guards, so a racing
# change is either seen by those reads or moves the counter past the value kept (two bumps that lose one
# still move it)
MODULES_CHANGED = [0]


def modules_changed(*_: Any) -> None:
    """Note a change of module state (also the callback of a guarded module's weak reference)."""
    MODULES_CHANGED[0] += 1


def attribute(ref: weakref.ref, name: str) -> tuple[type, Any]:
    """The (type, value) of the attribute `name` of the object `ref` refers to (GONE where either is)."""
    obj = ref()
    value = GONE if obj is None else getattr(obj, name, GONE)
    return (type(value), value)


class ModuleState:
    """The read of a module's `_traced_state` (what a trace of its call depends on besides tensors)."""

    __slots__ = ("cls", "ref")

    def __init__(self, module: Any) -> None:
        self.ref = weakref.ref(module, modules_changed)
        self.cls = type(module)

    def __call__(self) -> tuple[type, Any]:
        return attribute(self.ref, "_traced_state")


class ModuleAttributes:
    """The read of a module's plain Python values (numbers, strings, None: `eps`, a layer's settings) and
    which modules its children are: a trace read them without a guard of their own."""

    __slots__ = ("ref",)

    def __init__(self, module: Any) -> None:
        self.ref = weakref.ref(module, modules_changed)

    def __call__(self) -> tuple:
        module = self.ref()
        return GONE if module is None else module_attributes(module)


def module_attributes(module: Any) -> tuple:
    """(name, type, value) of each scalar in the module's `__dict__`, then (name, id) of its children."""
    d = module.__dict__
    found = [(name, type(v), v) for name, v in d.items() if type(v) in _SCALAR_TYPES]
    children = d.get("_modules")
    if isinstance(children, dict):
        found += [(name, id(m)) for name, m in children.items()]
    return tuple(found)


def _layout(cls: type) -> tuple[Any, Any] | None:
    """What makes a `__dict__` look at `cls`'s instances equal to reading `_traced_state`: the property
    (nn.Module's, which reads `training` and the hook lists) and no class attribute `training` (which a
    descriptor could serve); None where the class reads it some other way."""
    prop = getattr(cls, "_traced_state", None)
    if not isinstance(prop, property) or getattr(prop.fget, "__qualname__", "") != "Module._traced_state":
        return None
    if getattr(cls, "training", GONE) is not GONE:
        return None
    hooks = prop.fget.__globals__.get("_HOOKS")
    return (prop, hooks) if isinstance(hooks, tuple) and len(hooks) == 4 else None


def checker(guards: dict[Any, tuple[Callable[[], Any], Any]]) -> Callable[[], bool]:
    """A function telling whether every guard's read still gives its value (`Program.holds`)."""
    covered: list[tuple[Callable[[], Any], Any]] = []  # module guards `MODULES_CHANGED` covers
    classes: dict[type, tuple[Any, Any]] = {}
    others: list[tuple[Callable[[], Any], Any]] = []
    for read, value in guards.values():
        layout = _layout(read.cls) if type(read) is ModuleState else None
        if type(read) is ModuleAttributes:  # read from the __dict__, which only the counter's API writes
            covered.append((read, value))
        elif layout is None:
            others.append((read, value))
        else:
            classes[read.cls] = layout
            covered.append((read, value))
    class_list = list(classes.items())
    checked: list[int | None] = [None]  # MODULES_CHANGED when the covered guards last held

    def holds() -> bool:
        now = MODULES_CHANGED[0]  # read before the reads: a change after them bumps it again
        if now != checked[0] or not all(_layout(cls) == layout for cls, layout in class_list):
            if not all(read() == value for read, value in covered):
                return False
            checked[0] = now
        return all(read() == value for read, value in others)

    return holds

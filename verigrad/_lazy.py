"""A package's names imported on first use (PEP 562), as `import torch` leaves torch.distributions unread
until used: a table of each name's module, and the package's `__getattr__` and `__dir__` that read it.
Start-up then imports what the program uses, not every family of layers and functions.
"""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Callable, Iterable, Mapping
from typing import Any

Where = tuple[str, str | None]  # (module relative to the package, attribute; None: the module itself)


def table(names: Mapping[str, str] | None = None, modules: Iterable[str] = ()) -> dict[str, Where]:
    """{name: (module, attribute)} from {module: "name other=attribute ..."} (`other=attribute`: the
    module's `attribute` under the name `other`) and `modules`, submodules reached by their own name."""
    out: dict[str, Where] = {module: (module, None) for module in modules}
    for module, spec in (names or {}).items():
        for item in spec.split():
            name, _, attribute = item.partition("=")
            out[name] = (module, attribute or name)
    return out


class LazyPackage(types.ModuleType):
    """A package module whose lazy names a submodule never replaces: importing `verigrad.compile` (the
    module) sets the attribute `compile` on `verigrad`, where the table says the name is a function."""

    def __setattr__(self, name: str, value: Any) -> None:
        where = self.__dict__.get("_LAZY_NAMES", {}).get(name)
        if where and where[1] is not None and getattr(value, "__name__", None) == f"{self.__name__}.{name}":
            return  # the import system's submodule, not the table's value
        super().__setattr__(name, value)


def attach(
    name: str, names: Mapping[str, Where], package: str | None = None
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Make the module `name` (being imported) resolve `names` on first access, their modules relative to
    `package` (by default the module itself); its `__getattr__` and `__dir__`. A name once resolved is set on
    the module, so that later look-ups are plain attribute reads."""
    module = sys.modules[name]
    package = package or name
    module._LAZY_NAMES = dict(names)
    module.__class__ = LazyPackage

    def __getattr__(attribute: str) -> Any:
        where = names.get(attribute)
        if where is None:
            raise AttributeError(f"module {name!r} has no attribute {attribute!r}")
        value: Any = importlib.import_module(f"{package}.{where[0]}")
        if where[1] is not None:
            value = getattr(value, where[1])
        module.__dict__[attribute] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*module.__dict__, *names})

    return __getattr__, __dir__

"""A package's names imported on first use (PEP 562), as `import torch` leaves torch.distributions unread
until used: a table of each name's module, and the package's `__getattr__` and `__dir__` that read it.
Start-up then imports what the program uses, not every family of layers and functions.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
import types
from collections.abc import Callable, Iterable, Mapping
from typing import Any

Where = tuple[str, str | None]  # (module relative to the package, attribute; None: the module itself)


def table(names: Mapping[str, str] | None = None, modules: Iterable[str] = ()) -> dict[str, Where]:
    """{name: (module, attribute)} from {module: "name other=attribute ..."} (`other=attribute`: the
    module's `attribute` under the name `other`; a module relative to the package, "..name" above it)
    and `modules`, submodules reached by their own name."""
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
        value: Any = importlib.import_module(where[0] if where[0][0] == "." else f".{where[0]}", package)
        if where[1] is not None:
            value = getattr(value, where[1])
        module.__dict__[attribute] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*module.__dict__, *names})

    return __getattr__, __dir__


def namespace(
    name: str, doc: str, names: Mapping[str, Where], package: str | None = None, **values: Any
) -> types.ModuleType:
    """A module `name` that is no file (PyTorch's namespaces that programs import: torch.func,
    torch.nn.modules), registered in sys.modules, holding `values` and `names` read on first use."""
    module = types.ModuleType(name, doc)
    module.__dict__.update(values)
    sys.modules[name] = module
    module.__getattr__, module.__dir__ = attach(name, names, package)
    return module


class _Aliases:
    """A finder (sys.meta_path) of module names that are other modules, imported on first use:
    `import verigrad.nn.modules.loss` imports verigrad.nn.losses and gives it under both names."""

    def __init__(self) -> None:
        self.targets: dict[str, str] = {}
        self.specs: dict[str, Any] = {}

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        return importlib.machinery.ModuleSpec(fullname, self) if fullname in self.targets else None

    def create_module(self, spec: Any) -> types.ModuleType:
        module = importlib.import_module(self.targets[spec.name])
        self.specs[module.__name__] = module.__spec__
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        module.__spec__ = self.specs.pop(module.__name__)  # its own, which the import replaced


_ALIASES = _Aliases()


def alias(targets: Mapping[str, str]) -> None:
    """Each name of `targets` (below a namespace module) imports as the module it maps to, on first use."""
    if _ALIASES not in sys.meta_path:
        sys.meta_path.append(_ALIASES)
    _ALIASES.targets.update(targets)
    for name in targets:
        parent = sys.modules[name.rpartition(".")[0]]
        if not hasattr(parent, "__path__"):
            parent.__path__ = []  # a package, so that the import system asks the finders for its children

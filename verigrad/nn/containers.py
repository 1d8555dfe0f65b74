"""Containers of modules and parameters, as PyTorch's: Sequential, ModuleList, ModuleDict, ParameterList,
and Parameter."""

from __future__ import annotations

from typing import Any

from ..ops import zeros
from ..tensor import Tensor
from .module import Module


class Sequential(Module):
    """Layers applied in order; indexable and iterable."""

    def __init__(self, *layers: Module):
        super().__init__()
        for i, layer in enumerate(layers):
            setattr(self, str(i), layer)

    def __getitem__(self, i: int) -> Module:
        return list(self._modules.values())[i]

    def __setitem__(self, i: int, module: Module) -> None:
        """Replace layer i (PyTorch's `model[i] = layer`), keeping its name."""
        setattr(self, list(self._modules)[i], module)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def append(self, module: Module) -> Sequential:
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules: Any) -> Sequential:
        for module in modules:
            self.append(module)
        return self

    def forward(self, x: Any) -> Any:
        for layer in self._modules.values():
            x = layer(x)
        return x


class ModuleList(Sequential):
    """A list of modules whose parameters are registered (no forward of its own); made from an
    iterable of modules, as in PyTorch, or from the modules themselves."""

    def __init__(self, *modules: Any):
        if len(modules) == 1 and not isinstance(modules[0], Module):
            modules = tuple(modules[0])
        super().__init__(*modules)

    def forward(self, x: Any) -> Any:
        raise NotImplementedError("ModuleList has no forward(); iterate over it")


class ModuleDict(Module):
    """Modules by name, registered (no forward of its own), as PyTorch's ModuleDict."""

    def __init__(self, modules: Any = None):
        super().__init__()
        self.update(modules or {})

    def __getitem__(self, name: str) -> Module:
        return self._modules[name]

    def __setitem__(self, name: str, module: Module) -> None:
        self.add_module(name, module)

    def __contains__(self, name: object) -> bool:
        return name in self._modules

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def keys(self):
        return self._modules.keys()

    def values(self):
        return self._modules.values()

    def items(self):
        return self._modules.items()

    def update(self, modules: Any) -> None:
        for name, module in dict(modules).items():
            self.add_module(name, module)

    def forward(self, x: Any) -> Any:
        raise NotImplementedError("ModuleDict has no forward(); index it by name")


class ParameterList(Module):
    """Tensors trained as parameters, by position (PyTorch's ParameterList)."""

    def __init__(self, values: Any = ()):
        super().__init__()
        for value in values:
            self.append(value)

    def append(self, value: Tensor) -> ParameterList:
        setattr(self, str(len(self)), Parameter(value) if not value.requires_grad else value)
        return self

    def __getitem__(self, i: int) -> Tensor:
        return list(self._parameters.values())[i]

    def __len__(self) -> int:
        return len(self._parameters)

    def __iter__(self):
        return iter(self._parameters.values())


class Parameter:
    """PyTorch's nn.Parameter: the tensor itself (its memory shared) marked as requiring grad, which is
    what makes a module attribute a parameter here."""

    def __new__(cls, data: Tensor | None = None, requires_grad: bool = True) -> Tensor:  # type: ignore[misc]
        if data is None:
            data = zeros(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Parameter takes a tensor, got {type(data).__name__}")
        return data.detach().requires_grad_(requires_grad)

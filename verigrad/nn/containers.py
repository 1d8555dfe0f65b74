"""Containers of modules and parameters, as PyTorch's: Sequential, ModuleList, ModuleDict, ParameterList,
ParameterDict, Parameter and Buffer."""

from __future__ import annotations

import operator
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from typing import Any

from ..ops import zeros
from ..tensor import Tensor
from .module import Module, is_marked_parameter, is_parameter, mark_buffer, mark_parameter, marked_buffer


class _ParameterType(type):
    def __instancecheck__(cls, value: Any) -> bool:
        return is_marked_parameter(value)


class Parameter(metaclass=_ParameterType):
    """PyTorch's nn.Parameter: the tensor itself (its memory shared, no history) marked as requiring grad
    (or not), which makes it a parameter of the module it is assigned to. isinstance(p, nn.Parameter)
    holds for such a tensor and for every module's parameter, as in PyTorch."""

    def __new__(cls, data: Tensor | None = None, requires_grad: bool = True) -> Tensor:  # type: ignore[misc]
        if data is None:
            data = zeros(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Parameter takes a tensor, got {type(data).__name__}")
        return mark_parameter(data.detach().requires_grad_(requires_grad))


def _index(name: str, i: Any, length: int) -> int:
    """`i` as a position in [0, length), negative counting from the end, as PyTorch's containers."""
    i = operator.index(i)
    if not -length <= i < length:
        raise IndexError(f"{name}: index {i} is out of range")
    return i % length


class _Indexed(Module):
    """Modules kept under the names "0", "1", ...: the list behaviour Sequential and ModuleList share."""

    def __init__(self, modules: Iterable[Module] = ()) -> None:
        super().__init__()
        for i, module in enumerate(modules):
            self.add_module(str(i), module)

    def _renumber(self, modules: list[Module]) -> None:
        """Hold exactly `modules`, named by position again (after a deletion or insertion)."""
        for name in list(self._modules):
            delattr(self, name)
        for i, module in enumerate(modules):
            self.add_module(str(i), module)

    def __getitem__(self, i: int | slice) -> Any:
        if isinstance(i, slice):
            return type(self)(list(self._modules.values())[i])
        return list(self._modules.values())[_index(type(self).__name__, i, len(self))]

    def __setitem__(self, i: int, module: Module) -> None:
        """Replace the module at `i` (`model[i] = layer`), keeping its name."""
        setattr(self, list(self._modules)[_index(type(self).__name__, i, len(self))], module)

    def __delitem__(self, i: int | slice) -> None:
        modules = list(self._modules.values())
        if isinstance(i, slice):
            del modules[i]
        else:
            del modules[_index(type(self).__name__, i, len(self))]
        self._renumber(modules)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(list(self._modules.values()))

    def __add__(self, other: Any) -> Any:
        if not isinstance(other, type(self)):
            raise TypeError(f"{type(self).__name__} + {type(other).__name__} is not supported")
        return type(self)([*self, *other])

    def __iadd__(self, other: Iterable[Module]) -> Any:
        return self.extend(other)

    def append(self, module: Module) -> Any:
        """Add `module` at the end; returns the container."""
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules: Iterable[Module]) -> Any:
        """Add each of `modules` at the end; returns the container."""
        for module in list(modules):
            self.append(module)
        return self

    def insert(self, index: int, module: Module) -> Any:
        """Put `module` before position `index` (as list.insert)."""
        if not isinstance(module, Module):
            raise TypeError(f"{type(self).__name__}.insert: {type(module).__name__} is not a Module subclass")
        modules = list(self._modules.values())
        modules.insert(index, module)
        self._renumber(modules)
        return self

    def pop(self, i: int = -1) -> Module:
        """Remove the module at `i` and return it."""
        module = self[i]
        del self[i]
        return module


class Sequential(_Indexed):
    """Layers applied in order, given as arguments or as one OrderedDict of named layers (as PyTorch's);
    indexable (a slice is a Sequential) and iterable."""

    def __init__(self, *args: Any):
        layers = args
        if len(layers) == 1 and isinstance(layers[0], OrderedDict):
            Module.__init__(self)
            for name, layer in layers[0].items():
                self.add_module(name, layer)
            return
        if len(layers) == 1 and isinstance(layers[0], list):  # a slice's copy (see _Indexed.__getitem__)
            layers = tuple(layers[0])
        super().__init__(layers)

    def __getitem__(self, i: int | slice) -> Any:
        if isinstance(i, slice):  # keeps the names, as PyTorch's
            return Sequential(OrderedDict(list(self._modules.items())[i]))
        return super().__getitem__(i)

    def forward(self, x: Any) -> Any:  # PyTorch names it input; x is the name a traced program prints
        for layer in self._modules.values():
            x = layer(x)
        return x


class ModuleList(_Indexed):
    """A list of modules whose parameters are registered (no forward of its own); made from an
    iterable of modules, as in PyTorch (`modules=`), or from the modules themselves."""

    def __init__(self, modules: Iterable[Module] | Module | None = None, *more: Module):
        if modules is None:
            modules = more
        elif isinstance(modules, Module):
            modules = (modules, *more)
        elif more:
            raise TypeError("ModuleList takes an iterable of modules, or the modules themselves")
        super().__init__(modules)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("ModuleList has no forward(); iterate over it")

    def __repr__(self) -> str:
        """PyTorch's: a run of modules that print alike is one line, "(0-2): 3 x Linear(...)"."""
        if not self._modules:
            return "ModuleList()"
        runs: list[list[Any]] = []  # [first, last, repr]
        for i, module in enumerate(self._modules.values()):
            text = repr(module)
            if runs and runs[-1][2] == text:
                runs[-1][1] = i
            else:
                runs.append([i, i, text])
        lines = []
        for first, last, text in runs:
            text = text.replace("\n", "\n  ")
            name, count = (str(first), "") if first == last else (f"{first}-{last}", f"{last - first + 1} x ")
            lines.append(f"  ({name}): {count}{text}")
        return "ModuleList(\n" + "\n".join(lines) + "\n)"


class ModuleDict(Module):
    """Modules by name, registered (no forward of its own), as PyTorch's ModuleDict."""

    def __init__(self, modules: Any = None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> Module:
        return self._modules[key]

    def __setitem__(self, key: str, module: Module) -> None:
        self.add_module(key, module)

    def __delitem__(self, key: str) -> None:
        if key not in self._modules:
            raise KeyError(key)
        delattr(self, key)

    def __contains__(self, key: object) -> bool:
        return key in self._modules

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._modules))

    def keys(self) -> Any:
        return self._modules.keys()

    def values(self) -> Any:
        return self._modules.values()

    def items(self) -> Any:
        return self._modules.items()

    def pop(self, key: str) -> Module:
        module = self[key]
        del self[key]
        return module

    def clear(self) -> None:
        for key in list(self._modules):
            del self[key]

    def update(self, modules: Any) -> None:
        """Add each (name, module) of a mapping or of an iterable of pairs."""
        pairs = modules.items() if hasattr(modules, "items") else modules
        for pair in pairs:
            name, module = pair
            self[name] = module

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("ModuleDict has no forward(); index it by name")


def _as_parameter(value: Any) -> Any:
    """A tensor becomes a parameter (as PyTorch's ParameterList and ParameterDict make one); anything
    else is kept as it is."""
    return value if not isinstance(value, Tensor) or is_parameter(value) else Parameter(value)


class _BufferType(type):
    def __instancecheck__(cls, value: Any) -> bool:
        return marked_buffer(value) is not None


class Buffer(metaclass=_BufferType):
    """PyTorch's nn.Buffer: the tensor itself (its memory shared, no history) marked to become a buffer of
    the module it is assigned to, saved by state_dict unless persistent=False."""

    def __new__(cls, data: Tensor, *, persistent: bool = True) -> Tensor:  # type: ignore[misc]
        if not isinstance(data, Tensor):
            raise TypeError(f"Buffer takes a tensor, got {type(data).__name__}")
        return mark_buffer(data.detach().requires_grad_(data.requires_grad), persistent)


class ParameterList(Module):
    """Tensors trained as parameters, by position (PyTorch's ParameterList)."""

    def __init__(self, values: Iterable[Any] | None = None):
        super().__init__()
        self._size = 0
        if values is not None:
            self.extend(values)

    def __getitem__(self, i: int | slice) -> Any:
        if isinstance(i, slice):
            return ParameterList([self[k] for k in range(len(self))[i]])
        return getattr(self, str(_index("ParameterList", i, len(self))))

    def __setitem__(self, i: int, value: Any) -> None:
        setattr(self, str(_index("ParameterList", i, len(self))), _as_parameter(value))

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[Any]:
        return iter([self[i] for i in range(len(self))])

    def __iadd__(self, values: Iterable[Any]) -> ParameterList:
        return self.extend(values)

    def append(self, value: Any) -> ParameterList:
        """Add `value` (a tensor becomes a parameter) at the end; returns the list."""
        name = str(self._size)
        self._size += 1
        setattr(self, name, _as_parameter(value))
        return self

    def extend(self, values: Iterable[Any]) -> ParameterList:
        for value in list(values):
            self.append(value)
        return self

    def extra_repr(self) -> str:
        return "\n".join(f"  ({i}): {_describe_parameter(p)}" for i, p in enumerate(self))


class ParameterDict(Module):
    """Tensors trained as parameters, by name (PyTorch's ParameterDict)."""

    def __init__(self, parameters: Any = None):
        super().__init__()
        self._keys: dict[str, None] = {}
        if parameters is not None:
            self.update(parameters)

    def __getitem__(self, key: str) -> Any:
        if key not in self._keys:
            raise KeyError(key)
        return getattr(self, key)

    def __setitem__(self, key: str, value: Any) -> None:
        if not isinstance(key, str):
            raise TypeError(f"ParameterDict keys must be strings, got {type(key).__name__}")
        self._keys[key] = None
        setattr(self, key, _as_parameter(value))

    def __delitem__(self, key: str) -> None:
        del self._keys[key]
        delattr(self, key)

    def __contains__(self, key: object) -> bool:
        return key in self._keys

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._keys))

    def keys(self) -> Any:
        return self._keys.keys()

    def values(self) -> Iterator[Any]:
        return iter([self[k] for k in self._keys])

    def items(self) -> Iterator[tuple[str, Any]]:
        return iter([(k, self[k]) for k in self._keys])

    def get(self, key: str, default: Any = None) -> Any:
        return getattr(self, key) if key in self._keys else default

    def pop(self, key: str) -> Any:
        value = self[key]
        del self[key]
        return value

    def clear(self) -> None:
        for key in list(self._keys):
            del self[key]

    def update(self, parameters: Any) -> None:
        """Add each (name, tensor) of a mapping or of an iterable of pairs."""
        pairs = parameters.items() if hasattr(parameters, "items") else parameters
        for key, value in pairs:
            self[key] = value

    def extra_repr(self) -> str:
        """PyTorch's lines (printed indented again by Module's repr, as PyTorch's are)."""
        return "\n".join(f"  ({k}): {_describe_parameter(v)}" for k, v in self.items())


def _describe_parameter(p: Any) -> str:
    """PyTorch's line for a parameter in a ParameterList/Dict: "Parameter containing: [torch.float32 of
    size 2x3]", verigrad's dtype names."""
    if not isinstance(p, Tensor):
        return f"Object of type: {type(p).__name__}"
    size = "x".join(str(d) for d in p.shape)
    return f"Parameter containing: [{p.dtype.name} of size {size}]"

"""PyTorch's `torch.nn.utils.parametrize`: a module's tensor computed by modules from the tensors kept.

`register_parametrization(module, "weight", p)` keeps the weight as `module.parametrizations.weight.original`
(as `original0`, `original1`, ... where `p.right_inverse` gives several) and makes `module.weight` a
property that computes `p(original)` at each read; more parametrizations stack on it. As in PyTorch, the
module's class becomes a subclass made for it ("ParametrizedLinear") holding those properties, so a module
without parametrizations reads its attributes as fast as before. Assigning to `module.weight` writes
`right_inverse(value)` into the originals.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator, Sequence
from typing import Any

from ...autograd import no_grad
from ...tensor import Tensor
from ..containers import ModuleDict, ModuleList, Parameter
from ..module import Module, is_marked_parameter

__all__ = [
    "ParametrizationList",
    "cached",
    "is_parametrized",
    "register_parametrization",
    "remove_parametrizations",
    "type_before_parametrizations",
]

_cache_enabled = 0
_cache: dict[tuple[int, str], Tensor] = {}


@contextlib.contextmanager
def cached() -> Iterator[None]:
    """Inside it, each parametrized tensor is computed once, at its first read, and that value is given
    at every later read (PyTorch's: e.g. a weight read at each step of an RNN)."""
    global _cache_enabled, _cache
    _cache_enabled += 1
    try:
        yield
    finally:
        _cache_enabled -= 1
        if not _cache_enabled:
            _cache = {}


def _register_parameter_or_buffer(module: Module, name: str, x: Tensor) -> None:
    if is_marked_parameter(x):
        module.register_parameter(name, x)
    else:
        module.register_buffer(name, x)


def _maybe_set(dest: Tensor, src: Tensor) -> None:
    """Write src into dest, keeping dest the same tensor object (PyTorch's dest.set_(src))."""
    if tuple(dest.shape) == tuple(src.shape) and dest.dtype is src.dtype:
        dest.assign(src)
    else:  # a new shape: dest takes src's values and spec
        dest.payload = src.detach().clone().payload
        dest.spec = src.spec


def _check_tensor(where: str, what: str, x: Any, like: Tensor | None = None) -> None:
    """x must be a tensor, with like's dtype and shape where given."""
    if not isinstance(x, Tensor):
        raise ValueError(f"{where}: {what} must be a tensor, got {type(x).__name__}")
    if like is not None and x.dtype is not like.dtype:
        raise ValueError(
            f"{where}: {what} has dtype {x.dtype.name}; the tensor parametrized has {like.dtype.name}"
        )
    if like is not None and tuple(x.shape) != tuple(like.shape):
        raise ValueError(
            f"{where}: {what} has shape {tuple(x.shape)}; the tensor parametrized has {tuple(like.shape)}"
        )


class ParametrizationList(ModuleList):
    """The parametrizations of one tensor, applied in order, and the original tensor(s) they start from
    (`original`, or `original0`, `original1`, ... when the first one takes several)."""

    def __init__(self, modules: Sequence[Module], original: Tensor, unsafe: bool = False) -> None:
        if len(modules) == 0:
            raise ValueError("ParametrizationList requires one or more modules.")
        super().__init__(modules)
        self.unsafe = unsafe
        shape, dtype = tuple(original.shape), original.dtype
        with no_grad():
            new: Any = original
            for module in reversed(list(self)):
                if hasattr(module, "right_inverse"):
                    with contextlib.suppress(NotImplementedError):
                        new = module.right_inverse(new)
        if not isinstance(new, (Tensor, Sequence)):
            raise ValueError(
                "'right_inverse' must return a Tensor or a Sequence of tensors (list, tuple...). "
                f"Got {type(new).__name__}"
            )
        self.is_tensor = isinstance(new, Tensor)
        self.ntensors = 1 if self.is_tensor else len(new)
        if self.is_tensor:
            if new.dtype is not original.dtype:
                raise ValueError(
                    f"When `right_inverse` outputs one tensor, it may not change the dtype.\n"
                    f"original.dtype: {original.dtype.name}\nright_inverse(original).dtype: {new.dtype.name}"
                )
            with no_grad():
                _maybe_set(original, new)
            _register_parameter_or_buffer(self, "original", original)
        else:
            for i, part in enumerate(new):
                if not isinstance(part, Tensor):
                    raise ValueError(
                        f"'right_inverse' must return a Tensor or a Sequence of tensors (list, tuple...). "
                        f"Got element {i} of the sequence with type {type(part).__name__}."
                    )
                if is_marked_parameter(original):
                    part = Parameter(part, original.requires_grad)
                part.requires_grad_(original.requires_grad)
                _register_parameter_or_buffer(self, f"original{i}", part)
        if not self.unsafe:
            z = self()
            _check_tensor("register_parametrization", "the parametrization's output", z)
            if z.dtype is not dtype:
                raise ValueError(
                    "Registering a parametrization may not change the dtype of the tensor, unless `unsafe` "
                    f"flag is enabled.\nunparametrized dtype: {dtype.name}\n"
                    f"parametrized dtype: {z.dtype.name}"
                )
            if tuple(z.shape) != shape:
                raise ValueError(
                    "Registering a parametrization may not change the shape of the tensor, unless `unsafe` "
                    f"flag is enabled.\nunparametrized shape: {shape}\nparametrized shape: {tuple(z.shape)}"
                )

    def right_inverse(self, value: Tensor) -> None:
        """Write into the originals the tensors from which the parametrizations compute `value`."""
        with no_grad():
            for module in reversed(list(self)):
                if not hasattr(module, "right_inverse"):
                    raise RuntimeError(
                        f"parametrization {type(module).__name__} does not implement right_inverse."
                    )
                value = module.right_inverse(value)
            if self.is_tensor:
                _check_tensor("right_inverse", "the value", value)
                if value.dtype is not self.original.dtype:
                    raise ValueError(
                        f"The tensor returned by right_inverse has dtype {value.dtype.name} while "
                        f"`original` has dtype {self.original.dtype.name}"
                    )
                _maybe_set(self.original, value)
            else:
                if not isinstance(value, Sequence) or len(value) != self.ntensors:
                    raise ValueError(
                        f"'right_inverse' must return a sequence of {self.ntensors} tensors, got {value!r}"
                    )
                for i, part in enumerate(value):
                    original = getattr(self, f"original{i}")
                    _check_tensor("right_inverse", f"element {i} of its result", part)
                    if part.dtype is not original.dtype:
                        raise ValueError(
                            f"Tensor {i} returned by `right_inverse` has dtype {part.dtype.name} while "
                            f"`original{i}` has dtype {original.dtype.name}"
                        )
                    _maybe_set(original, part)

    def forward(self) -> Tensor:  # type: ignore[override]
        modules = list(self)
        if self.is_tensor:
            x = modules[0](self.original)
        else:
            x = modules[0](*(getattr(self, f"original{i}") for i in range(self.ntensors)))
        for module in modules[1:]:
            x = module(x)
        return x

    def __repr__(self) -> str:
        return "ParametrizationList" + ModuleList.__repr__(self)[len("ModuleList") :]


def _parametrized_setattr(self: Module, name: str, value: Any) -> None:
    """A parametrized name is written through its property (right_inverse), as in PyTorch."""
    found = self.__dict__.get("parametrizations")
    if isinstance(found, ModuleDict) and name in found._modules:
        if is_marked_parameter(value):
            raise KeyError(f"attribute '{name}' already exists (it is parametrized)")
        object.__setattr__(self, name, value)
        return
    type(self).__mro__[1].__setattr__(self, name, value)


def _inject_new_class(module: Module) -> None:
    cls = type(module)

    def getstate(self: Module) -> Any:
        raise RuntimeError(
            "Serialization of parametrized modules is only supported through state_dict(). See: "
            "https://pytorch.org/tutorials/beginner/saving_loading_models.html"
            "#saving-loading-a-general-checkpoint-for-inference-and-or-resuming-training"
        )

    def default_deepcopy(self: Module, memo: dict) -> Module:
        """copy.deepcopy works (pickling does not: __getstate__ refuses), as in PyTorch."""
        found = memo.get(id(self))
        if found is not None:
            return found
        replica = self.__new__(type(self))
        memo[id(self)] = replica
        object.__setattr__(replica, "__dict__", copy.deepcopy(self.__dict__, memo))
        return replica

    namespace: dict[str, Any] = {"__getstate__": getstate, "__setattr__": _parametrized_setattr}
    if not hasattr(cls, "__deepcopy__"):
        namespace["__deepcopy__"] = default_deepcopy
    module.__class__ = type(f"Parametrized{cls.__name__}", (cls,), namespace)


def _inject_property(module: Module, name: str) -> None:
    def get_parametrized(self: Module) -> Tensor:
        parametrization = self.parametrizations[name]
        if not _cache_enabled:
            return parametrization()
        key = (id(self), name)
        value = _cache.get(key)
        if value is None:
            value = _cache[key] = parametrization()
        return value

    def set_original(self: Module, value: Tensor) -> None:
        self.parametrizations[name].right_inverse(value)

    setattr(type(module), name, property(get_parametrized, set_original))


def register_parametrization(
    module: Module, tensor_name: str, parametrization: Module, *, unsafe: bool = False
) -> Module:
    """Make `module.<tensor_name>` computed by `parametrization` from the tensor kept (see the module
    docstring); a second one on the same name applies after the first. `unsafe`: skip the checks that
    the parametrization keeps the tensor's dtype and shape. Returns the module."""
    if not isinstance(parametrization, Module):
        raise TypeError(
            "register_parametrization: the parametrization must be a Module, got "
            f"{type(parametrization).__name__}"
        )
    parametrization.train(module.training)
    if is_parametrized(module, tensor_name):
        if not unsafe:
            y = getattr(module, tensor_name)
            x = parametrization(y)
            _check_tensor("register_parametrization", "the parametrization's output", x, y)
            if hasattr(parametrization, "right_inverse"):
                try:
                    z = parametrization.right_inverse(x)
                except NotImplementedError:
                    pass
                else:
                    _check_tensor("register_parametrization", "right_inverse's output", z, y)
        module.parametrizations[tensor_name].append(parametrization)
        module.parametrizations[tensor_name].unsafe |= unsafe
    elif tensor_name in module._buffers or tensor_name in module._parameters:
        original = getattr(module, tensor_name)
        if original is None:
            raise ValueError(f"register_parametrization: {type(module).__name__}.{tensor_name} is None")
        parametrizations = ParametrizationList([parametrization], original, unsafe=unsafe)
        delattr(module, tensor_name)
        if not is_parametrized(module):
            _inject_new_class(module)
            module.parametrizations = ModuleDict()
        _inject_property(module, tensor_name)
        module.parametrizations[tensor_name] = parametrizations
    else:
        raise ValueError(
            f"Module '{module}' does not have a parameter, a buffer, or a parametrized element with name "
            f"'{tensor_name}'"
        )
    return module


def is_parametrized(module: Module, tensor_name: str | None = None) -> bool:
    """Whether `module` has a parametrization (on `tensor_name`, where given)."""
    parametrizations = module.__dict__.get("parametrizations")
    if not isinstance(parametrizations, ModuleDict):
        return False
    return len(parametrizations) > 0 if tensor_name is None else tensor_name in parametrizations


def remove_parametrizations(module: Module, tensor_name: str, leave_parametrized: bool = True) -> Module:
    """Undo the parametrizations of `tensor_name`: it is a parameter (or buffer) again, holding its
    parametrized value (`leave_parametrized`) or the original. Returns the module."""
    if not is_parametrized(module, tensor_name):
        raise ValueError(f"Module {module} does not have a parametrization on {tensor_name}")
    parametrizations = module.parametrizations[tensor_name]
    if parametrizations.is_tensor:
        original = parametrizations.original
        if leave_parametrized:
            with no_grad():
                _maybe_set(original, getattr(module, tensor_name))
    else:
        if not leave_parametrized:
            raise ValueError(
                "Cannot leave unparametrized (`leave_parametrized=False`) a tensor that is parametrized in "
                "terms of a sequence of tensors."
            )
        with no_grad():
            t = getattr(module, tensor_name)
        requires_grad = any(p.requires_grad for p in parametrizations.parameters())
        original = Parameter(t.detach(), True) if requires_grad else t.detach()
    delattr(type(module), tensor_name)
    del module.parametrizations[tensor_name]
    _register_parameter_or_buffer(module, tensor_name, original)
    if not is_parametrized(module):
        delattr(module, "parametrizations")
        module.__class__ = type(module).__bases__[0]
    return module


def type_before_parametrizations(module: Module) -> type:
    """The module's class before parametrizations were registered on it (its class where none were)."""
    return type(module).__bases__[0] if is_parametrized(module) else type(module)

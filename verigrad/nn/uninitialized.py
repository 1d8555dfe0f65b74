"""PyTorch's nn.UninitializedParameter and nn.UninitializedBuffer: a parameter (buffer) whose shape is not
known yet, as the lazy layers hold before their first forward. As verigrad's nn.Parameter, each is a
tensor (empty, of its dtype) marked as such: isinstance(p, nn.UninitializedParameter) holds until
`materialize(shape)` gives it its elements, and for a lazy layer's placeholders until the layer is made."""

from __future__ import annotations

import weakref
from typing import Any

from ..devices import as_device
from ..dtypes import as_dtype
from ..ops import empty
from ..settings import get_default_dtype
from ..tensor import Tensor
from .module import is_marked_parameter, mark_buffer, mark_parameter

_UNINITIALIZED: weakref.WeakValueDictionary[int, Tensor] = weakref.WeakValueDictionary()


def mark_uninitialized(t: Tensor) -> Tensor:
    """Mark `t` as holding no elements yet (until `materialize`)."""
    _UNINITIALIZED[id(t)] = t
    return t


def is_lazy(value: Any) -> bool:
    """Whether `value` is an uninitialized parameter or buffer (torch.nn.parameter.is_lazy)."""
    return isinstance(value, Tensor) and _UNINITIALIZED.get(id(value)) is value


def materialize(t: Tensor, shape: Any, device: Any = None, dtype: Any = None) -> Tensor:
    """Give an uninitialized parameter or buffer its elements, in place (the same object, which an optimizer
    may hold): `shape` in its dtype (or `dtype`), zeros until initialized; it is then a plain parameter or
    buffer."""
    if not is_lazy(t):
        raise RuntimeError("materialize: only an UninitializedParameter or UninitializedBuffer has no shape")
    as_device(device, "materialize")
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    t.data = empty(shape, dtype=t.dtype if dtype is None else as_dtype(dtype))
    return initialized(t)


def initialized(t: Tensor) -> Tensor:
    """`t`, no longer marked uninitialized (its elements were given)."""
    _UNINITIALIZED.pop(id(t), None)
    return t


def _placeholder(requires_grad: bool, device: Any, dtype: Any) -> Tensor:
    as_device(device, "an uninitialized parameter")
    dtype = get_default_dtype() if dtype is None else as_dtype(dtype)
    return mark_uninitialized(empty(0, dtype=dtype).requires_grad_(requires_grad))


class _UninitializedParameterType(type):
    def __instancecheck__(cls, value: Any) -> bool:
        return is_lazy(value) and is_marked_parameter(value)


class UninitializedParameter(metaclass=_UninitializedParameterType):
    """A parameter with no shape yet (PyTorch's nn.UninitializedParameter): `materialize(shape)` makes it."""

    def __new__(cls, requires_grad: bool = True, device: Any = None, dtype: Any = None) -> Tensor:  # type: ignore[misc]
        return mark_parameter(_placeholder(requires_grad, device, dtype))


class _UninitializedBufferType(type):
    def __instancecheck__(cls, value: Any) -> bool:
        return is_lazy(value) and not is_marked_parameter(value)


class UninitializedBuffer(metaclass=_UninitializedBufferType):
    """A buffer with no shape yet (PyTorch's nn.UninitializedBuffer): `materialize(shape)` makes it."""

    def __new__(  # type: ignore[misc]
        cls, requires_grad: bool = False, device: Any = None, dtype: Any = None, persistent: bool = True
    ) -> Tensor:
        return mark_buffer(_placeholder(requires_grad, device, dtype), persistent)

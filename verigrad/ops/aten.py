"""`verigrad.ops.aten`: the few of PyTorch's aten operators (`torch.ops.aten.NAME.OVERLOAD`) that programs
and PyTorch's own tests call directly, with aten's signatures, written with the ops. Any other name raises
AttributeError naming the ones there are (use PyTorch's public function instead)."""

from collections.abc import Callable
from typing import Any

from . import _aten


class OpOverloadPacket:
    """An aten operator: callable (its default overload), and each overload as an attribute."""

    def __init__(self, name: str, **overloads: Callable[..., Any]) -> None:
        self._name = name
        self._overloads = overloads
        self.__name__ = name

    def __getattr__(self, overload: str) -> Callable[..., Any]:
        try:
            return self.__dict__["_overloads"][overload]
        except KeyError:
            raise AttributeError(
                f"verigrad.ops.aten.{self._name} has no overload {overload!r} (it has: "
                f"{', '.join(self._overloads)})"
            ) from None

    def overloads(self) -> list[str]:
        return list(self._overloads)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return next(iter(self._overloads.values()))(*args, **kwargs)

    def __repr__(self) -> str:
        return f"verigrad.ops.aten.{self._name}"


_OPERATORS = {
    packet._name: packet
    for packet in (
        OpOverloadPacket("max_pool2d_with_indices_backward", default=_aten.max_pool2d_with_indices_backward),
        OpOverloadPacket("_safe_softmax", default=_aten.safe_softmax),
        OpOverloadPacket("slice", Tensor=_aten.slice_tensor),
        OpOverloadPacket("gelu_backward", default=_aten.gelu_backward),
    )
}


def __getattr__(name: str) -> OpOverloadPacket:
    try:
        return _OPERATORS[name]
    except KeyError:
        raise AttributeError(
            f"verigrad.ops.aten has no operator {name!r}: it has only {', '.join(_OPERATORS)}; call "
            "PyTorch's public function (torch.X, torch.nn.functional.X, Tensor.X) instead"
        ) from None


def __dir__() -> list[str]:
    return sorted(_OPERATORS)

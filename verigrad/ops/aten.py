"""`verigrad.ops.aten`: the few of PyTorch's aten operators (`torch.ops.aten.NAME.OVERLOAD`) that programs
and PyTorch's own tests call directly, with aten's signatures, written with the ops. Any other name raises
AttributeError naming the ones there are (use PyTorch's public function instead)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import ShapeError
from ..shapes import shape_text
from ..tensor import Tensor
from .composite._common import out_size, pair
from .composite.pooling import max_pool_grad_at


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


def _window(value: Any, what: str, minimum: int, default: Any = None) -> tuple[int, int]:
    """aten's int[2]: an int, one int for both axes, or two; empty means `default`."""
    if isinstance(value, list | tuple):
        if not value and default is not None:
            return default
        if len(value) == 1:
            value = value[0]
    return pair(value, f"max_pool2d_with_indices_backward: {what}", minimum)


def _max_pool2d_with_indices_backward(
    grad_output: Tensor, self: Tensor, kernel_size: Any, stride: Any, padding: Any, dilation: Any,
    ceil_mode: bool, indices: Tensor,
) -> Tensor:  # fmt: skip
    """The gradient of max_pool2d's input from its output's and the indices it returned: each added at its
    position in zeros shaped as `self` (aten's max_pool2d_with_indices_backward)."""
    name = "max_pool2d_with_indices_backward"
    if self.ndim not in (3, 4):
        raise ShapeError(f"{name}: self must be [C, H, W] or [N, C, H, W], got {shape_text(self.shape)}")
    k = _window(kernel_size, "kernel_size", 1)
    s = _window(stride, "stride", 1, default=k)
    p = _window(padding, "padding", 0)
    d = _window(dilation, "dilation", 1)
    if any(2 * p[i] > k[i] for i in range(2)):
        raise ShapeError(f"{name}: padding {p} must be at most half the kernel {k}")
    sizes, ceil = self.shape[-2:], bool(ceil_mode)
    pooled = (*self.shape[:-2], *(out_size(sizes[i], k[i], s[i], p[i], d[i], ceil) for i in (0, 1)))
    for what, t in (("grad_output", grad_output), ("indices", indices)):
        if tuple(t.shape) != pooled:
            raise ShapeError(
                f"{name}: {what} must be the pooled shape {shape_text(pooled)} of self "
                f"{shape_text(self.shape)}, got {shape_text(t.shape)}"
            )
    return max_pool_grad_at(grad_output, self, indices, nd=2)


max_pool2d_with_indices_backward = OpOverloadPacket(
    "max_pool2d_with_indices_backward", default=_max_pool2d_with_indices_backward
)

_NAMES = ("max_pool2d_with_indices_backward",)


def __getattr__(name: str) -> Any:
    raise AttributeError(
        f"verigrad.ops.aten has no operator {name!r}: it has only {', '.join(_NAMES)}; call PyTorch's public "
        "function (torch.X, torch.nn.functional.X, Tensor.X) instead"
    )

"""PyTorch's arguments every factory takes (device=, out=, layout=, requires_grad=, a shape given several
ways), checked once for all of them."""

from __future__ import annotations

from typing import Any

from ..devices import as_device
from ..shapes import DimLike, as_shape
from ..tensor import Tensor
from ..typeinfo import check_layout


def _placed(where: str, device: Any, out: Any = None, layout: Any = None) -> None:
    """Refuse, before any work, a device other than the CPU, `out=` and a layout other than strided."""
    as_device(device, where)
    check_layout(layout, where)
    if out is not None:
        raise TypeError(
            f"{where}: out= is not supported; use the tensor it returns (x.copy_(result) to fill x)"
        )


def _grad(t: Tensor, requires_grad: bool) -> Tensor:
    return t.requires_grad_(True) if requires_grad else t


def _shape_args(shape: tuple, size: Any = None, where: str = "") -> tuple[DimLike, ...]:
    """A shape given as several sizes, one list, tuple or Size, or PyTorch's `size=`."""
    if size is not None:
        if shape:
            raise TypeError(f"{where}: the shape is given twice, as sizes {shape} and as size={size}")
        shape = (size,)
    if len(shape) == 1 and isinstance(shape[0], list | tuple | str):
        shape = shape[0]
    return as_shape(shape)

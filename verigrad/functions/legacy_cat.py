"""PyTorch's `cat` (also `concatenate`), with its legacy rule: a 1-D empty tensor, shape (0,), is
skipped whatever the others' shapes (`cat([torch.tensor([]), x])` is x), though its dtype still counts
in the result's."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..dtypes import promote
from ..ops import concat
from ..tensor import Tensor


def _legacy_empty(t: Any) -> bool:
    if not isinstance(t, Tensor):
        return False
    shape = t.spec.shape
    return len(shape) == 1 and shape[0] == 0


class Cat:
    """PyTorch's `cat`: `cat(tensors, dim=0)` (a class of its own so that vg_eager can bind its `__call__`,
    as it binds `Op.__call__`: the legacy rule's check made in C, docs/eager.md)."""

    def __call__(self, tensors: Sequence[Tensor] | Tensor, *more: Any, **kwargs: Any) -> Tensor:
        """The tensors joined along `dim` (0 by default; `axis=` as verigrad's concat). Given as separate
        arguments (verigrad's concat form), they are joined as they are."""
        if isinstance(tensors, Tensor) or not any(map(_legacy_empty, tensors)):
            return concat(tensors, *more, **kwargs)  # the usual case: concat itself, nothing more
        kept = [t for t in tensors if not _legacy_empty(t)] or list(tensors)
        out = concat(kept, *more, **kwargs)
        dtype = promote(*(t.dtype for t in tensors if isinstance(t, Tensor)))
        return out if out.dtype is dtype else out.cast(dtype)


cat = Cat()
cat.__name__ = cat.__qualname__ = "cat"  # type: ignore[attr-defined]
cat.__doc__ = Cat.__call__.__doc__

"""The reference backend: every op runs its NumPy reference. It has no code per op.

`decomposition_kernel(op, mode)` runs a composite op's decomposition as a kernel, each op in it run by
`mode`; `composite_reference(op)` is that with every op run by its NumPy reference: the reference of a
composite op (what a backend's fused kernel is measured against, and what it runs for the cases its C
code does not take). Eager mode and compiled plans run it in eager mode where a backend has no kernel.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .. import modes
from ..dtypes import from_numpy_dtype
from ..shapes import Spec
from ..tensor import Tensor
from .active import add_backend
from .kernel_table import Backend

reference = add_backend(Backend("reference", "NumPy references of every op (the definitions)"))


class _References(modes.Mode):
    """Runs every op by its NumPy reference, a composite by its decomposition (no autograd)."""

    name = "references"

    def apply(self, op: Any, args: tuple[Tensor, ...], params: dict, out: Spec) -> Tensor:
        if op.is_composite:
            return op.decompose(*args, **params)
        result = np.asarray(op.reference(*(a.payload for a in args), **params))
        return Tensor(out, result.astype(out.dtype.np, copy=False))

    def constant(self, array: np.ndarray, dtype: Any) -> Tensor:
        return Tensor(Spec(tuple(array.shape), dtype), array)


_REFERENCES = _References()


def decomposition_kernel(op: Any, mode: modes.Mode) -> Callable[..., np.ndarray]:
    """A kernel running the composite `op`'s decomposition on its arrays, each op in it run by `mode`
    (which records no gradients: its operands are new tensors that require none)."""

    def run(*arrays: np.ndarray, **params: Any) -> np.ndarray:
        tensors = [Tensor(Spec(a.shape, from_numpy_dtype(a.dtype)), a) for a in arrays]
        with modes.using(mode), np.errstate(all="ignore"):
            return op.decompose(*tensors, **params).payload

    return run


def composite_reference(op: Any) -> Callable[..., np.ndarray]:
    """A kernel running `op`'s decomposition on the references: the reference of a composite op."""
    return decomposition_kernel(op, _REFERENCES)

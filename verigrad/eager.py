"""`EagerMode`: run each op's kernel on the active backend now, and record autograd history."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import modes
from .autograd import Node, is_grad_enabled
from .backends import get_backend
from .backends.reference import decomposition_kernel
from .dtypes import DType
from .shapes import Spec, shape_text
from .tensor import Tensor


class EagerMode(modes.Mode):
    name = "eager"

    def apply(self, op: Any, args: tuple[Tensor, ...], params: dict, out: Spec) -> Tensor:
        arrays, wanted = [], False  # one pass over the operands: their data, and whether one wants a grad
        for a in args:
            if not isinstance(a.payload, np.ndarray):
                raise TypeError(
                    f"{op.name}: an abstract tensor {a.spec!r} reached eager code; "
                    "specs only run inside verigrad.check or verigrad.abstract()"
                )
            arrays.append(a.payload)
            wanted = wanted or a.requires_grad
        needs_grad = wanted and op.differentiable and is_grad_enabled()
        backend = get_backend()
        if op.is_composite:
            kernel = backend.native(op, out.dtype)
            if needs_grad and op.vjp is None:
                return op.decompose(*args, **params)  # autograd goes through the primitives
            if kernel is None:
                if not needs_grad:
                    return op.decompose(*args, **params)
                kernel = decomposition_kernel(op, EAGER)  # one tape node with the op's VJP
        else:
            kernel = backend.kernel(op, out.dtype)
        if getattr(kernel, "never_warns", False):
            result = conform(op, kernel(*arrays, **params), out)
        else:
            with np.errstate(all="ignore"):  # log(-1) is NaN by definition, not a warning
                result = conform(op, kernel(*arrays, **params), out)
        t = Tensor(out, result)
        if needs_grad:
            t.requires_grad = True
            t._node = Node(op, args, params)
        return t

    def constant(self, array: np.ndarray, dtype: DType) -> Tensor:
        return Tensor(Spec(tuple(array.shape), dtype), array)

    def assign(self, target: Tensor, value: Tensor) -> None:
        if target.requires_grad and is_grad_enabled():
            raise RuntimeError(
                "a tensor that requires grad is being updated in place; do it under verigrad.no_grad()"
            )
        if value.requires_grad and is_grad_enabled():  # PyTorch records it; here its gradient would be lost
            raise RuntimeError(
                "a value that requires grad is written in place into a tensor that does not; verigrad "
                "does not record in-place writes yet: write it out of place (index_put, where, cat)"
            )
        if not target.payload.flags.writeable:
            raise RuntimeError("cannot write into a broadcast (read-only) view")
        np.copyto(target.payload, value.payload)


def conform(op: Any, result: Any, out: Spec) -> np.ndarray:
    """The kernel's result with the dtype of the op's rule; its shape must match the rule's."""
    want = out.dtype.np
    if type(result) is not np.ndarray or (result.dtype is not want and result.dtype != want):
        result = np.asarray(result).astype(want, copy=False)
    if result.shape != out.shape:
        raise AssertionError(
            f"{op.name} produced shape {list(result.shape)} but its rule says {shape_text(out.shape)}"
        )
    return result


EAGER = EagerMode()
modes.set_default(EAGER)

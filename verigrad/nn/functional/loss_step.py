"""cross_entropy's eager loss step: where the logits require grad, the forward computes the loss and the
logits' gradient for an incoming gradient of 1 in one pass over each row (the `cross_entropy_step` kernel
a compiled step runs, ir/passes/loss_step.py) and keeps that gradient for the backward, which uses it when
the incoming gradient is exactly 1 (`loss.backward()`) and otherwise runs `cross_entropy_grad` as always.

The loss and the gradient are the bits of the cross_entropy and cross_entropy_grad kernels: the step's
rows repeat both kernels' steps (tests/test_eager_loss_step.py). The tape holds the usual cross_entropy
node; the kept gradient (the size of the logits, as PyTorch keeps their softmax) lives until the
backward takes it or the node is dropped.
"""

from __future__ import annotations

import numpy as np

from ... import modes
from ...autograd import Node
from ...backends import active
from ...backends.kernel_table import Backend
from ...dtypes import DType
from ...eager import EAGER, EagerMode
from ...ops import cross_entropy as cross_entropy_op
from ...ops.composite.losses import (
    KEPT,
    KEPT_LOCK,
    cross_entropy_grad,
    cross_entropy_step,
    cross_entropy_total,
)
from ...shapes import Spec
from ...tensor import Tensor

_RUN = EagerMode.run  # a replaced run (a test counting kernel calls) sees the ops called one by one
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_TARGET = np.dtype(np.int64)


class _Kept:
    """The logits' gradient for an incoming gradient of 1, with what it was computed under."""

    __slots__ = ("backend", "grad", "spec", "stamp")

    def __init__(self, grad: np.ndarray, spec: Spec, backend: Backend) -> None:
        self.grad, self.spec, self.backend, self.stamp = grad, spec, backend, backend.stamp

    def __call__(self, g: Tensor) -> Tensor | None:
        """The kept gradient where the backward's kernel would give its bits: an incoming gradient of
        exactly 1 in the dtype, eagerly, without a graph of the backward (create_graph), on the backend
        and kernels the forward ran; None otherwise."""
        if modes.LOCAL.grad[-1] or modes.LOCAL.stack[-1] is not EAGER:
            return None
        backend = active.get_backend()
        if backend is not self.backend or backend.stamp is not self.stamp:
            return None
        a = g.payload
        if type(a) is not np.ndarray or a.shape != () or a.dtype != self.grad.dtype or a != 1:
            return None
        return Tensor(self.spec, self.grad)


def cross_entropy_kept(
    input: Tensor, target: Tensor, reduction: str, ignore_index: int | None
) -> Tensor | None:
    """cross_entropy(input [N, C], target [N]) with the logits' gradient kept for the backward (see above),
    or None where this step does not apply (no gradient wanted, not eager, a reduction "none", operands
    the kernels do not take, no step kernel on the backend): the cross_entropy op then."""
    if (
        reduction == "none"
        or not input.requires_grad
        or not modes.LOCAL.grad[-1]
        or modes.LOCAL.stack[-1] is not EAGER
        or EagerMode.run is not _RUN
    ):
        return None
    logits, targets = input.payload, target.payload
    if (
        type(logits) is not np.ndarray
        or type(targets) is not np.ndarray
        or logits.ndim != 2
        or logits.dtype not in _FLOATS
        or targets.dtype != _TARGET
        or targets.shape != logits.shape[:1]
        or not logits.size
    ):
        return None
    backend = active.get_backend()
    if not _pair_of_step(backend, input.dtype):
        return None
    params = {"reduction": reduction, "ignore_index": ignore_index}
    n, c = logits.shape
    # the step op is not differentiable: no node of its own
    both = cross_entropy_step(input, target, _one(input.dtype), **params).payload
    loss = cross_entropy_total(EAGER.constant(both[n * c :], input.dtype), target, **params)
    loss.requires_grad = True
    loss._node = node = Node(cross_entropy_op, (input, target), params)
    with KEPT_LOCK:
        KEPT[node] = _Kept(both[: n * c].reshape(n, c), input.spec, backend)
    return loss


def _pair_of_step(backend: Backend, dtype: DType) -> bool:
    """Whether `backend` has the step kernel and its cross_entropy and cross_entropy_grad kernels are those
    whose bits the step's results are (one module's: a kernel registered in place of either runs)."""
    step = backend.native(cross_entropy_step, dtype)
    home = getattr(step, "__module__", None)
    return step is not None and all(
        getattr(backend.native(op, dtype), "__module__", None) == home
        for op in (cross_entropy_op, cross_entropy_grad)
    )


_ONES: dict[object, Tensor] = {}


def _one(dtype: DType) -> Tensor:
    """The 0-d 1 of `dtype`: the incoming gradient the kept gradient is computed for."""
    one = _ONES.get(dtype)
    if one is None:
        one = _ONES[dtype] = EAGER.constant(np.ones((), dtype.np), dtype)
    return one

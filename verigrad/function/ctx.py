"""The `ctx` of a custom Function, and its backward's gradients checked as PyTorch's engine checks them
(eagerly and in a compiled plan alike)."""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

from ..autograd import _FREED, no_grad
from ..ops._op import unbroadcast
from ..tensor import Tensor


class FunctionCtx:
    """The `ctx` a Function's forward (or setup_context) fills and its backward reads."""

    def __init__(self, needs_input_grad: tuple[bool, ...]) -> None:
        self.needs_input_grad = needs_input_grad
        self.to_save: tuple[Any, ...] = ()
        self.dirty_tensors: tuple[Tensor, ...] = ()
        self.non_differentiable: tuple[Tensor, ...] = ()
        self.materialize_grads = True
        self._grads: list[Tensor | None] = []  # several outputs: the gradient each passed to the pack
        self._token_given = False
        # the node whose backward reads them (freed: they are gone, as PyTorch's), weakly: the node holds
        # the ctx, and a cycle would keep the whole graph alive until Python's cycle collector runs
        self._node: weakref.ref | None = None

    def save_for_backward(self, *tensors: Tensor | None) -> None:
        for i, t in enumerate(tensors):
            if t is not None and not isinstance(t, Tensor):
                raise TypeError(
                    f"save_for_backward can only save variables, but argument {i} is of type "
                    f"{type(t).__name__}"
                )
        self.to_save = tensors

    @property
    def saved_tensors(self) -> tuple[Any, ...]:
        node = self._node() if self._node is not None else None
        if node is not None and node.freed:
            raise RuntimeError(_FREED)
        return tuple(self.to_save)

    def mark_dirty(self, *tensors: Tensor) -> None:
        self.dirty_tensors = tensors

    def mark_non_differentiable(self, *tensors: Tensor) -> None:
        self.non_differentiable = tensors

    def set_materialize_grads(self, value: bool) -> None:
        self.materialize_grads = bool(value)


def default_setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> Any:
    """Function.setup_context where a subclass gives none (its forward then takes ctx)."""
    raise NotImplementedError("setup_context is not implemented.")


def default_backward(ctx: Any, *grad_outputs: Any) -> Any:
    """Function.backward (and its alias vjp) where a subclass gives neither."""
    raise NotImplementedError(
        "You must implement either the backward or vjp method for your custom autograd.Function to use it "
        "with backward mode AD."
    )


def user_backward(fn: Any) -> Any:
    """The backward a Function defines: `backward`, or `vjp` (PyTorch's alias); both refused as PyTorch's."""
    backward, vjp = fn.backward, getattr(fn, "vjp", default_backward)
    if vjp is default_backward:
        return backward
    if backward is not default_backward:
        raise RuntimeError(
            "Implementing both 'backward' and 'vjp' for a custom Function is not allowed. You should only "
            "implement one of them."
        )
    return vjp


def run_forward(fn: type, ctx: FunctionCtx, args: tuple, kwargs: dict) -> Any:
    """The user's forward without recording: `forward(ctx, *args)`, or `forward(*args)` then
    `setup_context(ctx, args, output)` where the Function gives one."""
    with no_grad():
        if fn.setup_context is default_setup_context:
            return fn.forward(ctx, *args, **kwargs)
        output = fn.forward(*args, **kwargs)
        fn.setup_context(ctx, args, output)
    return output


def backward_grads(
    fn: type,
    name: str,
    ctx: FunctionCtx,
    given: Sequence[Tensor | None],
    inputs: Sequence[Tensor],
    positions: tuple[int, ...],
    nargs: int,
) -> tuple[Tensor | None, ...]:
    """`fn.backward(ctx, *given)`, one gradient per tensor input (at `positions` among the `nargs`
    arguments): trailing Nones beyond the arguments dropped, a larger broadcast shape summed down; PyTorch's
    errors for a wrong count, a gradient of a non-tensor argument and a shape that does not fit."""
    result = user_backward(fn)(ctx, *given)
    grads = result if isinstance(result, tuple) else (result,)
    if len(grads) > nargs and all(gi is None for gi in grads[nargs:]):
        grads = grads[:nargs]
    if len(grads) != nargs:
        raise RuntimeError(
            f"function {name} returned an incorrect number of gradients (expected {nargs}, got {len(grads)})"
        )
    at = dict(zip(positions, inputs))
    for i, gi in enumerate(grads):
        if gi is not None and i not in at:
            raise RuntimeError(
                f"function {name} returned a gradient different than None at position {i + 1}, but the "
                "corresponding forward input was not a Variable"
            )
    return tuple(_fitted(name, grads[p], inp, p) for p, inp in at.items())


def _fitted(name: str, gi: Any, inp: Tensor, index: int) -> Tensor | None:
    """The gradient `gi` for `inp` as PyTorch's engine takes it: a larger broadcast shape summed down to
    inp's, another shape refused."""
    if gi is None:
        return None
    if not isinstance(gi, Tensor):
        raise TypeError(f"function {name} returned a gradient of type {type(gi).__name__} at index {index}")
    want, got = tuple(inp.shape), tuple(gi.shape)
    if got != want:
        if not _expandable(want, got):
            raise RuntimeError(
                f"Function {name} returned an invalid gradient at index {index} - got {list(got)} but "
                f"expected shape compatible with {list(want)}"
            )
        gi = unbroadcast(gi, want)
    return gi


def _expandable(shape: tuple, to: tuple) -> bool:
    if len(shape) > len(to):
        return False
    return all(a == b or a == 1 for a, b in zip(reversed(shape), reversed(to)))

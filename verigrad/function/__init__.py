"""PyTorch's custom autograd functions (`verigrad.autograd.Function`): a user's `forward` runs under
no_grad and its result gets one `Node` whose VJP calls the user's `backward`, so it goes through the
same engine (and the C walk) as the built-in ops.

Several outputs: each differentiable output's node passes its gradient to a hidden 0-element tensor
(the "pack") whose node calls `backward` once with all of them; the engine walks every output before
the pack, since the outputs are made from it.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import modes, versions
from ..autograd import Node, _grad_mode, is_grad_enabled, no_grad, view_base
from ..dtypes import f32
from ..inplace import _move_hooks
from ..ops.creation import full_op
from ..shapes import Spec
from ..tensor import Tensor, set_requires_grad
from .ctx import FunctionCtx, backward_grads, default_backward, default_setup_context, run_forward
from .traced import traced_apply

_LEGACY = (
    "Legacy autograd function with non-static forward method is deprecated. Please use new-style autograd "
    "function with static forward method. (Example: https://pytorch.org/docs/stable/autograd.html"
    "#torch.autograd.Function)"
)
_LEAF_DIRTY = "a leaf Variable that requires grad has been used in an in-place operation."
_TWICE = "trying to differentiate twice a function that was marked with @once_differentiable"
_PACK_SPEC = Spec((0,), f32)


class _FunctionOp:
    """The op of the node a Function's outputs get (one per Function class, as PyTorch's `<Name>Backward`)."""

    written = False
    differentiable = True

    def __init__(self, fn: type) -> None:
        self.fn = fn
        self.name = f"{fn.__name__}Backward"

    def __repr__(self) -> str:
        return f"<{self.name}>"

    def vjp(
        self,
        g: Tensor,
        out: Tensor,
        *inputs: Tensor,
        ctx: FunctionCtx,
        positions: tuple[int, ...],
        nargs: int,
        outputs: tuple[Spec | None, ...],
    ) -> tuple[Tensor | None, ...]:
        if len(outputs) == 1 and ctx._grads == []:
            given: list[Tensor | None] = [g]
        else:
            given, ctx._grads, ctx._token_given = ctx._grads, [None] * len(outputs), False
        if ctx.materialize_grads:
            given = [_zeros(s) if gi is None else gi for gi, s in zip(given, outputs)]
        return backward_grads(self.fn, self.name, ctx, given, inputs, positions, nargs)


def _zeros(spec: Spec | None) -> Tensor | None:
    return None if spec is None else full_op(shape=spec.shape, dtype=spec.dtype, value=0)


class _Unpack:
    """The op of one output's node where a Function gives several: its gradient goes to the ctx, and the
    first output walked passes the pack a 0-element token so the pack's node runs after all of them."""

    name = "function_output"
    written = False
    differentiable = True

    @staticmethod
    def vjp(g: Tensor, out: Tensor, pack: Tensor, ctx: FunctionCtx, index: int) -> tuple[Tensor | None]:
        ctx._grads[index] = g
        if ctx._token_given:
            return (None,)
        ctx._token_given = True
        return (Tensor(_PACK_SPEC, np.empty(0, np.float32)),)


class _Twice:
    """The op of a once_differentiable backward's result: differentiating it raises, as PyTorch's."""

    name = "DelayedError"
    written = False
    differentiable = True

    @staticmethod
    def vjp(g: Tensor, out: Tensor, *inputs: Tensor) -> tuple:
        raise RuntimeError(_TWICE)


_OPS: dict[type, _FunctionOp] = {}


def _op_of(fn: type) -> _FunctionOp:
    op = _OPS.get(fn)
    if op is None:
        op = _OPS[fn] = _FunctionOp(fn)
    return op


class Function:
    """PyTorch's `torch.autograd.Function`: subclass it with static `forward(ctx, *args)` and
    `backward(ctx, *grads)` (or `forward(*args)` and `setup_context(ctx, inputs, output)`) and call
    `MyFn.apply(*args)`."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(_LEGACY)

    @staticmethod
    def forward(ctx: Any, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("You must implement the forward function for custom autograd.Function.")

    setup_context = staticmethod(default_setup_context)

    backward = vjp = staticmethod(default_backward)

    @classmethod
    def apply(cls, *args: Any, **kwargs: Any) -> Any:
        return _apply(cls, args, kwargs)


def _apply(cls: type, args: tuple, kwargs: dict) -> Any:
    if modes.current().name == "trace":
        return traced_apply(cls, args, kwargs)
    recording = is_grad_enabled()
    needs = tuple(isinstance(a, Tensor) and a.requires_grad and recording for a in args)
    ctx = FunctionCtx(needs)
    positions = tuple(i for i, a in enumerate(args) if isinstance(a, Tensor))
    inputs = tuple(args[i] for i in positions)
    output = run_forward(cls, ctx, args, kwargs)
    single = not isinstance(output, tuple)
    outs = (output,) if single else output
    if not all(any(d is o for o in outs) for d in ctx.dirty_tensors):
        raise RuntimeError(
            "Some elements marked as dirty during the forward method were not returned as output. The "
            "inputs that are modified inplace must all be outputs of the Function."
        )
    if not any(needs):
        results = tuple(_fresh(o, inputs, ctx) for o in outs)
        return results[0] if single else results
    return _record(cls, ctx, args, inputs, positions, outs, single)


def _fresh(o: Any, inputs: tuple[Tensor, ...], ctx: FunctionCtx) -> Any:
    """An output as returned: an input not written in place comes back as a new tensor of its memory
    (PyTorch's view of it), so that giving it a history leaves the input's alone."""
    if isinstance(o, Tensor) and any(o is i for i in inputs) and not any(o is d for d in ctx.dirty_tensors):
        return Tensor(o.spec, o.payload)
    return o


def _record(
    cls: type,
    ctx: FunctionCtx,
    args: tuple,
    inputs: tuple[Tensor, ...],
    positions: tuple[int, ...],
    outs: tuple,
    single: bool,
) -> Any:
    """Give the differentiable outputs their history: the Function's node (through the pack where it
    gives several outputs)."""
    dirty = {id(t) for t in ctx.dirty_tensors}
    skip = {id(t) for t in ctx.non_differentiable}
    for t in ctx.dirty_tensors:
        if t._node is None and t.requires_grad:
            raise RuntimeError(_LEAF_DIRTY)
        if view_base(t) is not None:
            raise RuntimeError(
                f"{cls.__name__}.apply: a tensor marked dirty is a view of a tensor with history; verigrad "
                "does not rebase a view's base onto a custom Function (write into the base itself)"
            )
    # a dirty input's node means it as it was (its history, its memory pinned: written since)
    olds: dict[int, Tensor] = {}
    for t in inputs:
        if id(t) in dirty:
            old = Tensor(t.spec, t.payload)
            old._node = t._node
            set_requires_grad(old, t.requires_grad)
            versions.pin(old)
            olds[id(t)] = old
            _move_hooks(t, old)  # as PyTorch's: its hooks take the gradient of it as it was
    held = tuple(olds.get(id(t), t) for t in inputs)
    results = [_fresh(o, inputs, ctx) for o in outs]
    wanted = [
        isinstance(o, Tensor) and id(o) not in skip and id(outs[k]) not in skip and o.dtype.is_float
        for k, o in enumerate(results)
    ]
    specs = tuple(o.spec if isinstance(o, Tensor) else None for o in results)
    params = {"ctx": ctx, "positions": positions, "nargs": len(args), "outputs": specs}
    op = _op_of(cls)
    if single:
        o = results[0]
        if wanted[0]:
            o._node = Node(op, held, params)
            ctx._node = weakref.ref(o._node)
            set_requires_grad(o, True)
        return o
    ctx._grads = [None] * len(results)
    pack = Tensor(_PACK_SPEC, np.empty(0, np.float32))
    pack.requires_grad, pack._node = True, Node(op, held, params)
    ctx._node = weakref.ref(pack._node)
    for k, o in enumerate(results):
        if wanted[k]:
            o._node = Node(_Unpack, (pack,), {"ctx": ctx, "index": k})
            set_requires_grad(o, True)
    return tuple(results)


def once_differentiable(backward: Callable[..., Any]) -> Callable[..., Any]:
    """PyTorch's decorator for a backward that is not itself differentiable: it runs without recording,
    and differentiating its result (create_graph=True, then backward again) raises."""

    @functools.wraps(backward)
    def wrapper(ctx: Any, *grads: Any) -> Any:
        recording = is_grad_enabled()
        with _grad_mode(False):
            result = backward(ctx, *grads)
        if not recording:
            return result
        tracked = tuple(g for g in grads if isinstance(g, Tensor) and g.requires_grad)
        if not tracked:
            return result
        items = result if isinstance(result, tuple) else (result,)
        marked = []
        for r in items:
            if isinstance(r, Tensor) and r.dtype.is_float:
                m = Tensor(r.spec, r.payload)
                m._node = Node(_Twice, tracked, {})
                set_requires_grad(m, True)
                r = m
            marked.append(r)
        return tuple(marked) if isinstance(result, tuple) else marked[0]

    return wrapper

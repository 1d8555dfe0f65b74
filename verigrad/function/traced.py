"""A custom Function inside `verigrad.trace` / `verigrad.compile`: one instruction of its own.

`function %a %b (call=MyFn)` runs the user's forward on the plan's arrays (as eager Tensors, without
recording), keeping its ctx on the call; `function_backward %g %y %a %b (call=MyFn, index=k)`, one per
input that needs a gradient, runs the user's backward once per run (the first of them) and gives input
k's gradient. A Function giving a tuple: `function` gives a 0-element pack, each tensor output is a
`function_output %pack (call=MyFn, index=i)`, and the backward gets the outputs' gradients that exist
(`present=`), as the eager pack does. The outputs' specs are found at trace time by running the forward
on specs alone (`AbstractMode`), so a traced forward is written with verigrad ops; `mark_dirty` is
refused there (it runs eagerly only).

The kernels give fresh arrays (a copy of what the user's code returned): a plan may write into a value's
memory once it is dead, and a replay records only the calls whose results they made, so these steps
always run the user's Python.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

import numpy as np

from .. import modes
from ..autograd import is_grad_enabled, no_grad
from ..dtypes import DType, f32
from ..ops import zeros_like
from ..ops._op import REGISTRY, Op
from ..ops.creation import full_op
from ..shapes import Spec
from ..tensor import Tensor
from .ctx import FunctionCtx, backward_grads, run_forward

_PACK = Spec((0,), f32)  # what `function` gives where the Function gives several outputs


class FunctionCall:
    """One traced call of a Function: the arguments' template (the non-tensor ones as given), and the ctx,
    inputs and gradients of the plan's current run. Printed as the Function's name."""

    def __init__(
        self,
        fn: type,
        args: tuple,
        kwargs: dict,
        positions: tuple[int, ...],
        outs: tuple[Spec | None, ...],
        several: bool = False,
    ) -> None:
        self.fn, self.template, self.kwargs, self.positions = fn, args, kwargs, positions
        self.outs = outs  # each output's spec (None: not a tensor)
        self.several = several  # a tuple of outputs (each a `function_output`), else `function` gives it
        self.spec = _PACK if self.several else outs[0]
        self.given: list[Tensor | None] = []  # trace time: the gradients the outputs' nodes passed
        recording = is_grad_enabled()
        self.needs = tuple(isinstance(a, Tensor) and a.requires_grad and recording for a in args)
        self.dtypes = tuple(args[i].dtype for i in positions)
        self.run = threading.local()  # this run's ctx, inputs and gradients (plans may run in threads)

    def __repr__(self) -> str:
        return self.fn.__name__

    def arguments(self, tensors: list[Tensor]) -> tuple:
        args = list(self.template)
        for p, t in zip(self.positions, tensors):
            args[p] = t
        return tuple(args)


def _eager(arrays: tuple[np.ndarray, ...], dtypes: tuple[DType, ...], needs: tuple[bool, ...]) -> list:
    out = []
    for a, d, need in zip(arrays, dtypes, needs):
        t = Tensor(Spec(tuple(a.shape), d), np.asarray(a, dtype=d.np))
        t.requires_grad = need
        out.append(t)
    return out


def _run_forward(*arrays: np.ndarray, call: FunctionCall) -> np.ndarray:
    needs = tuple(call.needs[p] for p in call.positions)
    tensors = _eager(arrays, call.dtypes, needs)
    ctx = FunctionCtx(call.needs)
    with modes.using(modes._DEFAULT[0]):  # the user's code runs eagerly on this run's arrays
        output = run_forward(call.fn, ctx, call.arguments(tensors), call.kwargs)
    outputs = output if call.several else (output,)
    if not isinstance(outputs, tuple) or len(outputs) != len(call.outs):
        raise RuntimeError(f"{call.fn.__name__}.forward returned {output!r} where its trace gave {call.outs}")
    for o, spec in zip(outputs, call.outs):
        if spec is not None and (
            not isinstance(o, Tensor) or o.dtype != spec.dtype or o.ndim != len(spec.shape)
        ):
            raise RuntimeError(f"{call.fn.__name__}.forward returned {o!r} where its trace gave {spec!r}")
    run = call.run
    # a single output's gradient is always given: its tensor is not kept to the backward (the plan holds
    # the copy; holding both kept every such output twice until the next run)
    run.ctx, run.inputs, run.grads = ctx, tensors, None
    run.outputs = outputs if call.several else (None,)
    return np.empty(0, np.float32) if call.several else np.array(output.payload, copy=True)


def _run_output(pack: np.ndarray, *, call: FunctionCall, index: int) -> np.ndarray:
    return np.array(call.run.outputs[index].payload, copy=True)


def _run_backward(
    *arrays: np.ndarray, call: FunctionCall, index: int, present: tuple[int, ...] = (0,)
) -> Any:
    run = call.run
    if run.grads is None:
        name = f"{call.fn.__name__}Backward"
        given: list[Tensor | None] = [None] * len(call.outs)
        for k, g in zip(present, arrays):
            given[k] = Tensor(Spec(tuple(g.shape), call.outs[k].dtype), g)
        with modes.using(modes._DEFAULT[0]), no_grad():
            if run.ctx.materialize_grads:
                given = [_zeros_as(o) if g is None else g for g, o in zip(given, run.outputs)]
            run.grads = backward_grads(
                call.fn, name, run.ctx, given, run.inputs, call.positions, len(call.template)
            )
    gi = run.grads[index]
    if gi is None:
        raise RuntimeError(
            f"{call.fn.__name__}.backward returned None for argument {call.positions[index]}, which requires"
            " grad, in a compiled function: return zeros there (a compiled step gives every gradient it"
            " traced)"
        )
    return np.array(gi.payload, dtype=call.dtypes[index].np, copy=True)


def _zeros_as(o: Any) -> Tensor | None:
    return zeros_like(o) if isinstance(o, Tensor) else None


def _forward_vjp(g: Tensor, out: Tensor, *inputs: Tensor, call: FunctionCall) -> tuple:
    if not call.several:
        grads, extra = (g,), {}
    else:  # the outputs' nodes passed theirs (`_output_vjp`); the token g carries nothing
        present = tuple(k for k, gk in enumerate(call.given) if gk is not None)
        grads, extra = tuple(call.given[k] for k in present), {"present": present}
        call.given = []
    return tuple(
        function_backward(*grads, out, *inputs, call=call, index=k, **extra) if x.requires_grad else None
        for k, x in enumerate(inputs)
    )


def _output_vjp(g: Tensor, out: Tensor, pack: Tensor, call: FunctionCall, index: int) -> tuple:
    """An output's gradient, kept for the pack's node; the first passes the pack a 0-element token (its
    node then runs after every output's, as eagerly)."""
    first = not call.given
    if first:
        call.given = [None] * len(call.outs)
    call.given[index] = g
    return (full_op(shape=(0,), dtype=f32, value=0) if first else None,)


def _twice(*_: Any, call: FunctionCall, index: int) -> tuple:
    raise NotImplementedError(
        f"differentiating the backward of {call.fn.__name__} inside a traced or compiled function (double "
        "backward) is not supported; run it eagerly"
    )


def _unregistered(op: Op) -> Op:
    """A user's code, not an op of verigrad's own: kept out of the registry that its suites test."""
    REGISTRY.pop(op.name)
    return op


function = _unregistered(
    Op(
        "function",
        shape=lambda *shapes, call: call.spec.shape,
        dtype=lambda *dtypes, call: call.spec.dtype,
        reference=_run_forward,
        vjp=_forward_vjp,
        doc="A custom autograd Function's forward, run on the plan's arrays.",
    )
)
function_output = _unregistered(
    Op(
        "function_output",
        shape=lambda pack, call, index: call.outs[index].shape,
        dtype=lambda pack, call, index: call.outs[index].dtype,
        reference=_run_output,
        vjp=_output_vjp,
        doc="Output `index` of a custom autograd Function that gives several.",
    )
)
function_backward = _unregistered(
    Op(
        "function_backward",
        shape=lambda *shapes, call, index, present=(0,): shapes[len(present) + 1 + index],
        dtype=lambda *dtypes, call, index, present=(0,): dtypes[len(present) + 1 + index],
        reference=_run_backward,
        vjp=_twice,
        doc="A custom autograd Function's backward: the gradient of its input `index`.",
    )
)


def traced_apply(fn: type, args: tuple, kwargs: dict) -> Tensor:
    """`fn.apply(*args, **kwargs)` inside a trace: the `function` instruction (refused with a clear error
    where the Function cannot be one)."""
    where = f"{fn.__name__}.apply inside a traced or compiled function"
    if any(isinstance(v, Tensor) for v in kwargs.values()):
        raise TypeError(f"{where}: pass tensors positionally (a tensor keyword argument is not traced)")
    positions = tuple(i for i, a in enumerate(args) if isinstance(a, Tensor))
    shapes = list(args)
    for p in positions:
        shapes[p] = Tensor(args[p].spec, None)
        shapes[p].requires_grad = args[p].requires_grad
    recording = is_grad_enabled()
    ctx = FunctionCtx(tuple(isinstance(a, Tensor) and a.requires_grad and recording for a in args))
    try:
        with modes.using(modes.AbstractMode()):
            output = run_forward(fn, ctx, tuple(shapes), kwargs)
    except Exception as e:
        raise TypeError(
            f"{where}: its forward is run on shapes alone to find its output's, and that failed ({e}); a "
            "traced Function's forward must compute with verigrad ops (call it outside the compiled function)"
        ) from e
    outputs = output if isinstance(output, tuple) else (output,)
    if ctx.dirty_tensors or not any(isinstance(o, Tensor) for o in outputs):
        what = "marks an input dirty" if ctx.dirty_tensors else f"returns {type(output).__name__}"
        raise NotImplementedError(
            f"{where}: a Function that {what} runs eagerly only; call it outside verigrad.compile/trace"
        )
    several = isinstance(output, tuple)
    call = FunctionCall(fn, args, kwargs, positions, tuple(_spec_of(o) for o in outputs), several)
    inputs = tuple(args[p] for p in positions)
    skip = {id(t) for t in ctx.non_differentiable}
    if not call.several:
        with no_grad() if id(output) in skip else contextlib.nullcontext():
            return function(*inputs, call=call)
    pack = function(*inputs, call=call)
    results = []
    for k, o in enumerate(outputs):
        if not isinstance(o, Tensor):
            results.append(o)
            continue
        with no_grad() if id(o) in skip else contextlib.nullcontext():
            results.append(function_output(pack, call=call, index=k))
    return tuple(results)


def _spec_of(o: Any) -> Spec | None:
    return o.spec if isinstance(o, Tensor) else None

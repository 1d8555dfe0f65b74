"""A custom Function inside `verigrad.trace` / `verigrad.compile`: one instruction of its own.

`function %a %b (call=MyFn)` runs the user's forward on the plan's arrays (as eager Tensors, without
recording), keeping its ctx on the call; `function_backward %g %y %a %b (call=MyFn, index=k)`, one per
input that needs a gradient, runs the user's backward once per run (the first of them) and gives input
k's gradient. The output's spec is found at trace time by running the forward on specs alone
(`AbstractMode`), so a traced forward is written with verigrad ops; several outputs and `mark_dirty`
are refused there (they run eagerly only).

The kernels give fresh arrays (a copy of what the user's code returned): a plan may write into a value's
memory once it is dead, and a replay records only the calls whose results they made, so these steps
always run the user's Python.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from .. import modes
from ..autograd import is_grad_enabled, no_grad
from ..dtypes import DType
from ..ops._op import REGISTRY, Op
from ..shapes import Spec
from ..tensor import Tensor
from .ctx import FunctionCtx, backward_grads, run_forward


class FunctionCall:
    """One traced call of a Function: the arguments' template (the non-tensor ones as given), and the ctx,
    inputs and gradients of the plan's current run. Printed as the Function's name."""

    def __init__(self, fn: type, args: tuple, kwargs: dict, positions: tuple[int, ...], spec: Spec) -> None:
        self.fn, self.template, self.kwargs, self.positions, self.spec = fn, args, kwargs, positions, spec
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
    spec = call.spec
    if not isinstance(output, Tensor) or output.dtype != spec.dtype or output.ndim != len(spec.shape):
        raise RuntimeError(f"{call.fn.__name__}.forward returned {output!r} where its trace gave {spec!r}")
    run = call.run
    run.ctx, run.inputs, run.grads = ctx, tensors, None
    return np.array(output.payload, copy=True)


def _run_backward(g: np.ndarray, out: np.ndarray, *arrays: np.ndarray, call: FunctionCall, index: int) -> Any:
    run = call.run
    if run.grads is None:
        name = f"{call.fn.__name__}Backward"
        grad = Tensor(Spec(tuple(g.shape), call.spec.dtype), g)
        with modes.using(modes._DEFAULT[0]), no_grad():
            run.grads = backward_grads(
                call.fn, name, run.ctx, [grad], run.inputs, call.positions, len(call.template)
            )
    gi = run.grads[index]
    if gi is None:
        raise RuntimeError(
            f"{call.fn.__name__}.backward returned None for argument {call.positions[index]}, which requires"
            " grad, in a compiled function: return zeros there (a compiled step gives every gradient it"
            " traced)"
        )
    return np.array(gi.payload, dtype=call.dtypes[index].np, copy=True)


def _forward_vjp(g: Tensor, out: Tensor, *inputs: Tensor, call: FunctionCall) -> tuple:
    return tuple(
        function_backward(g, out, *inputs, call=call, index=k) if x.requires_grad else None
        for k, x in enumerate(inputs)
    )


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
function_backward = _unregistered(
    Op(
        "function_backward",
        shape=lambda g, out, *shapes, call, index: shapes[index],
        dtype=lambda g, out, *dtypes, call, index: dtypes[index],
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
    if not isinstance(output, Tensor) or ctx.dirty_tensors:
        what = "gives several outputs" if isinstance(output, tuple) else "marks an input dirty"
        if not isinstance(output, tuple | Tensor):
            what = f"returns {type(output).__name__}"
        raise NotImplementedError(
            f"{where}: a Function that {what} runs eagerly only; call it outside verigrad.compile/trace"
        )
    call = FunctionCall(fn, args, kwargs, positions, output.spec)
    inputs = tuple(args[p] for p in positions)
    if any(output is t for t in ctx.non_differentiable):
        with no_grad():
            return function(*inputs, call=call)
    return function(*inputs, call=call)

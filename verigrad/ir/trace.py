"""`TraceMode` records each op call as an instruction; `trace(fn, *specs)` returns the Program.

Tracing uses the same op calls as eager mode and `check`: the rules run, then the mode appends an
instruction instead of running a kernel. Autograd records the same `Node`s as in eager mode, so
`loss.backward()` inside a traced function appends the backward instructions (after `backward:`),
built from the ops' VJPs. Eager tensors the function reads (parameters, optimizer state) become named
inputs; `assign` to them becomes an update written back.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import modes
from ..autograd import Node, is_grad_enabled
from ..dtypes import DType
from ..shapes import Spec
from ..tensor import Tensor
from .program import Program, Value


class TraceMode(modes.Mode):
    name = "trace"

    def __init__(self, program: Program, names: dict[int, str] | None = None) -> None:
        self.program = program
        self.names = names or {}  # id(eager tensor) -> the name its input gets
        self.bound: dict[int, Value] = {}  # id(eager tensor) -> its current value
        self.captured: dict[int, Tensor] = {}
        self.saved_grads: dict[int, Any] = {}  # .grad of each captured tensor before the trace

    def value_of(self, t: Tensor) -> Value:
        if isinstance(t.data, Value):
            return t.data
        if not isinstance(t.data, np.ndarray):
            raise TypeError(f"an abstract tensor {t.spec!r} reached a trace; pass it as an argument")
        key = id(t)
        if key not in self.bound:
            name = self.names.get(key) or f"c{len(self.captured)}"
            self.bound[key] = self.program.add_input(t.spec, name)
            self.captured[key] = t
            self.saved_grads[key] = t.grad
            self.program.captured.append(t)
        return self.bound[key]

    def apply(self, op: Any, args: tuple[Tensor, ...], params: dict, out: Spec) -> Tensor:
        needs_grad = op.differentiable and is_grad_enabled() and any(a.requires_grad for a in args)
        if op.is_composite and needs_grad and op.vjp is None:
            return op.decompose(*args, **params)  # the backward pass needs the primitives
        value = self.program.emit(op, tuple(self.value_of(a) for a in args), params, out)
        t = Tensor(out, value)
        if needs_grad:
            t.requires_grad = True
            t._node = Node(op, args, params)
        return t

    def constant(self, array: np.ndarray, dtype: DType) -> Tensor:
        spec = Spec(tuple(array.shape), dtype)
        return Tensor(spec, self.program.emit("const", (), {"value": array}, spec))

    def assign(self, target: Tensor, value: Tensor) -> None:
        new = self.value_of(value)
        if isinstance(target.data, Value):
            target.data = new  # a tensor made inside the trace: rebind it (SSA)
            return
        old = self.value_of(target)  # a captured tensor: its new value is written back
        self.bound[id(target)] = new
        self.program.updates[old.name] = new

    def restore(self) -> None:
        """Give captured tensors back the `.grad` they had: a trace leaves no traced value behind."""
        for key, t in self.captured.items():
            t.grad = self.saved_grads[key]

    def begin_backward(self) -> None:
        if self.program.backward_at is None:
            self.program.backward_at = len(self.program.instrs)


def _arg_names(fn: Callable, count: int) -> list[str]:
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        params = []
    names = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(names) < count and any(p.kind == p.VAR_POSITIONAL for p in params):
        base = next(p.name for p in params if p.kind == p.VAR_POSITIONAL)
        names += [f"{base}{i}" for i in range(count - len(names))]
    names = names[:count]
    return names + [f"arg{i}" for i in range(len(names), count)]


def tensor_names(*objects: Any) -> dict[int, str]:
    """Names for the tensors held by modules and optimizers found in `objects` (duck-typed)."""
    names: dict[int, str] = {}
    for obj in objects:
        if hasattr(obj, "named_parameters") and hasattr(obj, "named_buffers"):
            for name, t in [*obj.named_parameters(), *obj.named_buffers()]:
                names.setdefault(id(t), name)
        elif hasattr(obj, "state_tensors"):
            for name, t in obj.state_tensors():
                names.setdefault(id(t), name)
    return names


def _closure_objects(fn: Callable) -> list[Any]:
    objects = [getattr(fn, "__self__", None), fn]
    objects += [c.cell_contents for c in getattr(fn, "__closure__", None) or () if _filled(c)]
    code = getattr(fn, "__code__", None)
    if code is not None:
        objects += [fn.__globals__[n] for n in code.co_names if n in getattr(fn, "__globals__", {})]
    return [o for o in objects if o is not None]


def _filled(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018
    except ValueError:
        return False
    return True


def trace(fn: Callable[..., Any], *specs: Spec, names: dict[int, str] | None = None) -> Program:
    """Record `fn` run on symbolic tensors of `specs` as a Program (see `print(program)`).

    >>> n, din = verigrad.dims("n din")
    >>> print(verigrad.trace(lambda x: (x * 2).relu(), verigrad.spec([n, din])))
    """
    program = Program()
    args = [Tensor(s, program.add_input(s, name)) for s, name in zip(specs, _arg_names(fn, len(specs)))]
    program.n_args = len(args)
    names = {**tensor_names(*_closure_objects(fn)), **(names or {})}
    mode = TraceMode(program, names)
    try:
        with modes.using(mode):
            result = fn(*args)
            outputs = result if isinstance(result, tuple | list) else (result,)
            program.outputs = [mode.value_of(o) for o in outputs if isinstance(o, Tensor)]
    finally:
        mode.restore()
    return program

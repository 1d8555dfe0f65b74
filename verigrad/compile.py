"""`check` (a function on abstract tensors: no data, no kernels), `trace`, and `compile`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from . import modes
from .errors import ShapeError
from .ops import tensor
from .shapes import Spec, dims, is_concrete
from .tensor import Tensor


def _out_specs(value: Any) -> Any:
    if isinstance(value, Tensor):
        return value.spec
    if isinstance(value, tuple | list):
        return type(value)(_out_specs(v) for v in value)
    if isinstance(value, dict):
        return {k: _out_specs(v) for k, v in value.items()}
    return value


def check(fn: Callable[..., Any], *specs: Spec) -> Any:
    """Run `fn` on tensors that are only specs; return the output spec(s) or raise ShapeError.

    >>> n, din, dout = verigrad.dims("n din dout")
    >>> verigrad.check(lambda x, w: x @ w.T, verigrad.spec([n, din]), verigrad.spec([dout, din]))
    f32[n, dout]
    """
    for i, s in enumerate(specs):
        if not isinstance(s, Spec):
            raise TypeError(f"argument {i} of check must be a verigrad.spec, got {type(s).__name__}")
    with modes.abstract():
        return _out_specs(fn(*(Tensor(s, None) for s in specs)))


class Compiled:
    """`fn` traced once per argument signature, then run from a plan cached per binding of its symbols.

    The default signature makes the leading dimension shared by the arguments a symbol `B` (falling back
    to the concrete shapes when the function needs them); `specs` fixes it instead.
    """

    def __init__(self, fn: Callable[..., Any], specs: tuple[Spec, ...] | None = None, optimize: bool = True):
        self.fn = fn
        self.specs = specs
        self.optimize = optimize
        self._programs: dict[Any, Any] = {}
        self._plans: dict[Any, Any] = {}
        self.counts = {"traces": 0, "plans": 0, "hits": 0}

    def program(self, *args: Tensor) -> Any:
        """The (optimized) Program these arguments run, tracing it if needed."""
        specs = self.specs or _default_specs(args)
        key = tuple(specs)
        if key not in self._programs:
            self._programs[key] = self._trace(specs, args)
        return self._programs[key]

    def _trace(self, specs: tuple[Spec, ...], args: tuple[Tensor, ...]) -> Any:
        from .ir import trace
        from .ir.passes import optimize

        try:
            program = trace(self.fn, *specs)
        except ShapeError:
            if self.specs is not None or all(is_concrete(s.shape) for s in specs):
                raise
            specs = tuple(a.spec for a in args)  # the function needs concrete sizes
            program = trace(self.fn, *specs)
        self.counts["traces"] += 1
        return optimize(program) if self.optimize else program

    def __call__(self, *args: Any) -> Any:
        from .backends import get_backend
        from .ir.plan import Plan, bind

        args = tuple(a if isinstance(a, Tensor) else tensor(a) for a in args)
        program = self.program(*args)
        values = bind(program, args)
        backend = get_backend()
        key = (id(program), tuple(sorted(values.items())), backend.name)
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plans[key] = Plan(program, values, backend)
            self.counts["plans"] += 1
        else:
            self.counts["hits"] += 1
        outputs, updates = plan.run([a.data for a in args] + [t.data for t in program.captured])
        by_name = {v.name: t for v, t in zip(program.inputs[program.n_args :], program.captured)}
        for name, array in updates.items():
            np.copyto(by_name[name].data, array)
        results = [Tensor(Spec(o.shape, v.spec.dtype), o) for o, v in zip(outputs, program.outputs)]
        return results[0] if len(results) == 1 else tuple(results)

    def stats(self) -> dict[str, int]:
        """How many traces, plans built, and plan cache hits so far."""
        return dict(self.counts)


def _default_specs(args: tuple[Tensor, ...]) -> tuple[Spec, ...]:
    batch = args[0].shape[0] if args and args[0].ndim else None
    if batch is None or batch <= 1:
        return tuple(a.spec for a in args)
    b = dims("B")
    return tuple(
        Spec((b, *a.shape[1:]) if a.ndim and a.shape[0] == batch else a.shape, a.dtype) for a in args
    )


def compile(
    fn: Callable[..., Any] | None = None, *, specs: tuple[Spec, ...] | None = None, optimize: bool = True
):
    """Compile `fn` (also usable as a decorator): traced once, run from cached plans."""
    if fn is None:
        return lambda f: Compiled(f, specs, optimize)
    return Compiled(fn, specs, optimize)

"""A `Plan` is a Program bound to concrete sizes and a backend: a flat list of kernel calls.

Building it resolves every symbol (from the arguments' shapes), every kernel and every param once;
running it is one loop over prepared steps, writing values into a list of slots.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..backends import Backend
from ..eager import conform, decomposition_kernel
from ..errors import DTypeError, ShapeError
from ..shapes import Dim, Spec, evaluate, multiple_of, shape_text
from .program import Program, Value


def bind(program: Program, args: Sequence[Any]) -> dict[str, int]:
    """Symbol values from the arguments' shapes; an argument that breaks the program's contract
    (rank, a fixed size, a dtype, a divisibility) is named with the symbol at fault."""
    values: dict[str, int] = {}
    pending = []
    for v, a in zip(program.inputs[: program.n_args], args):
        shape, dtype = tuple(a.shape), a.dtype
        where = f"argument {v.name}"
        if dtype is not v.spec.dtype:
            raise DTypeError(
                f"{where}: dtype {dtype.name}, but the function was compiled for {v.spec.dtype.name}"
            )
        if len(shape) != len(v.spec.shape):
            raise ShapeError(
                f"{where}: shape {list(shape)} does not have the rank of {shape_text(v.spec.shape)}"
            )
        for i, (d, n) in enumerate(zip(v.spec.shape, shape)):
            symbol = _plain_symbol(d)
            if symbol is None:
                pending.append((where, i, d, n))
            elif values.setdefault(symbol, n) != n:
                raise ShapeError(f"{where}: dimension {i} is {n}, but {symbol} = {values[symbol]} already")
            elif n % multiple_of(symbol):
                raise ShapeError(f"{where}: {symbol} = {n} is not a multiple of {multiple_of(symbol)}")
    for where, i, d, n in pending:
        try:
            expected = evaluate(d, values)
        except KeyError as e:
            raise ShapeError(f"{where}: dimension {i} ({d}) has a symbol no argument binds: {e}") from None
        if expected != n:
            raise ShapeError(f"{where}: dimension {i} is {n}, but {d} = {expected} for {values}")
    return values


def _plain_symbol(d: Any) -> str | None:
    if isinstance(d, Dim) and len(d.terms) == 1:
        monomial, coeff = d.terms[0]
        if coeff == 1 and len(monomial) == 1 and monomial[0][1] == 1:
            return monomial[0][0]
    return None


def concrete(value: Any, values: dict[str, int]) -> Any:
    """A param with every Dim replaced by its value."""
    if isinstance(value, Dim):
        return value.evaluate(values)
    if isinstance(value, tuple):
        return tuple(concrete(v, values) for v in value)
    if isinstance(value, list):
        return [concrete(v, values) for v in value]
    return value


class Plan:
    """The program's instructions as kernel calls over numbered slots, for one binding of the symbols."""

    def __init__(self, program: Program, values: dict[str, int], backend: Backend) -> None:
        self.program = program
        slot: dict[int, int] = {}
        self.initial: list[Any] = []

        def slot_of(v: Value) -> int:
            if v.id not in slot:
                slot[v.id] = len(self.initial)
                self.initial.append(None)
            return slot[v.id]

        self.input_slots = [slot_of(v) for v in program.inputs]
        self.steps: list[tuple[Any, tuple[int, ...], int]] = []
        for instr in program.instrs:
            out = slot_of(instr.out)
            if instr.name == "const":
                self.initial[out] = instr.params["value"]
                continue
            params = {k: concrete(p, values) for k, p in instr.params.items()}
            spec = Spec(concrete(instr.out.spec.shape, values), instr.out.spec.dtype)
            self.steps.append(
                (_kernel(instr.op, params, spec, backend), tuple(slot_of(a) for a in instr.args), out)
            )
        self.output_slots = [slot_of(v) for v in program.outputs]
        self.update_slots = {name: slot_of(v) for name, v in program.updates.items()}
        self.instructions = len(self.steps)

    def run(self, arrays: Sequence[np.ndarray]) -> tuple[list[np.ndarray], dict[str, np.ndarray]]:
        env = list(self.initial)
        for s, a in zip(self.input_slots, arrays):
            env[s] = a
        with np.errstate(all="ignore"):
            for kernel, ins, out in self.steps:
                env[out] = kernel(*[env[i] for i in ins])
        return [env[s] for s in self.output_slots], {n: env[s] for n, s in self.update_slots.items()}


def _kernel(op: Any, params: dict, spec: Spec, backend: Backend) -> Any:
    """The instruction's kernel with its params bound, checking the result as eager mode does."""
    if op.is_composite:
        kernel = backend.native(op, spec.dtype) or decomposition_kernel(op)
    else:
        kernel = backend.kernel(op, spec.dtype)
    bound = functools.partial(kernel, **params) if params else kernel
    return lambda *arrays: conform(op, bound(*arrays), spec)

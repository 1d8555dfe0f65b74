"""The IR: a `Program` is a list of SSA instructions over `Value`s with symbolic specs.

One node type: an `Instr` applies an op (or the pseudo-op `const`) to values and defines one new
value. Inputs are named (the function's arguments, then the tensors it captured: parameters,
optimizer state); `updates` names the captured tensors the program writes back (`p -= lr * g`); a
random op's seed is the number of its draw among `draws`, drawn anew by each run.
`str(program)` prints it, one line per instruction:

    %7: f32[B,16,H/2,W/2] = max_pool2d %6 (kernel=(2,2), stride=(2,2))
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ..shapes import DimLike, Spec, evaluate, numel
from .guards import checker
from .printer import format_program
from .validate import validate


@dataclass(eq=False)
class Value:
    """An SSA value: defined once, by an input or an instruction."""

    id: int
    spec: Spec
    name: str | None = None  # inputs only

    def __repr__(self) -> str:
        return f"%{self.id}"


@dataclass(eq=False)
class Instr:
    op: Any  # an Op record, or "const" (params["value"] holds the array)
    args: tuple[Value, ...]
    params: dict[str, Any]
    out: Value

    @property
    def name(self) -> str:
        return self.op if isinstance(self.op, str) else self.op.name


@dataclass(eq=False)
class Program:
    inputs: list[Value] = field(default_factory=list)
    instrs: list[Instr] = field(default_factory=list)
    outputs: list[Value] = field(default_factory=list)
    updates: dict[str, Value] = field(default_factory=dict)  # captured input name -> new value
    backward_at: int | None = None  # index of the first instruction of the backward pass
    captured: list[Any] = field(default_factory=list)  # eager tensors bound to the captured inputs
    n_args: int = 0  # inputs[:n_args] are the function's arguments
    # the generators of the random draws, in the order the function made them: each run draws their seeds
    # anew (`Plan.seeds`), and a random op's `seed` param k stands for the run's k-th draw
    draws: list[Any] = field(default_factory=list)
    # what the trace read from Python (a module's `training`, a number in a closure cell or a global):
    # key -> (a function reading it again, the (type, value) read); a compiled call runs this program
    # only while each reads the same (`holds`)
    guards: dict[tuple[int, str], tuple[Any, Any]] = field(default_factory=dict)
    # the function ran no backward pass and returned a result that carries gradient history; which
    output_grads: tuple[bool, ...] = ()
    outputs_require_grad: bool = False
    _next: int = 0
    # the memory plan (passes/memplan.py); `copy` drops it, since it only holds for these instructions
    buffers: dict[int, int] | None = None  # value id -> buffer id; None: not planned
    buffer_bytes: list[DimLike] = field(default_factory=list)  # buffer id -> its size in bytes
    inplace: set[int] = field(default_factory=set)  # values computed into their dying input's buffer
    _holds: Any = field(default=None, repr=False, compare=False)  # (guards, their count, `checker`'s)

    def new_value(self, spec: Spec, name: str | None = None) -> Value:
        v = Value(self._next, spec, name)
        self._next += 1
        return v

    def add_input(self, spec: Spec, name: str) -> Value:
        v = self.new_value(spec, name)
        self.inputs.append(v)
        return v

    def emit(self, op: Any, args: tuple[Value, ...], params: dict, spec: Spec) -> Value:
        out = Value(self._next, spec)
        self._next += 1
        self.instrs.append(Instr(op, args if type(args) is tuple else tuple(args), params, out))
        return out

    def copy(self, instrs: list[Instr] | None = None, **changes: Any) -> Program:
        """The same program with other instructions (or fields); values are shared, not copied."""
        fields = {
            "inputs": list(self.inputs),
            "instrs": list(self.instrs if instrs is None else instrs),
            "outputs": list(self.outputs),
            "updates": dict(self.updates),
            "backward_at": self.backward_at,
            "captured": list(self.captured),
            "n_args": self.n_args,
            "draws": list(self.draws),
            "guards": dict(self.guards),
            "output_grads": self.output_grads,
            "outputs_require_grad": self.outputs_require_grad,
            "_next": self._next,
        }
        fields.update(changes)
        return Program(**fields)

    def holds(self) -> bool:
        """Whether the values the trace read from Python objects (`guards`) are still those."""
        check = self._holds
        if check is None or check[0] is not self.guards or check[1] != len(self.guards):
            check = self._holds = (self.guards, len(self.guards), checker(self.guards))
        return check[2]()

    def __iter__(self) -> Iterator[Instr]:
        return iter(self.instrs)

    def __len__(self) -> int:
        return len(self.instrs)

    def __str__(self) -> str:
        return format_program(self)

    def memory(self, values: dict[str, int]) -> dict[str, int]:
        """Bytes of the memory plan for a binding of the symbols (`{"B": 32}`): `planned` (every buffer
        of the plan), `naive` (one buffer per value an instruction computes; views and constants own
        none in either count), and how many `buffers`, `values` and `inplace` values that makes."""
        if self.buffers is None:
            raise ValueError("this program has no memory plan: run verigrad.ir.passes.memplan.run on it")
        owned = [i.out for i in self.instrs if i.out.id in self.buffers]
        return {
            "planned": sum(evaluate(size, values) for size in self.buffer_bytes),
            "naive": sum(evaluate(nbytes(v.spec), values) for v in owned),
            "buffers": len(self.buffer_bytes),
            "values": len(owned),
            "inplace": len(self.inplace),
        }

    def verify(self) -> Program:
        """The program itself, after `validate` found it well formed (IRError where it is not)."""
        validate(self)
        return self


def nbytes(spec: Spec) -> DimLike:
    """The size of a value of `spec` in bytes (symbolic when its shape is)."""
    return numel(spec.shape) * spec.dtype.itemsize

"""What the passes share: a `Rewriter` that rebuilds a program instruction by instruction, and the facts
about values they reason with (uses, producers, which values are results, which are compact).

A pass never changes an `Instr` or a `Value` in place (the program it was given shares them): it keeps
an instruction as it is, keeps it with its arguments renamed (a new `Instr` defining the same value),
replaces its value by another one, or emits a new instruction in its place.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from ..program import Instr, Program, Value

# ops whose output may share memory with their first argument (a NumPy view): permute, broadcast_to
# and slice always do, reshape does when the layout allows, contiguous returns a C-ordered input itself
VIEW_OPS = frozenset({"reshape", "permute", "broadcast_to", "slice", "contiguous"})


class Rewriter:
    """Builds the rewritten program; `replace(v, w)` makes every later use of v read w instead."""

    def __init__(self, program: Program) -> None:
        self.program = program
        self._replaced: dict[int, Value] = {}
        self._kept: list[tuple[Instr, int]] = []  # (instruction, index of the one it stands for)
        self.producer: dict[int, Instr] = {}  # value id -> its instruction in the new program

    def value(self, v: Value) -> Value:
        while v.id in self._replaced:
            v = self._replaced[v.id]
        return v

    def renamed(self, instr: Instr) -> Instr:
        """`instr` reading the current replacements of its arguments (itself if none changed)."""
        replaced = self._replaced
        if not replaced or not any(a.id in replaced for a in instr.args):  # the common case, fast
            return instr
        return Instr(instr.op, tuple(self.value(a) for a in instr.args), instr.params, instr.out)

    def keep(self, instr: Instr, index: int, renamed: bool = False) -> Instr:
        """Append `instr` (renamed, unless `renamed` says it already is) in place of the instruction at
        `index` of the old program."""
        if not renamed:
            instr = self.renamed(instr)
        self._kept.append((instr, index))
        self.producer[instr.out.id] = instr
        return instr

    def emit(self, op: Any, args: tuple[Value, ...], params: dict, out: Value, index: int) -> Instr:
        """A new instruction that defines `out` (an existing value) in place of the one at `index`."""
        return self.keep(Instr(op, tuple(args), params, out), index)

    def replace(self, v: Value, w: Value) -> None:
        self._replaced[v.id] = self.value(w)

    def finish(self) -> Program:
        old = self.program
        backward_at = None
        if old.backward_at is not None:  # the marker goes before the first backward instruction left
            backward_at = next((k for k, (_, i) in enumerate(self._kept) if i >= old.backward_at), None)
        return old.copy(
            [instr for instr, _ in self._kept],
            outputs=[self.value(v) for v in old.outputs],
            updates={name: self.value(v) for name, v in old.updates.items()},
            backward_at=backward_at,
        )


def uses(program: Program) -> Counter:
    """How many times each value is read: by instructions (once per argument), outputs and updates."""
    count: Counter = Counter()
    for instr in program.instrs:
        count.update(a.id for a in instr.args)
    count.update(v.id for v in [*program.outputs, *program.updates.values()])
    return count


def results(program: Program) -> set[int]:
    """The values the caller receives: outputs, and the values written back to captured tensors."""
    return {v.id for v in [*program.outputs, *program.updates.values()]}


def is_const(instr: Instr | None) -> bool:
    return instr is not None and instr.name == "const"


def compact_array(a: np.ndarray) -> bool:
    """True when `a` fills a block of memory with no gaps: positive strides, no broadcast (zero)
    strides, its elements packed in some order of its axes."""
    axes = sorted((s, n) for n, s in zip(a.shape, a.strides) if n > 1)
    step = a.itemsize
    for s, n in axes:
        if s != step:
            return False
        step *= n
    return True


def is_compact(v: Value, producer: dict[int, Instr], memo: dict[int, bool]) -> bool:
    """Whether v, computed on the reference backend, is always a compact array (see `compact_array`).

    NumPy allocates element-wise results in the memory order of their operands, so `x * 1` has the
    same strides as x exactly when x is compact; removing it is then invisible even to the ops whose
    summation order follows the layout (sum, matmul). Program inputs may be any view: not compact.
    Composite ops run their decomposition, whose last op may be a view: not compact either.
    """
    if v.id in memo:
        return memo[v.id]
    instr = producer.get(v.id)
    if instr is None:
        out = False  # an input
    elif is_const(instr):
        out = compact_array(np.asarray(instr.params["value"]))
    elif instr.op.is_fused:
        out = True  # its root is element-wise: a fresh array
    elif instr.op.is_composite:
        out = False
    elif instr.name in ("reshape", "permute"):
        out = is_compact(instr.args[0], producer, memo)  # views of it, or a C-ordered copy
    elif instr.name == "broadcast_to":
        same = instr.args[0].spec.shape == instr.out.spec.shape
        out = same and is_compact(instr.args[0], producer, memo)
    elif instr.name == "slice":
        out = False
    elif instr.name == "cast" and instr.out.spec.dtype.name == "bf16":
        out = is_compact(instr.args[0], producer, memo)  # bf16 to bf16 returns its input
    else:
        out = True  # every other primitive allocates its result (contiguous makes a C copy or is one)
    memo[v.id] = out
    return out


def freeze(value: Any) -> Any:
    """A hashable key for a param that tells apart what `==` would merge: -0.0 from 0.0, 1 from 1.0
    and True, arrays by dtype, shape, strides and bytes."""
    kind = type(value)
    if kind is int or kind is str or kind is bool or value is None:  # the common cases, fast
        return (kind, value)
    if kind is tuple and all(type(v) is int for v in value):
        return (kind, value)
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, value.shape, value.strides, value.tobytes())
    if isinstance(value, float | np.floating):
        return (type(value).__name__, float(value).hex())
    if isinstance(value, tuple | list):
        return (type(value).__name__, *(freeze(v) for v in value))
    if isinstance(value, dict):
        return ("dict", *((k, freeze(v)) for k, v in value.items()))
    if isinstance(value, slice):
        return ("slice", freeze(value.start), freeze(value.stop), freeze(value.step))
    return (type(value).__name__, value)

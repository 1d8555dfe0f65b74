"""A `Plan` is a Program bound to concrete sizes and a backend: a straight line of kernel calls.

Building it resolves every symbol (from the arguments' shapes), every param and every kernel once:

- a kernel is the backend's own for (op, dtype), else the op's NumPy reference; where the reference
  is chosen and the op offers `fast` for the operands' dtypes, that leaner equivalent (the same
  result, bit for bit, without the per-call dtype rule and no-op casts);
- the same bits, cheaper, chosen from the concrete shapes: a backend kernel stated exact on a result
  and operands of fewer elements than the backend's `ufunc_below` runs as the op's `fast`, or as its
  reference where that is a ufunc (a ufunc call costs a fraction of a C kernel's set-up); `where` on a
  0-d condition returns the chosen branch (not where that would hand the caller an argument's or
  another result's array); a reshape that must copy (a permuted view) copies through the backend's
  `contiguous` kernel (`_SHAPED_FAST`);
- a composite op the backend has no kernel for is replaced by the instructions of its decomposition,
  traced once for the concrete operands: the same kernels eager mode runs for it, without a trip
  through eager dispatch per call;
- a fused group (passes/fuse.py) the backend has no kernel for, or whose result and operands are all
  smaller than the backend's `ufunc_below`, runs its members as steps of their own: the kernels they
  would run unfused (ufuncs, on small operands), without a loop over the members inside a kernel. But
  where the backend has a kernel for the group less its members computed from one-element values alone
  (an optimizer's bias corrections), only those run as steps of their own, and the rest stays a group.

The first run checks every kernel's result against its instruction's spec, as eager mode's `conform`
does: a result of the wrong shape is an error; one of another dtype (or a NumPy scalar) is converted,
and that instruction keeps the conversion. Later runs call the kernels directly, in a loop over
the steps; once a plan has run `generate_after` times, it becomes a Python function generated for it,
one line per kernel call (`print(plan.source)`), which saves the loop's overhead (a few tenths of a
microsecond per call) at a one-time cost of compiling that source (tens of microseconds per line).

On a backend that can record its kernel calls (the cpu backend's vg_call), a plan run more than
`replay_after` times records one run's calls and replays them from then on (ir/replay.py): each step
that made only C calls is one of them, without its Python; `Plan.replay = False` (or
`VERIGRAD_REPLAY=0`) turns it off.

In place (passes/memplan.py plans it for the program; the plan decides it for its own steps, which
inline decompositions and run fused groups member by member): a step whose kernel is a NumPy ufunc
writes its result into an input's array (`ufunc(a, b, out=a)`) where that is provably the same result, bit
for bit, layout included:

- at build time: every operand and the result have one dtype and the input the result's shape (so the
  ufunc's own loop gives that dtype, as it would allocate it); the input's array was allocated by an
  earlier ufunc step of this run (never a program input, a captured tensor, a constant, or a kernel's
  result that may be a view of any of them), and neither it nor anything that may view it (the result
  of any step that is not a ufunc's is taken to view its inputs) is read later or returned;
- on the first run, which allocates every result and checks it: the result the ufunc allocated has the
  input's strides. Layouts follow from the inputs' strides alone, so later runs with inputs of the
  strides the first run had run those steps in place; a run with other strides turns in place off.

An update of a captured tensor (an optimizer's new parameter or moment) is written into that tensor's
own array, where the step that makes it writes element-wise into `out=` (a ufunc of one dtype, or a
kernel that says it `writes_into`, as the cpu backend's fused kernels), and neither the tensor nor
anything that may view it is read after that step; `compile` then has nothing to copy back. A run
whose arguments share memory with a tensor so written turns in place off.

`Plan.inplace = False` (on the class or a plan, before its first run) turns it off.

Merged calls: fused steps whose results only one later fused step of their shape reads (an optimizer's
new moments, which the parameter's update reads) run, from the second run on, as one call of a kernel
the backend makes for the group of groups (passes/fuse.py `merge`): one pass reads the gradient and
the old values and writes every result, each into the array its step would have written. They merge
only where no step between them writes into an array (the merged call reads the earlier steps' inputs
later than they did). `Plan.merge = False` turns it off. Steps the binding fixes (no inputs, such as an
inlined decomposition's `arange`, or `numel_of`) run once when the plan is built and become constants.
"""

from __future__ import annotations

import collections
import functools
import math
import operator
import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .. import modes
from ..autograd import no_grad
from ..backends import Backend
from ..backends.memory import retain_freed
from ..backends.reference import decomposition_kernel
from ..dtypes import DType
from ..eager import EAGER, conform
from ..errors import DTypeError, ShapeError
from ..shapes import Dim, Spec, evaluate, multiple_of, shape_text
from ..tensor import Tensor
from .passes.fuse import FusedGroup, merge, mergeable
from .program import Program, Value
from .replay import Replay, Results, root
from .trace import TraceMode

RECORDINGS = 4  # recordings of a plan's calls, at most (each made after a run that could not replay)


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
            if isinstance(d, int):
                if d != n:
                    pending.append((where, i, d, n))
                continue
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


_PLAIN = (int, float, str, bool, type(None))


class _Concrete:
    """`concrete` with each Dim and each shape evaluated once per plan (a program repeats a few sizes)."""

    def __init__(self, values: dict[str, int]) -> None:
        self.values = values
        self.dims: dict[Dim, int] = {}
        self.shapes: dict[tuple, tuple] = {}

    def __call__(self, value: Any) -> Any:
        if isinstance(value, _PLAIN):  # the common case first
            return value
        if isinstance(value, Dim):
            n = self.dims.get(value)
            if n is None:
                n = self.dims[value] = value.evaluate(self.values)
            return n
        if isinstance(value, tuple):
            return tuple(map(self, value))
        if isinstance(value, list):
            return [self(v) for v in value]
        return value

    def shape(self, shape: tuple) -> tuple:
        out = self.shapes.get(shape)
        if out is None:
            out = self.shapes[shape] = (
                shape if all(type(d) is int for d in shape) else tuple(map(self, shape))
            )
        return out


class Step:
    """One kernel call: slots in, one slot out, and the spec its result must have."""

    __slots__ = ("fix", "ins", "into", "kernel", "native", "op", "out", "params", "spec")

    def __init__(
        self,
        op: Any,
        kernel: Callable,
        ins: tuple[int, ...],
        out: int,
        spec: Spec,
        params: dict | None = None,
    ) -> None:
        self.op, self.kernel, self.ins, self.out, self.spec = op, kernel, ins, out, spec
        self.params = params or {}
        self.fix: str | None = None  # after the first run: None, "asarray" or "conform"
        self.into: int | None = None  # the input slot whose array the result is written into
        self.native: Callable | None = None  # the backend's kernel where a leaner one runs (small operands)

    def __repr__(self) -> str:
        args = ", ".join(f"x{i}" for i in self.ins)
        into = "" if self.into is None else f" (into x{self.into})"
        return f"x{self.out}: {self.spec!r} = {self.op.name}({args}){into}"


class Merged(Step):
    """Fused steps run as one kernel call in the last one's place (see `Plan._merge_groups`): `outs`
    their result slots (the last one's last), `intos` the slot each is written into (None: a new
    array), `parts` the steps it stands for."""

    __slots__ = ("intos", "outs", "parts")

    def __init__(self, op: Any, kernel: Callable, ins: tuple[int, ...], parts: list[Step]) -> None:
        super().__init__(op, kernel, ins, parts[-1].out, parts[-1].spec)
        self.parts = parts
        self.outs = tuple([part.out for part in parts])
        self.intos = tuple([part.into for part in parts])

    def __repr__(self) -> str:
        args = ", ".join(f"x{i}" for i in self.ins)
        outs = ", ".join(
            f"x{o}" + ("" if i is None else f" (into x{i})") for o, i in zip(self.outs, self.intos)
        )
        return f"{outs} = {self.op.name}({args})"


class Plan:
    """The program's instructions as kernel calls over numbered slots, for one binding of the symbols."""

    def __init__(self, program: Program, values: dict[str, int], backend: Backend) -> None:
        retain_freed()  # a run allocates what the last one freed: reuse its pages (backends/memory.py)
        self.program = program
        self.values = dict(values)
        self.backend = backend
        self._concrete = _Concrete(self.values)
        self._slots: dict[Value, int] = {}  # also holds the decompositions' values
        self.specs: list[Spec] = []  # concrete spec of each slot
        self.consts: dict[int, np.ndarray] = {}
        self.steps: list[Step] = []
        self._same: dict[Any, int] = {}  # (op, input slots, params) -> the slot that computed it
        self._mergeable = mergeable(program)  # fused results kept whole, however small
        self.input_slots = [self._new_slot(v, self._spec(v.spec)) for v in program.inputs]
        self._emit(program.instrs, self._slots)
        self.output_slots = [self._slots[v] for v in program.outputs]
        self.update_names = list(program.updates)
        self.update_slots = {name: self._slots[v] for name, v in program.updates.items()}
        self._fold_known_steps()
        self._no_alias_out()
        self.instructions = len(self.steps)
        self._template: list[Any] = [None] * len(self.specs)  # the slots before a run: constants only
        for slot, value in self.consts.items():
            self._template[slot] = value
        self.runs = 0
        self._candidates = self._inplace_candidates()  # step index -> the input slot it may write into
        self._groups = self._merge_groups()  # fused steps a run after the first may make one call
        self._strides: list[tuple] | None = None  # the inputs' strides on the first run, while in place
        self._written: list[int] = []  # the positions of the inputs steps write into (updates)
        self._captured_check: tuple | None = None  # see `_inplace_holds`
        self._loop: list[tuple[Callable, tuple[int, ...], Any]] | None = None  # after the checked run
        self.calls: list[Step] = self.steps  # what later runs call: the steps, some merged
        self._fn: Callable[..., Any] | None = None  # generated after `generate_after` runs
        self._replay: Replay | bool | None = None  # the recorded calls; False: never (ir/replay.py)
        self._recordings = 0
        self.source: str | None = None  # its text

    # runs before the plan becomes a generated function: compiling its source costs about as much as
    # the loop's overhead over some 60 runs, so a plan run this often is likely to be run far more
    generate_after = 64

    # runs before a plan records its calls and replays them (ir/replay.py); `replay = False` turns it off
    replay_after = 8
    replay = os.environ.get("VERIGRAD_REPLAY", "1") != "0"

    # whether the first run may turn on in place for the steps that allow it (see the module docstring)
    inplace = True

    # whether later runs make one call of each group of `_merge_groups`
    merge = True

    # building ----------------------------------------------------------------------------------
    def _spec(self, spec: Spec) -> Spec:
        shape = self._concrete.shape(spec.shape)
        return spec if shape is spec.shape else Spec(shape, spec.dtype)

    def _new_slot(self, v: Value, spec: Spec) -> int:
        slot = self._slots[v] = len(self.specs)
        self.specs.append(spec)
        return slot

    def _emit(self, instrs: Sequence[Any], slots: dict[Value, int], inlined: bool = False) -> None:
        """Steps for `instrs`, whose values `slots` maps (arguments in, results added). The steps of
        inlined decompositions are merged with equal earlier ones (softmax's backward after
        cross_entropy's forward repeats its max, sub and exp); the passes did that for the rest."""
        concrete_param = self._concrete
        for instr in instrs:
            op = instr.op
            if isinstance(op, str):  # "const"
                value = instr.params["value"]
                slots[instr.out] = slot = len(self.specs)
                self.specs.append(Spec(value.shape, instr.out.spec.dtype))
                self.consts[slot] = value
                continue
            ins = tuple([slots[a] for a in instr.args])
            params = {k: concrete_param(p) for k, p in instr.params.items()} if instr.params else {}
            whole = not inlined and instr.out.id in self._mergeable
            slots[instr.out] = self._call(op, params, ins, self._spec(instr.out.spec), inlined, whole)

    def _call(
        self,
        op: Any,
        params: dict,
        ins: tuple[int, ...],
        spec: Spec,
        inlined: bool = False,
        whole: bool = False,
    ) -> int:
        """The slot holding `op(*ins, **params)` of concrete `spec`, after the steps that compute it. A
        fused group that may be merged (`whole`) keeps its kernel however small: a merged call costs
        less than the members of its groups."""
        backend = self.backend
        if op.is_composite or op.is_fused:
            kernel = backend.native(op, spec.dtype)
            small = not whole and self._small_exact(op, ins, spec)
            if op.is_fused and kernel is None and not small:
                hoisted = self._hoisted(op, params["params"], ins, spec, inlined, whole)
                if hoisted is not None:
                    return hoisted
            if op.is_fused and (kernel is None or small):  # small: ufuncs cost less than C
                return self._members(op.group, params["params"], ins)[len(op.group.ops) - 1]
            if kernel is None:
                sub = _decomposition(op, params, tuple([self.specs[i] for i in ins]), spec)
                if sub is not None:
                    inner = dict(zip(sub.inputs, ins))
                    self._emit(sub.instrs, inner, inlined=True)
                    return inner[sub.outputs[0]]
                kernel = decomposition_kernel(op, EAGER)
        else:
            kernel = backend.kernel(op, spec.dtype)
        key: Any = None
        if inlined:
            try:
                key = (op, ins, tuple((k, _param_key(v)) for k, v in params.items()))
            except TypeError:
                key = None
        if key is not None:
            slot = self._same.get(key)
            if slot is not None:
                return slot
        bound = native = None
        if kernel is not op.reference and not whole and self._small_exact(op, ins, spec):
            if op.fast is not None:
                bound = op.fast(spec.dtype, tuple([self.specs[i].dtype for i in ins]), **params)
            elif isinstance(op.reference, np.ufunc) and not params:  # neg, abs: already lean
                bound = op.reference
            if bound is not None:  # a replay makes the backend's call, which costs less without Python
                native = functools.partial(kernel, **params) if params else kernel
        if kernel is op.reference:
            shaped = _SHAPED_FAST.get(op.name)
            if shaped is not None:
                bound = shaped(backend, spec, tuple([self.specs[i] for i in ins]), params)
            if bound is None and op.fast is not None:
                bound = op.fast(spec.dtype, tuple([self.specs[i].dtype for i in ins]), **params)
        if bound is None:
            bound = functools.partial(kernel, **params) if params else kernel
        out = len(self.specs)
        self.specs.append(spec)
        step = Step(op, bound, ins, out, spec, params)
        step.native = native
        self.steps.append(step)
        if key is not None:
            self._same[key] = out
        return out

    def _small_exact(self, op: Any, ins: tuple[int, ...], spec: Spec) -> bool:
        """Whether the backend's kernel is exact and the result and every operand have fewer elements
        than its `ufunc_below` (0 where it has none): the op's `fast` NumPy kernel then gives the same
        bits at a lower per-call cost."""
        small = getattr(self.backend, "ufunc_below", 0)
        if math.prod(spec.shape) >= small or any(math.prod(self.specs[i].shape) >= small for i in ins):
            return False
        return self.backend.exactness(op.name, spec.dtype.name).is_exact

    def _members(
        self, op: FusedGroup, params: tuple, ins: tuple[int, ...], which: Sequence[int] | None = None
    ) -> dict[int, int]:
        """A fused group the backend has no kernel for: each member (of `which`, in order; default all) a
        step of its own, running the kernel it would run unfused, checked and converted as every step
        is; the slots of their results."""
        done: dict[int, int] = {}
        for m in range(len(op.ops)) if which is None else which:
            member, refs, member_params = op.ops[m], op.wiring[m], dict(params[m])
            args = tuple([ins[k] if kind == "in" else done[k] for kind, k in refs])
            shape = member.shape_rule(*[self.specs[i].shape for i in args], **member_params)
            done[m] = self._call(member, member_params, args, Spec(shape, op.dtypes[m]))
        return done

    def _hoisted(
        self, fused: Any, params: tuple, ins: tuple[int, ...], spec: Spec, inlined: bool, whole: bool
    ) -> int | None:
        """A fused group the backend has no kernel for, where it has one for the group less the members
        computed from one-element values alone (Adam's bias corrections, whose pow the cpu backend does
        not fuse where the C library's is not NumPy's): those members as steps of their own, the rest a
        group reading their results; None where that is not so."""
        op = fused.group
        if not op.inputs:
            return None
        same: list[bool] = []  # computed from one-element values alone
        for refs in op.wiring:
            same.append(
                all(math.prod(self.specs[ins[k]].shape) == 1 if kind == "in" else same[k] for kind, k in refs)
            )
        rest = [m for m, one in enumerate(same) if not one]
        if len(rest) == len(same) or any(same[m] for m in op.roots):
            return None
        read = sorted({k for m in rest for kind, k in op.wiring[m] if kind == "m" and same[k]})
        shapes: dict[int, tuple] = {}
        for m in (m for m, one in enumerate(same) if one):
            args = [self.specs[ins[k]].shape if kind == "in" else shapes[k] for kind, k in op.wiring[m]]
            shapes[m] = op.ops[m].shape_rule(*args, **dict(params[m]))
        place = {m: ("m", j) for j, m in enumerate(rest)} | {
            m: ("in", len(ins) + j) for j, m in enumerate(read)
        }
        rest_op = FusedGroup(
            tuple(op.ops[m] for m in rest),
            tuple(tuple(place[k] if kind == "m" else (kind, k) for kind, k in op.wiring[m]) for m in rest),
            tuple(op.dtypes[m] for m in rest),
            (*op.inputs, *(Spec(shapes[m], op.dtypes[m]) for m in read)),
            tuple(place[m][1] for m in op.roots),
        ).op()
        if self.backend.native(rest_op, spec.dtype) is None:
            return None
        done = self._members(op, params, ins, [m for m, one in enumerate(same) if one])
        rest_params = {"params": tuple(params[m] for m in rest)}
        return self._call(rest_op, rest_params, (*ins, *(done[m] for m in read)), spec, inlined, whole)

    def _fold_known_steps(self) -> None:
        """Steps whose result the binding already fixes become constants: those with no inputs (a
        decomposition's `arange` or `full`; not a random op, whose seed stays visible) and `numel_of`
        (it reads its operand's shape alone, known here), each run once now and converted as the first
        run would; not where the result is returned or written back (the caller owns each result)."""
        returned = {*self.output_slots, *self.update_slots.values()}
        kept = []
        for step in self.steps:
            known = not step.ins or (step.op.name == "numel_of" and len(step.ins) == 1)
            if not known or step.out in returned or "seed" in step.params:
                kept.append(step)
                continue
            spec = self.specs[step.ins[0]] if step.ins else None
            args = [np.broadcast_to(np.zeros((), spec.dtype.np), spec.shape)] if spec is not None else []
            with np.errstate(all="ignore"):
                self.consts[step.out] = conform(step.op, step.kernel(*args), step.spec)
        self.steps = kept

    def _no_alias_out(self) -> None:
        """A step whose kernel may return an operand's array (`_SHAPED_FAST`) copies instead where that
        would make a result the same array as an argument, a captured tensor, a constant or another
        result: the caller owns each result."""
        shared = {*self.input_slots, *self.consts, *self.output_slots}
        for step in self.steps:
            found = _ALIASING.get(step.kernel)
            if found is not None and (step.out in shared or shared.intersection(step.ins[found[1]])):
                step.kernel = found[0]

    def _inplace_candidates(self) -> dict[int, int]:
        """Step index -> an input slot the step may write its result into, by the rules of the module
        docstring that need no run: a ufunc of one dtype, an input of the result's shape allocated by
        an earlier ufunc step, which nothing reads, views or returns afterwards."""
        steps = self.steps
        fresh = {step.out for step in steps if _ufunc_step(step)}  # arrays a ufunc allocated
        allocated = fresh | {step.out for step in steps if _writes_into(step)}  # new arrays, never views
        if not allocated:
            return {}
        end = len(steps)
        last: dict[int, int] = {}  # slot -> the last step reading it (end: returned)
        for k, step in enumerate(steps):
            for i in step.ins:
                last[i] = k
        for slot in (*self.output_slots, *self.update_slots.values()):
            last[slot] = end
        roots: dict[int, frozenset] = {}  # slot -> the allocations its array may be (a view of)
        for slot in (*self.input_slots, *self.consts):
            roots[slot] = frozenset((slot,))
        # allocation -> the last step reading any slot that may hold (a view of) it
        held_until: dict[int, int] = {slot: last.get(slot, -1) for slot in self.input_slots}
        candidates: dict[int, int] = {}
        for k, step in enumerate(steps):
            into = None
            if step.out in fresh and len(step.spec.shape):
                into = self._into(step, k, roots, held_until, last, fresh)
            if into is not None:
                candidates[k] = into
                roots[step.out] = roots[into]
            elif step.out in allocated:
                roots[step.out] = frozenset((step.out,))
            else:  # any other kernel's result may view its inputs
                roots[step.out] = frozenset((step.out,)).union(*[roots[i] for i in step.ins])
            read = last.get(step.out, -1)
            for r in roots[step.out]:
                if held_until.get(r, -1) < read:
                    held_until[r] = read
        candidates.update(self._update_targets(held_until))
        return candidates

    def _update_targets(self, held_until: dict[int, int]) -> dict[int, int]:
        """Step index -> the captured input slot it may write its result into: the result is the update
        of that tensor (its new value, which `compile` would copy into it), made by a step that writes
        element-wise into `out=` a result of the input's spec, and neither the input nor anything that
        may view it is read after that step (an optimizer's last read of a parameter or a moment)."""
        program = self.program
        captured = dict(
            zip([v.name for v in program.inputs[program.n_args :]], self.input_slots[program.n_args :])
        )
        made_by = {step.out: k for k, step in enumerate(self.steps)}
        outputs = set(self.output_slots)
        shared = collections.Counter(self.update_slots.values())
        targets: dict[int, int] = {}
        for name, u in self.update_slots.items():
            k, c = made_by.get(u), captured.get(name)
            if k is None or c is None or u in outputs or shared[u] != 1:
                continue
            step = self.steps[k]
            if step.spec != self.specs[c] or held_until.get(c, -1) > k:
                continue
            if _writes_into(step) or (
                _ufunc_step(step) and all(self.specs[i].dtype is step.spec.dtype for i in step.ins)
            ):
                targets[k] = c
        return targets

    def _into(self, step: Step, k: int, roots: dict, held_until: dict, last: dict, fresh: set) -> int | None:
        spec = step.spec
        specs = self.specs
        for i in step.ins:
            if specs[i].dtype is not spec.dtype:
                return None
        for i in step.ins:
            if specs[i].shape != spec.shape or len(roots[i]) != 1:
                continue
            (r,) = roots[i]
            if r not in fresh or held_until.get(r, -1) > k:
                continue  # not a ufunc's allocation, or read (itself or a view) after this step
            if all(j == i or r not in roots[j] for j in step.ins):  # read through no other view here
                return i
        return None

    def _merge_groups(self) -> list[tuple[tuple[int, ...], Any, Callable, tuple[int, ...]]]:
        """Groups of fused steps `(k1, ..., k)` that a run may make one kernel call at step k, each with
        the merged op, its kernel (params bound) and its input slots: step k reads the results of the
        earlier ones, fused steps of the same result shape whose results nothing else reads or returns
        (an optimizer's new moments, which the parameter's update reads: one pass reads the gradient
        and the old values, and writes all three). The merged kernels are made now, so that they are
        built with the plan's other fused kernels."""
        steps = self.steps
        readers: dict[int, set[int]] = collections.defaultdict(set)
        for k, step in enumerate(steps):
            for i in step.ins:
                readers[i].add(k)
        made_by = {step.out: k for k, step in enumerate(steps)}
        outputs = set(self.output_slots)
        roots: set[int] = set()
        groups = []
        for k, step in enumerate(steps):
            if not _fused_step(step):
                continue
            parts = sorted(
                {
                    made_by[i]
                    for i in step.ins
                    if i in made_by
                    and i not in outputs
                    and readers[i] == {k}
                    and made_by[i] not in roots
                    and _fused_step(steps[made_by[i]])
                    and steps[made_by[i]].spec.shape == step.spec.shape
                }
            )
            if not parts:
                continue
            group = [steps[j] for j in (*parts, k)]
            op, keys, params = merge(
                [(s.op, s.ins, s.params["params"]) for s in group], [s.out for s in group]
            )
            kernel = self.backend.native(op, step.spec.dtype)
            if kernel is None or not getattr(kernel, "writes_into", False):
                continue
            roots.add(k)
            groups.append(((*parts, k), op, functools.partial(kernel, params=params), keys))
        return groups

    def _schedule(self) -> list[Step]:
        """The calls of a run after the first: the steps, with each group of `_merge_groups` one merged
        call, where its steps need no conversion and no step between its first and last writes into an
        array (the merged call reads the earlier steps' inputs later than they did)."""
        steps = self.steps
        merged: dict[int, Step] = {}
        dropped: set[int] = set()
        for group, op, kernel, ins in self._groups if self.merge else ():
            first, last = group[0], group[-1]
            if any(steps[j].fix is not None for j in group) or any(
                steps[j].into is not None for j in range(first, last) if j not in group
            ):
                continue
            merged[last] = Merged(op, kernel, ins, [steps[j] for j in group])
            dropped.update(group[:-1])
        if not merged:
            return steps
        return [merged.get(k, step) for k, step in enumerate(steps) if k not in dropped]

    # running -----------------------------------------------------------------------------------
    @property
    def checked(self) -> bool:
        """Whether a run has checked every kernel's result (later runs do not)."""
        return self._loop is not None

    def run(self, arrays: Sequence[np.ndarray]) -> tuple[list[np.ndarray], dict[str, np.ndarray]]:
        """Outputs and updated captured tensors (by name) for input arrays in `program.inputs` order."""
        self.runs += 1
        if self._strides is not None and not self._inplace_holds(arrays):
            self._no_inplace()  # other layouts than the first run's, or inputs that share memory now
        replayed = self._replayed(arrays)
        if replayed is not None:
            if self._fn is None and self.runs >= self.generate_after:
                self._fn = self._generate()  # for the runs that cannot replay; `source` reads as ever
            return replayed
        if self._fn is not None:
            with np.errstate(all="ignore"):  # log(-1) is NaN by definition, not a warning
                outputs, updates = self._fn(*arrays)
            return list(outputs), dict(zip(self.update_names, updates))
        if self._loop is None:
            env = self._checked(arrays)
        else:
            env = self._run_loop(arrays)
            if self.runs >= self.generate_after:
                self._fn = self._generate()
        return [env[s] for s in self.output_slots], {n: env[s] for n, s in self.update_slots.items()}

    def _run_loop(self, arrays: Sequence[np.ndarray]) -> list[Any]:
        """Every slot's array after the unchecked loop's run on `arrays`."""
        env = self._template.copy()
        for s, a in zip(self.input_slots, arrays):
            env[s] = a
        return self._run_steps(env)

    def _run_steps(self, env: list[Any], first: int = 0) -> list[Any]:
        """`env` (every slot's array) after the unchecked loop's steps from `first` on."""
        with np.errstate(all="ignore"):
            for kernel, ins, out in self._loop[first:] if first else self._loop:
                if type(out) is tuple:  # a merged call's results
                    for slot, result in zip(out, kernel(*[env[i] for i in ins])):
                        env[slot] = result
                else:
                    env[out] = kernel(*[env[i] for i in ins])
        return env

    def _replayed(self, arrays: Sequence[np.ndarray]) -> Results | None:
        """The run as a replay of the plan's recorded calls (ir/replay.py), or None where it is not one:
        replay off or given up, too few runs yet, or a run it cannot take (it then records again, up to
        `RECORDINGS` times)."""
        replay = self._replay
        if replay is False:
            return None
        if replay is not None:
            if replay.usable(arrays):
                return replay.run(arrays)
            self._replay = replay = None
        if not self.replay or self._loop is None or self.runs <= self.replay_after:
            return None
        if self._recordings >= RECORDINGS:
            self._replay = False
            return None
        self._recordings += 1
        found, results = Replay.record(self, arrays)
        if results is None:
            return None
        self._replay = False if found is None else found
        return results

    def _checked(self, arrays: Sequence[np.ndarray]) -> list[Any]:
        """One run step by step, each result checked as `conform` does; then the unchecked loop."""
        if len(arrays) != len(self.input_slots):
            raise TypeError(f"the plan takes {len(self.input_slots)} arrays, got {len(arrays)}")
        env = self._template.copy()
        for s, a in zip(self.input_slots, arrays):
            if not isinstance(a, np.ndarray) or a.dtype != self.specs[s].dtype.np:
                raise TypeError(f"input slot {s}: expected a NumPy array of {self.specs[s]!r}")
            env[s] = a
        with np.errstate(all="ignore"):
            for step in self.steps:
                result = step.kernel(*[env[i] for i in step.ins])
                spec = step.spec
                want = spec.dtype.np
                if type(result) is not np.ndarray or result.dtype != want:
                    ok = isinstance(result, np.generic) and result.dtype == want
                    step.fix = "asarray" if ok else "conform"
                    result = conform(step.op, result, spec)  # raises on a wrong shape
                elif result.shape != spec.shape:
                    conform(step.op, result, spec)  # raises, naming the op
                env[step.out] = result
        if self.inplace:
            for k, into in self._candidates.items():
                step = self.steps[k]
                result, target = env[step.out], env[into]
                # a ufunc's result of no dimensions is a NumPy scalar ("asarray"); into `out=` it is
                # that array (an optimizer's step count)
                plain = step.fix is None or (step.fix == "asarray" and _ufunc_step(step))
                if plain and result.strides == target.strides and target.flags.writeable:
                    step.into = into
            if any(step.into is not None for step in self.steps):
                self._strides = [a.strides for a in arrays]
            position = {slot: i for i, slot in enumerate(self.input_slots)}
            self._written = [position[s.into] for s in self.steps if s.into in position]
            if self._written and not self._inplace_holds(arrays):
                self._no_inplace()
        self._start_loop()
        if self.runs >= self.generate_after:
            self._fn = self._generate()
        return env

    def _start_loop(self) -> None:
        """The calls of later runs (`_schedule`), and the loop that makes them."""
        self.calls = self._schedule()
        self._loop = [(_fixed(step), _args(step), _outs(step)) for step in self.calls]

    def _inplace_holds(self, arrays: Sequence[np.ndarray]) -> bool:
        """Whether a run on `arrays` may keep in place: the first run's strides, and no array written
        into (a captured tensor's) sharing memory with another input. The captured tensors' arrays are
        the same objects from run to run: what depends on them alone is kept while they are, and a
        run checks its arguments against it."""
        n = self.program.n_args
        captured = arrays[n:]
        known = self._captured_check
        if known is None or len(known[0]) != len(captured) or not all(map(operator.is_, known[0], captured)):
            same_strides = [a.strides for a in captured] == self._strides[n:]
            written = [i - n for i in self._written]
            roots = [id(root(a)) for a in captured]
            counts = collections.Counter(roots)
            apart = all(i >= 0 and counts[roots[i]] == 1 for i in written)
            written_roots = {roots[i] for i in written}
            known = self._captured_check = (list(captured), same_strides and apart, written_roots)
        if not known[1] or [a.strides for a in arrays[:n]] != self._strides[:n]:
            return False
        return all(id(root(a)) not in known[2] for a in arrays[:n])

    def _no_inplace(self) -> None:
        """Every step allocates its result again (and the generated function is made again)."""
        for step in self.steps:
            step.into = None
        self._strides = None
        self._written = []
        self._start_loop()
        self._fn = self.source = None
        self._replay = None

    @property
    def inplace_steps(self) -> list[Step]:
        """The steps that write their result into an input's array (decided by the first run)."""
        return [step for step in self.steps if step.into is not None]

    def _generate(self) -> Callable[..., Any]:
        """`run(x0, x1, ...)` as straight-line Python: one local per slot, deleted after its last use."""
        keep = set(self.output_slots) | set(self.update_slots.values()) | set(self.input_slots)
        last: dict[int, int] = {}
        for k, step in enumerate(self.calls):
            for i in _args(step):
                last[i] = k
        dead_after: dict[int, list[int]] = {}
        for slot, k in last.items():
            if slot not in keep and slot not in self.consts:
                dead_after.setdefault(k, []).append(slot)
        namespace: dict[str, Any] = {"asarray": np.asarray, "conform": conform}
        namespace.update({f"x{s}": a for s, a in self.consts.items()})
        lines = [f"def run({', '.join(f'x{s}' for s in self.input_slots)}):"]
        for k, step in enumerate(self.calls):
            namespace[f"k{k}"] = step.kernel
            if isinstance(step, Merged):
                into = ", out=(" + "".join("None, " if i is None else f"x{i}, " for i in step.intos) + ")"
            else:
                into = "" if step.into is None else f", out=x{step.into}"
            call = f"k{k}({', '.join(f'x{i}' for i in step.ins)}{into})"
            if step.fix == "asarray":
                call = f"asarray({call})"
            elif step.fix == "conform":
                namespace[f"op{k}"], namespace[f"spec{k}"] = step.op, step.spec
                call = f"conform(op{k}, {call}, spec{k})"
            outs = _outs(step)
            targets = ", ".join(f"x{o}" for o in outs) if isinstance(outs, tuple) else f"x{outs}"
            lines.append(f"    {targets} = {call}  # {step.op.name}")
            for out in outs if isinstance(outs, tuple) else (outs,):
                if out not in keep and out not in last:
                    dead_after.setdefault(k, []).append(out)
            if k in dead_after:
                lines.append(f"    del {', '.join(f'x{s}' for s in dead_after[k])}")
        outputs = "".join(f"x{s}, " for s in self.output_slots)
        updates = "".join(f"x{self.update_slots[n]}, " for n in self.update_names)
        lines.append(f"    return ({outputs}), ({updates})")
        self.source = "\n".join(lines) + "\n"
        exec(compile(self.source, f"<plan of {len(self.steps)} steps>", "exec"), namespace)
        return namespace["run"]


def _ufunc_step(step: Step) -> bool:
    """Whether the step calls a NumPy ufunc on its arrays alone (one result, allocated by the ufunc)."""
    kernel = step.kernel
    return isinstance(kernel, np.ufunc) and kernel.nout == 1 and kernel.nin == len(step.ins)


def _writes_into(step: Step) -> bool:
    """Whether the step's kernel allocates a new array for its result, or writes it into `out=` (an
    array of the result's spec, which may be one of its inputs): a fused kernel's."""
    kernel = step.kernel
    return getattr(getattr(kernel, "func", kernel), "writes_into", False) is True


def _fused_step(step: Step) -> bool:
    """Whether the step runs a fused group's own kernel (one that may write into `out=`)."""
    return step.op.is_fused and "params" in step.params and _writes_into(step)


def _args(step: Step) -> tuple[int, ...]:
    """The slots the loop passes to the step's kernel: its inputs, then the slot(s) it writes into."""
    if isinstance(step, Merged):
        return (*step.ins, *[i for i in step.intos if i is not None])
    return step.ins if step.into is None else (*step.ins, step.into)


def _outs(step: Step) -> Any:
    """The slot the step's result goes to; a merged call's, a tuple of them."""
    return step.outs if isinstance(step, Merged) else step.out


def _into(kernel: Callable) -> Callable:
    """The kernel (a ufunc, or one that `_writes_into`) on all its arguments but the last, into the last
    (as `out`)."""
    return lambda *arrays: kernel(*arrays[:-1], out=arrays[-1])


def recording_kernel(step: Step, fixed: Callable) -> Callable:
    """What a replay records for the step (ir/replay.py): the backend's kernel where the plan runs a
    leaner one on small operands (a replayed call costs less than the ufunc's Python), writing into
    the step's input where the step does and the kernel `takes_out`; else the loop's kernel `fixed`."""
    native = step.native
    if native is None or isinstance(step, Merged):
        return fixed
    if step.into is None:
        return native
    if getattr(getattr(native, "func", native), "takes_out", False):
        return _into(native)
    return fixed


def _fixed(step: Step) -> Callable:
    """The step's kernel with the conversion its first result needed, if any."""
    kernel, op, spec = step.kernel, step.op, step.spec
    if isinstance(step, Merged):
        n, intos = len(step.ins), step.intos

        def merged(*arrays: np.ndarray) -> Any:
            extra = iter(arrays[n:])
            return kernel(*arrays[:n], out=tuple([None if i is None else next(extra) for i in intos]))

        return merged
    if step.into is not None:
        return _into(kernel)
    if step.fix == "asarray":
        return lambda *arrays: np.asarray(kernel(*arrays))
    if step.fix == "conform":
        return lambda *arrays: conform(op, kernel(*arrays), spec)
    return kernel


def _select(c: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a if c else b


def _where_select(backend: Backend, out: Spec, specs: tuple[Spec, ...], params: dict) -> Callable | None:
    """`where` with a 0-d condition and both branches of the result's spec (an optimizer's first-step
    test): the chosen branch itself, the bits np.where would copy it to."""
    c, a, b = specs
    return _select if not c.shape and a == out and b == out else None


_RESHAPE_NO_COPY = np.lib.NumpyVersion(np.__version__) >= "2.1.0"  # np.reshape(..., copy=False)


def _merged(x: np.ndarray) -> np.ndarray:
    """A view of x with its adjacent axes merged where their strides allow (and size-1 axes dropped):
    a permuted array's few blocks."""
    shape: list[int] = []
    strides: list[int] = []
    for n, step in zip(x.shape, x.strides):
        if n == 1:
            continue
        if shape and strides[-1] == step * n:
            shape[-1] *= n
            strides[-1] = step
        else:
            shape.append(n)
            strides.append(step)
    return x.reshape(shape)  # a view: each merge keeps the elements' addresses


def _reshape_copying(backend: Backend, out: Spec, specs: tuple[Spec, ...], params: dict) -> Callable | None:
    """`reshape` that copies (a permuted view, say) through the backend's `contiguous` kernel, after
    merging the view's axes (its C copy takes up to 4 axes): the same elements, in a new C-contiguous
    array, as np.reshape's copy; a view where np.reshape gives one."""
    from ..registry import OPS

    contiguous = backend.native(OPS["contiguous"], out.dtype)
    if contiguous is None or not _RESHAPE_NO_COPY:
        return None
    shape = params["shape"]

    def reshape(x: np.ndarray) -> np.ndarray:
        if x.flags.c_contiguous:  # a view (the check costs less than copy=False's)
            return x.reshape(shape)
        try:
            return x.reshape(shape, copy=False)
        except ValueError:  # no view of x has this shape
            return contiguous(_merged(x)).reshape(shape)

    return reshape


# op name -> for the backend, the result's and operands' concrete specs and the params, a leaner
# equivalent of the op's reference (as `Op.fast`, but chosen by shape), or None
_SHAPED_FAST: dict[str, Callable[..., Callable | None]] = {
    "where": _where_select,
    "reshape": _reshape_copying,
}
# such a kernel -> one that copies (the same bits), and the operands it may return
_ALIASING: dict[Callable, tuple[Callable, slice]] = {_select: (np.where, slice(1, None))}


# composite ops without a kernel: their decompositions, traced for concrete operands ------------
_DECOMPOSITIONS: dict[Any, Program | None] = {}


def _decomposition(op: Any, params: dict, specs: tuple[Spec, ...], out: Spec) -> Program | None:
    """The decomposition of `op` for operands of these concrete specs, as a Program whose one output
    has the spec `out` (None when it cannot be traced, reads tensors it was not given, or gives
    another spec: the plan then runs it eagerly, as `decomposition_kernel`)."""
    try:
        key: Any = (op.name, specs, tuple((k, _param_key(v)) for k, v in sorted(params.items())))
    except TypeError:
        key = None  # a param this cache cannot tell apart reliably: trace again
    if key is not None and key in _DECOMPOSITIONS:
        return _DECOMPOSITIONS[key]
    program = Program()
    args = [Tensor(s, program.add_input(s, f"a{i}")) for i, s in enumerate(specs)]
    program.n_args = len(args)
    mode = TraceMode(program)
    try:
        with modes.using(mode), no_grad():
            result = op.decompose(*args, **params)
        program.outputs = [mode.value_of(result)] if isinstance(result, Tensor) else []
    except Exception:  # a decomposition that only runs eagerly: the plan runs it so, per call
        program.outputs = []
    ok = not mode.captured and program.outputs and program.outputs[0].spec == out
    program = program if ok else None
    if key is not None:
        if len(_DECOMPOSITIONS) > 4096:
            _DECOMPOSITIONS.clear()
        _DECOMPOSITIONS[key] = program
    return program


def _param_key(value: Any) -> Any:
    """A key that tells apart every two params a decomposition could treat differently (0.0 and
    -0.0, 1 and 1.0 and True); TypeError for a kind of value it does not know."""
    if isinstance(value, float):
        return (float, value.hex())
    if value is None or isinstance(value, bool | int | str):
        return (type(value), value)
    if isinstance(value, tuple):
        return (tuple, tuple(_param_key(v) for v in value))
    if isinstance(value, DType):
        return (DType, value.name)
    raise TypeError(f"no cache key for {type(value).__name__}")

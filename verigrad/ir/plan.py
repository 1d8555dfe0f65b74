"""A `Plan` is a Program bound to concrete sizes and a backend: a straight line of kernel calls.

Building it resolves every symbol (from the arguments' shapes) and lowers the program for the backend
(passes/lower.py: decompositions inlined, fused groups split where the backend runs them better so),
then binds a kernel to each lowered instruction (kernel_choice.py) and a slot to each value. Steps the
binding fixes (no inputs, such as an inlined decomposition's `arange`, or `numel_of`) run once then and
become constants. Which steps write their result into an input's array is the memory plan's decision
(passes/memplan.py `calls_inplace`); `Plan.inplace = False` (on the class or a plan, before its first
run) turns it off.

The first run checks every kernel's result against its instruction's spec, as eager mode's `conform`
does: a result of the wrong shape is an error; one of another dtype (or a NumPy scalar) is converted,
and that instruction keeps the conversion. It also checks that each in-place step's result, allocated
this once, has its input's strides (else the step allocates), that no step the memory plan took to
allocate its result (any op but the views and `where`) gave an operand's memory (else no step writes
in place), and keeps those strides: a later run
with other strides, or whose arguments share memory with a captured tensor written into, turns in
place off. Later runs call the kernels directly, in a loop over the steps; a run (the first too) drops
each result after its last reader, as eager mode's arrays go (a run that held every result to its end
held a training step's whole memory, and each new array was cold in the caches). Once a plan has run
`generate_after` times, it becomes a Python function generated for it, one line per kernel call
(`print(plan.source)`), which saves the loop's overhead (a few tenths of a microsecond per call) at a
one-time cost of compiling that source (tens of microseconds per line).

On a backend that can record its kernel calls (the cpu backend's vg_call), a plan run more than
`replay_after` times records one run's calls and replays them from then on (ir/replay.py): each step
that made only C calls is one of them, without its Python; not where its fixed buffers, every result
held from run to run, would hold far more than a run's peak or the captured tensors (`_replay_fits`: a
training step's large activations and gradients, whose calls' Python costs little beside them);
`Plan.replay = False` (or
`VERIGRAD_REPLAY=0`) turns it off.

Merged calls: fused steps whose results only one later fused step of their shape reads (an optimizer's
new moments, which the parameter's update reads) run, from the second run on, as one call of a kernel
the backend makes for the group of groups (passes/fuse.py `merge`): one pass reads the gradient and
the old values and writes every result, each into the array its step would have written. They merge
only where no step between them writes into an array (the merged call reads the earlier steps' inputs
later than they did). `Plan.merge = False` turns it off.

Threads: a plan runs one call at a time (`run` holds the plan's `lock`; about 0.1 us). Its first runs decide
in place, merging, the generated function and the recording, and a replay writes the plan's fixed
buffers: two threads calling one compiled function with the same binding take turns rather than each
keeping buffers of its own (a plan's buffers can be a model's activations). Plans of other bindings or
functions run at the same time.
"""

from __future__ import annotations

import collections
import functools
import operator
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .. import settings
from ..backends import Backend
from ..backends.memory import COLLAPSE_AT, collapse_heap, retain_freed
from ..eager import conform
from ..errors import DTypeError, ShapeError
from ..shapes import Dim, Spec, evaluate, multiple_of, shape_text
from . import kernel_choice
from .kernel_choice import ALIASING
from .memory_plan import held_bytes, nbytes
from .passes import lower, memplan
from .passes.fuse import merge, mergeable
from .program import Program
from .replay import VIEW_OPS, Replay, Results, root
from .steps import (
    Merged,
    Step,
    call_args,
    call_outs,
    fixed_kernel,
    is_fused_step,
    is_ufunc_step,
    takes_out_step,
    writes_into,
)

# ops whose kernel may give (a view of) an operand's memory: the views, and `where` (a branch itself)
MAY_VIEW = VIEW_OPS | {"where"}
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


def _dead_after(
    calls: Sequence[Step], reads: Sequence[tuple[int, ...]], kept: set[int]
) -> list[tuple[int, ...]]:
    """For each call, the slots no later call reads (nor the run returns): its operands read for the
    last time, and its results nobody reads. A run drops them there, so that an array goes when eager
    mode's would (a run holding every step's result to its end held the whole step's memory)."""
    last: dict[int, int] = {}
    for k, (call, ins) in enumerate(zip(calls, reads)):
        outs = call_outs(call)
        for slot in (*ins, *(outs if type(outs) is tuple else (outs,))):
            last[slot] = k
    dead: list[list[int]] = [[] for _ in calls]
    for slot, k in last.items():
        if slot not in kept:
            dead[k].append(slot)
    return [tuple(d) for d in dead]


def _plain_symbol(d: Any) -> str | None:
    if isinstance(d, Dim) and len(d.terms) == 1:
        monomial, coeff = d.terms[0]
        if coeff == 1 and len(monomial) == 1 and monomial[0][1] == 1:
            return monomial[0][0]
    return None


class Plan:
    """The program's instructions as kernel calls over numbered slots, for one binding of the symbols."""

    def __init__(self, program: Program, values: dict[str, int], backend: Backend) -> None:
        retain_freed()  # a run allocates what the last one freed: reuse its pages (backends/memory.py)
        self.program = program
        self.values = dict(values)
        self.backend = backend
        self.specs: list[Spec] = []  # concrete spec of each slot
        # the seed of each of the program's random draws in this run (set by the caller before a run;
        # the draws' numbers until then)
        self.seeds: list[int] = list(range(len(program.draws)))
        self.consts: dict[int, np.ndarray] = {}
        self.steps: list[Step] = []
        self.input_slots, self.output_slots, self.update_slots = self._bind_kernels()
        self.update_names = list(program.updates)
        self._fold_known_steps()
        self._no_alias_out()
        self.instructions = len(self.steps)
        self._template: list[Any] = [None] * len(self.specs)  # the slots before a run: constants only
        for slot, value in self.consts.items():
            self._template[slot] = value
        self.runs = 0
        # steps taken to allocate their result (no op that may view): the first run checks it
        self._allocating = {
            k
            for k, step in enumerate(self.steps)
            if step.op.name not in MAY_VIEW and step.kernel not in ALIASING
        }
        self._candidates = self._inplace_candidates()  # step index -> the input slot it may write into
        self._groups = self._merge_groups()  # fused steps a run after the first may make one call
        self._strides: list[tuple] | None = None  # the inputs' strides on the first run, while in place
        self._written: list[int] = []  # the positions of the inputs steps write into (updates)
        self._captured_check: tuple | None = None  # see `_inplace_holds`
        self._loop: list[tuple[Callable, tuple[int, ...], Any]] | None = None  # after the checked run
        self._dead: list[tuple[int, ...]] = []  # the slots each call of the loop reads last
        self.calls: list[Step] = self.steps  # what later runs call: the steps, some merged
        self._fn: Callable[..., Any] | None = None  # generated after `generate_after` runs
        self._replay: Replay | bool | None = None  # the recorded calls; False: never (ir/replay.py)
        self._recordings = 0
        self.source: str | None = None  # its text
        self.lock = threading.Lock()  # one run at a time (see the module docstring)

    # runs before the plan becomes a generated function: compiling its source costs about as much as
    # the loop's overhead over some 60 runs, so a plan run this often is likely to be run far more
    generate_after = 64

    # runs before a plan records its calls and replays them (ir/replay.py); `replay = False` turns it off
    replay_after = 8
    replay = settings.env_flag("VERIGRAD_REPLAY", True)

    # bytes a replay's fixed buffers may hold beyond a run's peak (`_replay_fits`; or a quarter of it)
    replay_extra = 16 << 20

    # whether the first run may turn on in place for the steps the memory plan allows
    inplace = True

    # whether later runs make one call of each group of `_merge_groups`
    merge = True

    # building ----------------------------------------------------------------------------------
    def _bind_kernels(self) -> tuple[list[int], list[int], dict[str, int]]:
        """The program lowered for the backend and the binding (passes/lower.py); a slot for each value
        of it (the inputs first) and a step for each instruction but constants, its kernel chosen for
        the backend (kernel_choice.py). Fused results a merged call may compute (`whole`) keep the
        backend's kernel however small. Returns the slots of the inputs, outputs and updates."""
        whole = mergeable(self.program)
        natives: dict[int, Any] = {}  # the backend's kernels lowering found, by value id
        lowered = lower.run(self.program, self.values, self.backend, whole, natives)
        specs = self.specs
        slots: dict[int, int] = {}
        for v in lowered.inputs:
            slots[v.id] = len(specs)
            specs.append(v.spec)
        for instr in lowered.instrs:
            slot = slots[instr.out.id] = len(specs)
            specs.append(instr.out.spec)
            if isinstance(instr.op, str):  # "const"
                self.consts[slot] = instr.params["value"]
                continue
            ins = tuple([slots[a.id] for a in instr.args])
            spec, params = instr.out.spec, instr.params
            operands = tuple([specs[i] for i in ins])
            found = natives.get(instr.out.id)
            kernel, native = kernel_choice.choose(
                self.backend,
                instr.op,
                params,
                spec,
                operands,
                instr.out.id in whole,
                found,
                self.seeds if self.program.draws else None,
            )
            step = Step(instr.op, kernel, ins, slot, spec, params)
            step.native = native
            self.steps.append(step)
        updates = {name: slots[v.id] for name, v in lowered.updates.items()}
        return [slots[v.id] for v in lowered.inputs], [slots[v.id] for v in lowered.outputs], updates

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
        """A step whose kernel may return an operand's array (kernel_choice.py) copies instead where that
        would make a result the same array as an argument, a captured tensor, a constant or another
        result: the caller owns each result."""
        shared = {*self.input_slots, *self.consts, *self.output_slots}
        for step in self.steps:
            found = ALIASING.get(step.kernel)
            if found is not None and (step.out in shared or shared.intersection(step.ins[found[1]])):
                step.kernel = found[0]

    def _inplace_candidates(self) -> dict[int, int]:
        """Step index -> the input slot the memory plan lets the step write its result into."""
        steps, program = self.steps, self.program
        n = program.n_args
        return memplan.calls_inplace(
            steps,
            self.specs,
            inputs=self.input_slots,
            consts=list(self.consts),
            outputs=self.output_slots,
            captured=dict(zip([v.name for v in program.inputs[n:]], self.input_slots[n:])),
            updates=self.update_slots,
            ufuncs={k for k, step in enumerate(steps) if is_ufunc_step(step) or takes_out_step(step)},
            writers={k for k, step in enumerate(steps) if writes_into(step)},
            allocating=self._allocating,
        )

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
            if not is_fused_step(step):
                continue
            parts = sorted(
                {
                    made_by[i]
                    for i in step.ins
                    if i in made_by
                    and i not in outputs
                    and readers[i] == {k}
                    and made_by[i] not in roots
                    and is_fused_step(steps[made_by[i]])
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
        """Outputs and updated captured tensors (by name) for input arrays in `program.inputs` order; a
        thread waits while another runs the plan."""
        with self.lock:
            return self.run_locked(arrays)

    def run_locked(self, arrays: Sequence[np.ndarray]) -> tuple[list[np.ndarray], dict[str, np.ndarray]]:
        """`run`, the caller holding `lock` (a compiled call holds it until it has written the updates
        back, so that the next run reads them)."""
        self.runs += 1
        if self.runs == COLLAPSE_AT:  # the heap now holds a run: into huge pages (backends/memory.py)
            collapse_heap()
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
        loop, dead = self._loop, self._dead
        with np.errstate(all="ignore"):
            for k in range(first, len(loop)):
                kernel, ins, out = loop[k]
                if type(out) is tuple:  # a merged call's results
                    for slot, result in zip(out, kernel(*[env[i] for i in ins])):
                        env[slot] = result
                else:
                    env[out] = kernel(*[env[i] for i in ins])
                for slot in dead[k]:  # its last reader: the array goes as it would in eager mode
                    env[slot] = None
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
        if self._recordings >= RECORDINGS or not self._replay_fits():
            self._replay = False
            return None
        self._recordings += 1
        found, results = Replay.record(self, arrays)
        if results is None:
            return None
        self._replay = False if found is None else found
        return results

    def _replay_fits(self) -> bool:
        """Whether a replay's fixed buffers (every result a call allocates, held from run to run) would
        hold at most `replay_extra` bytes more than a run of the loop holds at its peak, or a quarter of
        that peak, or half the memory of the captured tensors the step reads anyway (a model's weights).
        A replay saves each call's Python (microseconds): worth it for a decode step's many small calls
        (SmolLM2's at batch 32: 34 MiB more than its run's 6 MiB peak, its weights 121 MiB), not for a
        training step's large ones (the small GPT's: 100 MiB more than its run's 44 MiB, 15 MiB of
        parameters and moments), whose memory it would hold twice over, each result in memory of its
        own, cold in the caches."""
        peak, total = held_bytes(self.calls, self._dead, self.specs)
        n = self.program.n_args
        captured = sum(nbytes(self.specs[slot]) for slot in self.input_slots[n:])
        return total - peak <= max(self.replay_extra, peak // 4, captured // 2)

    def _checked(self, arrays: Sequence[np.ndarray]) -> list[Any]:
        """One run step by step, each result checked as `conform` does; then the unchecked loop."""
        if len(arrays) != len(self.input_slots):
            raise TypeError(f"the plan takes {len(self.input_slots)} arrays, got {len(arrays)}")
        env = self._template.copy()
        for s, a in zip(self.input_slots, arrays):
            if not isinstance(a, np.ndarray) or a.dtype != self.specs[s].dtype.np:
                raise TypeError(f"input slot {s}: expected a NumPy array of {self.specs[s]!r}")
            env[s] = a
        candidates = self._candidates if self.inplace else {}
        allocating = self._allocating if candidates else ()
        viewed = False  # whether a step taken to allocate gave (a view of) an operand's memory
        dead = _dead_after(self.steps, [step.ins for step in self.steps], self._kept())
        with np.errstate(all="ignore"):
            for k, step in enumerate(self.steps):
                result = step.kernel(*[env[i] for i in step.ins])
                if k in allocating and isinstance(result, np.ndarray):
                    mine = id(root(result))
                    viewed = viewed or any(mine == id(root(env[i])) for i in step.ins)
                spec = step.spec
                want = spec.dtype.np
                if type(result) is not np.ndarray or result.dtype != want:
                    ok = isinstance(result, np.generic) and result.dtype == want
                    step.fix = "asarray" if ok else "conform"
                    result = conform(step.op, result, spec)  # raises on a wrong shape
                elif result.shape != spec.shape:
                    conform(step.op, result, spec)  # raises, naming the op
                env[step.out] = result
                into = candidates.get(k)
                if into is not None:  # checked now: the input may go at this step
                    target = env[into]
                    # a ufunc's result of no dimensions is a NumPy scalar ("asarray"); into `out=` it is
                    # that array (an optimizer's step count)
                    plain = step.fix is None or (step.fix == "asarray" and is_ufunc_step(step))
                    if plain and result.strides == target.strides and target.flags.writeable:
                        step.into = into
                for slot in dead[k]:
                    env[slot] = None
        if viewed:  # the memory plan's premise failed: no step writes in place
            for step in self.steps:
                step.into = None
        if self.inplace:
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
        self._loop = [(fixed_kernel(step), call_args(step), call_outs(step)) for step in self.calls]
        self._dead = _dead_after(self.calls, [ins for _, ins, _ in self._loop], self._kept())

    def _kept(self) -> set[int]:
        """The slots a run keeps to its end: its inputs, outputs and updates (and the constants)."""
        return {*self.input_slots, *self.output_slots, *self.update_slots.values(), *self.consts}

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
            for i in call_args(step):
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
            outs = call_outs(step)
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

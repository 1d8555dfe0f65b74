"""A plan's kernel calls made again without Python between them: the backend records them once on a
tape (the cpu backend's vg_call, backends/cpu/fastcall.py), and later runs replay the tape.

A recorded call points into the arrays it was given: the arguments, the captured tensors' arrays, and
every array a kernel allocated (results, scratch); kernels hand vg_call the objects themselves, not
addresses made in Python (`Library.ptr`, `Library.ref`). The tape holds all of them, so the allocated
ones become the plan's fixed buffers, which each replay writes again; the pointers into the arguments
are moved to each run's own arguments (`Tape.rebind`). So a run replays only

- with arguments of the recording run's layouts, and the same captured arrays (the same objects:
  the updates are written into them);
- under the settings it was recorded with (`Backend.settings`: threads, chunk size, ...);
- and it returns copies of the outputs, which the next run overwrites.

Steps are of three kinds, decided by the recording run: a step whose calls all went onto the tape, and
whose results they made, is replayed (not one whose C call said "not done" and which then computed in
Python: replaying the call alone would repeat the recording's result); a movement op that made none and
whose result views its operand needs nothing (its view is of the same buffers; a view of an argument is
made again for each run's argument); the rest (a NumPy ufunc, a kernel that called C through ctypes) run
in Python, each result copied into the buffer the recording run gave it.

Kernels are pure functions of their operands (the op contract: the only writes into an operand are the
plan's own, in place, into a step's result). A kernel could still compute in Python, or pass C a value
read from its operands: a replay would then repeat a stale result. So the run after the recording
(`_check`) runs the plan in Python too, puts the captured arrays it writes back, replays step by step,
and compares each step's results with Python's, bit for bit: the first step that differs runs in
Python from then on, and the next run checks again (at most `CHECKS` runs, then the plan stops
replaying). A call whose result (a kernel's "done" flag) is not the one recorded stops the replay
there: that step and the rest run in Python, into new arrays.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import itertools
import operator
import threading
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..backends.threads import env_count
from .steps import recording_kernel

CHECKS = 4  # runs that may each find a step to take out of the replay, at most


def budget() -> int:
    """The bytes the replays of all plans may hold in their buffers: `VERIGRAD_REPLAY_MIB` MiB (512 unless
    set; 0 keeps the latest alone); past it, the least recently replayed plans let theirs go (a model
    decoding at many cache widths has a plan per width)."""
    mib = env_count("VERIGRAD_REPLAY_MIB", least=0)
    return (512 if mib is None else mib) << 20


BUDGET = budget()
# one recording at a time in the process: vg_call keeps one tape, and a second thread starting to record
# would take the first's calls off its tape
_RECORDING = threading.Lock()
REPLAY, VIEW, PYTHON = "replay", "view", "python"
VIEW_OPS = frozenset({"reshape", "permute", "broadcast_to", "slice", "cast", "contiguous"})  # may view

Results = tuple[list[np.ndarray], dict[str, np.ndarray]]


class Replay:
    """The recording of one plan's steps (`record`), checked (`_check`) and replayed (`run`); `plan` is
    the Plan (ir/plan.py) it was recorded from."""

    def __init__(self, plan: Any, tape: Any, arrays: Sequence[np.ndarray]) -> None:
        n = plan.program.n_args
        self.plan, self.tape = plan, tape
        self.settings = plan.backend.settings()
        self.layouts = [(a.strides, a.flags.aligned) for a in arrays[:n]]
        self.captured = list(arrays[n:])
        self.kinds: list[str] = []
        self.marks: list[tuple[int, int]] = []  # each step's records [start, stop) on the tape
        self.env: list[Any] = []  # every slot's array after the recording run: the fixed buffers
        self.actions: list[tuple[int, int]] = []
        self.outputs: list[tuple[int, bool]] = []  # each output's slot, and whether it is returned as is
        self.updates: dict[str, np.ndarray] = {}
        self.argument_views: list[int] = []  # VIEW steps of an argument (made again for each run's)
        self.argument_slots: list[int] = []  # the slots of the arguments and of those views
        self.checks = 0
        self.checked = False
        self.bytes = 0  # what its buffers hold (`_held_bytes`)
        self.lock = threading.Lock()  # one run at a time writes the fixed buffers

    # recording ------------------------------------------------------------------------------------
    @classmethod
    def record(cls, plan: Any, arrays: Sequence[np.ndarray]) -> tuple[Replay | None, Results | None]:
        """A run of the plan made while the backend records its calls (its outputs and updates, as
        `Plan.run` gives them), and the Replay of them (None where it cannot replay); (None, None),
        with nothing run, where the backend has no tape or the arguments' memory is not apart."""
        n = plan.program.n_args
        tape = plan.backend.tape()
        spans = _spans(arrays[:n])
        if tape is None or spans is None:
            return None, None
        self = cls(plan, tape, arrays)
        env = plan._template.copy()
        for slot, a in zip(plan.input_slots, arrays):
            env[slot] = a
        with _RECORDING, plan.backend.recording(tape), np.errstate(all="ignore"):
            for step, (kernel, ins, out) in zip(plan.calls, plan._loop):
                start, foreign, held = len(tape), tape.foreign, len(tape.held)
                args = [env[i] for i in ins]
                slots, results = _pairs(out, recording_kernel(step, kernel)(*args))
                for slot, r in zip(slots, results):
                    env[slot] = r
                self.marks.append((start, len(tape)))
                written = tape.held[held:] if len(tape) > start else []
                self.kinds.append(self._kind(start, foreign, step, args, results, written))
        self.env = env
        tape.inputs(spans)
        argument_roots = {id(root(a)) for a in arrays[:n]}
        # each run's arguments are pointed at anew: the recording's need not stay (a model's old cache)
        tape.held = [_without(h, argument_roots) for h in tape.held]
        self.argument_views = [
            k
            for k, kind in enumerate(self.kinds)
            if kind == VIEW and any(id(root(env[s])) in argument_roots for s in self._outs(k))
        ]
        views = [slot for k in self.argument_views for slot in self._outs(k)]
        self.argument_slots = [*plan.input_slots[:n], *views]
        given = {id(root(a)) for a in arrays}
        self.outputs = [(s, id(root(env[s])) in given) for s in plan.output_slots]
        self.updates = {name: env[s] for name, s in plan.update_slots.items()}
        results = self._results(env)
        captured = {id(a) for a in self.captured}
        if (
            not all(id(env[s]) in captured for s in plan.update_slots.values())
            or self._gives_caller_memory(given)
            or not self._worth()
        ):
            return None, results  # nothing fixed to replay into, or mostly Python
        self._schedule()
        self.bytes = _held_bytes(tape.held, given)
        self._release()
        _live.add(self)
        return self, results

    def _gives_caller_memory(self, given: set[int]) -> bool:
        """Whether a step other than a view or one writing in place gave an argument's or a captured
        array's memory as its result (a `where` on a 0-d condition gives a branch itself): its buffer
        would be the caller's, which later runs must not write."""
        calls = self.plan.calls
        return any(
            kind != VIEW
            and not _written_inputs(calls[k])
            and any(id(root(self.env[s])) in given for s in self._outs(k))
            for k, kind in enumerate(self.kinds)
        )

    def _worth(self) -> bool:
        """Whether replaying saves time: a replayed step saves its Python call (a few microseconds), a
        step left to Python costs a little more than in the generated function (its loop, the copy
        into its buffer); at least as many replayed steps as Python ones."""
        return self.kinds.count(REPLAY) >= self.kinds.count(PYTHON)

    def _kind(self, start: int, foreign: int, step: Any, args: list, results: tuple, written: list) -> str:
        """REPLAY, VIEW or PYTHON for a step of the recording run (see the module docstring); `written`:
        the objects the step's recorded calls hold (the arrays they read and wrote)."""
        tape = self.tape
        stop = len(tape)
        into = bool(_written_inputs(step))
        if tape.foreign != foreign:
            return PYTHON
        if stop == start:
            roots = {id(root(a)) for a in args if isinstance(a, np.ndarray)}
            views = all(isinstance(r, np.ndarray) and id(root(r)) in roots for r in results)
            return VIEW if views and not into and step.op.name in VIEW_OPS else PYTHON
        # a step that writes into an input and may stop midway could not be redone in Python
        if into and tape.checked(start, stop):
            return PYTHON
        # a result no recorded call made (a kernel whose C call said "not done" and which then computed
        # in Python, as a sum's signed zero or a NaN loss makes it): replaying the call alone would
        # leave the recording's stale result
        made = {id(root(a)) for a in _arrays(written)}
        return REPLAY if all(id(root(r)) in made for r in results if isinstance(r, np.ndarray)) else PYTHON

    def _schedule(self) -> None:
        """The replay as actions in order: (first record, last record + 1) for each run of replayed
        steps with only views between them, (step, -1) for each step left to Python."""
        actions: list[tuple[int, int]] = []
        open_run = False
        for k, kind in enumerate(self.kinds):
            if kind == PYTHON:
                actions.append((k, -1))
                open_run = False
            elif kind == REPLAY:
                start, stop = self.marks[k]
                if open_run:
                    actions[-1] = (actions[-1][0], stop)
                else:
                    actions.append((start, stop))
                open_run = True
        self.actions = actions
        # NumPy's error state (1.4 us to set) matters only to the steps left to Python
        python = any(stop < 0 for _, stop in actions)
        self.quiet = functools.partial(np.errstate, all="ignore") if python else contextlib.nullcontext

    # running --------------------------------------------------------------------------------------
    def usable(self, arrays: Sequence[np.ndarray]) -> bool:
        """Whether this run may replay: arguments of the recorded layouts, the same captured arrays,
        the same settings."""
        n = len(self.layouts)
        return (
            len(arrays) == n + len(self.captured)
            and all(map(operator.is_, self.captured, arrays[n:]))
            and [(a.strides, a.flags.aligned) for a in arrays[:n]] == self.layouts
            and self.plan.backend.settings() == self.settings
        )

    def run(self, arrays: Sequence[np.ndarray]) -> Results | None:
        """The plan's outputs and updates for `arrays` (see `usable`), replayed once checked; None while
        another thread replays (the caller then runs the plan in Python)."""
        if not self.lock.acquire(blocking=False):
            return None
        try:
            _live.touch(self)
            return self._check(arrays) if not self.checked else self._results(self._replay(arrays))
        finally:
            self._release()
            self.lock.release()

    def _release(self) -> None:
        """The run's arguments (and views of them) out of the fixed buffers' slots: the caller's
        arrays are not kept past the run."""
        env = self.env
        for slot in self.argument_slots:
            env[slot] = None

    def _bind(self, arrays: Sequence[np.ndarray]) -> list[Any]:
        """The fixed buffers, with this run's arguments (and the views of them) in their slots, and the
        tape's pointers into the arguments moved to them."""
        plan, env = self.plan, self.env
        n = len(self.layouts)
        self.tape.rebind(tuple(arrays[:n]))
        for slot, a in zip(plan.input_slots[:n], arrays):
            env[slot] = a
        loop = plan._loop
        for k in self.argument_views:
            kernel, ins, out = loop[k]
            env[out] = kernel(*[env[i] for i in ins])
        return env

    def _replay(self, arrays: Sequence[np.ndarray]) -> list[Any]:
        env = self._bind(arrays)
        run, loop = self.tape.run, self.plan._loop
        with self.quiet():
            for start, stop in self.actions:
                if stop >= 0:
                    stopped = run(start, stop)
                    if stopped >= 0:
                        return self._finish(self._step_of(stopped))
                    continue
                kernel, ins, out = loop[start]
                result = kernel(*[env[i] for i in ins])
                if type(out) is tuple:
                    for slot, r in zip(out, result):
                        _into(env[slot], r)
                else:
                    _into(env[out], result)
        return env

    def _step_of(self, record: int) -> int:
        """The step that made the tape's record `record`."""
        return next(k for k, (start, stop) in enumerate(self.marks) if start <= record < stop)

    def _finish(self, k: int) -> list[Any]:
        """Steps k... run in Python, into new arrays (a recorded call did not return what it did)."""
        return self.plan._run_steps(self.env.copy(), k)

    def _results(self, env: list[Any]) -> Results:
        """The outputs (copies of the fixed buffers; the arguments, captured arrays and views of them
        as they are) and the updates (the captured arrays)."""
        outputs = [env[s] if keep else np.array(env[s]) for s, keep in self.outputs]
        return outputs, dict(self.updates)

    def _check(self, arrays: Sequence[np.ndarray]) -> Results:
        """The run in Python, each step followed by its replay from the same state (the captured arrays
        it wrote in place put back first) and a comparison of their results, bit for bit; the first
        step that differs runs in Python from then on. The Python run's results are the ones kept."""
        plan, loop = self.plan, self.plan._loop
        captured = {id(a) for a in self.captured}
        env = plan._template.copy()
        for slot, a in zip(plan.input_slots, arrays):
            env[slot] = a
        fixed = self._bind(arrays)
        differs, complete = None, True
        with np.errstate(all="ignore"):
            for k, (kernel, ins, out) in enumerate(loop):
                targets = [env[i] for i in _written_inputs(plan.calls[k]) if id(env[i]) in captured]
                before = [t.copy() for t in targets]
                slots, results = _pairs(out, kernel(*[env[i] for i in ins]))
                for slot, r in zip(slots, results):
                    env[slot] = r
                if differs is not None or not complete:
                    continue  # the rest of the run in Python alone
                python = {id(t): t.copy() for t in targets}  # Python's values of what it wrote in place
                for t, b in zip(targets, before):
                    np.copyto(t, b)
                if self.kinds[k] == REPLAY and self.tape.run(*self.marks[k]) >= 0:
                    complete = False  # a call returned another result: this run cannot tell
                elif self.kinds[k] == PYTHON:
                    for slot, r in zip(*_pairs(out, kernel(*[fixed[i] for i in ins]))):
                        _into(fixed[slot], r)
                if complete and any(not _same(python.get(id(env[s]), env[s]), fixed[s]) for s in slots):
                    differs = k
                for t in targets:
                    np.copyto(t, python[id(t)])
        self.checks += 1
        if differs is not None:
            self.kinds[differs] = PYTHON
            self._schedule()
        self.checked = complete and differs is None
        if not self._worth() or (not self.checked and self.checks >= CHECKS):
            plan._replay = False
        return [env[s] for s in plan.output_slots], {name: env[s] for name, s in plan.update_slots.items()}

    def _outs(self, k: int | None = None) -> list[int]:
        """The slots step k writes (every step's for None)."""
        loop = self.plan._loop
        outs = [loop[k][2]] if k is not None else [out for _, _, out in loop]
        return [s for out in outs for s in (out if type(out) is tuple else (out,))]


def _spans(arrays: Sequence[np.ndarray]) -> tuple[tuple[int, int], ...] | None:
    """Each array's memory as (data pointer, bytes); None where a stride is negative or two overlap
    (a pointer into them would not say which argument it is into)."""
    spans = []
    for a in arrays:
        if any(s < 0 for s in a.strides):
            return None
        size = 0 if a.size == 0 else sum((d - 1) * s for d, s in zip(a.shape, a.strides)) + a.itemsize
        spans.append((a.__array_interface__["data"][0], size))
    ordered = sorted(s for s in spans if s[1])
    if any(lo + size > next_lo for (lo, size), (next_lo, _) in itertools.pairwise(ordered)):
        return None
    return tuple(spans)


def _without(held: Any, roots: set[int]) -> Any:
    """A held argument of a recorded call, without the arrays whose memory is one of `roots` (None in
    their place; a tuple of arrays filtered the same way)."""
    if isinstance(held, np.ndarray):
        return None if id(root(held)) in roots else held
    if isinstance(held, tuple):
        return tuple([_without(item, roots) for item in held])
    return held


def _arrays(held: list) -> list[np.ndarray]:
    """The arrays among a recorded call's held arguments (inside tuples too)."""
    found = []
    for h in held:
        if isinstance(h, np.ndarray):
            found.append(h)
        elif isinstance(h, tuple):
            found.extend(_arrays(list(h)))
    return found


def _written_inputs(step: Any) -> list[int]:
    """The input slots whose arrays the step writes its result (a merged call: its results) into."""
    return [i for i in getattr(step, "intos", None) or (step.into,) if i is not None]


def _pairs(out: Any, result: Any) -> tuple[tuple, tuple]:
    """A step's slots and results (a merged call has several)."""
    return (out, result) if type(out) is tuple else ((out,), (result,))


def root(array: np.ndarray) -> np.ndarray:
    """The array whose memory `array` views (itself if it owns its memory)."""
    while isinstance(array.base, np.ndarray):
        array = array.base
    return array


def _into(fixed: np.ndarray, result: Any) -> None:
    """A Python step's result into the buffer the recording gave it (where it is not that buffer)."""
    if result is not fixed:
        np.copyto(fixed, result)


def _same(a: Any, b: Any) -> bool:
    """Whether two results have the same bits."""
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def _held_bytes(held: list, given: set[int]) -> int:
    """The bytes of the memory a tape's held arguments keep alive but the caller's (`given`: the ids of
    the arguments' and captured arrays' roots), each buffer once, views counted as what they view."""
    roots = [root(a) for a in held if isinstance(a, np.ndarray)]
    return sum({id(r): r.nbytes for r in roots if id(r) not in given}.values())


class _Live:
    """The replays that hold buffers, least recently run first, within BUDGET bytes in all (plans of
    several threads: a lock, reentrant as a replay collected while it is held forgets itself)."""

    def __init__(self) -> None:
        self.entries: collections.OrderedDict[int, tuple[weakref.ref, int]] = collections.OrderedDict()
        self.total = 0
        self.lock = threading.RLock()

    def add(self, replay: Replay) -> None:
        key = id(replay)
        with self.lock:
            self.entries[key] = (weakref.ref(replay, lambda _: self._forget(key)), replay.bytes)
            self.total += replay.bytes
            while self.total > BUDGET and len(self.entries) > 1:
                oldest, (ref, _) = next(iter(self.entries.items()))
                self._forget(oldest)
                old = ref()
                if old is not None and old.plan._replay is old:
                    old.plan._replay = None  # its buffers go; run often again, it records again

    def touch(self, replay: Replay) -> None:
        key = id(replay)
        with self.lock:
            if key in self.entries:
                self.entries.move_to_end(key)

    def _forget(self, key: int) -> None:
        with self.lock:
            found = self.entries.pop(key, None)
            if found is not None:
                self.total -= found[1]


_live = _Live()

"""Memory planning: liveness analysis gives each computed value a buffer, reusing the buffers of values
that are dead, and runs an element-wise instruction in place where an input dies there.

- Views alias: the results of permute, reshape, broadcast_to, slice and contiguous (and of a cast to the
  same dtype) are taken to share their input's buffer, so a buffer stays live while any value that may
  view it is live. (reshape and contiguous copy when the layout requires; counting them as views only
  keeps buffers longer.) Program inputs and constants, and views of them, have no buffer of the plan.
- A buffer is free after the instruction that last reads it (or a view of it); outputs and updates live
  to the end. A new value takes a free buffer of the same size, else a free one at least as large for
  every value of the symbols, else a new buffer.
- In place: an element-wise instruction (or a fused group) writes into the buffer of an input that dies
  there, has the result's shape and size, is computed by an instruction that is not a view, and is not
  also read through a view by the same instruction. Never into a program input, a captured tensor or a
  constant (they have no buffer here).

The plan is stored on the program (`buffers`, `buffer_bytes`, `inplace`) and reported by
`program.memory(values)`; the program's instructions and results are unchanged. Run this pass last: any
later pass makes a new program without the plan.

A compiled plan (verigrad/ir/plan.py) runs the lowered program (lower.py), whose instructions are its
kernel calls, and asks `calls_inplace` which of them write their result into an input's array: a call
whose kernel is a NumPy ufunc writes it into an input's array (`ufunc(a, b, out=a)`) where that is
provably the same result, bit for bit, layout included:

- every operand and the result have one dtype and the input the result's shape (so the ufunc's own loop
  gives that dtype, as it would allocate it); the input's array was allocated by an earlier ufunc call
  of the run (never a program input, a captured tensor, a constant, or a kernel's result that may be a
  view of any of them), and neither it nor anything that may view it (the result of any call that is
  not a ufunc's, a fused kernel's or one the caller says allocates is taken to view its inputs) is read
  later or returned;
- the first run, which allocates every result, checks that the result the ufunc allocated has the
  input's strides (layouts follow from the inputs' strides alone, so later runs with inputs of the
  strides the first run had run those calls in place; a run with other strides turns in place off).

An update of a captured tensor (an optimizer's new parameter or moment) is written into that tensor's
own array, where the call that makes it writes element-wise into `out=` (a ufunc of one dtype, or a
kernel that says it `writes_into`, as the cpu backend's fused kernels), and neither the tensor nor
anything that may view it is read after that call; `compile` then has nothing to copy back.
"""

from __future__ import annotations

import collections
from collections.abc import Sequence
from typing import Any

from ...shapes import Dim, Spec
from ..program import Program, nbytes
from ._rewrite import VIEW_OPS, results
from .fuse import is_elementwise, is_fused


def run(program: Program) -> Program:
    instrs = program.instrs
    owner: dict[int, int | None] = {v.id: None for v in program.inputs}  # value -> value owning its buffer
    for instr in instrs:
        if instr.name == "const":
            owner[instr.out.id] = None
        elif _aliases(instr):
            owner[instr.out.id] = owner[instr.args[0].id]
        else:
            owner[instr.out.id] = instr.out.id
    end = len(instrs)
    last: dict[int, int] = {}  # owning value -> index of the last instruction reading it or a view of it
    for i, instr in enumerate(instrs):
        for a in instr.args:
            if owner[a.id] is not None:
                last[owner[a.id]] = i
    for vid in results(program):
        if owner[vid] is not None:
            last[owner[vid]] = end
    dying: dict[int, list[int]] = {}
    for vid, i in last.items():
        dying.setdefault(i, []).append(vid)

    buffers: dict[int, int] = {}
    sizes: list = []
    fits: dict = {}  # (buffer size, value size) -> whether the buffer holds it for every binding
    free: list[int] = []
    inplace: set[int] = set()
    for i, instr in enumerate(instrs):
        out = instr.out
        if owner[out.id] != out.id:
            continue
        size = nbytes(out.spec)
        into = _inplace_input(instr, owner, last, i, size) if _elementwise(instr) else None
        if into is not None:
            buffer = buffers[into]
            inplace.add(out.id)
        else:
            buffer = _take(free, sizes, size, fits)
            if buffer is None:
                buffer = len(sizes)
                sizes.append(size)
        buffers[out.id] = buffer
        for vid in dying.get(i, ()):
            if vid != into:
                free.append(buffers[vid])
        if out.id not in last:
            free.append(buffer)  # never read (dead code): free at once
    planned = program.copy()
    planned.buffers, planned.buffer_bytes, planned.inplace = buffers, sizes, inplace
    return planned


def describe(program: Program) -> str:
    """The plan as text: each buffer's size, then the values it holds in order (* in place)."""
    if program.buffers is None:
        return "no memory plan"
    held: dict[int, list[str]] = {}
    for instr in program.instrs:
        buffer = program.buffers.get(instr.out.id)
        if buffer is not None:
            mark = "*" if instr.out.id in program.inplace else ""
            held.setdefault(buffer, []).append(f"%{instr.out.id}{mark}")
    lines = [f"buffer {b}: {size} bytes: {' '.join(held[b])}" for b, size in enumerate(program.buffer_bytes)]
    return "\n".join(["memory plan (* in place):", *lines])


def _aliases(instr) -> bool:
    if instr.name in VIEW_OPS:
        return True
    return instr.name == "cast" and instr.args[0].spec.dtype is instr.out.spec.dtype


def _elementwise(instr) -> bool:
    return is_fused(instr) or is_elementwise(instr)


def _inplace_input(instr, owner: dict, last: dict, i: int, size) -> int | None:
    """The id of an input this instruction may overwrite, or None."""
    for a in instr.args:
        if owner[a.id] != a.id or last.get(a.id) != i:
            continue  # an input, a constant or a view; or read later
        if a.spec.shape != instr.out.spec.shape or nbytes(a.spec) != size:
            continue  # broadcast into a larger result, or another item size
        if all(b is a for b in instr.args if owner[b.id] == a.id):
            return a.id
    return None


def _take(free: list[int], sizes: list, size, fits: dict | None = None) -> int | None:
    """A free buffer of exactly `size` bytes, else the first at least as large for every binding.
    `fits` memoizes the second test by (buffer size, size): symbolic differences cost."""
    for k, b in enumerate(free):
        if sizes[b] == size:
            return free.pop(k)
    if fits is None:
        fits = {}
    for k, b in enumerate(free):
        have = sizes[b]
        key = (have, size)
        ok = fits.get(key)
        if ok is None:
            ok = fits[key] = _nonnegative(have - size)
        if ok:
            return free.pop(k)
    return None


def _nonnegative(d) -> bool:
    """True when d >= 0 for every (non-negative) value of the symbols: no negative coefficient."""
    if isinstance(d, Dim):
        return all(coeff >= 0 for _, coeff in d.terms)
    return d >= 0


def calls_inplace(
    calls: Sequence[Any],
    specs: Sequence[Spec],
    *,
    inputs: Sequence[int],
    consts: Sequence[int],
    outputs: Sequence[int],
    captured: dict[str, int],
    updates: dict[str, int],
    ufuncs: set[int],
    writers: set[int],
    allocating: set[int] = frozenset(),
) -> dict[int, int]:
    """Call index -> the slot of the input it may write its result into (see the module docstring).

    `calls` are a plan's kernel calls (each with slots `ins`, a slot `out` and a concrete `spec`),
    `specs` every slot's spec; `inputs`, `consts` and `outputs` are slots, `captured` and `updates` the
    slots of the captured tensors and of their new values by name; `ufuncs` the calls of a NumPy ufunc
    on their arrays alone (one result, which it allocates), `writers` those whose kernel writes its
    result element-wise into `out=`, a new array otherwise; `allocating` other calls whose result is a new
    array, never a view of an operand (the caller checks it on a run before it writes in place)."""
    fresh = {calls[k].out for k in ufuncs}  # arrays a ufunc allocated
    allocated = fresh | {calls[k].out for k in (*writers, *allocating)}  # new arrays, never views
    if not allocated:
        return {}
    end = len(calls)
    last: dict[int, int] = {}  # slot -> the last call reading it (end: returned)
    for k, call in enumerate(calls):
        for i in call.ins:
            last[i] = k
    for slot in (*outputs, *updates.values()):
        last[slot] = end
    roots: dict[int, frozenset] = {}  # slot -> the allocations its array may be (a view of)
    for slot in (*inputs, *consts):
        roots[slot] = frozenset((slot,))
    # allocation -> the last call reading any slot that may hold (a view of) it
    held_until: dict[int, int] = {slot: last.get(slot, -1) for slot in inputs}
    chosen: dict[int, int] = {}
    for k, call in enumerate(calls):
        into = None
        if call.out in fresh and len(call.spec.shape):
            into = _ufunc_into(call, k, specs, roots, held_until, fresh)
        if into is not None:
            chosen[k] = into
            roots[call.out] = roots[into]
        elif call.out in allocated:
            roots[call.out] = frozenset((call.out,))
        else:  # any other kernel's result may view its inputs
            roots[call.out] = frozenset((call.out,)).union(*[roots[i] for i in call.ins])
        read = last.get(call.out, -1)
        for r in roots[call.out]:
            if held_until.get(r, -1) < read:
                held_until[r] = read
    chosen.update(_update_targets(calls, specs, outputs, captured, updates, ufuncs, writers, held_until))
    return chosen


def _ufunc_into(
    call: Any, k: int, specs: Sequence[Spec], roots: dict, held_until: dict, fresh: set
) -> int | None:
    """The input slot the ufunc call `k` may write into: one dtype throughout, an input of the result's
    shape that an earlier ufunc allocated, read (itself or a view) by no later call, nor through
    another view by this one."""
    spec = call.spec
    for i in call.ins:
        if specs[i].dtype is not spec.dtype:
            return None
    for i in call.ins:
        if specs[i].shape != spec.shape or len(roots[i]) != 1:
            continue
        (r,) = roots[i]
        if r not in fresh or held_until.get(r, -1) > k:
            continue  # not a ufunc's allocation, or read (itself or a view) after this call
        if all(j == i or r not in roots[j] for j in call.ins):  # read through no other view here
            return i
    return None


def _update_targets(
    calls: Sequence[Any],
    specs: Sequence[Spec],
    outputs: Sequence[int],
    captured: dict[str, int],
    updates: dict[str, int],
    ufuncs: set[int],
    writers: set[int],
    held_until: dict[int, int],
) -> dict[int, int]:
    """Call index -> the captured input slot it may write its result into: the result is the update of
    that tensor (its new value, which `compile` would copy into it), made by a call that writes
    element-wise into `out=` a result of the input's spec, and neither the input nor anything that may
    view it is read after that call (an optimizer's last read of a parameter or a moment)."""
    made_by = {call.out: k for k, call in enumerate(calls)}
    returned = set(outputs)
    shared = collections.Counter(updates.values())
    targets: dict[int, int] = {}
    for name, u in updates.items():
        k, c = made_by.get(u), captured.get(name)
        if k is None or c is None or u in returned or shared[u] != 1:
            continue
        call = calls[k]
        if call.spec != specs[c] or held_until.get(c, -1) > k:
            continue
        if k in writers or (k in ufuncs and all(specs[i].dtype is call.spec.dtype for i in call.ins)):
            targets[k] = c
    return targets

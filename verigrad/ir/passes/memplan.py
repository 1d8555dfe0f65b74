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
`program.memory(values)`; the program's instructions and results are unchanged. The executor
(verigrad/ir/plan.py) runs ufunc steps in place by the same rules applied to its own steps (it inlines
decompositions and runs fused groups member by member, so its steps are not the program's values), not
by reading this plan. Run this pass last: any later pass makes a new program without the plan.
"""

from __future__ import annotations

from ...shapes import Dim
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

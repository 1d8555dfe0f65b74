"""Common-subexpression elimination: an instruction that repeats an earlier one (the same op on the same
values with equal params) is removed, and its uses read the earlier value.

Params are equal when they are the same values of the same types: 0.0 and -0.0 differ, as do 1 and
1.0. Constants are merged by value: the same dtype, shape, strides and bytes. Random ops are pure
functions of their seed param, so two draws merge only when they have the same seed (and then give the
same bits). Ops are matched as written: `add %1 %2` and `add %2 %1` stay two instructions.
"""

from __future__ import annotations

from ..program import Program
from ._rewrite import Rewriter, freeze


def run(program: Program) -> Program:
    rw = Rewriter(program)
    seen: dict = {}
    for index, old in enumerate(program.instrs):
        instr = rw.renamed(old)
        key = (
            instr.op,  # an Op record (compared by identity) or "const"
            tuple(a.id for a in instr.args),
            tuple((k, freeze(v)) for k, v in instr.params.items()),  # canonical params keep one order
        )
        first = seen.get(key)
        if first is not None and first.spec == instr.out.spec:
            rw.replace(instr.out, first)
        else:
            seen.setdefault(key, instr.out)
            rw.keep(instr, index, renamed=True)
    return rw.finish()

"""Dead-code elimination: drop instructions whose value no output, update or later use needs."""

from __future__ import annotations

from ..program import Program


def run(program: Program) -> Program:
    live = {v.id for v in [*program.outputs, *program.updates.values()]}
    kept = []
    for instr in reversed(program.instrs):
        if instr.out.id in live:
            kept.append(instr)
            live.update(a.id for a in instr.args)
    kept.reverse()
    backward_at = program.backward_at
    if backward_at is not None:  # keep the marker before the first surviving backward instruction
        first = {id(i) for i in program.instrs[backward_at:]}
        backward_at = next((k for k, i in enumerate(kept) if id(i) in first), None)
    return program.copy(kept, backward_at=backward_at)

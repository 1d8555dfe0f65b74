"""Program -> Program transformations, each in a module of its own; `PIPELINE` is their order.

constfold   results known before the program runs (shape arithmetic, const-only instructions) -> const
simplify    identities removed (x * 1, reshape to the same shape, ...), permute and reshape chains composed
cse         repeated instructions (same op, same values, equal params) and equal constants merged
dce         instructions no result needs dropped
loss_step   a cross_entropy and its gradient over the same logits made one instruction (one pass a row)
fuse        trees of element-wise instructions made one `fused` instruction
memplan     buffers assigned by liveness, reused, and element-wise ops run in place (annotations only)

lower       for one backend and one binding of the symbols: sizes made concrete, decompositions the
            backend has no kernel for inlined, fused groups it runs better member by member split.
            Not in `PIPELINE`: a plan (ir/plan.py) runs it when it is built, then asks
            `memplan.calls_inplace` which of the lowered program's kernel calls run in place.

Each pass leaves a program that `validate` accepts and that gives the same bits on the reference backend.
Folding first gives simplify and cse constants to work on; dce then drops what they left unused; fusion
needs the final uses; the memory plan holds only for the instructions it was made for, so it is last.
"""

from . import constfold, cse, dce, fuse, loss_step, memplan, simplify

PIPELINE = [constfold.run, simplify.run, cse.run, dce.run, loss_step.run, fuse.run, memplan.run]


def optimize(program, passes=None, verify=False):
    """Run the passes in order (the default pipeline when None); `verify=True` checks after each."""
    for run in PIPELINE if passes is None else passes:
        program = run(program)
        if verify:
            program.verify()
    return program

"""loss_step: a cross_entropy and its gradient over the same logits made one `cross_entropy_step`.

A training step's loss computes every row's exps for its log-sum-exp, and its gradient computes them
again over the same logits (16 MB of them for 1024 rows of 4096 classes). Where the program holds both,
with the same targets and params, a reduction of "mean" or "sum", and a gradient for the loss `g` that
is known before the loss (a program input, a value computed before it, or a constant: backward()'s 1),
the loss's instruction becomes

    %s = cross_entropy_step %x %t %g      f32[N*C + N]: the gradient's rows, then the rows' losses
    %a = slice %s (the first N*C)  ->  %d = reshape %a (N, C)     the gradient's value
    %b = slice %s (the last N)     ->  %l = cross_entropy_total %b %t     the loss's value

and the gradient's instruction goes: one pass per row computes its max, its exps into the gradient's
row, their sum, the loss, and the quotients while the row is in cache. Each result has the bits of
the instruction it replaces (the step op's decomposition is theirs). A constant `g` defined after the
loss is moved before it; any other `g` computed after the loss (backward() outside a compiled function
passes it in) leaves the pair as it is.
"""

from __future__ import annotations

from ...ops.composite.losses import STEP_REDUCTIONS, cross_entropy_step, cross_entropy_total
from ...ops.movement import reshape, slice_
from ...shapes import Spec
from ..program import Instr, Program
from ._rewrite import Rewriter


def _pairs(program: Program) -> dict[int, tuple[int, Instr | None]]:
    """Index of each cross_entropy that fuses -> (index of its gradient, the constant g to move before
    it, if any)."""
    losses: dict[tuple, int] = {}  # (logits id, target id, params) -> index of the loss
    defined_at: dict[int, int] = {}  # value id -> index of its instruction
    found: dict[int, tuple[int, Instr | None]] = {}
    for k, instr in enumerate(program.instrs):
        defined_at[instr.out.id] = k
        if instr.name not in ("cross_entropy", "cross_entropy_grad"):
            continue
        if instr.params["reduction"] not in STEP_REDUCTIONS:
            continue
        key = (instr.args[0].id, instr.args[1].id, instr.params["reduction"], instr.params["ignore_index"])
        if instr.name == "cross_entropy":
            losses.setdefault(key, k)
            continue
        at = losses.get(key)
        if at is None or at in found:
            continue
        g = instr.args[2]
        where = defined_at.get(g.id, -1)  # -1: an input
        producer = program.instrs[where] if where >= 0 else None
        if where < at:
            found[at] = (k, None)
        elif producer is not None and producer.name == "const":
            found[at] = (k, producer)
    return found


def run(program: Program) -> Program:
    pairs = _pairs(program)
    if not pairs:
        return program
    rw = Rewriter(program)
    grads = {k for k, _ in pairs.values()}
    moved = {id(c) for _, c in pairs.values() if c is not None}
    for k, instr in enumerate(program.instrs):
        if k in grads or id(instr) in moved:
            continue
        if k not in pairs:
            rw.keep(instr, k)
            continue
        grad_at, const = pairs[k]
        grad = program.instrs[grad_at]
        if const is not None:
            rw.keep(const, k)
        _emit(program, rw, instr, rw.renamed(grad), k)
    return rw.finish()


def _emit(program: Program, rw: Rewriter, loss: Instr, grad: Instr, index: int) -> None:
    """The step instruction and its views, defining the loss's and the gradient's values."""
    logits, target, g = grad.args
    n, c = logits.spec.shape
    dtype = grad.out.spec.dtype
    params = dict(loss.params)
    # new values numbered by the program's counter, which the rewritten program continues from
    step = program.new_value(Spec((n * c + n,), dtype))
    rw.emit(cross_entropy_step, (logits, target, g), params, step, index)
    flat = program.new_value(Spec((n * c,), dtype))
    rw.emit(slice_, (step,), {"index": ((0, n * c, 1),)}, flat, index)
    rw.emit(reshape, (flat,), {"shape": (n, c)}, grad.out, index)
    rows = program.new_value(Spec((n,), dtype))
    rw.emit(slice_, (step,), {"index": ((n * c, n * c + n, 1),)}, rows, index)
    rw.emit(cross_entropy_total, (rows, target), params, loss.out, index)

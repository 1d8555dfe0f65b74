"""Algebraic simplification: instructions that return their input unchanged are removed, and chains of
movement ops are composed, only where the result is bit-identical on the reference backend.

Removed (every use reads x instead):
    x * 1, 1 * x, x / 1       exact in IEEE arithmetic for every x
    x - 0                     x - (+0) is x + (-0), which is x for every x, -0 included
    x + (-0), (-0) + x        likewise
    x + 0, 0 + x, x - (-0)    only where x cannot be -0 (then -0 + 0 = +0 would change it): integer
                              x, or x made by abs, exp, relu_deriv, a cast from an integer or bool,
                              or a constant holding no -0
    permute(x, identity), reshape(x, x's shape), broadcast_to(x, x's shape), cast(x, x's dtype)
Composed:
    permute(permute(x, a), b)  -> permute(x, a[b])  (removed when that is the identity)
    reshape(reshape(x, s), t)  -> reshape(x, t)     when s only splits x's dimensions and adds or
                                                   drops 1s (so the inner reshape is always a view)

The constant (1, 0) must be a single element that leaves x's shape and dtype as they are. Bit-identical
includes the layout: the reference kernels are NumPy, whose sums and products add in an order that
follows the strides, so a value is only replaced by one with the same strides on every dimension of size
above 1. Views of views keep them; `x * 1` and `cast` allocate in x's memory order, which gives x's
strides only when x is compact (see `_rewrite.is_compact`), so those are removed only then. An output or
an update is never replaced by another value (the caller would then hold an input's memory, or two
results one array); the instruction that computes it is kept, or composed.
"""

from __future__ import annotations

import numpy as np

from ...shapes import Dim
from ..program import Program, Value
from ._rewrite import Rewriter, is_compact, is_const, results

# ops whose result is never -0.0 (in every dtype they produce)
_NO_NEGATIVE_ZERO = frozenset({"abs", "exp", "relu_deriv"})


def run(program: Program) -> Program:
    rw = Rewriter(program)
    keep_results = results(program)
    compact: dict[int, bool] = {}
    for index, old in enumerate(program.instrs):
        instr = rw.renamed(old)
        same = _identity_of(instr, rw, compact)
        if same is not None and instr.out.id not in keep_results:
            rw.replace(instr.out, same)
            continue
        composed = _composed(instr, rw)
        if composed is not None:
            op, x, params = composed
            if x.spec == instr.out.spec and instr.out.id not in keep_results and _is_identity(op, x, params):
                rw.replace(instr.out, x)
                continue
            rw.emit(op, (x,), params, instr.out, index)
            continue
        rw.keep(instr, index, renamed=True)
    return rw.finish()


def _identity_of(instr, rw: Rewriter, compact: dict) -> Value | None:
    """The value this instruction returns unchanged, if it is one of the identities above."""
    name, args, out = instr.name, instr.args, instr.out
    if name == "const" or not args:
        return None
    x = args[0]
    if name in ("permute", "reshape", "broadcast_to") and _is_identity(instr.op, x, instr.params):
        return x
    if name == "cast" and x.spec == out.spec:
        bf16 = out.spec.dtype.name == "bf16"  # bf16 to bf16 returns the input itself
        return x if bf16 or is_compact(x, rw.producer, compact) else None
    if name not in ("mul", "div", "add", "sub"):
        return None
    for i, j in ((0, 1), (1, 0)):
        x, c = args[i], rw.producer.get(args[j].id)
        if x.spec != out.spec or not is_const(c):
            continue
        value = np.asarray(c.params["value"])
        if value.size != 1 or not is_compact(x, rw.producer, compact):
            continue
        v = value.reshape(())
        if name == "mul" and v == 1:
            return x
        if name == "div" and j == 1 and v == 1:
            return x
        if v != 0:
            continue
        negative_zero = bool(np.signbit(v)) if value.dtype.kind == "f" else False
        if name == "sub" and j == 1 and not negative_zero:
            return x  # x - (+0) == x + (-0) == x
        if name == "add" and (negative_zero or _never_negative_zero(x, rw)):
            return x
        if name == "sub" and j == 1 and _never_negative_zero(x, rw):
            return x  # x - (-0) == x + (+0)
    return None


def _never_negative_zero(x: Value, rw: Rewriter) -> bool:
    if x.spec.dtype.kind != "f":
        return True
    instr = rw.producer.get(x.id)
    if instr is None:
        return False
    if is_const(instr):
        value = np.asarray(instr.params["value"])
        return not bool(np.any(np.signbit(value) & (value == 0)))
    if instr.name == "cast":
        return instr.args[0].spec.dtype.kind != "f"
    return instr.name in _NO_NEGATIVE_ZERO


def _is_identity(op, x: Value, params: dict) -> bool:
    name = op if isinstance(op, str) else op.name
    if name == "permute":
        return tuple(params["axes"]) == tuple(range(len(x.spec.shape)))
    if name in ("reshape", "broadcast_to"):
        return tuple(params["shape"]) == tuple(x.spec.shape)
    return False


def _composed(instr, rw: Rewriter):
    """(op, x, params) of one movement op that does what `instr` and its producer do together."""
    if instr.name not in ("permute", "reshape"):
        return None
    inner = rw.producer.get(instr.args[0].id)
    if inner is None or inner.name != instr.name:
        return None
    x = inner.args[0]
    if instr.name == "permute":
        a, b = inner.params["axes"], instr.params["axes"]
        return instr.op, x, {"axes": tuple(a[i] for i in b)}
    if not refines(x.spec.shape, inner.params["shape"]):
        return None
    return instr.op, x, {"shape": instr.params["shape"]}


def refines(old: tuple, new: tuple) -> bool:
    """Whether `new` only splits dimensions of `old` (each into consecutive factors) and adds or drops
    dimensions of size 1, for every value of the symbols. NumPy makes such a reshape a view of any
    array, so reshaping it further gives the strides reshaping the original would."""
    old = [d for d in old if not _is_one(d)]
    new = [d for d in new if not _is_one(d)]
    j = 0
    for d in old:
        size: int | Dim = 1
        while size != d:
            if j == len(new) or (isinstance(size, int) and isinstance(d, int) and size > d):
                return False
            size = size * new[j]
            j += 1
    return j == len(new)


def _is_one(d) -> bool:
    return isinstance(d, int) and d == 1

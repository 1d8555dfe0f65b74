"""A concat of views of one array made one strided copy (run by lower.py, on concrete sizes).

A backward pass often writes its gradient in one packed array and then rearranges it piece by piece:
attention's gradient holds dq, dk and dv side by side per head, and the projection's gradient wants
them as (batch, tokens, 3 * width); each piece is sliced, reshaped, permuted and reshaped (a copy),
then the pieces are concatenated (a second copy of all of them). Where every piece of a concat is such
a chain of slices, reshapes and permutes of one array X, and together they hold each element of X
once, the concat is X itself rearranged: `reshape(permute(reshape(X, S), P), R)`, one copy.

Which rearrangement is found by running the chains' NumPy references on X's element numbers (an
arange): the concat of those is a permutation of them, read off as sizes and strides (`_permuted`).
Movement alone, so the result has the concat's bits; its layout too, as the last reshape is a copy
in C order, which the rewrite makes sure of (a concat that a view would give stays as it is).
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np

from ...ops.movement import permute, reshape
from ...shapes import Spec
from ..program import Instr, Program, Value

CHAIN_OPS = frozenset({"slice", "reshape", "permute"})
MAX_ELEMENTS = 1 << 22  # larger arrays are not numbered: the plan's build holds a few int32 copies


def run(program: Program) -> Program:
    """`program` with each concat of views of one array rewritten as one copy (see the module
    docstring); the view instructions left unread dropped. The program itself where none is."""
    producer = {instr.out.id: instr for instr in program.instrs}
    rewritten: dict[int, list[Instr]] = {}  # concat's index -> its replacement
    walked: set[int] = set()  # ids of the values of the chains a rewrite no longer reads
    for k, instr in enumerate(program.instrs):
        if instr.name != "concat":
            continue
        found = _chains(instr, producer)
        if found is None:
            continue
        base, chains = found
        shapes = _rearrangement(instr, base, chains)
        if shapes is None:
            continue
        rewritten[k] = _copy_of(program, base, *shapes, instr.out)
        walked.update(made.out.id for chain in chains for made in chain)
    if not rewritten:
        return program
    instrs = [new for k, instr in enumerate(program.instrs) for new in rewritten.get(k, [instr])]
    return program.copy(_without_unread(program, instrs, walked))


def _chains(concat: Instr, producer: dict[int, Instr]) -> tuple[Value, list[list[Instr]]] | None:
    """The array X every piece of `concat` is a chain of views of, and each piece's chain (its
    instructions, the piece's first); None where the pieces are not such views of one array."""
    base: Value | None = None
    chains = []
    for piece in concat.args:
        if piece.spec.dtype is not concat.out.spec.dtype:
            return None
        chain, v = [], piece
        while (made := producer.get(v.id)) is not None and made.name in CHAIN_OPS:
            chain.append(made)
            v = made.args[0]
        if not chain or (base is not None and v is not base):
            return None
        base = v
        chains.append(chain)
    return None if base is None else (base, chains)


def _rearrangement(
    concat: Instr, base: Value, chains: list[list[Instr]]
) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """(S, P) such that the concat is `reshape(permute(reshape(base, S), P), its shape)`, a copy; None
    where there are none."""
    size = math.prod(base.spec.shape)
    if size != math.prod(concat.out.spec.shape) or not 1 < size <= MAX_ELEMENTS:
        return None
    numbers = np.arange(size, dtype=np.int32).reshape(base.spec.shape)
    pieces = []
    for chain in chains:
        x = numbers
        for instr in reversed(chain):
            x = instr.op.reference(x, **instr.params)
        pieces.append(x)
    found = _permuted(concat.op.reference(*pieces, **concat.params).ravel())
    if found is None:
        return None
    shape, axes = found
    probe = np.empty(shape, np.uint8).transpose(axes)
    if np.shares_memory(probe.reshape(concat.out.spec.shape), probe):
        return None  # a view: the concat's copy is not one the rewrite could keep
    return shape, axes


def _permuted(order: np.ndarray) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """(S, P) with `permute(arange(n).reshape(S), P).ravel()` equal to `order`, a permutation of
    arange(n) (n > 1); None where it is no such rearrangement. Dimensions are read from the innermost:
    each the longest run of equal steps over blocks of the dimensions found so far that divides n."""
    n = order.size
    dims: list[tuple[int, int]] = []  # (size, stride), innermost first
    block = 1
    while block < n:
        step = int(order[block] - order[0])
        count = 1
        while count * block < n and order[count * block] == order[0] + count * step:
            count += 1
        count = max(c for c in range(1, count + 1) if (n // block) % c == 0)
        if count == 1:
            return None
        dims.append((count, step))
        block *= count
    expected = np.zeros((), np.int32)
    for size, stride in reversed(dims):
        expected = np.add.outer(expected, np.arange(size, dtype=np.int32) * stride)
    if order[0] != 0 or not np.array_equal(expected.ravel(), order):
        return None
    by_stride = sorted(range(len(dims)), key=lambda d: dims[d][1])  # innermost of the base first
    covered = 1
    for d in by_stride:
        if dims[d][1] != covered:
            return None
        covered *= dims[d][0]
    outer_first = by_stride[::-1]  # the base's dimensions as S lists them
    shape = tuple(dims[d][0] for d in outer_first)
    axes = tuple(outer_first.index(d) for d in reversed(range(len(dims))))
    return shape, axes


def _copy_of(
    program: Program, base: Value, shape: tuple[int, ...], axes: tuple[int, ...], out: Value
) -> list[Instr]:
    """The instructions of `reshape(permute(reshape(base, shape), axes), out's shape)` defining `out`."""
    dtype = base.spec.dtype
    instrs = []
    x = base
    if shape != base.spec.shape:
        v = program.new_value(Spec(shape, dtype))
        instrs.append(Instr(reshape, (x,), {"shape": shape}, v))
        x = v
    v = program.new_value(Spec(tuple(shape[a] for a in axes), dtype))
    instrs.append(Instr(permute, (x,), {"axes": axes}, v))
    instrs.append(Instr(reshape, (v,), {"shape": out.spec.shape}, out))
    return instrs


def _without_unread(program: Program, instrs: list[Instr], walked: set[int]) -> list[Instr]:
    """`instrs` less the walked chains' instructions that nothing reads any more (last to first)."""
    reads = Counter(a.id for instr in instrs for a in instr.args)
    reads.update(v.id for v in [*program.outputs, *program.updates.values()])
    kept = []
    for instr in reversed(instrs):
        if instr.out.id in walked and not reads[instr.out.id]:
            reads.subtract(a.id for a in instr.args)
            continue
        kept.append(instr)
    return kept[::-1]

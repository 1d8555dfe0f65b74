"""`einsum`, written with the ops: each operand's letters that appear nowhere else are summed first,
then the operands are joined left to right, each pair as one batched matrix product (batch letters,
then the kept letters of each side, the shared ones contracted), and the result is permuted to the
output's order. A letter repeated within one operand (`"ii->i"`) takes that operand's diagonal first.
Equations as NumPy's and PyTorch's: explicit (`"bij,bjk->bik"`) or implicit (the
letters that appear once, in alphabetical order), with `...` for leading axes.
"""

from __future__ import annotations

import builtins
import math
import string
from collections import Counter
from typing import Any

from ..dtypes import promote
from ..errors import ShapeError
from ..ops.creation import arange
from ..ops.index import take
from ..ops.matmul import matmul
from ..ops.movement import broadcast_to, permute, reshape
from ..ops.reduce import sum
from ..shapes import broadcast, shape_text
from ..tensor import Tensor

# the axes of `...`, named by characters no subscript can be (a letter is a-z or A-Z)
_SPARE = "".join(chr(0xE000 + i) for i in range(64))


def _parse(equation: str, ranks: list[int]) -> tuple[list[str], str]:
    """The operands' subscripts and the output's, with `...` replaced by `_SPARE`'s characters."""
    equation = equation.replace(" ", "")
    inputs, arrow, output = equation.partition("->")
    terms = inputs.split(",")
    if len(terms) != len(ranks):
        raise ValueError(f"einsum: {equation!r} names {len(terms)} operands, {len(ranks)} given")
    spare = _SPARE
    ellipsis_rank = 0
    for term, rank in zip(terms, ranks):
        letters = term.replace("...", "")
        if letters and not (letters.isalpha() and letters.isascii()):
            raise ValueError(f"einsum: subscripts are the letters a-z, A-Z and '...', got {term!r}")
        if "..." in term:
            ellipsis_rank = max(ellipsis_rank, rank - len(letters))
        elif len(term) != rank:
            raise ShapeError(f"einsum: {term!r} names {len(term)} axes of an operand with {rank}")
    expanded = []
    for term, rank in zip(terms, ranks):
        if "..." in term:
            own = rank - len(term.replace("...", ""))
            term = term.replace("...", spare[ellipsis_rank - own : ellipsis_rank])
        expanded.append(term)
    if arrow:
        output = output.replace("...", spare[:ellipsis_rank])
        unknown = set(output) - set("".join(expanded))
        if unknown or len(set(output)) != len(output):
            raise ValueError(f"einsum: the output {output!r} must name each input letter at most once")
    else:
        counts = Counter("".join(expanded))
        once = sorted(c for c, n in counts.items() if n == 1 and c in string.ascii_letters)
        output = spare[:ellipsis_rank] + "".join(once)
    return expanded, output


def _diagonals(x: Tensor, term: str) -> tuple[Tensor, str]:
    """x's diagonal over the axes of each letter it repeats (`"ii"`), the letter once, last: those axes
    moved to the end and merged, then read at the positions (i, i, ...)."""
    for c in dict.fromkeys(term):
        at = [i for i, letter in enumerate(term) if letter == c]
        if len(at) < 2:
            continue
        n = x.shape[at[0]]
        if any(x.shape[i] != n for i in at):
            sizes = ", ".join(str(x.shape[i]) for i in at)
            raise ShapeError(
                f"einsum: the axes of {c!r} in {term!r} must have one size for a diagonal, got {sizes}"
            )
        rest = [i for i in range(len(term)) if i not in at]
        x = permute(x, axes=(*rest, *at))
        x = reshape(x, shape=(*x.shape[: len(rest)], n ** len(at)))
        step = builtins.sum(n**j for j in range(len(at)))  # from (i, ..., i) to (i+1, ..., i+1)
        x = take(x, arange(0, n) * step, axis=len(rest))
        term = "".join(term[i] for i in rest) + c
    return x, term


def _sum_out(x: Tensor, term: str, keep: set[str]) -> tuple[Tensor, str]:
    gone = tuple(i for i, c in enumerate(term) if c not in keep)
    if not gone:
        return x, term
    return sum(x, axis=gone), "".join(c for c in term if c in keep)


def _arranged(x: Tensor, term: str, order: str) -> Tensor:
    return x if term == order else permute(x, axes=tuple(term.index(c) for c in order))


def _product(a: Tensor, ta: str, b: Tensor, tb: str, keep: set[str]) -> tuple[Tensor, str]:
    """a and b joined: letters in both and kept are batch letters, in both and not kept contracted."""
    batch = "".join(c for c in ta if c in tb and c in keep)
    shared = "".join(c for c in ta if c in tb and c not in keep)
    left, right = "".join(c for c in ta if c not in tb), "".join(c for c in tb if c not in ta)
    size = {**dict(zip(tb, b.shape)), **dict(zip(ta, a.shape))}
    for c in batch + shared:
        (size[c],) = broadcast((a.shape[ta.index(c)],), (b.shape[tb.index(c)],))
    a = _arranged(a, ta, batch + left + shared)
    b = _arranged(b, tb, batch + shared + right)
    sizes = [size[c] for c in batch]
    a = broadcast_to(a, shape=(*sizes, *a.shape[len(batch) :]))
    b = broadcast_to(b, shape=(*sizes, *b.shape[len(batch) :]))

    def prod(letters: str) -> Any:
        return math.prod((size[c] for c in letters), start=1)

    if a.dtype is not b.dtype:  # an integer operand summed alone is i64 (PyTorch's sum): so is the product
        common = promote(a.dtype, b.dtype)
        a, b = a.cast(common), b.cast(common)
    a = reshape(a, shape=(*sizes, prod(left), prod(shared)))
    out = matmul(a, reshape(b, shape=(*sizes, prod(shared), prod(right))))
    return reshape(out, shape=(*sizes, *(size[c] for c in left + right))), batch + left + right


def einsum(equation: str, *operands: Any) -> Tensor:
    """Sum of products of the operands' elements over the letters the output does not name."""
    if len(operands) == 1 and isinstance(operands[0], list | tuple):
        operands = tuple(operands[0])
    if not operands or not all(isinstance(x, Tensor) for x in operands):
        raise TypeError("einsum takes an equation and one or more tensors")
    terms, output = _parse(equation, [x.ndim for x in operands])
    operands, terms = zip(*(_diagonals(x, t) for x, t in zip(operands, terms)))
    x, term = operands[0], terms[0]
    for k in range(len(operands)):
        later = set(output).union(*terms[k + 1 :])
        if k == 0:
            x, term = _sum_out(x, term, later)
            continue
        y, other = _sum_out(operands[k], terms[k], later | set(term))
        x, term = _product(x, term, y, other, later)
    x, term = _sum_out(x, term, set(output))
    if sorted(term) != sorted(output):
        raise ShapeError(f"einsum: cannot form {output!r} from {term!r} ({shape_text(x.shape)})")
    return _arranged(x, term, output)

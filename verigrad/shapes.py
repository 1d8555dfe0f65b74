"""Symbolic dimensions in normal form, the `Spec` of a tensor, and the shape rules ops share.

A `Dim` is a polynomial with rational coefficients over atoms (an integral coefficient is held as
an ``int``, the rest as ``Fraction``s; they compare and hash alike). An atom is a symbol (``n``, ``din``)
or a floor quotient that could not be divided exactly (``(H-1)//2``). The normal form is a sorted tuple
of (monomial, coefficient) terms, so two dims are equal exactly when they are the same polynomial,
which is when they are equal for every value of the symbols. Constants are plain ``int``: a `Dim` is
never constant. A symbol may be declared a multiple of an integer (``dims("H", multiple_of=4)``);
``H/2`` is then a valid size, since it is an integer for every allowed ``H``.
"""

from __future__ import annotations

import functools
import operator
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, SupportsIndex

import numpy as np

from .dtypes import DType, as_dtype, f32
from .errors import AxisError, DTypeError, ShapeError

Monomial = tuple[tuple[str, int], ...]  # ((atom, power), ...) sorted by atom

_MULTIPLE_OF: dict[str, int] = {}  # symbol -> the integer every value of it is a multiple of
_FLOORS: dict[str, tuple[Dim, int]] = {}  # floor atom -> (numerator, divisor)
_ORDER: dict[str, int] = {}  # atom -> when it was first made; monomials list atoms in this order
_ORDER_LOCK = threading.Lock()  # two threads' new atoms get two keys (a tie would order terms by chance)


def _atom_key(atom: str) -> int:
    key = _ORDER.get(atom)
    if key is None:
        with _ORDER_LOCK:
            key = _ORDER.setdefault(atom, len(_ORDER))
    return key


class Dim:
    """A symbolic dimension expression. Build with `dims`; combine with + - * / // and ints."""

    __slots__ = ("_hash", "terms")

    def __init__(self, terms: tuple[tuple[Monomial, Fraction], ...]) -> None:
        self.terms = terms
        self._hash = hash(terms)

    # construction ------------------------------------------------------------------------------
    @staticmethod
    def _make(coeffs: dict[Monomial, Fraction | int]) -> Dim | int:
        kept = []
        for m, c in coeffs.items():
            if c:
                if type(c) is Fraction and c.denominator == 1:
                    c = c.numerator  # integral coefficients are ints: cheaper to combine and hash
                kept.append((m, c))
        if not kept:
            return 0
        if len(kept) == 1:
            m, c = kept[0]
            if m == ():
                return c if type(c) is int else _raise_fraction(c)
            return Dim((kept[0],))
        kept.sort(key=_term_order)
        return Dim(tuple(kept))

    def _coeffs(self) -> dict[Monomial, Fraction | int]:
        return dict(self.terms)

    # arithmetic --------------------------------------------------------------------------------
    def __add__(self, other: DimLike) -> Dim | int:
        coeffs = self._coeffs()
        for m, c in _as_terms(other):
            coeffs[m] = coeffs.get(m, 0) + c
        return Dim._make(coeffs)

    __radd__ = __add__

    def __neg__(self) -> Dim | int:
        return Dim._make({m: -c for m, c in self.terms})

    def __sub__(self, other: DimLike) -> Dim | int:
        return self + (-other)

    def __rsub__(self, other: DimLike) -> Dim | int:
        return (-self) + other

    def __mul__(self, other: DimLike) -> Dim | int:
        if type(other) is int:  # the common case: scale every coefficient (the order stays)
            if other == 1 or other == 0:
                return self if other else 0
            return Dim(tuple([(m, _integral(c * other)) for m, c in self.terms]))
        coeffs: dict[Monomial, Fraction | int] = {}
        for m1, c1 in self.terms:
            for m2, c2 in _as_terms(other):
                m = _mono_mul(m1, m2)
                coeffs[m] = coeffs.get(m, 0) + c1 * c2
        return Dim._make(coeffs)

    __rmul__ = __mul__

    def __truediv__(self, other: DimLike) -> Dim | int:
        """Exact division; raises ShapeError when the quotient is not an integer for every value."""
        q = exact_div(self, other)
        if q is None:
            raise ShapeError(f"{self} is not divisible by {other} for every value of the symbols")
        return q

    def __rtruediv__(self, other: int) -> Dim | int:
        """An int divided by a dimension: exact only for 0 (``12 / n`` is refused)."""
        q = exact_div(other, self)
        if q is None:
            raise ShapeError(f"{other} is not divisible by {self} for every value of the symbols")
        return q

    def __floordiv__(self, other: int) -> Dim | int:
        """Floor division by a positive int: exact when possible, otherwise a new floor atom."""
        q = exact_div(self, other)
        if q is not None:
            return q
        name = f"({self})//{other}"
        _FLOORS.setdefault(name, (self, other))
        _atom_key(name)
        return Dim(((((name, 1),), 1),))

    # comparison and use ------------------------------------------------------------------------
    def __eq__(self, other: object) -> bool:
        return isinstance(other, Dim) and self._hash == other._hash and self.terms == other.terms

    def __hash__(self) -> int:
        return self._hash

    def __index__(self) -> int:
        raise TypeError(f"the symbolic dimension {self} has no concrete value here")

    def __bool__(self) -> bool:
        return True  # a symbolic size is never the constant 0

    @property
    def symbols(self) -> set[str]:
        """The symbols this expression depends on (through floor atoms too)."""
        out: set[str] = set()
        for m, _ in self.terms:
            for atom, _ in m:
                if atom in _FLOORS:
                    numer = _FLOORS[atom][0]
                    out |= numer.symbols if isinstance(numer, Dim) else set()
                else:
                    out.add(atom)
        return out

    def evaluate(self, values: dict[str, int]) -> int:
        """The integer value for the given symbol values."""
        total: Fraction | int = 0
        for m, c in self.terms:
            term = c
            for atom, power in m:
                term *= _atom_value(atom, values) ** power
            total += term
        if total.denominator != 1:
            raise ValueError(f"{self} is not an integer for {values}")
        return int(total)

    def __repr__(self) -> str:
        out = ""
        for m, c in self.terms:
            text = _term_text(m, c)
            out += text if not out or text.startswith("-") else "+" + text
        return out

    __str__ = __repr__


DimLike = Dim | int


def _integral(c: Fraction | int) -> Fraction | int:
    """An integral coefficient as an int."""
    return c.numerator if type(c) is Fraction and c.denominator == 1 else c


def _raise_fraction(c: Fraction) -> int:
    raise ShapeError(f"the size {c} is not an integer")


def _term_order(term: tuple[Monomial, Fraction | int]) -> tuple:
    m = term[0]
    key = _MONOMIAL_ORDER.get(m)
    if key is None:  # atoms keep their keys forever, so a monomial's place never changes
        key = _MONOMIAL_ORDER[m] = (-sum(p for _, p in m), [(_atom_key(a), -p) for a, p in m])
    return key


_MONOMIAL_ORDER: dict[Monomial, tuple] = {}


def _as_terms(x: DimLike) -> tuple[tuple[Monomial, Fraction | int], ...]:
    if isinstance(x, Dim):
        return x.terms
    if isinstance(x, int):
        return (((), int(x)),) if x else ()
    raise TypeError(f"cannot combine a dimension with {type(x).__name__} {x!r}")


def _mono_mul(a: Monomial, b: Monomial) -> Monomial:
    if not a:
        return b
    if not b:
        return a
    powers = dict(a)
    for atom, p in b:
        powers[atom] = powers.get(atom, 0) + p
    return tuple(sorted(powers.items(), key=lambda ap: _atom_key(ap[0])))


def _atom_value(atom: str, values: dict[str, int]) -> int:
    if atom in _FLOORS:
        numer, d = _FLOORS[atom]
        return evaluate(numer, values) // d
    if atom not in values:
        raise KeyError(f"no value given for the symbol {atom}")
    return values[atom]


def _term_text(m: Monomial, c: Fraction) -> str:
    if not m:
        return str(c)
    body = "*".join(a if p == 1 else f"{a}^{p}" for a, p in m)
    sign = "-" if c < 0 else ""
    c = abs(c)
    if c.numerator != 1:
        body += f"*{c.numerator}"
    if c.denominator != 1:
        body += f"/{c.denominator}"
    return sign + body


def _integer_valued(d: DimLike) -> bool:
    """Sufficient test that a polynomial is an integer for every allowed value of its symbols."""
    if isinstance(d, int):
        return True
    for m, c in d.terms:
        scale = 1
        for atom, p in m:
            scale *= _MULTIPLE_OF.get(atom, 1) ** p
        if (c * scale).denominator != 1:
            return False
    return True


def exact_div(a: DimLike, b: DimLike) -> DimLike | None:
    """a / b when it is an integer-valued polynomial for every value of the symbols, else None."""
    if isinstance(b, int):
        if b == 0:
            return None
        if isinstance(a, int):
            return a // b if a % b == 0 else None
        q = Dim._make({m: Fraction(c, b) for m, c in a.terms})
    else:
        try:
            q = _poly_div(a, b)
        except ShapeError:  # a fractional constant in the quotient or remainder: not an integer
            return None
        if q is None:
            return None
    return q if _integer_valued(q) else None


def _poly_div(a: DimLike, b: Dim) -> DimLike | None:
    """Multivariate division over the rationals by leading terms; None when there is a remainder."""
    rem: DimLike = a
    quotient: DimLike = 0
    lead_m, lead_c = b.terms[0]
    while rem != 0:
        rm, rc = _as_terms(rem)[0]
        powers = dict(rm)
        for atom, p in lead_m:
            if powers.get(atom, 0) < p:
                return None
            powers[atom] -= p
        mono = tuple(sorted(((x, p) for x, p in powers.items() if p), key=lambda ap: _atom_key(ap[0])))
        step = Dim._make({mono: Fraction(rc, lead_c)})
        quotient = quotient + step
        rem = rem - step * b
    return quotient


def multiple_of(symbol: str) -> int:
    """The integer every value of `symbol` is declared to be a multiple of (1 if none)."""
    return _MULTIPLE_OF.get(symbol, 1)


def evaluate(d: DimLike, values: dict[str, int]) -> int:
    """The integer value of a dimension (an int is its own value)."""
    return d if isinstance(d, int) else d.evaluate(values)


def dims(names: str, multiple_of: int | None = None) -> Dim | tuple[Dim, ...]:
    """Symbolic dimensions by name: ``n, din, dout = dims("n din dout")``; one name gives one Dim.

    ``multiple_of=4`` declares that every value of these symbols is a multiple of 4 (a symbol is one
    name everywhere: declaring it again with another multiple is an error); without it, a symbol keeps
    what it was declared as (a multiple of 1 if never).
    """
    out = []
    for name in names.replace(",", " ").split():
        if not name.isidentifier():
            raise ValueError(f"a dimension name must be an identifier, got {name!r}")
        if multiple_of is None:
            _MULTIPLE_OF.setdefault(name, 1)
        elif _MULTIPLE_OF.get(name, multiple_of) != multiple_of:
            raise ValueError(f"{name} was declared a multiple of {_MULTIPLE_OF[name]} before")
        else:
            _MULTIPLE_OF[name] = multiple_of
        _atom_key(name)
        out.append(Dim(((((name, 1),), 1),)))
    return out[0] if len(out) == 1 else tuple(out)


# shapes and specs ------------------------------------------------------------------------------
Shape = tuple[DimLike, ...]


def as_shape(shape: int | str | Dim | Iterable) -> Shape:
    """Normalize a shape given as an int, a Dim, a string of names or a sequence of those."""
    if isinstance(shape, int | Dim):
        shape = (shape,)
    elif isinstance(shape, str):
        shape = shape.replace(",", " ").split()
    out = []
    for d in shape:
        if isinstance(d, str):
            d = int(d) if d.lstrip("-").isdigit() else dims(d)
        elif not isinstance(d, Dim):
            d = int(d)  # accepts NumPy integers; refuses floats with a TypeError
        if isinstance(d, int) and d < 0:
            raise ShapeError(f"a size must not be negative, got {d}")
        out.append(d)
    return tuple(out)


def shape_text(shape: Sequence[DimLike]) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def numel(shape: Sequence[DimLike]) -> DimLike:
    """The product of the sizes (the integer factors first: they only scale the polynomial)."""
    n, symbolic = 1, []
    for d in shape:
        if isinstance(d, Dim):
            symbolic.append(d)
        else:
            n *= d
    if not symbolic:
        return n
    out: DimLike = symbolic[0]
    for d in symbolic[1:]:
        out = out * d
    return out * n


def is_concrete(shape: Sequence[DimLike]) -> bool:
    return all(isinstance(d, int) for d in shape)


class Size(tuple):
    """PyTorch's `torch.Size`: the concrete shape `Tensor.shape` and `Tensor.size()` give, a tuple of ints.

    It equals and hashes as the plain tuple (`x.shape == (2, 3)`); slicing it or adding a tuple to it gives
    a `Size`, and `Size` is how a shape is told from a tensor's data (`Tensor(x.shape)` means a shape).
    A symbolic shape (one with a `Dim`) is a plain tuple: a `Size` holds ints only.
    """

    __slots__ = ()

    def __new__(cls, sizes: Iterable[SupportsIndex] = ()) -> Size:
        try:
            items = list(sizes)
        except TypeError:
            raise TypeError(f"Size() takes an iterable of ints, not {type(sizes).__name__}") from None
        for i, d in enumerate(items):
            if type(d) is not int:
                if isinstance(d, Dim) or not hasattr(d, "__index__"):
                    raise TypeError(f"Size() takes an iterable of ints (item {i} is {type(d).__name__})")
                items[i] = operator.index(d)
        return tuple.__new__(cls, items)

    def numel(self) -> int:
        """The number of elements a tensor of this shape holds (1 for `Size([])`)."""
        n = 1
        for d in self:
            n *= d
        return n

    def __getitem__(self, key: Any) -> Any:
        if type(key) is slice:
            return tuple.__new__(Size, tuple.__getitem__(self, key))
        return tuple.__getitem__(self, key)

    def __add__(self, other: Any) -> Any:
        if not isinstance(other, tuple):
            return NotImplemented
        return Size(tuple.__add__(self, other))

    def __radd__(self, other: Any) -> Any:
        if not isinstance(other, tuple):
            return NotImplemented
        return Size(tuple.__add__(other, self))

    def __mul__(self, n: SupportsIndex) -> Size:
        return tuple.__new__(Size, tuple.__mul__(self, n))

    __rmul__ = __mul__

    def __reduce__(self) -> tuple:
        return (Size, (tuple(self),))

    def __repr__(self) -> str:
        return f"verigrad.Size({list(self)})"

    __str__ = __repr__


def as_size(shape: Shape) -> Size | Shape:
    """A shape as `Tensor.shape` shows it: a `Size` of Python ints (NumPy integers an op was given become
    ints) when no entry is a `Dim`, else the tuple itself."""
    for d in shape:
        if type(d) is not int:
            return shape if any(isinstance(e, Dim) for e in shape) else Size(shape)
    return tuple.__new__(Size, shape)


@dataclass(frozen=True)
class Spec:
    """What an op knows of a tensor before it runs: its (possibly symbolic) shape and its dtype."""

    shape: Shape
    dtype: DType = f32

    def __hash__(self) -> int:
        # remembered: eager calls look their result spec up by their operands' specs (ops/_op.py)
        try:
            return self.__dict__["_hash"]
        except KeyError:
            h = self.__dict__["_hash"] = hash((self.shape, self.dtype))
            return h

    def __getstate__(self) -> dict:
        return {"shape": self.shape, "dtype": self.dtype}  # not the hash: a dtype's differs per process

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @functools.cached_property
    def size(self) -> Size | Shape:
        """The shape as `Tensor.shape` gives it (`as_size`), made once per spec: eager calls reuse specs."""
        return as_size(self.shape)

    def __repr__(self) -> str:
        return f"{self.dtype.name}{shape_text(self.shape)}"


def spec(shape: int | str | Dim | Iterable, dtype: DType | str = "f32") -> Spec:
    """Describe an argument without data: ``spec([n, din])`` or ``spec("n din", "f64")``."""
    return Spec(as_shape(shape), as_dtype(dtype))


# rules shared by many ops ----------------------------------------------------------------------
def _refuse_bool(axis: object) -> None:
    """A bool (a NumPy one too) is no dim (PyTorch raises; Python would read True as 1)."""
    if isinstance(axis, bool | np.bool_):
        raise DTypeError(f"a dim must be an int, not the bool {axis}")


def plain_int(value: Any) -> Any:
    """A NumPy integer as the Python int PyTorch reads it as (through __index__); anything else as it is."""
    return int(value) if isinstance(value, np.integer) else value


def normalize_axis(axis: int, ndim: int) -> int:
    """axis as a non-negative int; a 0-d tensor takes 0 and -1, as PyTorch's (a NumPy integer too)."""
    _refuse_bool(axis)
    axis = plain_int(axis)
    if not -max(ndim, 1) <= axis < max(ndim, 1):
        raise AxisError(f"axis {axis} is out of range for {ndim} dimensions")
    return axis % ndim if ndim else 0


def normalize_axes(axis: int | Sequence[int] | None, ndim: int) -> tuple[int, ...]:
    """Reduction axes as sorted non-negative ints; None means all axes."""
    if axis is None:
        return tuple(range(ndim))
    _refuse_bool(axis)  # (inside a sequence PyTorch takes True as 1)
    axes = (axis,) if isinstance(axis, int | np.integer) else tuple(axis)
    if ndim == 0:  # PyTorch's: a 0-d tensor takes dim 0 and -1, reducing over nothing
        if any(a not in (0, -1) for a in axes):
            raise AxisError(f"axis {axis} is out of range for 0 dimensions (it takes 0 or -1)")
        return ()
    out = tuple(sorted({normalize_axis(int(a) if isinstance(a, bool) else a, ndim) for a in axes}))
    if len(out) != len(axes):
        raise ShapeError(f"repeated axis in {axis}")
    return out


def broadcast(*shapes: Shape) -> Shape:
    """NumPy broadcasting, for symbols too: ``n`` joins ``n`` or ``1``; ``n`` and ``m`` are refused."""
    if shapes:
        first = shapes[0]
        for s in shapes:
            if s != first:
                break
        else:
            return tuple(first)  # all the same shape (the common case)
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(-ndim, 0):
        size: DimLike = 1
        for s in shapes:
            if -i > len(s):
                continue
            d = s[i]
            if d == 1 or d == size:
                continue
            if size != 1:
                why = "differ for some values of the symbols" if _symbolic(d, size) else "differ"
                raise ShapeError(
                    f"cannot broadcast: dimension {ndim + i} sizes {size} and {d} {why} "
                    "(each must be equal or 1)"
                )
            size = d
        out.append(size)
    return tuple(out)


def _symbolic(*ds: DimLike) -> bool:
    return any(isinstance(d, Dim) for d in ds)


def matmul_shape(a: Shape, b: Shape) -> Shape:
    """NumPy matmul: [..., i, j] @ [..., j, k] -> [..., i, k]; 1-D operands get a dim added and removed."""
    if not a or not b:
        raise ShapeError("matmul needs operands of at least one dimension")
    a2 = (1, *a) if len(a) == 1 else a
    b2 = (*b, 1) if len(b) == 1 else b
    if a2[-1] != b2[-2]:
        raise ShapeError(
            f"the contracted dimensions differ: {a2[-1]} (last of the left operand) vs "
            f"{b2[-2]} ({'only' if len(b) == 1 else 'second to last'} of the right); "
            "rule [..., i, j] @ [..., j, k] -> [..., i, k]"
        )
    try:
        batch = broadcast(a2[:-2], b2[:-2])
    except ShapeError as e:
        raise ShapeError(f"batch dimensions: {e.reason}") from None
    out = (*batch, a2[-2], b2[-1])
    if len(a) == 1:
        out = out[:-2] + out[-1:]
    if len(b) == 1:
        out = out[:-1]
    return out


def reshape_shape(shape: Shape, new: Sequence[DimLike]) -> Shape:
    """The target shape with -1 inferred; refused unless both hold the same number of elements."""
    total = numel(shape)
    infer = [i for i, d in enumerate(new) if isinstance(d, int) and d == -1]
    if len(infer) > 1:
        raise ShapeError("only one dimension can be -1")
    if any(isinstance(d, int) and d < -1 for d in new):
        raise ShapeError(f"invalid size in {shape_text(new)}")
    if infer:
        known = numel([d for i, d in enumerate(new) if i != infer[0]])
        q = exact_div(total, known) if known != 0 else None
        if q is None:
            raise ShapeError(
                f"cannot infer -1: {total} elements are not a multiple of {known} "
                "for every value of the symbols"
            )
        new = [q if i == infer[0] else d for i, d in enumerate(new)]
    elif numel(new) != total:
        raise ShapeError(f"{total} elements cannot be viewed as {numel(new)}")
    return tuple(new)

"""The `Op` record: one op's shape rule, dtype rule, NumPy reference, VJP and test samples.

Calling an op lifts Python scalars and arrays to tensors, checks the rules (raising `ShapeError` or
`DTypeError` that name the op, the operands and the user's line), then hands the call to the current
mode, which runs it, describes it or records it.

A composite op has `decompose` (the op written in other ops) instead of a NumPy `reference`; its
reference is that decomposition run on the reference backend. With no `vjp`, its gradient is the
decomposition's.

An op may also give `fast(out_dtype, arg_dtypes, **params)`: for operands of exactly those dtypes and
those (concrete) params, a kernel taking only the arrays that returns what `reference` returns, bit for
bit, with less per-call work (no dtype rule, no casts that would be no-ops); or None when there is none
for those dtypes. A compiled plan asks for it once, when it is built.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import modes
from ..dtypes import DEFAULT_FLOAT, DEFAULT_INT, DType, bool_, from_numpy_dtype, promote
from ..errors import DTypeError, ShapeError
from ..shapes import Size, Spec
from ..tensor import Tensor, describe

REGISTRY: dict[str, Op] = {}  # every op by name, filled as the op modules define them


@dataclass
class Sample:
    """Inputs for the registry-driven suites: arrays (float ones are cast per dtype) and params."""

    args: tuple[Any, ...]
    params: dict[str, Any] = field(default_factory=dict)


def registered(name: str) -> Op:
    """The op called `name` (what a pickled op is loaded as)."""
    return REGISTRY[name]


class Op:
    """One operation, defined once. See the module docstring for the parts."""

    def __init__(
        self,
        name: str,
        *,
        shape: Callable[..., tuple],
        dtype: Callable[..., DType],
        reference: Callable[..., np.ndarray] | None = None,
        decompose: Callable[..., Tensor] | None = None,
        vjp: Callable[..., Sequence[Tensor | None]] | None = None,
        params: Callable[..., dict] | None = None,
        positional: tuple[str, ...] = (),
        variadic: bool = False,
        samples: Callable[[np.random.Generator], list[Sample]] | None = None,
        torch: Callable[..., Any] | None = None,
        exact: bool = True,
        differentiable: bool = True,
        fast: Callable[..., Callable[..., Any] | None] | None = None,
        doc: str = "",
        group: Any = None,
    ) -> None:
        if (reference is None) == (decompose is None):
            raise ValueError(f"op {name}: give exactly one of reference or decompose")
        self.name = name
        self.shape_rule = shape
        self.dtype_rule = dtype
        self.reference = reference
        self.decompose = decompose
        self.vjp = vjp
        self.canonical_params = params
        self.positional = positional  # params that may also be passed after the tensor operands
        self.variadic = variadic  # takes any number of tensors, or one list of them
        self.samples = samples
        self.torch = torch
        self.exact = exact
        self.fast = fast  # see the module docstring
        self.differentiable = differentiable and (vjp is not None or decompose is not None)
        self._eager_plans: dict[tuple, Any] = {}  # eager calls' (operand shapes and dtypes, params) -> plan
        self.__doc__ = doc
        self.__name__ = self.__qualname__ = name  # as a function's, for code that names what it calls
        self.group = group  # a fused group's members (ir/passes/fuse.py); such an op is not registered
        if group is not None:
            return
        if name in REGISTRY:
            raise ValueError(f"op {name} is defined twice")
        REGISTRY[name] = self

    @property
    def is_composite(self) -> bool:
        return self.decompose is not None

    @property
    def is_fused(self) -> bool:
        """Whether the op is a fused group of element-wise ops, made per program by the fuse pass."""
        return self.group is not None

    def __repr__(self) -> str:
        return f"<op {self.name}>"

    def __reduce__(self) -> tuple:
        """Pickled (and deep-copied) by name, as PyTorch's built-in functions are: the registry's op in the
        process that loads it. A fused group is made per program and has no name to go by."""
        if self.group is not None or REGISTRY.get(self.name) is not self:
            raise TypeError(f"{self!r} is a fused group made for one program; it cannot be pickled")
        return (registered, (self.name,))

    def spec(self, *args: Tensor, **params: Any) -> Spec:
        """The output spec for these operands, or a located ShapeError/DTypeError."""
        return self._spec(args, params)

    def _spec(self, args: tuple[Tensor, ...], params: dict[str, Any]) -> Spec:
        try:
            if len(args) == 1:  # the common arities, without building lists
                s = args[0].spec
                shape = self.shape_rule(s.shape, **params)
                dtype = self.dtype_rule(s.dtype, **params)
            elif len(args) == 2:
                s, s2 = args[0].spec, args[1].spec
                shape = self.shape_rule(s.shape, s2.shape, **params)
                dtype = self.dtype_rule(s.dtype, s2.dtype, **params)
            else:
                specs = [a.spec for a in args]
                shape = self.shape_rule(*[s.shape for s in specs], **params)
                dtype = self.dtype_rule(*[s.dtype for s in specs], **params)
        except (ShapeError, DTypeError) as e:
            if e.op is not None:
                raise
            raise e.locate(self.name, tuple(describe(a) for a in args)) from None
        except TypeError:
            refuse_out(self.name, params)
            raise
        return Spec(shape, dtype)

    def __call__(self, *args: Any, **params: Any) -> Tensor:
        if params and "out" in params and OUT_WRITER:
            out = params.pop("out")
            return OUT_WRITER[0](self.name, lambda: self(*args, **params), out)
        if not args and ("input" in params or "tensors" in params):  # add(input=x, other=y), stack(tensors=)
            args = _keyword_operands(params)
        if self.variadic and args and isinstance(args[0], _SEQUENCES):
            if len(args) - 1 > len(self.positional):
                raise TypeError(f"{self.name} takes at most {len(self.positional)} params after the tensors")
            params.update(zip(self.positional, args[1:]))
            args = tuple(args[0])
        elif self.positional and len(args) > 1 and not isinstance(args[1], Tensor):
            extra = args[1:]
            if len(extra) > len(self.positional):
                raise TypeError(f"{self.name} takes at most {len(self.positional)} params after x")
            params.update(zip(self.positional, extra))
            args = args[:1]
        for a in args:
            if type(a) is not Tensor:
                tensors = lift(args)
                break
        else:
            tensors = args  # all tensors already (the common case): nothing to lift
        mode = modes.LOCAL.stack[-1]  # modes.current(), inlined
        if mode.name != "eager":
            if self.canonical_params is not None:
                params = self._canonical(tensors, params)
            return mode.apply(self, tensors, params, self._spec(tensors, params))
        # Eagerly, shapes are concrete: the canonical params, the rules' answer and the kernel are
        # functions of the operand specs and the params (and the backend), kept in a plan per key. Params
        # are keyed as given where a canonical form is computed from them, so only by values that are
        # equal exactly (`_exact_items`); a call whose params cannot be so keyed is planned every time.
        # The operands are keyed by their shapes and dtypes (hashed and compared in C, where a Spec's
        # hash and equality are Python calls).
        n = len(tensors)
        if n == 1:
            s = tensors[0].spec
            key: tuple | None = (s.shape, s.dtype)
        elif n == 2:
            s, s2 = tensors[0].spec, tensors[1].spec
            key = (s.shape, s.dtype, s2.shape, s2.dtype)
        else:
            key = tuple([part for t in tensors for part in (t.spec.shape, t.spec.dtype)])
        if params:
            if self.canonical_params is None:
                key = (*key, *params.items())
            else:
                items = _exact_items(params)
                key = None if items is None else (*key, items)
        try:
            found = self._eager_plans[key]  # type: ignore[index]
        except (KeyError, TypeError):  # not seen yet, or not hashable (a slice before Python 3.12)
            found = self._plan(mode, tensors, params, key)
        return mode.run(self, tensors, params if found[0] is None else found[0], found[1])

    def _canonical(self, tensors: tuple[Tensor, ...], params: dict[str, Any]) -> dict[str, Any]:
        try:
            return self.canonical_params(*[t.spec for t in tensors], **params)  # type: ignore[misc]
        except (ShapeError, DTypeError) as e:
            raise e.locate(self.name, tuple(describe(a) for a in tensors)) from None
        except TypeError:
            refuse_out(self.name, params)
            raise

    def _plan(self, mode: Any, tensors: tuple[Tensor, ...], params: dict[str, Any], key: Any) -> tuple:
        """(the canonical params or None where the op has no canonical form, the eager mode's plan),
        kept under `key` where there is one."""
        canonical = None
        if self.canonical_params is not None:
            params = canonical = self._canonical(tensors, params)
        found = (canonical, mode.plan(self, tensors, params))
        if key is not None:
            try:
                if len(self._eager_plans) >= SPECS_KEPT:
                    self._eager_plans.clear()
                self._eager_plans[key] = found
            except TypeError:
                pass
        return found


_PLAIN_PARAMS = frozenset({int, bool, float, str, type(None), DType})
_TUPLES = (tuple, Size)  # a Size (x.shape given as a shape) is keyed as a tuple, its kind apart
_PLAIN_OR_TUPLE = _PLAIN_PARAMS | set(_TUPLES)
_INTS = frozenset({int, type(None)})


def _exact_items(params: dict[str, Any]) -> tuple | None:
    """`params`' items as a key under which two calls meet only when their params are the same values of
    the same types (True is not 1, nor 2.0 2, nor -0.0 0.0): with their types (and floats' signs); None
    where a value is not an int, bool, float, string, None, dtype, a Size, or a tuple of ints, Nones,
    slices of them and such tuples."""
    kinds = tuple(map(type, params.values()))
    if _PLAIN_PARAMS.issuperset(kinds) or (_PLAIN_OR_TUPLE.issuperset(kinds) and _int_tuples(params)):
        # the common case (no tuple, or tuples of ints and Nones: a shape, axes): the items, their types,
        # and each float's sign (-0.0 == 0.0; a NaN equals nothing, so it is planned anew)
        if float in kinds:
            return (
                *params.items(),
                kinds,
                *[math.copysign(1.0, v) for v in params.values() if type(v) is float],
            )
        return (*params.items(), kinds)
    out = []
    for name, value in params.items():
        kind = type(value)
        if kind is tuple:
            if not _INTS.issuperset(map(type, value)):  # ints and Nones stand for themselves
                try:
                    value = _exact_value(value)
                except _Unkeyed:
                    return None
        elif kind not in _PLAIN_PARAMS:
            return None
        elif kind is float:
            value = (value, math.copysign(1.0, value))
        out.append((name, value, kind))
    return tuple(out)


def _int_tuples(params: dict[str, Any]) -> bool:
    """Whether every tuple (or Size) among `params`' values holds only ints and Nones."""
    return all(_INTS.issuperset(map(type, v)) for v in params.values() if type(v) in _TUPLES)


class _Unkeyed(Exception):
    pass


def _exact_value(value: Any) -> Any:
    """A tuple of ints, Nones, bools, slices of ints and Nones, and such tuples, as a key that tells each
    element's type apart; _Unkeyed for anything else."""
    kind = type(value)
    if kind is int or value is None:
        return value
    if kind is bool:
        return ("bool", value)
    if kind is slice:
        parts = (value.start, value.stop, value.step)
        if not _INTS.issuperset(map(type, parts)):
            raise _Unkeyed
        return ("slice", *parts)
    if kind is tuple:
        return ("tuple", *[_exact_value(v) for v in value])
    raise _Unkeyed


def never_warns(kernel: Callable) -> Callable:
    """Mark a kernel that never lets NumPy warn (it only moves data, or computes in C and silences NumPy
    where it falls back to it): eager calls then skip setting NumPy's error state, 1-2 us a call."""
    kernel.never_warns = True  # type: ignore[attr-defined]
    return kernel


def silenced(reference: Callable) -> Callable:
    """`reference` run with NumPy's floating-point warnings off (log(-1) is NaN by definition): what a
    `never_warns` kernel falls back to."""

    def run(*args: Any, **kwargs: Any) -> Any:
        with np.errstate(all="ignore"):
            return reference(*args, **kwargs)

    return run


_SEQUENCES = (list, tuple)
# the keywords PyTorch's signatures give an op's tensor operands after `input`, in their order
_OPERAND_KEYWORDS = ("other", "exponent", "mat2", "vec", "tensor")


# PyTorch's out=: the writer (name, compute, out) -> out, registered by verigrad.out_argument (a layer
# above ops/, where the Tensor's in-place methods are)
OUT_WRITER: list[Callable[[str, Callable[[], Any], Any], Any]] = []


def refuse_out(name: str, params: dict[str, Any]) -> None:
    """PyTorch's `out=`, which verigrad's ops do not take (their rules refused it): a clear TypeError."""
    if "out" in params:
        raise TypeError(
            f"{name}: out= is not supported; use the tensor it returns (out.copy_(result) fills out)"
        )


def _keyword_operands(params: dict[str, Any]) -> tuple[Any, ...]:
    """The operands given by PyTorch's keywords (`input=x, other=y`; a sequence as `tensors=`), taken out
    of `params`."""
    if "input" not in params:
        return (params.pop("tensors"),)
    return (params.pop("input"), *[params.pop(k) for k in _OPERAND_KEYWORDS if k in params])


SPECS_KEPT = 1024  # plans an op remembers for eager calls


def lift(args: Sequence[Any]) -> tuple[Tensor, ...]:
    """Tensors stay; Python scalars take the dtype of the tensors they meet (as in PyTorch)."""
    for a in args:
        if type(a) is not Tensor and not isinstance(a, Tensor):
            break
    else:
        return args if type(args) is tuple else tuple(args)
    tensor_dtypes = [a.dtype for a in args if isinstance(a, Tensor)]
    joined = promote(*tensor_dtypes) if tensor_dtypes else None
    out = []
    constant = modes.current().constant
    for a in args:
        if isinstance(a, Tensor):
            out.append(a)
            continue
        if type(a) is float and joined is not None and joined.name in _FLOATS:  # x * 0.5: the common case
            out.append(constant(np.array(a, joined.np), joined))  # one rounding of the double, as astype
            continue
        array = np.asarray(a)
        if array.dtype.kind not in "biuf":
            unsupported = "verigrad has no complex numbers: " if array.dtype.kind == "c" else ""
            raise TypeError(f"{unsupported}cannot make a tensor from {type(a).__name__} {a!r}")
        if isinstance(a, np.ndarray):
            dtype = from_numpy_dtype(array.dtype)
        else:  # Python and NumPy scalars and lists are weakly typed (as PyTorch's)
            # PyTorch reads a NumPy bool as a float number
            kind = "f" if isinstance(a, np.bool_) else array.dtype.kind
            dtype = _scalar_dtype(_KIND_EXAMPLE[kind], joined)
        out.append(constant(array.astype(dtype.np, copy=False), dtype))
    return tuple(out)


_KIND_EXAMPLE = {"b": True, "i": 0, "u": 0, "f": 0.0}
_FLOATS = ("f32", "f64")


def _scalar_dtype(value: bool | int | float, joined: DType | None) -> DType:
    if isinstance(value, bool):
        return joined or bool_
    if isinstance(value, int):
        return joined if joined is not None and joined is not bool_ else DEFAULT_INT
    return joined if joined is not None and joined.is_float else DEFAULT_FLOAT


# helpers the rules and VJPs share --------------------------------------------------------------
def same_shape(*shapes: tuple) -> tuple:
    return shapes[0]


def no_bf16(*dtypes: DType) -> None:
    for d in dtypes:
        if d.name == "bf16":
            raise DTypeError("bf16 tensors can only be loaded, moved and cast; call .float() first")


def _promoted(dtypes: tuple[DType, ...]) -> DType:
    """promote(*dtypes), without its work when they are all the same dtype (the common case)."""
    first = dtypes[0]
    for d in dtypes:
        if d is not first:
            return promote(*dtypes)
    return first


def floating_only(*dtypes: DType, what: str = "", **_: Any) -> DType:
    """The promoted dtype of operands PyTorch takes as floats only (linalg's decompositions and solvers,
    the float activations): an integer or bool operand raises (`what` names the function in the message
    where no op names it)."""
    no_bf16(*dtypes)
    for d in dtypes:
        if not d.is_float:
            where = f"{what}: " if what else ""
            raise DTypeError(f"{where}expected a floating point tensor, got {d.name} (as PyTorch); cast it")
    return _promoted(dtypes)


def promoted_float(*dtypes: DType, what: str = "", **_: Any) -> DType:
    """The promoted dtype of the operands of PyTorch's float-only element-wise ops (hypot, logaddexp,
    nextafter, igamma): it must be a float, so an integer or bool operand beside a float one is promoted
    (i64 with f16 computes in f16); integers and bool alone raise."""
    no_bf16(*dtypes)
    out = _promoted(dtypes)
    if not out.is_float:
        where = f"{what}: " if what else ""
        raise DTypeError(f"{where}expected a floating point tensor, got {out.name} (as PyTorch); cast it")
    return out


def float_dtype(*dtypes: DType, **_: Any) -> DType:
    """A float result: floats keep their (promoted) dtype, ints and bool give f32."""
    no_bf16(*dtypes)
    d = _promoted(dtypes)
    return d if d.is_float else DEFAULT_FLOAT


def numeric_dtype(*dtypes: DType, **_: Any) -> DType:
    """Arithmetic on the promoted dtype; on bools in i64 (add and mul keep two bools bool: binary.py)."""
    no_bf16(*dtypes)
    d = _promoted(dtypes)
    return DEFAULT_INT if d is bool_ else d


def unbroadcast(g: Tensor, shape: tuple) -> Tensor:
    """Sum a gradient of the broadcast shape back to an operand's `shape`."""
    if g.shape == shape:
        return g
    lead = g.ndim - len(shape)
    ones = tuple(lead + i for i, d in enumerate(shape) if d == 1 and g.shape[lead + i] != 1)
    if not ones and lead:  # only leading axes: summed away (a bias's gradient is one sum)
        g = g.sum(axis=tuple(range(lead)))
    elif lead or ones:
        g = g.sum(axis=tuple(range(lead)) + ones, keepdim=True)
    return g if g.shape == shape else g.reshape(shape)

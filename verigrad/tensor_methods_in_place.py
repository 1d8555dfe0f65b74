"""Tensor's in-place methods: the wrappers that write a result into the tensor (`x.name_()`, `x op= o`,
the view-changing `x.t_()`) with the dtype check they share, the in-place methods whose arguments
differ from the op's (add_, the random fills, resize_, copy_, ...), and the name tables
(IN_PLACE, VIEWS_IN_PLACE, IN_PLACE_OPERATORS, ALIASES) that `tensor_methods.bind` sets on Tensor. `ADAPTED`
(filled by `@adapted`, here and in tensor_methods) holds the methods written by hand.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from . import versions
from .dtypes import can_cast, f64
from .errors import DTypeError, ShapeError
from .functions import distributions, pointwise
from .grad_mode import is_grad_enabled
from .inplace import LEAF_IN_PLACE
from .ops import binary, bitwise, creation
from .shapes import Spec
from .tensor import Tensor, describe


def version_counter(self: Tensor) -> int:
    """PyTorch's `_version`: the in-place writes of this tensor's memory so far (shared by its views and
    aliases; `.data`'s writes count too, where PyTorch gives `.data` a counter of its own)."""
    payload = self.payload
    return versions.version(payload) if type(payload) is np.ndarray else 0


def in_place(name: str) -> Callable[..., Tensor]:
    """`x.name_(*args)`: `x.name(*args)` written into x."""

    def method(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        refuse_partial_overlap(self, (*args, *kwargs.values()), name + "_")
        out = getattr(self, name)(*args, **kwargs)
        return self.assign(out if name in _FILLING else _castable(out, self, name + "_"))

    method.__doc__ = f"{name}, written into this tensor."
    return method


def refuse_partial_overlap(self: Tensor, operands: tuple, what: str) -> None:
    """PyTorch's refusal to write into a tensor that an operand partly overlaps (x[1:].add_(x[:-1]): its
    result would depend on the order of the writes). The same elements (x.mul_(x)) are fine. Where a
    layout has gaps PyTorch does not look, and its result follows its order of writes
    (x[:3, :3].add_(x[:3, :3].t())); verigrad refuses that too where the two share an element (a deliberate
    difference: an error, not another answer), and takes interleaved ones that share none
    (x[:, 0].add_(x[:, 1]))."""
    refuse_overlapping_arrays(self.payload, operands, what)


def refuse_overlapping_setitem(self: Tensor, key: Any, value: Any) -> None:
    """`x[key] = value` refused where value partly overlaps the view the key selects (x[1:] = x[:-1]), as
    PyTorch's copy refuses it; only keys of ints, slices, None and Ellipsis select a view."""
    parts = key if isinstance(key, tuple) else (key,)
    basic = all(p is None or p is Ellipsis or isinstance(p, slice) or type(p) is int for p in parts)
    if not (basic and isinstance(value, Tensor) and isinstance(self.payload, np.ndarray)):
        return
    try:
        target = self.payload[key]
    except IndexError:  # setitem says what is wrong with the key
        return
    refuse_overlapping_arrays(target, (value,), "setitem")


def refuse_overlapping_arrays(mine: Any, operands: tuple, what: str) -> None:
    """`refuse_partial_overlap` for the array written (`mine`: a tensor's payload or a view of it)."""
    for o in operands:
        theirs = getattr(o, "payload", None) if isinstance(o, Tensor) else None
        if not isinstance(theirs, np.ndarray) or not isinstance(mine, np.ndarray) or theirs is mine:
            continue
        if not np.may_share_memory(mine, theirs):
            continue
        if _at(mine) == _at(theirs) and mine.strides == theirs.strides and mine.shape == theirs.shape:
            continue
        if not (_dense(mine) and _dense(theirs)) and not _shares(mine, theirs):
            continue
        raise RuntimeError(
            f"{what}: unsupported operation: some elements of the input tensor and the written-to tensor "
            "refer to a single memory location (as in PyTorch); clone() the input first"
        )


def _shares(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether a and b share an element (True where that is too costly to tell)."""
    try:
        return bool(np.shares_memory(a, b, max_work=10_000))
    except np.exceptions.TooHardError:
        return True


def _at(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def _dense(a: np.ndarray) -> bool:
    """Whether `a`'s elements fill a block of memory once each, in some order of its axes."""
    if a.flags.c_contiguous or a.flags.f_contiguous:
        return True
    step = a.itemsize
    for stride, size in sorted((abs(st), n) for n, st in zip(a.shape, a.strides) if n != 1):
        if stride != step:
            return False
        step *= size
    return True


# in-place methods that write values given to them, which PyTorch casts to the tensor's dtype
_FILLING = ("index_fill", "scatter", "masked_fill", "index_add", "scatter_add", "scatter_reduce")


def _castable(result: Tensor, into: Tensor, what: str) -> Tensor:
    """`result`, if an in-place op may write it into `into`: not a float into an integer tensor, nor a
    number into a bool one (PyTorch raises, where a cast would silently change the values)."""
    if not can_cast(result.dtype, into.dtype):
        raise DTypeError(
            f"{what}: the result type {result.dtype.name} can't be cast to the tensor's {into.dtype.name} "
            "(as in PyTorch); compute out of place or cast first"
        )
    return result


def shape_arg(shape: tuple) -> tuple:
    """Accept both `x.reshape(2, 3)` and `x.reshape((2, 3))`."""
    if len(shape) == 1 and isinstance(shape[0], list | tuple):
        return tuple(shape[0])
    return shape


ADAPTED: dict[str, Callable[..., Any]] = {}


def adapted(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Enter a method written here in the table under its own name."""
    ADAPTED[fn.__name__] = fn
    return fn


@adapted
def add_(self: Tensor, o: Any, alpha: Any = 1) -> Tensor:
    """self + alpha * o written into self, with one rounding (as PyTorch's)."""
    refuse_partial_overlap(self, (o,), "add_")
    return self.assign(_castable(pointwise.add(self, o, alpha=alpha), self, "add_"))


@adapted
def sub_(self: Tensor, o: Any, alpha: Any = 1) -> Tensor:
    """self - alpha * o written into self, with one rounding (as PyTorch's)."""
    refuse_partial_overlap(self, (o,), "sub_")
    return self.assign(_castable(pointwise.sub(self, o, alpha=alpha), self, "sub_"))


@adapted
def clamp_(self: Tensor, min: Any = None, max: Any = None) -> Tensor:
    """clamp(min, max), written into this tensor."""
    refuse_partial_overlap(self, (min, max), "clamp_")
    return self.assign(_castable(self.clamp(min, max), self, "clamp_"))


@adapted
def uniform_(self: Tensor, a: float = 0.0, b: float = 1.0, generator: Any = None) -> Tensor:
    """Values drawn uniformly from [a, b), in place."""
    return self.assign(creation.rand(*self.shape, dtype=self.dtype, generator=generator) * (b - a) + a)


@adapted
def normal_(self: Tensor, mean: float = 0.0, std: float = 1.0, generator: Any = None) -> Tensor:
    """Values drawn from N(mean, std^2), in place."""
    return self.assign(creation.randn(*self.shape, dtype=self.dtype, generator=generator) * std + mean)


def _uniform_draws(self: Tensor, generator: Any) -> Tensor:
    """Uniform [0, 1) draws of this shape: in this dtype if it is a float one, else in f64 (geometric_ of
    integers)."""
    return creation.rand(*self.shape, dtype=self.dtype if self.dtype.is_float else f64, generator=generator)


def _continuous(self: Tensor, what: str, value: Any, name: str) -> None:
    """PyTorch's checks of a continuous distribution's fill: a float tensor, a positive scale."""
    if not self.dtype.is_float:
        raise DTypeError(f"Tensor.{what}: a continuous distribution, for float tensors; got {describe(self)}")
    if not value > 0:
        raise ValueError(f"Tensor.{what} expects {name} > 0, got {value!r}")


@adapted
def exponential_(self: Tensor, lambd: float = 1.0, *, generator: Any = None) -> Tensor:
    """Values drawn from the exponential distribution of rate lambd, in place: -log(1 - U) / lambd."""
    _continuous(self, "exponential_", lambd, "lambd")
    return self.assign(-(-_uniform_draws(self, generator)).log1p() / lambd)


@adapted
def geometric_(self: Tensor, p: float, *, generator: Any = None) -> Tensor:
    """Values drawn from the geometric distribution (the trials up to the first success, each a success
    with probability p: 1, 2, ...), in place: ceil(log(1 - U) / log(1 - p))."""
    if not 0 < p < 1:
        raise ValueError(f"Tensor.geometric_ expects p in (0, 1), got {p!r}")
    trials = ((-_uniform_draws(self, generator)).log1p() / math.log1p(-p)).ceil()
    return self.assign(trials.clamp(min=1))  # U = 0 gives 0 trials: at least one


@adapted
def cauchy_(self: Tensor, median: float = 0.0, sigma: float = 1.0, *, generator: Any = None) -> Tensor:
    """Values drawn from the Cauchy distribution, in place: median + sigma tan(pi (U - 1/2))."""
    _continuous(self, "cauchy_", sigma, "sigma")
    return self.assign(((_uniform_draws(self, generator) - 0.5) * math.pi).tan() * sigma + median)


@adapted
def log_normal_(self: Tensor, mean: float = 1.0, std: float = 2.0, *, generator: Any = None) -> Tensor:
    """Values drawn from the log-normal distribution (exp of N(mean, std^2)), in place."""
    _continuous(self, "log_normal_", std, "std")
    normal = creation.randn(*self.shape, dtype=self.dtype, generator=generator)
    return self.assign((normal * std + mean).exp())


def view_in_place(name: str) -> Callable[..., Tensor]:
    """`x.name_(*args)` (squeeze_, unsqueeze_, t_, transpose_, ...): x becomes its view x.name(*args), as
    PyTorch's, for a tensor without history (the usual case: reshaping data in place); a leaf that
    requires grad raises PyTorch's error where grad mode is on."""

    def method(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        if self.requires_grad and self.is_leaf and is_grad_enabled():
            raise RuntimeError(LEAF_IN_PLACE)  # PyTorch's; under no_grad the leaf becomes the view
        if self.requires_grad and not self.is_leaf:
            raise NotImplementedError(
                f"Tensor.{name}_: changing the shape in place of a tensor that requires grad is not "
                f"supported; write x = x.{name}(...)"
            )
        self.data = getattr(self, name)(*args, **kwargs)
        return self

    method.__doc__ = f"This tensor made its view {name}(...) in place (a tensor without gradient)."
    return method


@adapted
def random_(self: Tensor, *args: Any, generator: Any = None) -> Tensor:
    """This tensor filled with integers drawn uniformly from [from, to) (random_(to): [0, to)), as
    PyTorch's random_; with no bounds PyTorch's default range is refused here (give them)."""
    if len(args) not in (1, 2):
        raise NotImplementedError("Tensor.random_: give the bounds, random_(to) or random_(from, to)")
    low, high = (0, args[0]) if len(args) == 1 else args
    if high is None:
        raise NotImplementedError("Tensor.random_: give the upper bound, random_(from, to)")
    draws = creation.randint(low, high, tuple(self.shape), generator=generator)
    return self.assign(draws.cast(self.dtype))


@adapted
def bernoulli_(self: Tensor, p: Any = 0.5, *, generator: Any = None) -> Tensor:
    """This tensor filled with draws of 1 with probability p (a number or a tensor that broadcasts),
    else 0."""
    probs = p.cast(f64) if isinstance(p, Tensor) else creation.full((), p, dtype=f64)
    probs = probs.expand(*self.shape) if probs.shape != tuple(self.shape) else probs
    return self.assign(distributions.bernoulli(probs, generator=generator).cast(self.dtype))


@adapted
def resize_(self: Tensor, *size: Any, memory_format: Any = None) -> Tensor:
    """This tensor given `size`, in place (eagerly, without gradient, as PyTorch's): its first elements
    in row-major order, a view of its memory where there are enough; the new ones past them are zeros
    (PyTorch's are uninitialised)."""
    shape = tuple(shape_arg(size))
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape):
        raise ValueError(f"Tensor.resize_: size must be non-negative ints, got {size!r}")
    if self.requires_grad:
        raise RuntimeError("Tensor.resize_: cannot resize tensors that require grad (as PyTorch)")
    data = self._array("Tensor.resize_()")
    flat, count = data.reshape(-1), int(np.prod(shape, dtype=np.int64))
    if count > flat.size:
        flat = np.concatenate([flat, np.zeros(count - flat.size, dtype=data.dtype)])
    self.data = Tensor(Spec(shape, self.dtype), flat[:count].reshape(shape))
    return self


@adapted
def resize_as_(self: Tensor, other: Tensor, memory_format: Any = None) -> Tensor:
    """self.resize_(other.shape)."""
    return self.resize_(tuple(other.shape))


@adapted
def zero_(self: Tensor) -> Tensor:
    return self.assign(0)


@adapted
def fill_(self: Tensor, value: Any) -> Tensor:
    """Every element set to value, a number or a 0-d tensor (in this tensor's dtype)."""
    if isinstance(value, Tensor) and value.ndim:
        raise ShapeError(f"fill_ only supports a 0-dimension value tensor, got {describe(value)}")
    return self.assign(value)


@adapted
def copy_(self: Tensor, src: Any) -> Tensor:
    """src's values (broadcast to this shape, cast to this dtype) written into this tensor."""
    refuse_partial_overlap(self, (src,), "copy_")
    return self.assign(src)


def assigning(op: Callable[..., Tensor]) -> Callable[[Tensor, Any], Tensor]:
    """`x op= o`: x op o written into x. PyTorch's in-place operators decline a NumPy array, so Python
    binds `x` to `x op o` (ops/array_operands.py), a new tensor, and so here."""

    def method(self: Tensor, o: Any) -> Tensor:
        if isinstance(o, np.ndarray):
            return NotImplemented
        refuse_partial_overlap(self, (o,), getattr(op, "name", "in-place op"))
        return self.assign(_castable(op(self, o), self, getattr(op, "name", "in-place op")))

    return method


IN_PLACE_OPERATORS = {"__iadd__": binary.add, "__isub__": binary.sub, "__imul__": binary.mul,
                      "__itruediv__": binary.div, "__imod__": binary.remainder,
                      "__ifloordiv__": binary.floor_divide, "__iand__": bitwise.bitwise_and,
                      "__ior__": bitwise.bitwise_or, "__ixor__": bitwise.bitwise_xor,
                      "__ilshift__": bitwise.bitwise_left_shift,
                      "__irshift__": bitwise.bitwise_right_shift}  # fmt: skip


ALIASES = {"astype": "cast", "clip": "clamp",
           "moveaxis": "movedim", "swapdims": "swapaxes", "divide": "div", "multiply": "mul",
           "subtract": "sub", "greater": "gt", "greater_equal": "ge", "less": "lt", "less_equal": "le",
           "not_equal": "ne", "clip_": "clamp_", "divide_": "div_", "multiply_": "mul_", "subtract_": "sub_",
           "greater_": "gt_", "greater_equal_": "ge_", "less_": "lt_", "less_equal_": "le_",
           "not_equal_": "ne_", "absolute_": "abs_", "negative_": "neg_"}  # fmt: skip


IN_PLACE = ("abs", "neg", "exp", "log", "sqrt", "rsqrt", "sigmoid", "tanh", "relu", "reciprocal", "square",
            "floor", "ceil", "round", "trunc", "sign", "pow", "lerp", "scatter_reduce", "index_fill",
            "masked_fill", "mul", "div", "index_add", "scatter", "scatter_add", "index_copy",
            "masked_scatter", "floor_divide", "remainder", "fmod", "true_divide", "copysign", "tan", "exp2",
            "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "bitwise_left_shift",
            "bitwise_right_shift", "clamp_min", "clamp_max", "sin", "cos", "sinh", "cosh", "asin", "acos",
            "atan", "asinh", "acosh", "atanh", "arcsin", "arccos", "arctan", "arcsinh", "arccosh", "arctanh",
            "log2", "log10", "log1p", "expm1", "erf", "erfc", "erfinv", "lgamma", "digamma", "i0", "sinc",
            "frac", "fix", "deg2rad", "rad2deg", "nan_to_num", "logit", "xlogy", "hypot", "atan2", "arctan2",
            "heaviside", "ldexp", "gcd", "lcm", "nextafter", "sgn", "logical_and", "logical_or",
            "logical_not", "logical_xor", "eq", "ne", "lt", "le", "gt", "ge", "addcmul", "addcdiv", "addmm",
            "addmv", "addr", "addbmm", "baddbmm", "cumsum", "cumprod", "tril", "triu", "float_power",
            "renorm", "index_reduce", "put", "igamma", "igammac", "polygamma", "mvlgamma")  # fmt: skip


VIEWS_IN_PLACE = ("squeeze", "unsqueeze", "t", "transpose", "swapaxes", "swapdims")

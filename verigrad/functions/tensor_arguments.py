"""PyTorch's functions whose operands must both be tensors: `torch.maximum(x, 2.0)` raises PyTorch's
TypeError (its signature has no Scalar overload), where verigrad's ops lift a number silently. The ops
themselves keep lifting numbers (verigrad's own code relies on it); the public names and Tensor's methods
are these checked forms, which also take PyTorch's keywords (`torch.maximum(input=x, other=y)`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..ops import binary, bitwise, special_gamma
from ..ops import special as special_ops
from ..tensor import Tensor
from . import numeric, pointwise, special

# name: (the function, the names of its tensor operands as PyTorch's signature gives them)
_OPERANDS: dict[str, tuple[Callable[..., Any], tuple[str, ...]]] = {
    "maximum": (binary.maximum, ("input", "other")),
    "minimum": (binary.minimum, ("input", "other")),
    "fmax": (special.fmax, ("input", "other")),
    "fmin": (special.fmin, ("input", "other")),
    "atan2": (binary.atan2, ("input", "other")),
    "arctan2": (binary.atan2, ("input", "other")),
    "hypot": (binary.hypot, ("input", "other")),
    "logaddexp": (binary.logaddexp, ("input", "other")),
    "logaddexp2": (special.logaddexp2, ("input", "other")),
    "nextafter": (special_ops.nextafter, ("input", "other")),
    "heaviside": (special.heaviside, ("input", "values")),
    "ldexp": (special.ldexp, ("input", "other")),
    "igamma": (special_gamma.igamma, ("input", "other")),
    "igammac": (special_gamma.igammac, ("input", "other")),
    "isclose": (pointwise.isclose, ("input", "other")),
    "allclose": (pointwise.allclose, ("input", "other")),
    "equal": (pointwise.equal, ("input", "other")),
    "gcd": (bitwise.gcd, ("input", "other")),
    "lcm": (bitwise.lcm, ("input", "other")),
    "dist": (numeric.dist, ("input", "other")),
    "logical_and": (binary.logical_and, ("input", "other")),
    "logical_or": (binary.logical_or, ("input", "other")),
    "logical_xor": (special.logical_xor, ("input", "other")),
}


def _operands(name: str, names: tuple[str, ...], args: tuple, kwargs: dict, method: bool) -> tuple:
    """The operands, given by position or by PyTorch's keyword, checked to be tensors; then the rest."""
    values = list(args[: len(names)])
    for keyword in names[len(values) :]:
        if keyword not in kwargs:
            raise TypeError(f"{name}(): missing required argument '{keyword}'")
        values.append(kwargs.pop(keyword))
    refuse_non_tensors(name, names, values, len(args), method)
    return (*values, *args[len(names) :])


def refuse_non_tensors(
    name: str, names: tuple[str, ...], values: list | tuple, positional: int, method: bool = False
) -> None:
    """PyTorch's TypeError for an operand that is not a tensor (a Python number): `values` by `names`,
    the first `positional` of them given by position (a method's first is self, not counted)."""
    for i, (keyword, value) in enumerate(zip(names, values)):
        if not isinstance(value, Tensor):
            where = f" (position {i + 1 - method})" if i < positional else ""
            kind = type(value).__name__
            raise TypeError(f"{name}(): argument '{keyword}'{where} must be Tensor, not {kind}")


def checked(name: str, *, method: bool = False, shown: str | None = None) -> Callable[..., Any]:
    """PyTorch's `torch.<name>` (or, with `method`, `Tensor.<name>`): the function of `name` above, its
    operands required to be tensors; `shown` is the name its errors give (PyTorch's `special_gammainc`
    for torch.special.gammainc), `name` by default."""
    fn, names = _OPERANDS[name]
    shown = shown or name

    def call(*args: Any, **kwargs: Any) -> Tensor:
        return fn(*_operands(shown, names, args, kwargs, method), **kwargs)

    call.__name__ = call.__qualname__ = shown
    call.__doc__ = f"{fn.__doc__ or name}\n\nAs PyTorch's, every operand must be a tensor."
    return call


NAMES = tuple(_OPERANDS)
FUNCTIONS: dict[str, Callable[..., Any]] = {name: checked(name) for name in NAMES}
METHODS: dict[str, Callable[..., Any]] = {name: checked(name, method=True) for name in NAMES}

"""Activation layers, as PyTorch's: each calls its F function with the settings it was made with, and
prints them as PyTorch does."""

from __future__ import annotations

import warnings
from typing import Any

from ..errors import ShapeError
from ..ops import full
from ..tensor import Tensor, describe
from . import functional as F
from .module import Module, check_dtypes, factory_dtype


def _activation(name: str, fn: Any) -> type[Module]:
    def forward(self: Module, input: Tensor) -> Tensor:
        return fn(input)

    return type(name, (Module,), {"forward": forward, "__doc__": f"{name} as a layer (see F.{fn.__name__})."})


Tanh = _activation("Tanh", F.tanh)
Sigmoid = _activation("Sigmoid", F.sigmoid)
Softsign = _activation("Softsign", F.softsign)
LogSigmoid = _activation("LogSigmoid", F.logsigmoid)
Tanhshrink = _activation("Tanhshrink", F.tanhshrink)


class _Configured(Module):
    """An activation with settings: F.<fn>(x, **settings) (`inplace` among them: see F.relu). Its repr
    shows `shown` of them, inplace only when set (as PyTorch's)."""

    shown: tuple[str, ...] | None = None  # None: every setting

    def __init__(self, **settings: Any):
        super().__init__()
        for key, value in settings.items():
            setattr(self, key, value)
        object.__setattr__(self, "_settings", tuple(settings))

    def forward(self, input: Tensor) -> Tensor:
        return self.fn(input, **{key: getattr(self, key) for key in self._settings})

    def extra_repr(self) -> str:
        shown = self._settings if self.shown is None else self.shown
        return ", ".join(
            f"{k}={getattr(self, k)!r}" for k in shown if k != "inplace" or getattr(self, "inplace", False)
        )


def _inplace_activation(name: str, fn: Any, shown: tuple[str, ...] | None = None) -> type[Module]:
    def __init__(self: _Configured, inplace: bool = False) -> None:
        _Configured.__init__(self, inplace=inplace)

    doc = f"{name} as a layer (see F.{fn.__name__}; inplace=True: see F.relu)."
    attrs = {"fn": staticmethod(fn), "__init__": __init__, "__doc__": doc, "shown": shown}
    return type(name, (_Configured,), attrs)


ReLU = _inplace_activation("ReLU", F.relu)
SiLU = _inplace_activation("SiLU", F.silu)
ReLU6 = _inplace_activation("ReLU6", F.relu6)
Mish = _inplace_activation("Mish", F.mish)
Hardsigmoid = _inplace_activation("Hardsigmoid", F.hardsigmoid, shown=())
Hardswish = _inplace_activation("Hardswish", F.hardswish, shown=())
SELU = _inplace_activation("SELU", F.selu)


class CELU(_Configured):
    fn = staticmethod(F.celu)

    def __init__(self, alpha: float = 1.0, inplace: bool = False):
        super().__init__(alpha=alpha, inplace=inplace)


class GLU(_Configured):
    fn = staticmethod(F.glu)

    def __init__(self, dim: int = -1):
        super().__init__(dim=dim)


class LeakyReLU(_Configured):
    fn = staticmethod(F.leaky_relu)

    def __init__(self, negative_slope: float = 0.01, inplace: bool = False):
        super().__init__(negative_slope=negative_slope, inplace=inplace)


class ELU(_Configured):
    fn = staticmethod(F.elu)

    def __init__(self, alpha: float = 1.0, inplace: bool = False):
        super().__init__(alpha=alpha, inplace=inplace)


class Softplus(_Configured):
    fn = staticmethod(F.softplus)

    def __init__(self, beta: float = 1.0, threshold: float = 20.0):
        super().__init__(beta=beta, threshold=threshold)


class Hardtanh(_Configured):
    """x limited to [min_val, max_val]; min_value and max_value are PyTorch's deprecated names of them."""

    fn = staticmethod(F.hardtanh)

    def __init__(
        self,
        min_val: float = -1.0,
        max_val: float = 1.0,
        inplace: bool = False,
        min_value: float | None = None,
        max_value: float | None = None,
    ):
        if min_value is not None or max_value is not None:
            warnings.warn(
                "keyword argument `min_value`/`max_value` is deprecated and renamed to `min_val`/`max_val`",
                FutureWarning,
                stacklevel=2,
            )
            min_val = min_val if min_value is None else min_value
            max_val = max_val if max_value is None else max_value
        if min_val > max_val:
            raise ValueError(f"Hardtanh: min_val ({min_val}) must not be greater than max_val ({max_val})")
        super().__init__(min_val=min_val, max_val=max_val, inplace=inplace)


class Threshold(_Configured):
    """x where x > threshold, else value."""

    fn = staticmethod(F.threshold)

    def __init__(self, threshold: float, value: float, inplace: bool = False):
        super().__init__(threshold=threshold, value=value, inplace=inplace)


class RReLU(_Configured):
    """Randomized leaky ReLU: random slopes in training, their mean (lower + upper) / 2 in eval."""

    def __init__(self, lower: float = 1.0 / 8, upper: float = 1.0 / 3, inplace: bool = False):
        super().__init__(lower=lower, upper=upper, inplace=inplace)

    def forward(self, input: Tensor) -> Tensor:
        return F.rrelu(input, self.lower, self.upper, self.training, self.inplace)


class Hardshrink(_Configured):
    fn = staticmethod(F.hardshrink)

    def __init__(self, lambd: float = 0.5):
        super().__init__(lambd=lambd)

    def extra_repr(self) -> str:
        return f"{self.lambd}"


class Softshrink(Hardshrink):
    fn = staticmethod(F.softshrink)


class PReLU(Module):
    """x where x > 0, else weight * x: one learned slope, or one per channel (num_parameters)."""

    def __init__(self, num_parameters: int = 1, init: float = 0.25, device: Any = None, dtype: Any = None):
        super().__init__()
        dtype = factory_dtype("PReLU", device, dtype)
        self.num_parameters, self.init = num_parameters, init
        self.weight = full((num_parameters,), init, dtype=dtype).requires_grad_(True)

    def forward(self, input: Tensor) -> Tensor:
        weight = self.weight  # read once: a parametrized weight is computed at each read
        check_dtypes("PReLU", weight, ("input", input))
        return F.prelu(input, weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"


class GELU(Module):
    def __init__(self, approximate: str = "none"):
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, input: Tensor) -> Tensor:
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class Softmax(Module):
    """softmax along `dim` (None: PyTorch's deprecated implicit choice, with its warning)."""

    fn = staticmethod(F.softmax)

    def __init__(self, dim: int | None = None):
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        return type(self).fn(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class LogSoftmax(Softmax):
    fn = staticmethod(F.log_softmax)


class Softmin(Softmax):
    fn = staticmethod(F.softmin)


class Softmax2d(Module):
    """Softmax over the channels of [N, C, H, W] (or [C, H, W]) at each position."""

    def forward(self, input: Tensor) -> Tensor:
        if input.ndim not in (3, 4):
            raise ShapeError(f"Softmax2d takes 3-D or 4-D input, got {describe(input)}")
        return F.softmax(input, dim=-3)

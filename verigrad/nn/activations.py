"""Activation layers, as PyTorch's: each calls its F function with the settings it was made with."""

from __future__ import annotations

from typing import Any

from ..dtypes import f32
from ..errors import ShapeError
from ..ops import full
from ..tensor import Tensor, describe
from . import functional as F
from .module import Module


def _activation(name: str, fn: Any) -> type[Module]:
    return type(name, (Module,), {"forward": lambda self, x: fn(x), "__doc__": f"{name} as a layer."})


Tanh = _activation("Tanh", F.tanh)


Sigmoid = _activation("Sigmoid", F.sigmoid)


class _Configured(Module):
    """An activation with settings: F.<fn>(x, **settings) (`inplace` among them: see F.relu)."""

    def __init__(self, **settings: Any):
        super().__init__()
        self.settings = settings

    def forward(self, x: Tensor) -> Tensor:
        return self.fn(x, **self.settings)

    def extra_repr(self) -> str:  # as PyTorch's: inplace shown only when it is set
        return ", ".join(f"{k}={v!r}" for k, v in self.settings.items() if k != "inplace" or v)


def _inplace_activation(name: str, fn: Any) -> type[Module]:
    def __init__(self: _Configured, inplace: bool = False) -> None:
        _Configured.__init__(self, inplace=inplace)

    doc = f"{name} as a layer (inplace=True: see F.relu)."
    return type(name, (_Configured,), {"fn": staticmethod(fn), "__init__": __init__, "__doc__": doc})


ReLU = _inplace_activation("ReLU", F.relu)


SiLU = _inplace_activation("SiLU", F.silu)


ReLU6 = _inplace_activation("ReLU6", F.relu6)


Mish = _inplace_activation("Mish", F.mish)


Hardsigmoid = _inplace_activation("Hardsigmoid", F.hardsigmoid)


Hardswish = _inplace_activation("Hardswish", F.hardswish)


SELU = _inplace_activation("SELU", F.selu)


Softsign = _activation("Softsign", F.softsign)


LogSigmoid = _activation("LogSigmoid", F.logsigmoid)


class CELU(_Configured):
    fn = staticmethod(F.celu)

    def __init__(self, alpha: float = 1.0, inplace: bool = False):
        super().__init__(alpha=alpha, inplace=inplace)


class GLU(_Configured):
    fn = staticmethod(F.glu)

    def __init__(self, dim: int = -1):
        super().__init__(dim=dim)


class PReLU(Module):
    """x where x > 0, else weight * x: one learned slope, or one per channel (num_parameters)."""

    def __init__(self, num_parameters: int = 1, init: float = 0.25, dtype: Any = f32):
        super().__init__()
        self.num_parameters = num_parameters
        self.weight = full((num_parameters,), init, dtype=dtype).requires_grad_(True)

    def forward(self, x: Tensor) -> Tensor:
        return F.prelu(x, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"


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
    fn = staticmethod(F.hardtanh)

    def __init__(self, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False):
        super().__init__(min_val=min_val, max_val=max_val, inplace=inplace)


class GELU(Module):
    def __init__(self, approximate: str = "none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, x: Tensor) -> Tensor:
        return F.gelu(x, approximate=self.approximate)


class Softmax(Module):
    def __init__(self, dim: int = -1):
        super().__init__()
        self.dim = dim

    def forward(self, x: Tensor) -> Tensor:
        return F.softmax(x, self.dim)


class LogSoftmax(Softmax):
    def forward(self, x: Tensor) -> Tensor:
        return F.log_softmax(x, self.dim)


class Softmax2d(Module):
    """Softmax over the channels of [N, C, H, W] (or [C, H, W]) at each position."""

    def forward(self, x: Tensor) -> Tensor:
        if x.ndim not in (3, 4):
            raise ShapeError(f"Softmax2d takes 3-D or 4-D input, got {describe(x)}")
        return F.softmax(x, dim=-3)

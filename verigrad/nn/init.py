"""Parameter initialisation as in PyTorch, drawn from the seedable generator: the layers' own
(`uniform`, `normal`), and PyTorch's in-place `zeros_`, `ones_`, `constant_`, `uniform_`, `normal_`,
`xavier_uniform_`, `xavier_normal_`, `kaiming_uniform_`, `kaiming_normal_` with `calculate_gain`.

Sizes may be symbolic (inside `verigrad.abstract()`): the bounds then do not matter, only the specs.
"""

from __future__ import annotations

import math

from ..autograd import no_grad
from ..dtypes import DType, f32
from ..ops import Generator, full, ones_like, rand, randn, zeros_like
from ..shapes import DimLike
from ..tensor import Tensor


def uniform(shape: tuple, bound: float, dtype: DType | str = f32) -> Tensor:
    """Uniform in [-bound, bound), as a parameter (requires grad)."""
    return (rand(*shape, dtype=dtype) * (2 * bound) - bound).detach().requires_grad_(True)


def normal(shape: tuple, std: float = 1.0, dtype: DType | str = f32) -> Tensor:
    return (randn(*shape, dtype=dtype) * std).detach().requires_grad_(True)


def fan_in_bound(fan_in: DimLike) -> float:
    """1/sqrt(fan_in): PyTorch's Kaiming-uniform bound with a=sqrt(5), and its bias bound."""
    return 1.0 / math.sqrt(fan_in) if isinstance(fan_in, int) and fan_in > 0 else 1.0


# PyTorch's in-place initialisers (for `model.apply(init_fn)`): each writes into t and returns it -----
def _fill(t: Tensor, values: Tensor) -> Tensor:
    with no_grad():
        return t.assign(values)


def zeros_(t: Tensor) -> Tensor:
    return _fill(t, zeros_like(t))


def ones_(t: Tensor) -> Tensor:
    return _fill(t, ones_like(t))


def constant_(t: Tensor, value: float) -> Tensor:
    return _fill(t, full(t.shape, value, dtype=t.dtype))


def uniform_(t: Tensor, a: float = 0.0, b: float = 1.0, generator: Generator | None = None) -> Tensor:
    """Uniform in [a, b) (Tensor.uniform_, outside the graph)."""
    with no_grad():
        return t.uniform_(a, b, generator)


def normal_(t: Tensor, mean: float = 0.0, std: float = 1.0, generator: Generator | None = None) -> Tensor:
    with no_grad():
        return t.normal_(mean, std, generator)


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """PyTorch's recommended gains: 1 for linear layers and sigmoid, 5/3 for tanh, sqrt(2) for relu,
    sqrt(2 / (1 + slope^2)) for leaky_relu (slope `param`, default 0.01), 3/4 for selu."""
    linear = ("linear", "identity", "conv1d", "conv2d", "conv3d", "sigmoid")
    if nonlinearity in linear:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else float(param)
        return math.sqrt(2.0 / (1 + slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"unknown nonlinearity {nonlinearity!r}")


def fans(t: Tensor) -> tuple[int, int]:
    """(fan_in, fan_out) of a weight laid out as PyTorch's: [out, in, *kernel] (a Linear's [out, in],
    an NCHW Conv2d's [O, C, KH, KW]; an NHWC Conv2d's [KH, KW, C, O] weight is not)."""
    if t.ndim < 2:
        raise ValueError(f"fans need a weight of at least 2 dimensions, got {t.ndim}")
    receptive = math.prod(t.shape[2:])
    return t.shape[1] * receptive, t.shape[0] * receptive


def xavier_uniform_(t: Tensor, gain: float = 1.0, generator: Generator | None = None) -> Tensor:
    fan_in, fan_out = fans(t)
    bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(t, -bound, bound, generator)


def xavier_normal_(t: Tensor, gain: float = 1.0, generator: Generator | None = None) -> Tensor:
    fan_in, fan_out = fans(t)
    return normal_(t, 0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)), generator)


def _kaiming_std(t: Tensor, a: float, mode: str, nonlinearity: str) -> float:
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"mode must be 'fan_in' or 'fan_out', got {mode!r}")
    fan = fans(t)[0 if mode == "fan_in" else 1]
    return calculate_gain(nonlinearity, a) / math.sqrt(fan)


def kaiming_uniform_(
    t: Tensor,
    a: float = 0.0,
    mode: str = "fan_in",
    nonlinearity: str = "leaky_relu",
    generator: Generator | None = None,
) -> Tensor:
    bound = math.sqrt(3.0) * _kaiming_std(t, a, mode, nonlinearity)
    return uniform_(t, -bound, bound, generator)


def kaiming_normal_(
    t: Tensor,
    a: float = 0.0,
    mode: str = "fan_in",
    nonlinearity: str = "leaky_relu",
    generator: Generator | None = None,
) -> Tensor:
    return normal_(t, 0.0, _kaiming_std(t, a, mode, nonlinearity), generator)

"""Parameter initialisation as in PyTorch, drawn from the seedable generator: the layers' own
(`_uniform_param`, `_normal_param`), and PyTorch's in-place `zeros_`, `ones_`, `constant_`, `eye_`,
`uniform_`, `normal_`, `trunc_normal_`, `xavier_uniform_`, `xavier_normal_`, `kaiming_uniform_`,
`kaiming_normal_`, `orthogonal_`, `sparse_` and `dirac_`, with `calculate_gain` and PyTorch's
deprecated names without the `_` (`uniform`, `normal`, `constant`, `eye`, ...: they warn, then fill in place).

Sizes may be symbolic (inside `verigrad.abstract()`): the bounds then do not matter, only the specs.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from ..autograd import no_grad
from ..dtypes import DType, bool_, f32, f64
from ..functions import scatter
from ..ops import (
    Generator,
    full,
    ones,
    ones_like,
    rand,
    randn,
    randperm,
    stack,
    tensor,
    where,
    zeros_like,
)
from ..ops import eye as identity  # not `eye`: that name is PyTorch's deprecated eye_ below
from ..shapes import DimLike
from ..tensor import Tensor


def _uniform_param(shape: tuple, bound: float, dtype: DType | str = f32) -> Tensor:
    """Uniform in [-bound, bound), as a parameter (requires grad)."""
    return (rand(*shape, dtype=dtype) * (2 * bound) - bound).detach().requires_grad_(True)


def _normal_param(shape: tuple, std: float = 1.0, dtype: DType | str = f32) -> Tensor:
    """N(0, std), as a parameter (requires grad)."""
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


def constant_(t: Tensor, val: float) -> Tensor:
    return _fill(t, full(t.shape, val, dtype=t.dtype))


def eye_(t: Tensor) -> Tensor:
    """The identity matrix (ones on the diagonal of a 2-D tensor, zeros elsewhere)."""
    if t.ndim != 2:
        raise ValueError(f"eye_: only tensors with 2 dimensions are supported, got {t.ndim}")
    return _fill(t, identity(t.shape[0], t.shape[1], dtype=t.dtype))


def uniform_(t: Tensor, a: float = 0.0, b: float = 1.0, generator: Generator | None = None) -> Tensor:
    """Uniform in [a, b) (Tensor.uniform_, outside the graph)."""
    with no_grad():
        return t.uniform_(a, b, generator)


def normal_(t: Tensor, mean: float = 0.0, std: float = 1.0, generator: Generator | None = None) -> Tensor:
    with no_grad():
        return t.normal_(mean, std, generator)


_LINEAR = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d")


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """PyTorch's recommended gains: 1 for the linear maps (linear, conv*, conv_transpose*) and sigmoid,
    5/3 for tanh, sqrt(2) for relu, sqrt(2 / (1 + slope^2)) for leaky_relu (slope `param`, default
    0.01), 3/4 for selu."""
    if nonlinearity in _LINEAR or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif isinstance(param, int | float) and not isinstance(param, bool):
            slope = param
        else:
            raise ValueError(f"calculate_gain: negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(
        f"calculate_gain: unknown nonlinearity {nonlinearity!r} (unsupported); use one of "
        f"{', '.join((*_LINEAR, 'sigmoid', 'tanh', 'relu', 'leaky_relu', 'selu'))}"
    )


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


def _erfinv(y: Tensor) -> Tensor:
    """erf's inverse on (-1, 1): Winitzki's approximation refined by three Newton steps (f64 then)."""
    w = -(1 - y * y).log()
    a = 0.147
    first = 2 / (math.pi * a) + w / 2
    x = (first * first + w / a).sqrt().sub(first).sqrt() * y.sign()
    for _ in range(3):
        x = x - (x.erf() - y) / ((-(x * x)).exp() * (2 / math.sqrt(math.pi)))
    return x


def trunc_normal_(
    t: Tensor,
    mean: float = 0.0,
    std: float = 1.0,
    a: float = -2.0,
    b: float = 2.0,
    generator: Generator | None = None,
) -> Tensor:
    """N(mean, std) truncated to [a, b], by PyTorch's method: uniform between the bounds' normal CDFs,
    through the inverse CDF, clamped to [a, b]."""
    if not a < b:
        raise ValueError(f"trunc_normal_: a must be below b, got a={a}, b={b}")
    cdf = lambda v: (1.0 + math.erf(v / math.sqrt(2.0))) / 2.0
    low, high = cdf((a - mean) / std), cdf((b - mean) / std)
    with no_grad():
        u = rand(*t.shape, dtype=f64, generator=generator) * (2 * high - 2 * low) + (2 * low - 1)
        values = (_erfinv(u) * (std * math.sqrt(2.0)) + mean).clamp(a, b)
        return t.assign(values.cast(t.dtype))


def orthogonal_(t: Tensor, gain: float = 1.0, generator: Generator | None = None) -> Tensor:
    """A (semi-)orthogonal matrix, times gain, for t flattened to [rows, the rest] (PyTorch's: the Q of a
    normal matrix's QR, its columns' signs those of R's diagonal)."""
    if t.ndim < 2:
        raise ValueError("orthogonal_: only tensors with 2 or more dimensions are supported")
    rows = t.shape[0]
    cols = t.numel() // rows if rows else 0
    with no_grad():
        flat = randn(rows, cols, dtype=f64, generator=generator)
        if rows < cols:
            flat = flat.mT
        from ..linalg import qr  # on first use: linalg is no layer's start-up

        q, r = qr(flat)
        q = q * r.diagonal(0, -2, -1).sign().unsqueeze(-2)
        if rows < cols:
            q = q.mT
        return t.assign((q * gain).reshape(t.shape).cast(t.dtype))


def sparse_(t: Tensor, sparsity: float, std: float = 0.01, generator: Generator | None = None) -> Tensor:
    """A 2-D matrix N(0, std) with ceil(sparsity * rows) zeros in each column, at random rows."""
    if t.ndim != 2:
        raise ValueError(f"sparse_: only tensors with 2 dimensions are supported, got {t.ndim}")
    rows, cols = t.shape
    zeros_per_column = math.ceil(sparsity * rows)
    with no_grad():
        values = randn(rows, cols, dtype=t.dtype, generator=generator) * std
        keep = ones((rows, cols), dtype=bool_)
        if zeros_per_column:
            picks = stack(
                [randperm(rows, generator=generator)[:zeros_per_column] for _ in range(cols)], axis=1
            )
            keep = scatter(keep, 0, picks, value=False)
        return t.assign(where(keep, values, 0.0).cast(t.dtype))


def dirac_(t: Tensor, groups: int = 1) -> Tensor:
    """The identity convolution kernel: a 3-, 4- or 5-D weight [out, in, *k], zero but a 1 at the centre
    of each (g * out/groups + d, d) for d below min(out/groups, in), so the convolution passes the first
    channels of each group through (PyTorch's)."""
    if t.ndim not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    out, channels, *kernel = t.shape
    if out % groups != 0:
        raise ValueError("dim 0 must be divisible by groups")
    per_group = out // groups
    values = np.zeros(tuple(t.shape), dtype=np.float64)
    centre = tuple(k // 2 for k in kernel)
    for g in range(groups):
        for d in range(min(per_group, channels)):
            values[(g * per_group + d, d, *centre)] = 1.0
    return _fill(t, tensor(values).cast(t.dtype))


def _deprecated(method: Any) -> Any:
    """PyTorch's old name of an initializer (without the trailing _): it warns, then initializes."""
    new_name = method.__name__
    old_name = new_name[:-1]

    def deprecated_init(*args: Any, **kwargs: Any) -> Any:
        warnings.warn(
            f"`nn.init.{old_name}` is now deprecated in favor of `nn.init.{new_name}`.",
            FutureWarning,
            stacklevel=2,
        )
        return method(*args, **kwargs)

    deprecated_init.__name__ = old_name
    deprecated_init.__doc__ = f"Deprecated: nn.init.{new_name}."
    return deprecated_init


uniform = _deprecated(uniform_)
normal = _deprecated(normal_)
constant = _deprecated(constant_)
eye = _deprecated(eye_)
dirac = _deprecated(dirac_)
xavier_uniform = _deprecated(xavier_uniform_)
xavier_normal = _deprecated(xavier_normal_)
kaiming_uniform = _deprecated(kaiming_uniform_)
kaiming_normal = _deprecated(kaiming_normal_)
orthogonal = _deprecated(orthogonal_)
sparse = _deprecated(sparse_)

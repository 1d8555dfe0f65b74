"""Activation functions, as in `torch.nn.functional`: softmax and log_softmax, the ReLU family, GELU,
SiLU, the sigmoid and tanh families, and PReLU and GLU; `inplace=True` as PyTorch's (see `_inplace`)."""

from __future__ import annotations

from typing import Any

from ... import ops
from ...autograd import is_grad_enabled
from ...errors import ShapeError
from ...shapes import shape_text
from ...tensor import Tensor


def softmax(x: Tensor, dim: int = -1, dtype: Any = None) -> Tensor:
    """exp(x) / sum(exp(x)) along `dim`, max-subtracted so it cannot overflow; with `dtype`, x is cast
    to it first (as PyTorch's)."""
    return ops.softmax(x if dtype is None else x.cast(dtype), axis=dim)


def log_softmax(x: Tensor, dim: int = -1, dtype: Any = None) -> Tensor:
    """log(softmax(x)) along `dim`, computed without forming softmax; `dtype` as softmax's."""
    return ops.log_softmax(x if dtype is None else x.cast(dtype), axis=dim)


def relu(x: Tensor, inplace: bool = False) -> Tensor:
    """max(x, 0)."""
    return _inplace(x, ops.relu(x), inplace)


def gelu(x: Tensor, approximate: str = "none") -> Tensor:
    """GELU with the exact normal CDF, or its tanh approximation with approximate='tanh'."""
    if approximate not in ("none", "tanh"):
        raise ValueError(f"approximate must be 'none' or 'tanh', got {approximate!r}")
    return ops.gelu_tanh(x) if approximate == "tanh" else ops.gelu(x)


def _inplace(x: Tensor, y: Tensor, inplace: bool) -> Tensor:
    """PyTorch's `inplace=True`: y written into x, and x returned, where x takes no part in a gradient;
    else y itself (the same values; the memory is not saved)."""
    if inplace and not (x.requires_grad and is_grad_enabled()):
        return x.assign(y)
    return y


def silu(x: Tensor, inplace: bool = False) -> Tensor:
    """x * sigmoid(x)."""
    return _inplace(x, ops.silu(x), inplace)


def sigmoid(x: Tensor) -> Tensor:
    """1 / (1 + exp(-x))."""
    return ops.sigmoid(x)


def tanh(x: Tensor) -> Tensor:
    """Hyperbolic tangent."""
    return ops.tanh(x)


def leaky_relu(x: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    """x where x > 0, else negative_slope * x."""
    return _inplace(x, ops.where(x > 0, x, x * negative_slope), inplace)


def elu(x: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """x where x > 0, else alpha * (exp(x) - 1) (by expm1)."""
    return _inplace(x, ops.where(x > 0, x, ops.expm1(x) * alpha), inplace)


def softplus(x: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """log(1 + exp(beta x)) / beta, and x itself where beta x > threshold (as PyTorch); the gradient is
    sigmoid(beta x), and 1 above the threshold."""
    scaled = x * beta
    linear = scaled > threshold
    # the curve only ever sees inputs up to the threshold: exp(350) is inf, and the gradient where() sends
    # it there, 0 * inf, would be NaN
    curve = ops.where(linear, 0.0, scaled)
    return ops.where(linear, x, ops.log1p(ops.exp(curve)) / beta)


def hardtanh(x: Tensor, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> Tensor:
    """x limited to [min_val, max_val]; the gradient passes strictly inside (as PyTorch's)."""
    return _inplace(x, ops.where(x <= min_val, min_val, ops.where(x >= max_val, max_val, x)), inplace)


def relu6(x: Tensor, inplace: bool = False) -> Tensor:
    return hardtanh(x, 0.0, 6.0, inplace)


def mish(x: Tensor, inplace: bool = False) -> Tensor:
    """x * tanh(softplus(x))."""
    return _inplace(x, x * ops.tanh(softplus(x)), inplace)


def hardsigmoid(x: Tensor, inplace: bool = False) -> Tensor:
    """relu6(x + 3) / 6: 0 below -3, 1 above 3, linear between."""
    return _inplace(x, relu6(x + 3.0) / 6.0, inplace)


def hardswish(x: Tensor, inplace: bool = False) -> Tensor:
    """x * hardsigmoid(x)."""
    return _inplace(x, x * hardsigmoid(x), inplace)


_SELU_ALPHA, _SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946


def selu(x: Tensor, inplace: bool = False) -> Tensor:
    """scale * elu(x, alpha) with the self-normalising constants (alpha 1.6733, scale 1.0507)."""
    return _inplace(x, elu(x, _SELU_ALPHA) * _SELU_SCALE, inplace)


def celu(x: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """x where x > 0, else alpha * (exp(x / alpha) - 1)."""
    if alpha == 0:
        raise ValueError("celu: alpha must not be 0")
    return _inplace(x, ops.where(x > 0, x, ops.expm1(x / alpha) * alpha), inplace)


def softsign(x: Tensor) -> Tensor:
    """x / (1 + |x|)."""
    return x / (ops.abs(x) + 1.0)


def logsigmoid(x: Tensor) -> Tensor:
    """log(sigmoid(x)) = -softplus(-x), without overflow for large |x|."""
    return ops.minimum(x, 0.0) - ops.log1p(ops.exp(-ops.abs(x)))


def glu(x: Tensor, dim: int = -1) -> Tensor:
    """a * sigmoid(b) for the halves a, b of x along `dim` (of even length)."""
    size = x.shape[dim]
    if isinstance(size, int) and size % 2:
        raise ShapeError(f"glu: dimension {dim} of {shape_text(x.shape)} has odd length {size}; it is halved")
    a, b = x.chunk(2, dim)
    return a * ops.sigmoid(b)


def prelu(x: Tensor, weight: Tensor) -> Tensor:
    """x where x > 0, else weight * x; weight has one value, or one per channel (dimension 1 of x)."""
    if weight.ndim != 1:
        raise ShapeError(f"prelu: weight must be one-dimensional, got {shape_text(weight.shape)}")
    if weight.shape[0] != 1 and x.ndim >= 2:
        weight = weight.reshape(weight.shape[0], *([1] * (x.ndim - 2)))
    return ops.where(x > 0, x, weight * x)

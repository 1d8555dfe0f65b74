"""Activation functions, as in `torch.nn.functional`, with PyTorch's signatures: softmax, log_softmax
and softmin, the ReLU family, GELU, SiLU, the sigmoid and tanh families, the shrinks, threshold, RReLU,
PReLU and GLU; `inplace=True` as PyTorch's (see `_inplace`), and the in-place forms relu_, elu_, ...
"""

from __future__ import annotations

import math
import warnings
from typing import Any

from ... import ops
from ...dtypes import bool_, u8
from ...errors import DTypeError, ShapeError
from ...ops._op import floating_only
from ...ops.data_in import check_number
from ...shapes import shape_text
from ...tensor import Tensor


def _softmax_dim(name: str, ndim: int, dim: int | None) -> int:
    """`dim`, or PyTorch's deprecated implicit choice when None (0 for 0-, 1- and 3-D input, else 1),
    with its warning."""
    if dim is not None:
        return dim
    implicit = 0 if ndim in (0, 1, 3) else 1
    warnings.warn(
        f"Implicit dimension choice for {name} has been deprecated. Change the call to include dim=X as an "
        "argument.",
        UserWarning,
        stacklevel=3,
    )
    return implicit


def softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None) -> Tensor:
    """exp(x) / sum(exp(x)) along `dim`, max-subtracted so it cannot overflow; with `dtype`, x is cast
    to it first (as PyTorch's). No dim: PyTorch's implicit one, with its warning."""
    if dim is None:
        dim = _softmax_dim("softmax", input.ndim, dim)
    return ops.softmax(input if dtype is None else input.cast(dtype), axis=dim)


def log_softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None) -> Tensor:
    """log(softmax(x)) along `dim`, computed without forming softmax; `dim` and `dtype` as softmax's."""
    if dim is None:
        dim = _softmax_dim("log_softmax", input.ndim, dim)
    return ops.log_softmax(input if dtype is None else input.cast(dtype), axis=dim)


def softmin(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None) -> Tensor:
    """softmax(-x) along `dim`; `dim` and `dtype` as softmax's, -x cast to `dtype` (as PyTorch's: -x of a u8
    tensor wraps first)."""
    dim = _softmax_dim("softmin", input.ndim, dim)
    return ops.softmax(-input if dtype is None else (-input).cast(dtype), axis=dim)


def _floats(x: Tensor, what: str) -> Tensor:
    """x, where PyTorch's kernel of `what` takes floats only (an integer or bool x raises, as there)."""
    floating_only(x.dtype, what=what)
    return x


def _inplace(x: Tensor, y: Tensor, inplace: bool) -> Tensor:
    """PyTorch's `inplace=True`: y written into x (recorded for autograd as any in-place write), and x
    returned; else y."""
    return x.assign(y) if inplace else y


def relu(input: Tensor, inplace: bool = False) -> Tensor:
    """max(x, 0)."""
    return _inplace(input, ops.relu(input), inplace)


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """GELU with the exact normal CDF, or its tanh approximation with approximate='tanh'."""
    _floats(input, "gelu")
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return ops.gelu_tanh(input) if approximate == "tanh" else ops.gelu(input)


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    """x * sigmoid(x)."""
    return _inplace(input, ops.silu(_floats(input, "silu")), inplace)


def sigmoid(input: Tensor) -> Tensor:
    """1 / (1 + exp(-x))."""
    return ops.sigmoid(input)


def tanh(input: Tensor) -> Tensor:
    """Hyperbolic tangent."""
    return ops.tanh(input)


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    """x where x > 0, else negative_slope * x."""
    _floats(input, "leaky_relu")
    return _inplace(input, ops.where(input > 0, input, input * negative_slope), inplace)


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """x where x > 0, else alpha * (exp(x) - 1) (by expm1)."""
    _floats(input, "elu")
    return _inplace(input, ops.where(input > 0, input, ops.expm1(input) * alpha), inplace)


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """log(1 + exp(beta x)) / beta, and x itself where beta x > threshold (as PyTorch); the gradient is
    sigmoid(beta x), and 1 above the threshold."""
    scaled = _floats(input, "softplus") * beta
    linear = scaled > threshold
    # the curve only ever sees inputs up to the threshold: exp(350) is inf, and the gradient where() sends
    # it there, 0 * inf, would be NaN
    curve = ops.where(linear, 0.0, scaled)
    return ops.where(linear, input, ops.log1p(ops.exp(curve)) / beta)


def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> Tensor:
    """x limited to [min_val, max_val]; the gradient passes strictly inside (as PyTorch's). An integer x
    stays integer, limited to the limits truncated (PyTorch's)."""
    if min_val > max_val:
        raise ValueError(f"hardtanh: min_val ({min_val}) must not be greater than max_val ({max_val})")
    if input.dtype is bool_:
        raise DTypeError("hardtanh does not take bool input (as PyTorch's); cast it to a number dtype first")
    if not input.dtype.is_float:
        if input.dtype is u8 and (min_val < 0 or max_val < 0):
            raise ValueError(f"hardtanh of a u8 tensor takes no negative limits, got {min_val} and {max_val}")
        min_val, max_val = math.trunc(min_val), math.trunc(max_val)
    # values as PyTorch's clamp (x at a limit is kept: -0.0 stays -0.0); the gradient only strictly
    # inside (0 at the limits and at NaN, as PyTorch's)
    clipped = ops.where(input < min_val, min_val, ops.where(input > max_val, max_val, input))
    inside = (input > min_val) & (input < max_val)
    return _inplace(input, ops.where(inside, input, clipped.detach()), inplace)


def relu6(input: Tensor, inplace: bool = False) -> Tensor:
    """min(max(x, 0), 6)."""
    return hardtanh(input, 0.0, 6.0, inplace)


def mish(input: Tensor, inplace: bool = False) -> Tensor:
    """x * tanh(softplus(x))."""
    return _inplace(input, input * ops.tanh(softplus(_floats(input, "mish"))), inplace)


def hardsigmoid(input: Tensor, inplace: bool = False) -> Tensor:
    """relu6(x + 3) / 6: 0 below -3, 1 above 3, linear between."""
    return _inplace(input, relu6(_floats(input, "hardsigmoid") + 3.0) / 6.0, inplace)


def hardswish(input: Tensor, inplace: bool = False) -> Tensor:
    """x * hardsigmoid(x)."""
    return _inplace(input, input * hardsigmoid(_floats(input, "hardswish")), inplace)


_SELU_ALPHA, _SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946


def selu(input: Tensor, inplace: bool = False) -> Tensor:
    """scale * elu(x, alpha) with the self-normalising constants (alpha 1.6733, scale 1.0507)."""
    return _inplace(input, elu(input, _SELU_ALPHA) * _SELU_SCALE, inplace)


def celu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """x where x > 0, else alpha * (exp(x / alpha) - 1)."""
    _floats(input, "celu")
    if alpha == 0:
        raise ValueError("celu: alpha must not be 0")
    return _inplace(input, ops.where(input > 0, input, ops.expm1(input / alpha) * alpha), inplace)


def threshold(input: Tensor, threshold: float, value: float, inplace: bool = False) -> Tensor:
    """value where x <= threshold, else x (NaN passes), as PyTorch's: both numbers taken in x's dtype (an
    integer tensor's threshold truncated, its value too: no promotion), one it cannot hold refused."""
    for number in (threshold, value):
        check_number(number, input.dtype, "threshold")
    if not input.dtype.is_float:
        threshold = int(threshold)
    return _inplace(input, input.masked_fill(input <= threshold, value), inplace)


_threshold = threshold  # for threshold_, whose argument has the name


def rrelu(
    input: Tensor,
    lower: float = 1.0 / 8,
    upper: float = 1.0 / 3,
    training: bool = False,
    inplace: bool = False,
) -> Tensor:
    """Randomized leaky ReLU: x where x > 0, else a * x, with a drawn from U(lower, upper) per element in
    training and (lower + upper) / 2 otherwise."""
    _floats(input, "rrelu")
    if not 0 <= lower <= upper:
        raise ValueError(f"rrelu: need 0 <= lower <= upper, got lower={lower}, upper={upper}")
    if not training:
        return leaky_relu(input, (lower + upper) / 2, inplace)
    slope = ops.rand_like(input) * (upper - lower) + lower
    return _inplace(input, ops.where(input > 0, input, input * slope), inplace)


def hardshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """0 where -lambd <= x <= lambd, else x (NaN too, and its gradient 1: PyTorch's)."""
    _floats(input, "hardshrink")
    return ops.where((input >= -lambd) & (input <= lambd), 0.0, input)


def softshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """x - lambd above lambd, x + lambd below -lambd, else 0 (lambd >= 0)."""
    _floats(input, "softshrink")
    if lambd < 0:
        raise ValueError(f"softshrink: lambd must be greater or equal to 0, got {lambd}")
    # PyTorch's: 0 inside, x -+ lambd outside (NaN too, with gradient 1)
    inside = (input >= -lambd) & (input <= lambd)
    return ops.where(inside, 0.0, input - lambd * ops.sign(input))


def tanhshrink(input: Tensor) -> Tensor:
    """x - tanh(x)."""
    return input - ops.tanh(input)


def softsign(input: Tensor) -> Tensor:
    """x / (1 + |x|)."""
    return input / (ops.abs(input) + 1.0)


def logsigmoid(input: Tensor) -> Tensor:
    """log(sigmoid(x)) = -softplus(-x), without overflow for large |x|."""
    _floats(input, "logsigmoid")
    return ops.minimum(input, 0.0) - ops.log1p(ops.exp(-ops.abs(input)))


def glu(input: Tensor, dim: int = -1) -> Tensor:
    """a * sigmoid(b) for the halves a, b of x along `dim` (of even length)."""
    _floats(input, "glu")
    size = input.shape[dim]
    if isinstance(size, int) and size % 2:
        raise ShapeError(
            f"glu: dimension {dim} of {shape_text(input.shape)} has odd length {size}; it is halved"
        )
    half = size // 2  # (chunk(2) of an empty dimension would give one chunk)
    return input.narrow(dim, 0, half) * ops.sigmoid(input.narrow(dim, half, half))


def prelu(input: Tensor, weight: Tensor) -> Tensor:
    """x where x > 0, else weight * x; weight has one value (0-d or [1]), or one per channel (dimension
    1 of x)."""
    floating_only(input.dtype, weight.dtype, what="prelu")
    if weight.ndim > 1:
        raise ShapeError(f"prelu: weight must be a scalar or one-dimensional, got {shape_text(weight.shape)}")
    if weight.ndim == 0:
        pass
    elif weight.shape[0] == 1:  # one value: the result has input's shape, a 0-d input's too (as PyTorch's)
        weight = weight.reshape(())
    elif input.ndim >= 2:
        weight = weight.reshape(weight.shape[0], *([1] * (input.ndim - 2)))
    return ops.where(input > 0, input, weight * input)


# PyTorch's in-place forms: the result written into the input, which is returned (recorded for autograd
# as every in-place write; refused on a leaf that requires grad)
def relu_(input: Tensor) -> Tensor:
    """relu, in place."""
    return input.assign(relu(input))


def elu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    """elu, in place."""
    return input.assign(elu(input, alpha))


def leaky_relu_(input: Tensor, negative_slope: float = 0.01) -> Tensor:
    """leaky_relu, in place."""
    return input.assign(leaky_relu(input, negative_slope))


def hardtanh_(input: Tensor, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:
    """hardtanh, in place."""
    return input.assign(hardtanh(input, min_val, max_val))


def threshold_(input: Tensor, threshold: float, value: float) -> Tensor:
    """threshold, in place."""
    return input.assign(_threshold(input, threshold, value))


def rrelu_(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False) -> Tensor:
    """rrelu, in place."""
    return input.assign(rrelu(input, lower, upper, training))


def celu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    """celu, in place."""
    return input.assign(celu(input, alpha))


def selu_(input: Tensor) -> Tensor:
    """selu, in place."""
    return input.assign(selu(input))

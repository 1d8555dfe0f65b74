"""Element-wise unary ops, the activations, and their derivative ops.

Derivative ops are ops of their own so a backend can give them kernels: `relu_deriv`, `gelu_deriv`,
`gelu_tanh_deriv` and `silu_deriv` read the forward input; `sigmoid_deriv` and `tanh_deriv` read the
forward output. Float results of int inputs are computed in f32. The transcendentals and the
activations built on them are evaluated in f64 and rounded once to the input's dtype (as f32 sums
accumulate in f64), by NumPy's f64 routines; tanh is written with expm1. They are exact=False: a kernel
may differ by a stated number of ulps.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ..dtypes import DType, bool_
from ..errors import DTypeError
from ..shapes import broadcast
from ._op import Op, float_dtype, no_bf16, numeric_dtype, same_shape, unbroadcast
from ._samples import binary, unary
from .creation import zeros_like

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_GELU_A = 0.044715
_erf_object = np.frompyfunc(math.erf, 1, 1)


def _as_float(x: np.ndarray) -> np.ndarray:
    return x if x.dtype.kind == "f" else x.astype(np.float32)


def _float_op(
    name: str,
    reference: Callable[[np.ndarray], np.ndarray],
    vjp: Callable | None,
    *,
    low: float = -2.0,
    high: float = 2.0,
    exact: bool = False,
    torch: Callable | None = None,
    doc: str = "",
    fast: bool = True,
) -> Op:
    return Op(
        name,
        shape=same_shape,
        dtype=float_dtype,
        reference=lambda x: reference(_as_float(x)),
        vjp=vjp,
        samples=unary(low, high),
        torch=torch,
        exact=exact,
        # _as_float is a no-op; a formula of several f64 passes costs more than a backend's kernel: none
        fast=(lambda out, dtypes: reference if dtypes[0].is_float else None) if fast else None,
        doc=doc,
    )


def in_f64(fn: Callable[[np.ndarray], np.ndarray]) -> Callable[[np.ndarray], np.ndarray]:
    """`fn` evaluated in f64, its result rounded once to the input's dtype."""
    return lambda x: fn(x.astype(np.float64, copy=False)).astype(x.dtype, copy=False)


# the formulas below take and give f64
def _erf(x: np.ndarray) -> np.ndarray:
    return np.asarray(_erf_object(x), dtype=np.float64)  # 0-d input gives a Python float


def _tanh(x: np.ndarray) -> np.ndarray:
    """tanh|x| = -u / (u + 2) with u = expm1(-2|x|): no cancellation, and no overflow for large |x|."""
    u = np.expm1(-2 * np.abs(x))
    return np.copysign(-u / (u + 2), x)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


def _silu(x: np.ndarray) -> np.ndarray:
    return x * _sigmoid(x)


def _silu_deriv(x: np.ndarray) -> np.ndarray:
    s = _sigmoid(x)
    return s * (1 + x * (1 - s))


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def _gelu_deriv(x: np.ndarray) -> np.ndarray:
    cdf = 0.5 * (1.0 + _erf(x / math.sqrt(2.0)))
    pdf = np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
    return cdf + x * pdf


def _gelu_tanh(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1 + _tanh(_SQRT_2_OVER_PI * (x + _GELU_A * x * x * x)))


def _gelu_tanh_deriv(x: np.ndarray) -> np.ndarray:
    t = _tanh(_SQRT_2_OVER_PI * (x + _GELU_A * x * x * x))
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * _SQRT_2_OVER_PI * (1 + 3 * _GELU_A * x * x)


def _not_bool(name: str) -> Callable[[DType], DType]:
    """The dtype rule of an arithmetic op PyTorch does not define on bool tensors (abs, floor, ...)."""

    def rule(x: DType, **_) -> DType:
        if x is bool_:
            raise DTypeError(f"{name} is not defined for bool tensors (as in PyTorch); cast them first")
        return numeric_dtype(x)

    return rule


def _same_dtype(x: DType, **_) -> DType:
    no_bf16(x)
    return x


neg = Op(
    "neg",
    shape=same_shape,
    dtype=_not_bool("neg"),
    reference=np.negative,
    vjp=lambda g, out, x: (-g,),
    samples=unary(),
    torch=lambda t, x: t.neg(x),
    doc="-x",
)
abs = Op(
    "abs",
    shape=same_shape,
    dtype=_not_bool("abs"),
    reference=np.abs,
    vjp=lambda g, out, x: (g * ((x > 0).cast(g.dtype) - (x < 0).cast(g.dtype)),),
    samples=unary(),
    torch=lambda t, x: t.abs(x),
    doc="|x|; its gradient at 0 is 0.",
)


def _stepwise(
    name: str, fn: Callable[[np.ndarray], np.ndarray], doc: str, dtype: Callable[..., DType] | None = None
) -> Op:
    """An op constant between steps (floor, round, sign, ...): its gradient is 0; integers are whole
    already (sign excepted) and keep their dtype; bool is refused, as in PyTorch, unless `dtype` says."""

    def reference(x: np.ndarray) -> np.ndarray:
        return fn(x) if x.dtype.kind == "f" or (fn is _sign and x.dtype.kind != "b") else x.copy()

    return Op(
        name,
        shape=same_shape,
        dtype=dtype or _not_bool(name),
        reference=reference,
        vjp=lambda g, out, x: (zeros_like(g),),
        samples=unary(-3.0, 3.0),
        torch=lambda t, x: getattr(t, name)(x),
        doc=doc,
    )


floor = _stepwise("floor", np.floor, "The largest whole number <= x.")
ceil = _stepwise("ceil", np.ceil, "The smallest whole number >= x.")
trunc = _stepwise("trunc", np.trunc, "x without its fractional part (towards 0).")
round_ = _stepwise("round", np.round, "The nearest whole number, halves to even (as PyTorch and NumPy).")


def _sign(x: np.ndarray) -> np.ndarray:
    return np.where(np.isnan(x), x.dtype.type(0), np.sign(x)) if x.dtype.kind == "f" else np.sign(x)


sign = _stepwise(
    "sign",
    _sign,
    "-1, 0 or 1 as x is negative, zero or positive; 0 for NaN; bool stays bool (as PyTorch).",
    dtype=_same_dtype,
)
exp = _float_op(
    "exp", in_f64(np.exp), lambda g, out, x: (g * out,), torch=lambda t, x: t.exp(x), doc="e ** x."
)
log = _float_op(
    "log",
    in_f64(np.log),
    lambda g, out, x: (g / x,),
    low=0.1,
    high=3.0,
    torch=lambda t, x: t.log(x),
    doc="Natural logarithm; NaN for negative inputs, -inf at 0.",
)
sqrt = _float_op(
    "sqrt",
    np.sqrt,
    lambda g, out, x: (g / (out * 2),),
    low=0.1,
    high=3.0,
    torch=lambda t, x: t.sqrt(x),
    doc="Square root; NaN for negative inputs.",
)


def _rsqrt(x: np.ndarray) -> np.ndarray:
    """1 / sqrt(x); f16 in f32, rounded once, as PyTorch's vectorised loop (its scalar tail, the last
    elements of each thread's share, rounds the square root to f16 first)."""
    if x.dtype == np.float16:
        return (1 / np.sqrt(x.astype(np.float32))).astype(np.float16)
    return 1 / np.sqrt(x)


rsqrt = _float_op(
    "rsqrt",
    _rsqrt,
    lambda g, out, x: (g * out * out * out * -0.5,),
    low=0.1,
    high=3.0,
    torch=lambda t, x: t.rsqrt(x),
    doc="1 / sqrt(x).",
)
sin = _float_op(
    "sin", in_f64(np.sin), lambda g, out, x: (g * cos(x),), torch=lambda t, x: t.sin(x), doc="Sine (radians)."
)
cos = _float_op(
    "cos",
    in_f64(np.cos),
    lambda g, out, x: (-(g * sin(x)),),
    torch=lambda t, x: t.cos(x),
    doc="Cosine (radians).",
)
tan = _float_op(
    "tan",
    in_f64(np.tan),
    lambda g, out, x: (g * (out * out + 1),),
    low=-1.4,
    high=1.4,
    torch=lambda t, x: t.tan(x),
    doc="Tangent (radians); its gradient 1 + tan(x)^2 (PyTorch's, from the result).",
)
exp2 = _float_op(
    "exp2",
    in_f64(np.exp2),
    lambda g, out, x: (g * out * math.log(2.0),),
    torch=lambda t, x: t.exp2(x),
    doc="2 ** x.",
)
sinh = _float_op(
    "sinh",
    in_f64(np.sinh),
    lambda g, out, x: (g * cosh(x),),
    torch=lambda t, x: t.sinh(x),
    doc="Hyperbolic sine.",
)
cosh = _float_op(
    "cosh",
    in_f64(np.cosh),
    lambda g, out, x: (g * sinh(x),),
    torch=lambda t, x: t.cosh(x),
    doc="Hyperbolic cosine.",
)
asin = _float_op(
    "asin",
    in_f64(np.arcsin),
    lambda g, out, x: (g * rsqrt(1 - x * x),),
    low=-0.9,
    high=0.9,
    torch=lambda t, x: t.asin(x),
    doc="Inverse sine, in [-pi/2, pi/2]; NaN outside [-1, 1].",
)
acos = _float_op(
    "acos",
    in_f64(np.arccos),
    lambda g, out, x: (-(g * rsqrt(1 - x * x)),),
    low=-0.9,
    high=0.9,
    torch=lambda t, x: t.acos(x),
    doc="Inverse cosine, in [0, pi]; NaN outside [-1, 1].",
)
atan = _float_op(
    "atan",
    in_f64(np.arctan),
    lambda g, out, x: (g / (x * x + 1),),
    torch=lambda t, x: t.atan(x),
    doc="Inverse tangent, in (-pi/2, pi/2).",
)
asinh = _float_op(
    "asinh",
    in_f64(np.arcsinh),
    lambda g, out, x: (g * rsqrt(x * x + 1),),
    torch=lambda t, x: t.asinh(x),
    doc="Inverse hyperbolic sine.",
)
acosh = _float_op(
    "acosh",
    in_f64(np.arccosh),
    lambda g, out, x: (g * rsqrt((x - 1) * (x + 1)),),
    low=1.1,
    high=3.0,
    torch=lambda t, x: t.acosh(x),
    doc="Inverse hyperbolic cosine; NaN below 1.",
)
atanh = _float_op(
    "atanh",
    in_f64(np.arctanh),
    lambda g, out, x: (g / ((1 - x) * (1 + x)),),
    low=-0.9,
    high=0.9,
    torch=lambda t, x: t.atanh(x),
    doc="Inverse hyperbolic tangent; +-inf at +-1, NaN beyond.",
)
tanh = _float_op(
    "tanh",
    in_f64(_tanh),
    lambda g, out, x: (g * tanh_deriv(out),),
    torch=lambda t, x: t.tanh(x),
    fast=False,
    doc="Hyperbolic tangent.",
)
sigmoid = _float_op(
    "sigmoid",
    in_f64(_sigmoid),
    lambda g, out, x: (g * sigmoid_deriv(out),),
    torch=lambda t, x: t.sigmoid(x),
    fast=False,
    doc="1 / (1 + exp(-x)), computed without overflow for large |x|.",
)
expm1 = _float_op(
    "expm1",
    in_f64(np.expm1),
    lambda g, out, x: (g * (out + 1),),
    torch=lambda t, x: t.expm1(x),
    doc="e ** x - 1, without the cancellation of exp(x) - 1 near 0.",
)
log1p = _float_op(
    "log1p",
    in_f64(np.log1p),
    lambda g, out, x: (g / (x + 1),),
    low=-0.5,
    high=3.0,
    torch=lambda t, x: t.log1p(x),
    doc="log(1 + x), accurate near 0; NaN below -1, -inf at -1.",
)


def _relu(x: np.ndarray) -> np.ndarray:
    """0 where x < 0, else x: -0.0 and NaN pass, as PyTorch's (clamp_min's std::max keeps x's -0.0)."""
    return np.where(x < 0, x.dtype.type(0), x).astype(x.dtype, copy=False)


relu = Op(
    "relu",
    shape=same_shape,
    dtype=_not_bool("relu"),
    reference=_relu,
    # relu(x) > 0 exactly where x > 0: the derivative read from the output, so a program need not keep
    # x for the backward pass and a bias add feeding relu fuses with it
    vjp=lambda g, out, x: (g * relu_deriv(out),),
    samples=unary(),
    torch=lambda t, x: t.relu(x),
    exact=True,
    fast=lambda out, dtypes: _relu,
    doc="max(x, 0), integers kept integer (as PyTorch); its gradient at 0 is 0.",
)
erf = _float_op(
    "erf",
    in_f64(_erf),
    lambda g, out, x: (g * (x * x * -1.0).exp() * (2.0 / math.sqrt(math.pi)),),
    torch=lambda t, x: t.erf(x),
    fast=False,
    doc="The error function (2/sqrt(pi)) * integral of exp(-t^2) from 0 to x, in f64, rounded once.",
)
gelu = _float_op(
    "gelu",
    in_f64(_gelu),
    lambda g, out, x: (gelu_grad(g, x) if g.dtype == x.dtype else g * gelu_deriv(x),),
    torch=lambda t, x: t.nn.functional.gelu(x),
    fast=False,
    doc="x * Phi(x) with the exact normal CDF (erf form), evaluated in f64 and rounded once.",
)
gelu_tanh = _float_op(
    "gelu_tanh",
    in_f64(_gelu_tanh),
    lambda g, out, x: (g * gelu_tanh_deriv(x),),
    torch=lambda t, x: t.nn.functional.gelu(x, approximate="tanh"),
    fast=False,
    doc="The tanh approximation of GELU used by GPT-2.",
)
silu = _float_op(
    "silu",
    in_f64(_silu),
    lambda g, out, x: (g * silu_deriv(x),),
    torch=lambda t, x: t.nn.functional.silu(x),
    fast=False,
    doc="x * sigmoid(x).",
)

# derivative ops --------------------------------------------------------------------------------
relu_deriv = _float_op(
    "relu_deriv",
    lambda x: (x > 0).astype(x.dtype),
    None,
    exact=True,
    doc="1 where x > 0, else 0 (relu's gradient at 0 is 0, as in PyTorch); x may be relu's input or its "
    "output alike.",
)
sigmoid_deriv = _float_op(
    "sigmoid_deriv",
    lambda y: y * (1 - y),
    lambda g, out, y: (g * (1 - y * 2),),
    low=0.0,
    high=1.0,
    exact=True,
    doc="y * (1 - y) of the forward output y = sigmoid(x).",
)
tanh_deriv = _float_op(
    "tanh_deriv",
    lambda y: 1 - y * y,
    lambda g, out, y: (g * y * -2,),
    low=-1.0,
    high=1.0,
    exact=True,
    doc="1 - y^2 of the forward output y = tanh(x).",
)


# second derivatives, so that create_graph=True differentiates gelu and silu twice
def _gelu_second(g, out, x):
    """gelu'' = pdf(x) * (2 - x^2)."""
    pdf = (x * x * -0.5).exp() * (1 / math.sqrt(2 * math.pi))
    return (g * pdf * (2 - x * x),)


def _gelu_tanh_second(g, out, x):
    """With t = tanh(u), u = c(x + a x^3): gelu_tanh'' = (1 - t^2) (u' + x (u'' - 2 t u'^2) / 2)."""
    t = tanh((x + x * x * x * _GELU_A) * _SQRT_2_OVER_PI)
    du = (1 + x * x * (3 * _GELU_A)) * _SQRT_2_OVER_PI
    ddu = x * (6 * _GELU_A * _SQRT_2_OVER_PI)
    return (g * tanh_deriv(t) * (du + x * 0.5 * (ddu - t * du * du * 2)),)


def _silu_second(g, out, x):
    """With s = sigmoid(x): silu'' = s (1 - s) (2 + x (1 - 2 s))."""
    s = sigmoid(x)
    return (g * sigmoid_deriv(s) * (2 + x * (1 - s * 2)),)


gelu_deriv = _float_op(
    "gelu_deriv", in_f64(_gelu_deriv), _gelu_second, doc="d gelu / dx of the forward input."
)


def _gelu_grad_dtype(g: DType, x: DType) -> DType:
    out = float_dtype(x)
    if g != out:
        raise DTypeError(f"gelu_grad: the gradient must be {out.name} as gelu's result is, got {g.name}")
    return out


def _torch_gelu_deriv(t, x):
    """PyTorch's gelu derivative at x, through its autograd (aten.gelu_backward fails on broadcast
    operands and some special values in oneDNN)."""
    leaf = x if x.requires_grad else x.detach().requires_grad_(True)
    with t.enable_grad():
        y = t.nn.functional.gelu(leaf)
        return t.autograd.grad(y, leaf, t.ones_like(y), create_graph=x.requires_grad)[0]


def _gelu_grad_vjp(gg, out, g, x):
    return (
        unbroadcast(gg * gelu_deriv(x), g.shape) if g.requires_grad else None,
        unbroadcast(_gelu_second(gg * g, out, x)[0], x.shape) if x.requires_grad else None,
    )


gelu_grad = Op(
    "gelu_grad",
    shape=broadcast,
    dtype=_gelu_grad_dtype,
    reference=lambda g, x: g * in_f64(_gelu_deriv)(_as_float(x)),
    vjp=_gelu_grad_vjp,
    samples=binary(),
    torch=lambda t, g, x: g * _torch_gelu_deriv(t, x),
    exact=False,
    doc="g * gelu_deriv(x) (broadcast), gelu's backward in one op (the two ops' roundings: the same bits).",
)
gelu_tanh_deriv = _float_op(
    "gelu_tanh_deriv",
    in_f64(_gelu_tanh_deriv),
    _gelu_tanh_second,
    doc="d gelu_tanh / dx of the forward input.",
)
silu_deriv = _float_op(
    "silu_deriv", in_f64(_silu_deriv), _silu_second, doc="d silu / dx of the forward input."
)

"""Values, dtypes and gradients PyTorch defines at the edges: softplus far beyond its threshold, powers at
0 and of negative bases, integer powers (integer results, negative exponents), and the integer dtypes
PyTorch keeps through abs, sign, floor, relu, remainder, sums and the like."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import torch

import verigrad
import verigrad.nn.functional as F
from verigrad import nn

TORCH_DTYPES = {"f32": torch.float32, "f64": torch.float64, "i32": torch.int32, "i64": torch.int64}
TORCH_DTYPES["bool"] = torch.bool
RTOL = {"f32": 1e-6, "f64": 1e-13}


def _pair(values: np.ndarray, dtype: str, requires_grad: bool = False) -> tuple:
    ours = verigrad.tensor(values, dtype=dtype)
    theirs = torch.tensor(values, dtype=TORCH_DTYPES[dtype])
    if requires_grad:
        ours.requires_grad_(True)
        theirs.requires_grad_(True)
    return ours, theirs


def _same(ours: verigrad.Tensor, theirs: torch.Tensor, rtol: float = 0.0, what: str = "") -> None:
    """Equal dtypes, and equal values (within rtol), NaN and infinities in the same places."""
    assert TORCH_DTYPES[ours.dtype.name] == theirs.dtype, f"{what}: {ours.dtype.name} != {theirs.dtype}"
    np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), rtol=rtol, atol=0.0, err_msg=what)


def _check_with_gradients(
    inputs: dict[str, np.ndarray],
    dtype: str,
    ours_fn: Callable[..., verigrad.Tensor],
    theirs_fn: Callable[..., torch.Tensor],
    cotangent: np.ndarray | None = None,
) -> None:
    """Values and the gradient of sum(out * cotangent) for every input, NaN and inf patterns included."""
    pairs = {k: _pair(v, dtype, requires_grad=True) for k, v in inputs.items()}
    out = ours_fn(**{k: p[0] for k, p in pairs.items()})
    expected = theirs_fn(**{k: p[1] for k, p in pairs.items()})
    _same(out, expected, RTOL[dtype], "values")
    if cotangent is None:
        cotangent = np.ones(out.shape)
    out.backward(verigrad.tensor(cotangent, dtype=dtype))
    expected.backward(torch.tensor(cotangent, dtype=TORCH_DTYPES[dtype]))
    for k, (ours, theirs) in pairs.items():
        _same(ours.grad, theirs.grad, RTOL[dtype], f"d/d{k}")


# softplus -----------------------------------------------------------------------------------------
SOFTPLUS_X = np.array([350.0, -350.0, 1e4, -1e4, 0.0, -1.0, 2.5, 10.0, 19.5, 20.0, 20.5, 100.0, -100.0])
BETAS_AND_THRESHOLDS = [(1.0, 20.0), (2.0, 20.0), (0.5, 5.0), (1.0, 1.0), (4.0, 2.0)]


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize(("beta", "threshold"), BETAS_AND_THRESHOLDS)
def test_softplus_values_and_gradients_far_from_zero(dtype, beta, threshold) -> None:
    """No NaN gradient above the threshold (x = 350: exp(350) overflows), sigmoid(beta x) below it; the
    threshold itself (beta x == threshold) still on the curve."""
    edge = np.array([threshold / beta, threshold / beta * 1.01])
    x = np.concatenate([SOFTPLUS_X, edge])
    _check_with_gradients(
        {"x": x},
        dtype,
        lambda x: F.softplus(x, beta, threshold),
        lambda x: torch.nn.functional.softplus(x, beta, threshold),
    )


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_softplus_module_and_mish_far_from_zero(dtype) -> None:
    for ours, theirs in [
        (nn.Softplus(beta=2.0, threshold=10.0), torch.nn.Softplus(2.0, 10.0)),
        (nn.Softplus(), torch.nn.Softplus()),
    ]:
        _check_with_gradients({"x": SOFTPLUS_X}, dtype, lambda x: ours(x), lambda x: theirs(x))
    # mish at -100 in f32 is a subnormal PyTorch's fused formula rounds otherwise
    x = SOFTPLUS_X[SOFTPLUS_X != -100.0]
    _check_with_gradients({"x": x}, dtype, lambda x: F.mish(x), lambda x: torch.nn.functional.mish(x))


# pow's gradients --------------------------------------------------------------------------------
BASES = np.array([0.0, -2.0, -0.5, 1.5, 3.0, -3.0])


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("exponent", [0, 0.0, 1, 2, 3, 0.5, 1.5, -1, -2, -0.5])
def test_pow_scalar_exponent_at_zero_and_negative_bases(dtype, exponent) -> None:
    """x ** 0 has gradient 0 everywhere, x = 0 included (y x^(y-1) there is 0 * inf)."""
    # PyTorch takes sqrt and rsqrt for 0.5 and -0.5, one ulp from the power rounded once
    rtol = {"f32": 2e-7, "f64": 3e-16}[dtype] if exponent in (0.5, -0.5) else RTOL[dtype]
    pairs = {"x": _pair(BASES, dtype, requires_grad=True)}
    out, expected = pairs["x"][0] ** exponent, pairs["x"][1] ** exponent
    _same(out, expected, rtol, "values")
    out.sum().backward()
    expected.sum().backward()
    _same(pairs["x"][0].grad, pairs["x"][1].grad, rtol, "d/dx")


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_pow_tensor_exponent_at_zero(dtype) -> None:
    """0 ** 0: gradient 0 for x and 0 for y; 0 ** -1: -inf for y, as PyTorch's; an infinite upstream
    gradient gives 0 for x where y == 0 (PyTorch's where), NaN for y where x == 0 and y >= 0 (inf * 0)."""
    x = np.array([0.0, 0.0, 0.0, 2.0, -2.0, -2.0, 0.0, 1.0, 0.0])
    y = np.array([0.0, 1.0, -1.0, 0.0, 0.5, 2.0, 2.0, 0.0, 0.0])
    cotangent = np.array([1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, np.inf])
    _check_with_gradients({"x": x, "y": y}, dtype, lambda x, y: x**y, lambda x, y: x**y, cotangent)
    _check_with_gradients({"y": y}, dtype, lambda y: verigrad.pow(0.0, y), lambda y: torch.pow(0.0, y))
    _check_with_gradients({"y": y}, dtype, lambda y: 2.0**y, lambda y: 2.0**y)


# integer powers -------------------------------------------------------------------------------------
INTS = np.array([-3, -1, 0, 1, 2, 5])


@pytest.mark.parametrize(
    ("x_dtype", "y_dtype"),
    [("i32", "i32"), ("i64", "i32"), ("i32", "i64"), ("i64", "i64"), ("i32", "bool"), ("bool", "i64")],
)
def test_integer_pow_keeps_integer_dtypes(x_dtype, y_dtype) -> None:
    """Integer ** integer is integer, in the promoted dtype; negative tensor exponents give 0 (1 and +-1
    for the bases 1 and -1), as PyTorch's integer power."""
    x = INTS.astype(bool) if x_dtype == "bool" else INTS
    exponents = np.array([0, 1, 2, 3, -1, -2])
    y = (exponents > 0) if y_dtype == "bool" else exponents
    (ours_x, theirs_x), (ours_y, theirs_y) = _pair(x, x_dtype), _pair(y, y_dtype)
    _same(ours_x**ours_y, theirs_x**theirs_y, what="x ** y")
    _same(verigrad.pow(ours_x, ours_y), torch.pow(theirs_x, theirs_y), what="pow(x, y)")
    outer = (ours_x.reshape(-1, 1) ** ours_y, theirs_x.reshape(-1, 1) ** theirs_y)
    _same(*outer, what="every base to every exponent")


@pytest.mark.parametrize("dtype", ["i32", "i64", "bool"])
@pytest.mark.parametrize("exponent", [0, 1, 2, 3, 2.5, 0.5])
def test_integer_pow_python_exponent(dtype, exponent) -> None:
    """An integer tensor ** a Python int stays integer (bool becomes i64); ** a Python float is f32."""
    x = INTS.astype(bool) if dtype == "bool" else INTS
    ours, theirs = _pair(x, dtype)
    _same(ours**exponent, theirs**exponent, RTOL["f32"], f"x ** {exponent}")
    _same(ours.pow(exponent), theirs.pow(exponent), RTOL["f32"], f"x.pow({exponent})")


@pytest.mark.parametrize("dtype", ["i32", "i64"])
def test_integer_pow_of_python_base_and_wrap_around(dtype) -> None:
    ours, theirs = _pair(np.array([0, 1, 2, 10, -1, -3]), dtype)
    _same(2**ours, 2**theirs, what="2 ** y")
    _same(verigrad.pow(2, ours), torch.pow(2, theirs), what="pow(2, y)")
    _same(verigrad.pow(-1, ours), torch.pow(-1, theirs), what="pow(-1, y)")
    _same(2.0**ours, 2.0**theirs, RTOL["f32"], "2.0 ** y")
    big_ours, big_theirs = _pair(np.array([3, 7, -5, 2]), dtype)
    _same(big_ours**40, big_theirs**40, what="wrapping around")


@pytest.mark.parametrize("dtype", ["i32", "i64", "bool"])
@pytest.mark.parametrize("exponent", [-1, -2])
def test_integer_to_negative_python_int_raises(dtype, exponent) -> None:
    x = INTS.astype(bool) if dtype == "bool" else INTS
    ours, theirs = _pair(x, dtype)
    with pytest.raises(RuntimeError, match="Integers to negative integer powers are not allowed"):
        theirs**exponent
    for attempt in (lambda: ours**exponent, lambda: verigrad.pow(ours, exponent), lambda: ours.pow(exponent)):
        with pytest.raises(verigrad.DTypeError, match="Integers to negative integer powers are not allowed"):
            attempt()


def test_bool_to_bool_power_raises() -> None:
    ours, theirs = _pair(np.array([True, False]), "bool")
    with pytest.raises(RuntimeError):
        theirs**theirs
    with pytest.raises(verigrad.DTypeError, match="bool"):
        ours**ours


# integer dtypes kept ----------------------------------------------------------------------------
INT_SAMPLE = np.array([[-3, 2, 0], [5, -7, 4]])
UNARY_KEEPING_INTEGERS = ["abs", "neg", "sign", "floor", "ceil", "round", "trunc", "relu"]


@pytest.mark.parametrize("dtype", ["i32", "i64"])
@pytest.mark.parametrize("name", UNARY_KEEPING_INTEGERS)
def test_integer_unary_keeps_the_dtype(dtype, name) -> None:
    ours, theirs = _pair(INT_SAMPLE, dtype)
    _same(getattr(ours, name)(), getattr(theirs, name)(), what=name)


def test_sign_of_bool_is_bool() -> None:
    ours, theirs = _pair(np.array([True, False]), "bool")
    _same(ours.sign(), theirs.sign(), what="sign")


@pytest.mark.parametrize("name", ["abs", "floor", "ceil", "round", "trunc", "relu"])
def test_unary_arithmetic_of_bool_raises(name) -> None:
    ours, theirs = _pair(np.array([True, False]), "bool")
    with pytest.raises(RuntimeError):
        getattr(theirs, name)()
    with pytest.raises(verigrad.DTypeError, match="bool"):
        getattr(ours, name)()


INTEGER_RESULTS = {
    "remainder": (lambda x: x % 3, lambda x: x % 3),
    "remainder by a tensor": (lambda x: x.remainder(x.abs() + 1), lambda x: x.remainder(x.abs() + 1)),
    "fmod": (lambda x: x.fmod(3), lambda x: x.fmod(3)),
    "sum": (lambda x: x.sum(), lambda x: x.sum()),
    "sum along": (lambda x: x.sum(1), lambda x: x.sum(1)),
    "prod": (lambda x: x.prod(), lambda x: x.prod()),
    "cumsum": (lambda x: x.cumsum(1), lambda x: x.cumsum(1)),
    "cumprod": (lambda x: x.cumprod(0), lambda x: x.cumprod(0)),
    "clamp": (lambda x: x.clamp(-2, 3), lambda x: x.clamp(-2, 3)),
    "where": (lambda x: verigrad.where(x > 0, x, 7), lambda x: torch.where(x > 0, x, 7)),
    "square": (lambda x: x * x, lambda x: x * x),
}


# bool arithmetic (remainder, clamp, x * x, ...) has meanings of its own in PyTorch: only the reductions
BOOL_RESULTS = ("sum", "sum along", "prod", "cumsum", "cumprod", "where")
DTYPES_AND_NAMES = [(d, n) for d in ("i32", "i64") for n in INTEGER_RESULTS]
DTYPES_AND_NAMES += [("bool", n) for n in BOOL_RESULTS]


@pytest.mark.parametrize(("dtype", "name"), DTYPES_AND_NAMES)
def test_integer_results_keep_pytorch_dtypes(dtype, name) -> None:
    """Sums and products of bool and int32 are i64 (PyTorch's), the element-wise ones keep the dtype."""
    ours, theirs = _pair(INT_SAMPLE.astype(bool) if dtype == "bool" else INT_SAMPLE, dtype)
    ours_fn, theirs_fn = INTEGER_RESULTS[name]
    _same(ours_fn(ours), theirs_fn(theirs), what=name)

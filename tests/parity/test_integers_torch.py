"""Integer dtypes, PyTorch's type promotion, integer arithmetic and the bitwise ops, add / sub with alpha,
and copysign / tan / exp2, against torch: values, dtypes and gradients.

Promotion is checked for every pair of dtypes and every pairing of a tensor with dimensions, a 0-d tensor
and a Python scalar, both as `result_type` and as the dtype and values of each op's result (or both
raising)."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
import torch

import verigrad

NAMES = ["bool", "u8", "i8", "i16", "i32", "i64", "f16", "bf16", "f32", "f64"]
TORCH = {
    "bool": torch.bool,
    "u8": torch.uint8,
    "i8": torch.int8,
    "i16": torch.int16,
    "i32": torch.int32,
    "i64": torch.int64,
    "f16": torch.float16,
    "bf16": torch.bfloat16,
    "f32": torch.float32,
    "f64": torch.float64,
}
NAME_OF = {v: k for k, v in TORCH.items()}
COMPUTE = [n for n in NAMES if n != "bf16"]  # verigrad computes on every dtype but bf16 (it refuses)


def _vg(values: Any, name: str) -> verigrad.Tensor:
    return verigrad.tensor(np.asarray(values), dtype=name)


def _torch(values: Any, name: str) -> torch.Tensor:
    return torch.tensor(np.asarray(values)).to(TORCH[name])


def _same(ours: verigrad.Tensor, theirs: torch.Tensor, what: str) -> None:
    assert ours.dtype.name == NAME_OF[theirs.dtype], f"{what}: {ours.dtype.name} != torch's {theirs.dtype}"
    assert tuple(ours.shape) == tuple(theirs.shape), what
    expected = theirs.numpy()
    np.testing.assert_array_equal(ours.numpy(), expected, err_msg=what, strict=True)


def _both(fn_ours, fn_theirs, what: str) -> None:
    """The same result, or both raising."""
    try:
        theirs = fn_theirs()
    except (RuntimeError, TypeError, NotImplementedError):
        with pytest.raises((verigrad.DTypeError, TypeError, NotImplementedError, ZeroDivisionError)):
            fn_ours()
        return
    _same(fn_ours(), theirs, what)


# the names -------------------------------------------------------------------------------------
def test_torch_names_are_the_same_dtypes() -> None:
    names = (
        "int8 int16 short int32 int int64 long uint8 float16 half bfloat16 float32 float float64 double bool"
    )
    for name in names.split():
        ours = getattr(verigrad, name)
        assert ours.name == NAME_OF[getattr(torch, name)], name
        assert ours.itemsize == getattr(torch, name).itemsize, name
        assert ours.is_floating_point == getattr(torch, name).is_floating_point, name
        assert ours.is_signed == getattr(torch, name).is_signed, name


@pytest.mark.parametrize(
    "method", ["int", "long", "short", "byte", "char", "bool", "float", "double", "half"]
)
def test_cast_methods(method: str) -> None:
    values = [-300.7, -1.5, 0.0, 2.5, 200.0]
    ours, theirs = getattr(_vg(values, "f64"), method)(), getattr(_torch(values, "f64"), method)()
    if method in ("byte", "char"):  # out of range float to integer: C leaves it undefined; compare in range
        ours, theirs = (
            getattr(_vg(values[1:4], "f64"), method)(),
            getattr(_torch(values[1:4], "f64"), method)(),
        )
    _same(ours, theirs, method)
    assert _vg([1, 2], "i32").bfloat16().dtype.name == "bf16"


def test_integer_casts_wrap_as_torch() -> None:
    for name in ("i8", "i16", "u8", "i32"):
        values = [300, -129, 70000, -1, 2**31 + 5]
        _same(
            _vg(values, "i64").to(getattr(verigrad, _TORCH_NAME[name])),
            _torch(values, "i64").to(TORCH[name]),
            name,
        )
    _same(verigrad.tensor(300).to(verigrad.int8), torch.tensor(300).to(torch.int8), "tensor(300).to(int8)")
    _same(
        verigrad.tensor([1, 2], dtype=verigrad.int8), torch.tensor([1, 2], dtype=torch.int8), "tensor(int8)"
    )


_TORCH_NAME = {"i8": "int8", "i16": "int16", "u8": "uint8", "i32": "int32"}


# promotion -------------------------------------------------------------------------------------
@pytest.mark.parametrize(("a", "b"), list(itertools.product(NAMES, NAMES)))
def test_promote_types_and_can_cast(a: str, b: str) -> None:
    ours = verigrad.promote_types(
        getattr(verigrad.dtypes, a if a != "bool" else "bool_"), verigrad.dtypes.as_dtype(b)
    )
    assert ours.name == NAME_OF[torch.promote_types(TORCH[a], TORCH[b])]
    assert verigrad.can_cast(a, b) == torch.can_cast(TORCH[a], TORCH[b])


VALUES = {"bool": [True, False, True], "f": [1.5, -2.25, 3.0], "i": [3, -2, 5], "u": [3, 2, 5]}
SCALARS = [2, 2.5, True, -1]
KINDS = ["dim", "zero"]


def _operand(kind: str, name: str, signed: bool):
    values = VALUES["bool" if name == "bool" else ("f" if name[0] in "fb" else ("i" if signed else "u"))]
    values = values if kind == "dim" else values[0]
    return _vg(values, name), _torch(values, name)


def _pairs() -> list[Any]:
    """Every pairing of two dtypes as (dim, dim), (dim, 0-d), (0-d, dim), (0-d, 0-d), and of a dtype with a
    Python scalar."""
    out = []
    for a, b in itertools.product(NAMES, NAMES):
        for ka, kb in itertools.product(KINDS, KINDS):
            out.append(pytest.param(a, ka, b, kb, id=f"{a}-{ka}-{b}-{kb}"))
    for a, s in itertools.product(NAMES, SCALARS):
        for ka in KINDS:
            out.append(pytest.param(a, ka, s, "scalar", id=f"{a}-{ka}-{s!r}"))
            out.append(pytest.param(s, "scalar", a, ka, id=f"{s!r}-{a}-{ka}"))
    return out


def _make(x: Any, kind: str, signed: bool):
    return (x, x) if kind == "scalar" else _operand(kind, x, signed)


OPS = {
    "add": (lambda m, a, b: m.add(a, b)),
    "sub": (lambda m, a, b: m.sub(a, b)),
    "mul": (lambda m, a, b: m.mul(a, b)),
    "div": (lambda m, a, b: m.div(a, b)),
    "pow": (lambda m, a, b: m.pow(a, b)),
    "maximum": (lambda m, a, b: m.maximum(a, b)),
    "lt": (lambda m, a, b: a < b),
    "eq": (lambda m, a, b: a == b),
    "floor_divide": (lambda m, a, b: a // b),
    "remainder": (lambda m, a, b: a % b),
    "bitwise_and": (lambda m, a, b: a & b),
    "where": (lambda m, a, b: m.where(m.tensor([True, False, True]), a, b)),
}


@pytest.mark.parametrize(("a", "ka", "b", "kb"), _pairs())
def test_result_type_and_results(a: Any, ka: str, b: Any, kb: str) -> None:
    signed = all(not (isinstance(x, str) and x == "u8") for x in (a, b))  # u8 keeps its values positive
    oa, ta = _make(a, ka, signed)
    ob, tb = _make(b, kb, signed)
    if ka == "scalar" and kb == "scalar":
        return
    assert verigrad.result_type(oa, ob).name == NAME_OF[torch.result_type(ta, tb)]
    for name, fn in OPS.items():
        if "bf16" in (a, b) or (name == "pow" and ka != "scalar" and kb == "scalar" and b == -1):
            continue  # bf16 is only loaded and cast; an integer to a negative Python int raises: below
        if name in ("where", "maximum") and "scalar" in (ka, kb):
            continue  # torch's take tensors only
        _both(lambda: fn(verigrad, oa, ob), lambda: fn(torch, ta, tb), f"{name}({a} {ka}, {b} {kb})")


def test_integer_power_of_a_negative_zero_dim_tensor_keeps_the_dtype() -> None:
    """i32 ** tensor(-1): the 0-d i64 exponent does not promote the i32 base (PyTorch's)."""
    _same(_vg([2, 1, -1], "i32") ** verigrad.tensor(-1), _torch([2, 1, -1], "i32") ** torch.tensor(-1), "pow")
    with pytest.raises(verigrad.DTypeError):
        _vg([2], "i32") ** -1
    with pytest.raises(RuntimeError):
        _torch([2], "i32") ** -1


# integer arithmetic ----------------------------------------------------------------------------
INTS = ["u8", "i8", "i16", "i32", "i64"]
DIVIDENDS = [-7, 7, -8, 8, 0, -1, 1, 5, -128, 127]
DIVISORS = [2, -2, 3, -3, 1, -1, 7, -7, 5, 4]


def _ints(values: Any, name: str) -> Any:
    return np.abs(values).tolist() if name == "u8" else values


ROUNDED = {
    "floor_divide": (lambda m, a, b: a // b),
    "div_floor": (lambda m, a, b: m.div(a, b, rounding_mode="floor")),
    "div_trunc": (lambda m, a, b: m.div(a, b, rounding_mode="trunc")),
    "floor_divide_fn": (lambda m, a, b: m.floor_divide(a, b)),
    "remainder": (lambda m, a, b: a % b),
    "fmod": (lambda m, a, b: m.fmod(a, b)),
    "true_divide": (lambda m, a, b: m.true_divide(a, b)),
}


@pytest.mark.parametrize("name", INTS)
@pytest.mark.parametrize("op", list(ROUNDED))
def test_integer_division(name: str, op: str) -> None:
    a, b = _ints(DIVIDENDS, name), _ints(DIVISORS, name)
    fn = ROUNDED[op]
    _same(fn(verigrad, _vg(a, name), _vg(b, name)), fn(torch, _torch(a, name), _torch(b, name)), op)
    _same(fn(verigrad, _vg(a, name), 3), fn(torch, _torch(a, name), 3), f"{op} by a scalar")
    if op not in ("fmod", "floor_divide_fn"):  # torch.fmod and torch.floor_divide take a tensor first
        _same(fn(verigrad, 100, _vg(b, name)), fn(torch, 100, _torch(b, name)), f"{op} of a scalar")
    if op != "true_divide":
        with pytest.raises(ZeroDivisionError):
            fn(verigrad, _vg(a, name), _vg([0] * len(a), name)).numpy()
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            fn(torch, _torch(a, name), _torch([0] * len(a), name))


SPECIAL = [0.0, -0.0, 1.0, -1.0, 7.3, -7.3, 0.1, 1e30, -1e-30, np.inf, -np.inf, np.nan, 2.5, -2.5, 1e-45]


@pytest.mark.parametrize("name", ["f16", "f32", "f64"])
@pytest.mark.parametrize("op", list(ROUNDED))
def test_float_division_rounding(name: str, op: str) -> None:
    pairs = np.array(list(itertools.product(SPECIAL, SPECIAL))).T
    rng = np.random.default_rng(0)
    a = np.concatenate([pairs[0], rng.uniform(-100, 100, 500)])
    b = np.concatenate([pairs[1], rng.uniform(-3, 3, 500)])
    if name == "f32" and op in ("remainder", "fmod"):
        # torch's f32 vector loop (Sleef's fmodf) gives NaN where a / b overflows f32, its scalar loop
        # the exact remainder verigrad gives: left out (see the README's table)
        with np.errstate(all="ignore"):
            keep = ~(np.isfinite(a) & np.isfinite(b) & (np.abs(a / b) > np.finfo(np.float32).max))
        a, b = a[keep], b[keep]
    fn = ROUNDED[op]
    with np.errstate(all="ignore"):
        ours = fn(verigrad, _vg(a, name), _vg(b, name))
    theirs = fn(torch, _torch(a, name), _torch(b, name))
    assert ours.dtype.name == NAME_OF[theirs.dtype]
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy(), err_msg=op, strict=True)
    number = ~np.isnan(theirs.numpy())  # a NaN's sign bit is no part of its value
    np.testing.assert_array_equal(
        np.signbit(ours.numpy()[number]), np.signbit(theirs.numpy()[number]), err_msg=f"{op} zeros"
    )


def test_division_gradients() -> None:
    """div with a rounding mode has a zero gradient; floor_divide's backward raises, as PyTorch's."""
    a, b = np.array([-7.0, 7.0, 3.5]), np.array([2.0, -2.0, 0.5])
    for mode in ("floor", "trunc"):
        x, y = verigrad.tensor(a, requires_grad=True), verigrad.tensor(b, requires_grad=True)
        tx, ty = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
        verigrad.div(x, y, rounding_mode=mode).sum().backward()
        torch.div(tx, ty, rounding_mode=mode).sum().backward()
        np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())
        np.testing.assert_array_equal(y.grad.numpy(), ty.grad.numpy())
    x = verigrad.tensor(a, requires_grad=True)
    out = x // 2
    assert out.requires_grad == (torch.tensor(a, requires_grad=True) // 2).requires_grad
    with pytest.raises(NotImplementedError, match="floor_divide"):
        out.sum().backward()
    with pytest.raises(ValueError, match="rounding_mode"):
        verigrad.div(x, 2, rounding_mode="round")


BITWISE = {
    "and": (lambda m, a, b: a & b),
    "or": (lambda m, a, b: a | b),
    "xor": (lambda m, a, b: a ^ b),
    "lshift": (lambda m, a, b: a << b),
    "rshift": (lambda m, a, b: a >> b),
    "bitwise_and": (lambda m, a, b: m.bitwise_and(a, b)),
    "bitwise_or": (lambda m, a, b: m.bitwise_or(a, b)),
    "bitwise_xor": (lambda m, a, b: m.bitwise_xor(a, b)),
    "bitwise_left_shift": (lambda m, a, b: m.bitwise_left_shift(a, b)),
    "bitwise_right_shift": (lambda m, a, b: m.bitwise_right_shift(a, b)),
}


@pytest.mark.parametrize("name", [*INTS, "bool", "f32"])
@pytest.mark.parametrize("op", list(BITWISE))
def test_bitwise(name: str, op: str) -> None:
    a = [-100, 100, -1, 1, 0, 64, -128, 127, 5, 3, 77, -77]
    b = (
        [0, 1, 3, 7, 8, 9, 15, 16, 31, 32, 63, 64]
        if "shift" in op
        else [3, -5, 1, 0, -1, 127, 7, 8, 9, 6, 5, 4]
    )
    if name == "u8":
        a, b = [v % 256 for v in a], [v % 256 for v in b]
    if name == "bool":
        a, b = [v > 0 for v in a], [v % 2 == 1 for v in b]
    fn = BITWISE[op]
    _both(
        lambda: fn(verigrad, _vg(a, name), _vg(b, name)),
        lambda: fn(torch, _torch(a, name), _torch(b, name)),
        op,
    )
    if name not in ("bool", "f32"):
        _both(lambda: fn(verigrad, 3, _vg(b, name)), lambda: fn(torch, 3, _torch(b, name)), f"reflected {op}")
        _both(
            lambda: fn(verigrad, _vg(a, name), 2), lambda: fn(torch, _torch(a, name), 2), f"{op} by a scalar"
        )
        neg = [-1, -5, -64, -100, 70, 200]
        _same(
            fn(verigrad, _vg(a[:6], name), _vg(neg, "i64")),
            fn(torch, _torch(a[:6], name), _torch(neg, "i64")),
            op,
        )


@pytest.mark.parametrize("name", [*INTS, "bool", "f32"])
def test_bitwise_not(name: str) -> None:
    values = [True, False] if name == "bool" else _ints([-100, 100, -1, 0, 5], name)
    _both(lambda: ~_vg(values, name), lambda: ~_torch(values, name), "~")
    _both(
        lambda: verigrad.bitwise_not(_vg(values, name)),
        lambda: torch.bitwise_not(_torch(values, name)),
        "not",
    )


IN_PLACE = {
    "//=": (lambda a, b: a.__ifloordiv__(b)),
    "%=": (lambda a, b: a.__imod__(b)),
    "&=": (lambda a, b: a.__iand__(b)),
    "|=": (lambda a, b: a.__ior__(b)),
    "^=": (lambda a, b: a.__ixor__(b)),
    "<<=": (lambda a, b: a.__ilshift__(b)),
    ">>=": (lambda a, b: a.__irshift__(b)),
    "+=": (lambda a, b: a.__iadd__(b)),
    "*=": (lambda a, b: a.__imul__(b)),
    "floor_divide_": (lambda a, b: a.floor_divide_(b)),
    "remainder_": (lambda a, b: a.remainder_(b)),
    "fmod_": (lambda a, b: a.fmod_(b)),
    "bitwise_and_": (lambda a, b: a.bitwise_and_(b)),
    "bitwise_or_": (lambda a, b: a.bitwise_or_(b)),
    "bitwise_xor_": (lambda a, b: a.bitwise_xor_(b)),
    "bitwise_left_shift_": (lambda a, b: a.bitwise_left_shift_(b)),
    "bitwise_right_shift_": (lambda a, b: a.bitwise_right_shift_(b)),
    "add_": (lambda a, b: a.add_(b, alpha=2)),
    "sub_": (lambda a, b: a.sub_(b, alpha=2)),
}


@pytest.mark.parametrize("name", ["i8", "i32", "i64", "u8"])
@pytest.mark.parametrize("op", list(IN_PLACE))
@pytest.mark.parametrize("other", ["i64 tensor", "f32 tensor", 2, 2.5])
def test_in_place(name: str, op: str, other: Any) -> None:
    """The result written into the tensor, or both refusing a float result for an integer tensor."""
    a = _ints([-7, 7, 100, -100], name)
    b = [2, 3, 1, 3]
    o_ours, o_theirs = (
        (_vg(b, other.split()[0]), _torch(b, other.split()[0])) if isinstance(other, str) else (other, other)
    )
    x, t = _vg(a, name), _torch(a, name)
    fn = IN_PLACE[op]
    try:
        expected = fn(t, o_theirs)
    except (RuntimeError, TypeError, NotImplementedError):
        with pytest.raises((verigrad.DTypeError, TypeError)):
            fn(x, o_ours)
        return
    out = fn(x, o_ours)
    assert out is x
    _same(x, expected, op)


# add / sub with alpha --------------------------------------------------------------------------
LENGTHS = [1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 31, 33, 64, 100, 1000, 4099]


@pytest.mark.parametrize("name", ["f32", "f64"])
@pytest.mark.parametrize("n", LENGTHS)
def test_add_with_alpha_is_one_fma_bit_for_bit(name: str, n: int) -> None:
    rng = np.random.default_rng(n)
    a, g = rng.standard_normal(n) * 10, rng.standard_normal(n)
    for alpha in (-0.1, 3.7, -1e-3):
        ta, tg = _torch(a, name), _torch(g, name)
        x, y = _vg(a, name), _vg(g, name)
        _same(x.add(y, alpha=alpha), ta.add(tg, alpha=alpha), f"add alpha={alpha}")
        _same(verigrad.add(x, y, alpha=alpha), torch.add(ta, tg, alpha=alpha), "verigrad.add")
        _same(x.sub(y, alpha=alpha), ta.sub(tg, alpha=alpha), f"sub alpha={alpha}")
        _same(verigrad.sub(x, y, alpha=alpha), torch.sub(ta, tg, alpha=alpha), "verigrad.sub")
        x.add_(y, alpha=alpha)
        ta.add_(tg, alpha=alpha)
        _same(x, ta, "add_")
        x.sub_(y, alpha=alpha)
        ta.sub_(tg, alpha=alpha)
        _same(x, ta, "sub_")


def test_add_with_alpha_where_one_rounding_shows() -> None:
    """Operands chosen so that a + alpha * g rounded twice is not the fma: torch gives the fma."""
    rng = np.random.default_rng(5)
    for name in ("f32", "f64"):
        a = rng.standard_normal(4096)
        g = rng.standard_normal(4096)
        dtype = np.float32 if name == "f32" else np.float64
        twice = a.astype(dtype) + dtype(-0.1) * g.astype(dtype)
        theirs = _torch(a, name).add(_torch(g, name), alpha=-0.1)
        assert (twice != theirs.numpy()).any()  # the case is one where rounding twice differs
        _same(_vg(a, name).add(_vg(g, name), alpha=-0.1), theirs, name)


def test_add_with_alpha_self_broadcast_and_integers() -> None:
    rng = np.random.default_rng(3)
    a, g = rng.standard_normal((1, 7)), rng.standard_normal((5, 7))
    _same(
        _vg(a, "f64").add(_vg(g, "f64"), alpha=-0.3), _torch(a, "f64").add(_torch(g, "f64"), alpha=-0.3), "bc"
    )
    i, j = [1, -5, 100], [3, 4, -7]
    for name in ("i8", "i32", "i64", "u8"):
        ii, jj = _ints(i, name), _ints(j, name)
        _same(
            _vg(ii, name).add(_vg(jj, name), alpha=3), _torch(ii, name).add(_torch(jj, name), alpha=3), name
        )
        _same(
            _vg(ii, name).sub(_vg(jj, name), alpha=-2), _torch(ii, name).sub(_torch(jj, name), alpha=-2), name
        )
    b = [True, False, False]
    _same(
        _vg(b, "bool").add(_vg(b[::-1], "bool"), alpha=True),
        _torch(b, "bool").add(_torch(b[::-1], "bool"), alpha=True),
        "b",
    )
    for ours, theirs in [
        (
            lambda: _vg(i, "i64").add(_vg(j, "i64"), alpha=0.5),
            lambda: _torch(i, "i64").add(_torch(j, "i64"), alpha=0.5),
        ),
        (
            lambda: _vg(i, "i64").sub(_vg(j, "i64"), alpha=True),
            lambda: _torch(i, "i64").sub(_torch(j, "i64"), alpha=True),
        ),
        (
            lambda: _vg(b, "bool").sub(_vg(b, "bool"), alpha=2),
            lambda: _torch(b, "bool").sub(_torch(b, "bool"), alpha=2),
        ),
    ]:
        with pytest.raises(RuntimeError):
            theirs()
        with pytest.raises(verigrad.DTypeError):
            ours()


@pytest.mark.parametrize("name", ["f32", "f64"])
def test_add_with_alpha_gradients(name: str) -> None:
    rng = np.random.default_rng(1)
    a, g, w = rng.standard_normal((3, 4)), rng.standard_normal((4,)), rng.standard_normal((3, 4))
    x, y = _vg(a, name).requires_grad_(), _vg(g, name).requires_grad_()
    tx, ty = _torch(a, name).requires_grad_(), _torch(g, name).requires_grad_()
    (x.sub(y, alpha=0.3) * _vg(w, name)).sum().backward()
    (tx.sub(ty, alpha=0.3) * _torch(w, name)).sum().backward()
    _same(x.grad, tx.grad, "grad x")
    _same(y.grad, ty.grad, "grad y")


# copysign, tan, exp2 ---------------------------------------------------------------------------
def _ulps(ours: np.ndarray, theirs: np.ndarray) -> float:
    finite = np.isfinite(theirs)
    assert np.array_equal(ours[~finite], theirs[~finite], equal_nan=True)
    gap = np.abs(ours[finite].astype(np.float64) - theirs[finite])
    return float(np.max(gap / np.spacing(np.abs(theirs[finite])), initial=0.0))


@pytest.mark.parametrize("name", ["f32", "f64"])
@pytest.mark.parametrize(
    ("op", "low", "high"), [("tan", -1.56, 1.56), ("tan", -100, 100), ("exp2", -150, 128)]
)
def test_tan_and_exp2_within_an_ulp_of_torch(name: str, op: str, low: float, high: float) -> None:
    """verigrad evaluates in f64 and rounds once (f32: correctly rounded but for double rounding); torch
    uses its vectorized routines (Sleef, within 1 ulp): the two agree within 1 ulp, and verigrad's f32 is
    within half an ulp of torch's own f64 result."""
    rng = np.random.default_rng(0)
    x = np.concatenate(
        [rng.uniform(low, high, 20000), np.linspace(low, high, 2001), [0.0, -0.0, np.inf, -np.inf, np.nan]]
    )
    ours = getattr(_vg(x, name), op)()
    theirs = getattr(torch, op)(_torch(x, name))
    assert ours.dtype.name == NAME_OF[theirs.dtype]
    assert _ulps(ours.numpy(), theirs.numpy()) <= 1.0
    if name == "f32":
        truth = getattr(torch, op)(_torch(x.astype(np.float32), "f64")).numpy()
        ok = np.isfinite(truth) & (np.abs(truth) < 3e38)
        err = np.abs(ours.numpy()[ok] - truth[ok]) / np.spacing(np.abs(ours.numpy()[ok]))
        assert err.max() <= 0.5 + 1e-6


@pytest.mark.parametrize("op", ["tan", "exp2"])
def test_tan_and_exp2_gradients_and_integers(op: str) -> None:
    x = np.linspace(-1.2, 1.2, 11)
    ours, theirs = _vg(x, "f64").requires_grad_(), _torch(x, "f64").requires_grad_()
    getattr(verigrad, op)(ours).sum().backward()
    getattr(torch, op)(theirs).sum().backward()
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-15)
    for name in ("i32", "u8", "bool", "i8"):
        values = [0, 1, 2] if name != "bool" else [True, False, True]
        o, t = getattr(verigrad, op)(_vg(values, name)), getattr(torch, op)(_torch(values, name))
        assert o.dtype.name == NAME_OF[t.dtype]
        assert _ulps(o.numpy(), t.numpy()) <= 1.0


def test_copysign() -> None:
    a = np.array(SPECIAL * len(SPECIAL))
    b = np.repeat(SPECIAL, len(SPECIAL))
    for name in ("f16", "f32", "f64"):
        _same(
            verigrad.copysign(_vg(a, name), _vg(b, name)),
            torch.copysign(_torch(a, name), _torch(b, name)),
            name,
        )
        np.testing.assert_array_equal(
            np.signbit(_vg(a, name).copysign(_vg(b, name)).numpy()),
            np.signbit(torch.copysign(_torch(a, name), _torch(b, name)).numpy()),
        )
    for name in ("i32", "bool", "u8"):
        values = [1, 0, 3] if name != "bool" else [True, False, True]
        _same(verigrad.copysign(_vg(values, name), -1.0), torch.copysign(_torch(values, name), -1.0), name)
    x = np.array([-2.0, 0.0, 3.0, -0.0, 1.5])
    y = np.array([1.0, -1.0, -2.0, 1.0, -0.0])
    ox, oy = _vg(x, "f64").requires_grad_(), _vg(y, "f64").requires_grad_()
    tx, ty = _torch(x, "f64").requires_grad_(), _torch(y, "f64").requires_grad_()
    verigrad.copysign(ox, oy).sum().backward()
    torch.copysign(tx, ty).sum().backward()
    _same(ox.grad, tx.grad, "grad x")
    _same(oy.grad, ty.grad, "grad y")


# integer results -------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["bool", "u8", "i8", "i16", "i32", "i64"])
def test_integer_reductions_and_pointwise(name: str) -> None:
    values = (
        [[True, False, True], [True, True, False]]
        if name == "bool"
        else _ints([[1, -2, 3], [4, 5, -6]], name)
    )
    x, t = _vg(values, name), _torch(values, name)
    for fn in (
        lambda m, a: a.sum(),
        lambda m, a: a.sum(dim=0),
        lambda m, a: a.prod(),
        lambda m, a: a.prod(dim=1),
        lambda m, a: a.cumsum(dim=1),
        lambda m, a: a.abs(),
        lambda m, a: -a,
        lambda m, a: a.sign(),
        lambda m, a: a.clamp(0, 2),
        lambda m, a: m.maximum(a, a.flip(0)),
        lambda m, a: a > 1,
        lambda m, a: a == a.flip(1),
        lambda m, a: a.max(),
        lambda m, a: a.mean(),
    ):
        _both(lambda fn=fn: fn(verigrad, x), lambda fn=fn: fn(torch, t), name)


def test_masked_fill_keeps_the_tensors_dtype() -> None:
    mask = [True, False, True]
    for name, value in [("i64", 2.5), ("i8", -3.7), ("u8", 7), ("f32", 0.1), ("f16", 2.5), ("bool", 0)]:
        values = [True, False, True] if name == "bool" else [1, 2, 3]
        for fill in (value, "tensor"):
            ours_v = verigrad.tensor(np.float64(value)) if fill == "tensor" else value
            theirs_v = torch.tensor(value, dtype=torch.float64) if fill == "tensor" else value
            _same(
                _vg(values, name).masked_fill(_vg(mask, "bool"), ours_v),
                _torch(values, name).masked_fill(_torch(mask, "bool"), theirs_v),
                f"masked_fill {name} {fill}",
            )


SCALAR_OPS = {
    "mul": (lambda m, x, s: x * s),
    "rmul": (lambda m, x, s: s * x),
    "div": (lambda m, x, s: x / s),
    "rdiv": (lambda m, x, s: s / x),
    "floordiv": (lambda m, x, s: x // s),
    "rfloordiv": (lambda m, x, s: s // x),
    "trunc": (lambda m, x, s: m.div(x, s, rounding_mode="trunc")),
    "add": (lambda m, x, s: x + s),
    "rsub": (lambda m, x, s: s - x),
    "mul 0-d": (lambda m, x, s: x * m.tensor(s, dtype=m.float64)),
    "0-d mul": (lambda m, x, s: x[0] * s),
}


@pytest.mark.parametrize("name", ["f16", "f32", "f64", "i32", "u8"])
@pytest.mark.parametrize("op", list(SCALAR_OPS))
def test_arithmetic_with_a_scalar_rounds_as_torch(name: str, op: str) -> None:
    """f16 times (or divided by) a scalar computes in f32 with the scalar's f32 value; `s / x` is
    reciprocal(x) * s (two roundings), in every dtype, as PyTorch's."""
    rng = np.random.default_rng(0)
    values = rng.uniform(0.5, 4, 3000) * (1 if name == "u8" else rng.choice([-1, 1], 3000))
    if name[0] in "iu":
        values = np.round(values)
    fn = SCALAR_OPS[op]
    for s in (0.1, 3, 7.3):
        _both(
            lambda: fn(verigrad, _vg(values, name), s),
            lambda: fn(torch, _torch(values, name), s),
            f"{op} {s}",
        )


def test_in_place_fills_cast_and_clamp_refuses() -> None:
    """index_fill_ and scatter_ cast the value given to the tensor's dtype; clamp_ with float bounds on
    an integer tensor raises; as PyTorch's."""
    index = [0, 2]
    for fn in (
        lambda m, x: x.index_fill_(0, m.tensor(index), 2.5),
        lambda m, x: x.scatter_(0, m.tensor(index), -3.7),
        lambda m, x: x.clamp_(0.5, 1.5),
        lambda m, x: x.clamp_(0, 2),
        lambda m, x: x.masked_fill_(m.tensor([True, False, True]), 9.9),
    ):
        _both(
            lambda fn=fn: fn(verigrad, _vg([1, 2, 3], "i32")),
            lambda fn=fn: fn(torch, _torch([1, 2, 3], "i32")),
            "fill",
        )

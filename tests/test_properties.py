"""Property tests (hypothesis): ops against NumPy on random shapes with size-0 and size-1 dimensions,
and the laws shapes, symbolic dimensions and a few ops must obey."""

from __future__ import annotations

import math
import operator
from functools import reduce

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import verigrad
from verigrad import ShapeError
from verigrad.shapes import broadcast, evaluate

SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
FEW = settings(SETTINGS, max_examples=30)

shapes = hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=4)
nonempty_shapes = hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=4)
float_dtypes = st.sampled_from([np.float32, np.float64])
SPECIALS = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan])


def _values(seed: int, shape: tuple, dtype, specials: bool = False) -> np.ndarray:
    """Random values of `dtype`; floats in [-4, 4] with, when asked, some signed zeros, infs and NaNs."""
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind in "iu":
        return rng.integers(-20, 20, size=shape).astype(dtype)
    if np.dtype(dtype).kind == "b":
        return np.asarray(rng.random(shape) > 0.5)
    x = rng.uniform(-4.0, 4.0, size=shape)
    if specials and x.size:
        mask = rng.random(shape) < 0.2
        x[mask] = rng.choice(SPECIALS, size=int(mask.sum()))
    return x.astype(dtype)


def _t(a: np.ndarray) -> verigrad.Tensor:
    return verigrad.from_numpy(a)


def _same(t: verigrad.Tensor, expected: np.ndarray) -> None:
    got = t.numpy()
    expected = np.asarray(expected)
    assert got.shape == expected.shape, (got.shape, expected.shape)
    assert got.dtype == expected.dtype, (got.dtype, expected.dtype)
    np.testing.assert_array_equal(got, expected, strict=True)


def _close(t: verigrad.Tensor, expected: np.ndarray, dtype) -> None:
    got = t.numpy()
    assert got.shape == np.shape(expected) and got.dtype == np.dtype(dtype)
    rtol = 1e-6 if np.dtype(dtype) == np.float32 else 1e-12
    np.testing.assert_allclose(got, expected, rtol=rtol, atol=rtol)


# element-wise binary ops with broadcasting -----------------------------------------------------
BINARY = {
    "add": (operator.add, np.add),
    "sub": (operator.sub, np.subtract),
    "mul": (operator.mul, np.multiply),
    "div": (operator.truediv, np.divide),
    "maximum": (verigrad.maximum, np.maximum),
    "minimum": (verigrad.minimum, np.minimum),
    "eq": (operator.eq, np.equal),
    "lt": (operator.lt, np.less),
    "ge": (operator.ge, np.greater_equal),
}


@SETTINGS
@given(
    bs=hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4, min_side=0, max_side=4),
    name=st.sampled_from(sorted(BINARY)),
    dtype=float_dtypes,
    seed=st.integers(0, 2**32 - 1),
)
def test_broadcasting_float_binary_ops_match_numpy(bs, name, dtype, seed) -> None:
    sa, sb = bs.input_shapes
    a, b = _values(seed, sa, dtype, specials=True), _values(seed + 1, sb, dtype, specials=True)
    ours, theirs = BINARY[name]
    with np.errstate(all="ignore"):
        expected = theirs(a, b)
    out = ours(_t(a), _t(b))
    assert out.shape == bs.result_shape
    _same(out, expected)


@SETTINGS
@given(
    bs=hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4, min_side=0, max_side=4),
    name=st.sampled_from(["add", "sub", "mul", "maximum", "minimum", "eq", "lt", "ge"]),
    dtypes=st.sampled_from([(np.int64, np.int64), (np.int32, np.int32), (np.int32, np.int64)]),
    seed=st.integers(0, 2**32 - 1),
)
def test_broadcasting_int_binary_ops_match_numpy(bs, name, dtypes, seed) -> None:
    sa, sb = bs.input_shapes
    a, b = _values(seed, sa, dtypes[0]), _values(seed + 1, sb, dtypes[1])
    ours, theirs = BINARY[name]
    expected = theirs(a, b)
    if expected.dtype.kind != "b":  # PyTorch's promotion: a 0-d operand does not widen a dimensioned one
        expected = expected.astype(verigrad.result_type(_t(a), _t(b)).np)
    _same(ours(_t(a), _t(b)), expected)


@SETTINGS
@given(
    bs=hnp.mutually_broadcastable_shapes(num_shapes=3, min_dims=0, max_dims=3, min_side=0, max_side=3),
    dtype=float_dtypes,
    seed=st.integers(0, 2**32 - 1),
)
def test_where_broadcasts_like_numpy(bs, dtype, seed) -> None:
    sc, sa, sb = bs.input_shapes
    c = _values(seed, sc, bool)
    a, b = _values(seed + 1, sa, dtype, specials=True), _values(seed + 2, sb, dtype, specials=True)
    _same(verigrad.where(_t(c), _t(a), _t(b)), np.where(c, a, b))


@SETTINGS
@given(shape=shapes, dtype=float_dtypes, seed=st.integers(0, 2**32 - 1))
def test_unary_ops_match_numpy(shape, dtype, seed) -> None:
    x = _values(seed, shape, dtype, specials=True)
    t = _t(x)
    with np.errstate(all="ignore"):
        _same(-t, -x)
        _same(abs(t), np.abs(x))
        _same(t.relu(), np.maximum(x, 0).astype(dtype))
        x64 = x.astype(np.float64)  # transcendentals are evaluated in f64 and rounded once
        _same(t.exp(), np.exp(x64).astype(dtype))
        _same(t.log(), np.log(x64).astype(dtype))
        _same(t.sqrt(), np.sqrt(x))
        u = np.expm1(-2 * np.abs(x64))  # tanh|x| = -u / (u + 2)
        _same(t.tanh(), np.copysign(-u / (u + 2), x64).astype(dtype))
        _same(t.sin(), np.sin(x64).astype(dtype))


# reductions ------------------------------------------------------------------------------------
@st.composite
def reduction_case(draw, shape_strategy=shapes):
    shape = draw(shape_strategy)
    axis = draw(
        st.one_of(
            st.none(),
            st.lists(st.integers(0, max(len(shape) - 1, 0)), unique=True, max_size=len(shape)).map(tuple),
        )
    )
    if axis is not None and draw(st.booleans()):  # negative spellings of the same axes
        axis = tuple(a - len(shape) for a in axis)
    return shape, axis, draw(st.booleans())


def _np_axis(axis):
    return None if axis is None else tuple(axis)


@SETTINGS
@given(case=reduction_case(), dtype=float_dtypes, seed=st.integers(0, 2**32 - 1))
def test_float_sum_and_mean_match_numpy(case, dtype, seed) -> None:
    shape, axis, keepdim = case
    x = _values(seed, shape, dtype)
    x64 = x.astype(np.float64)
    expected = np.sum(x64, axis=_np_axis(axis), keepdims=keepdim).astype(dtype)
    out = _t(x).sum(axis=axis, keepdim=keepdim)
    _close(out, expected, dtype)
    with np.errstate(invalid="ignore"):  # over no elements: NaN, as PyTorch's
        expected_mean = np.mean(x64, axis=_np_axis(axis), keepdims=keepdim).astype(dtype)
    _close(_t(x).mean(axis=axis, keepdim=keepdim), expected_mean, dtype)  # NumPy's axis: () is none


@SETTINGS
@given(case=reduction_case(), dtype=st.sampled_from([np.int32, np.int64, bool]), seed=st.integers(0, 2**32))
def test_int_and_bool_sums_are_exact_i64(case, dtype, seed) -> None:
    shape, axis, keepdim = case
    x = _values(seed, shape, dtype)
    out = _t(x).sum(axis=axis, keepdim=keepdim)
    _same(out, np.sum(x, axis=_np_axis(axis), keepdims=keepdim, dtype=np.int64))


@SETTINGS
@given(
    case=reduction_case(),
    dtype=st.sampled_from([np.float32, np.float64, np.int32, np.int64]),
    which=st.sampled_from(["max", "min"]),
    seed=st.integers(0, 2**32 - 1),
)
def test_max_min_match_numpy(case, dtype, which, seed) -> None:
    shape, axis, keepdim = case
    x = _values(seed, shape, dtype)
    reduced = range(len(shape)) if axis is None else axis
    t = _t(x)
    reduce = getattr(verigrad.ops, which)  # the op, over any axes (NumPy's reading of axis=())
    if not all(shape[a] for a in reduced):
        with pytest.raises(ShapeError):
            reduce(t, axis=axis, keepdim=keepdim)
        return
    expected = getattr(np, which)(x, axis=_np_axis(axis), keepdims=keepdim)
    _same(reduce(t, axis=axis, keepdim=keepdim), expected)


@SETTINGS
@given(shape=nonempty_shapes, data=st.data(), seed=st.integers(0, 2**32 - 1))
def test_argmax_matches_numpy(shape, data, seed) -> None:
    x = np.round(_values(seed, shape, np.float64))  # rounded: ties, where the first index wins
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    keepdim = data.draw(st.booleans())
    _same(_t(x).argmax(dim=axis, keepdim=keepdim), np.argmax(x, axis=axis, keepdims=keepdim))
    _same(_t(x).argmax(), np.int64(np.argmax(x)))


# movement --------------------------------------------------------------------------------------
def _factorizations(total: int, draw) -> tuple:
    """A random shape with `total` elements (with 1s and, for 0, a zero somewhere)."""
    if total == 0:
        return tuple(draw(st.lists(st.integers(0, 4), min_size=1, max_size=4).filter(lambda s: 0 in s)))
    primes, rest, p = [], total, 2
    while rest > 1:
        while rest % p == 0:
            primes.append(p)
            rest //= p
        p += 1
    slots = draw(st.integers(1, 4))
    dims = [1] * slots
    for q in primes:
        dims[draw(st.integers(0, slots - 1))] *= q
    return () if dims == [1] and draw(st.booleans()) else tuple(dims)  # one element: maybe 0-d


@SETTINGS
@given(shape=shapes, data=st.data(), seed=st.integers(0, 2**32 - 1))
def test_reshape_matches_numpy_and_round_trips(shape, data, seed) -> None:
    x = _values(seed, shape, np.float32)
    target = _factorizations(x.size, data.draw)
    if data.draw(st.booleans()) and target:
        i = data.draw(st.integers(0, len(target) - 1))
        if math.prod(d for j, d in enumerate(target) if j != i) != 0:
            target = (*target[:i], -1, *target[i + 1 :])
    out = _t(x).reshape(target)
    _same(out, x.reshape(target))
    _same(out.reshape(shape), x)


@SETTINGS
@given(shape=shapes, data=st.data(), seed=st.integers(0, 2**32 - 1))
def test_permute_matches_numpy_and_inverts(shape, data, seed) -> None:
    x = _values(seed, shape, np.float64)
    axes = tuple(data.draw(st.permutations(range(len(shape)))))
    out = _t(x).permute(axes)
    _same(out, np.transpose(x, axes))
    assert np.shares_memory(out.numpy(), x) or x.size == 0
    _same(out.permute(tuple(np.argsort(axes))), x)
    _same(_t(x).T.T, x)
    if len(shape) >= 2:
        a, b = data.draw(st.integers(0, len(shape) - 1)), data.draw(st.integers(0, len(shape) - 1))
        _same(_t(x).transpose(a, b), np.swapaxes(x, a, b))
        _same(_t(x).transpose(a, b).transpose(a, b), x)


@st.composite
def basic_index(draw, shape):
    items = []
    for size in shape[: draw(st.integers(0, len(shape)))]:
        if size and draw(st.integers(0, 3)) == 0:
            items.append(draw(st.integers(-size, size - 1)))
            continue
        bound = st.one_of(st.none(), st.integers(-size - 2, size + 2))
        items.append(slice(draw(bound), draw(bound), draw(st.one_of(st.none(), st.integers(1, 3)))))
    if draw(st.booleans()):
        items.insert(draw(st.integers(0, len(items))), None)
    if draw(st.booleans()):
        items.insert(draw(st.integers(0, len(items))), Ellipsis)
    return tuple(items)


@SETTINGS
@given(shape=shapes, data=st.data(), seed=st.integers(0, 2**32 - 1))
def test_slicing_matches_numpy(shape, data, seed) -> None:
    x = _values(seed, shape, np.float32)
    key = data.draw(basic_index(shape))
    try:
        expected = x[key]
    except IndexError:  # an int out of range once the ellipsis moved it: refused alike
        with pytest.raises(IndexError):
            _t(x)[key]
        return
    out = _t(x)[key]
    _same(out, expected)
    assert np.shares_memory(out.numpy(), x) or out.numpy().size == 0


@SETTINGS
@given(shape=nonempty_shapes, data=st.data(), seed=st.integers(0, 2**32 - 1))
def test_integer_array_indexing_matches_numpy(shape, data, seed) -> None:
    x = _values(seed, shape, np.float64)
    axis = data.draw(st.integers(0, len(shape) - 1))
    idx_shape = data.draw(hnp.array_shapes(min_dims=0, max_dims=2, min_side=0, max_side=3))
    idx = np.random.default_rng(seed).integers(-shape[axis], shape[axis], size=idx_shape)
    key = (slice(None),) * axis + (idx,)
    _same(_t(x)[key], x[key])
    _same(verigrad.take(_t(x), _t(idx), axis=axis), np.take(x, idx, axis=axis))


@SETTINGS
@given(shape=shapes, data=st.data(), seed=st.integers(0, 2**32 - 1))
def test_pad_matches_numpy(shape, data, seed) -> None:
    x = _values(seed, shape, np.float64)
    k = data.draw(st.integers(0, len(shape)))
    widths = tuple((data.draw(st.integers(0, 2)), data.draw(st.integers(0, 2))) for _ in range(k))
    value = data.draw(st.sampled_from([0.0, -1.5, 7.0]))
    full = ((0, 0),) * (len(shape) - k) + widths
    expected = np.pad(x, full, constant_values=value) if x.ndim else x  # NumPy cannot pad a 0-d array
    _same(_t(x).pad(widths, value=value), expected)


@SETTINGS
@given(shape=nonempty_shapes, data=st.data(), seed=st.integers(0, 2**32 - 1))
def test_concat_and_stack_match_numpy(shape, data, seed) -> None:
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    count = data.draw(st.integers(1, 3))
    parts = []
    for i in range(count):
        s = list(shape)
        s[axis] = data.draw(st.integers(0, 3))
        parts.append(_values(seed + i, tuple(s), np.float32))
    _same(verigrad.concat(*map(_t, parts), axis=axis), np.concatenate(parts, axis=axis))
    same = [_values(seed + i, shape, np.float32) for i in range(count)]
    new_axis = data.draw(st.integers(-len(shape) - 1, len(shape)))
    _same(verigrad.stack([_t(p) for p in same], axis=new_axis), np.stack(same, axis=new_axis))


# matmul ----------------------------------------------------------------------------------------
@SETTINGS
@given(
    bs=hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=2, min_side=0, max_side=3),
    nkm=st.tuples(st.integers(0, 4), st.integers(0, 4), st.integers(0, 4)),
    vectors=st.sampled_from(["", "a", "b", "ab"]),
    dtype=float_dtypes,
    seed=st.integers(0, 2**32 - 1),
)
def test_matmul_with_batch_broadcasting_matches_numpy(bs, nkm, vectors, dtype, seed) -> None:
    n, k, m = nkm
    sa = (k,) if "a" in vectors else (*bs.input_shapes[0], n, k)
    sb = (k,) if "b" in vectors else (*bs.input_shapes[1], k, m)
    a, b = _values(seed, sa, dtype), _values(seed + 1, sb, dtype)
    expected = np.matmul(a.astype(np.float64), b.astype(np.float64)).astype(dtype)
    _close(_t(a) @ _t(b), expected, dtype)


@SETTINGS
@given(
    bs=hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=2, min_side=1, max_side=3),
    nkm=st.tuples(st.integers(1, 3), st.integers(1, 3), st.integers(1, 3)),
    seed=st.integers(0, 2**32 - 1),
)
def test_int_matmul_is_exact(bs, nkm, seed) -> None:
    n, k, m = nkm
    a = _values(seed, (*bs.input_shapes[0], n, k), np.int64)
    b = _values(seed + 1, (*bs.input_shapes[1], k, m), np.int64)
    _same(_t(a) @ _t(b), np.matmul(a, b))


# laws ------------------------------------------------------------------------------------------
@SETTINGS
@given(shape=shapes, seed=st.integers(0, 2**32 - 1))
def test_sum_over_all_axes_equals_nested_sums(shape, seed) -> None:
    xi = _values(seed, shape, np.int64)
    nested = _t(xi)
    for _ in shape:
        nested = nested.sum(axis=0)
    _same(nested, np.int64(xi.sum()))
    _same(_t(xi).sum(), np.int64(xi.sum()))
    xf = _values(seed, shape, np.float64)
    nested = _t(xf)
    for _ in shape:
        nested = nested.sum(axis=-1)
    np.testing.assert_allclose(nested.item(), _t(xf).sum().item(), rtol=1e-12, atol=1e-12)


@SETTINGS
@given(
    shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=5),
    dtype=float_dtypes,
    scale=st.sampled_from([1.0, 30.0, 1000.0]),
    seed=st.integers(0, 2**32 - 1),
)
def test_softmax_rows_sum_to_one(shape, dtype, scale, seed) -> None:
    x = (_values(seed, shape, np.float64) * scale).astype(dtype)
    s = _t(x).softmax(-1).numpy()
    assert s.dtype == dtype and s.shape == shape
    assert np.all(s >= 0) and np.all(s <= 1)
    atol = 1e-6 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(s.sum(axis=-1), 1.0, atol=atol)


n_, m_, k_ = verigrad.dims("pn pm pk")
SYMBOLIC_SIZES = [1, 2, 3, n_, m_, n_ * 2, n_ + 1]
concrete_dims = st.lists(st.integers(0, 3), max_size=4).map(tuple)
symbolic_dims = st.lists(st.sampled_from(SYMBOLIC_SIZES), max_size=4).map(tuple)


def _broadcast_or_none(*shapes_):
    try:
        return broadcast(*shapes_)
    except ShapeError:
        return None


def _assoc(a, b, c) -> None:
    ab = _broadcast_or_none(a, b)
    left = None if ab is None else _broadcast_or_none(ab, c)
    bc = _broadcast_or_none(b, c)
    right = None if bc is None else _broadcast_or_none(a, bc)
    assert left == right
    assert _broadcast_or_none(a, b, c) == left
    assert _broadcast_or_none(a, b) == _broadcast_or_none(b, a)


@SETTINGS
@given(a=concrete_dims, b=concrete_dims, c=concrete_dims)
def test_concrete_broadcasting_is_associative_and_matches_numpy(a, b, c) -> None:
    _assoc(a, b, c)
    try:
        expected = np.broadcast_shapes(a, b, c)
    except ValueError:
        expected = None
    assert _broadcast_or_none(a, b, c) == expected


@SETTINGS
@given(a=symbolic_dims, b=symbolic_dims, c=symbolic_dims)
def test_symbolic_broadcasting_is_associative(a, b, c) -> None:
    _assoc(a, b, c)


# symbolic dimensions ---------------------------------------------------------------------------
SYMBOLS = ("pn", "pm", "pk")
SYMBOL_DIMS = dict(zip(SYMBOLS, (n_, m_, k_)))


@st.composite
def expressions(draw, depth: int = 3):
    """An expression tree over the symbols and small ints: ('sym', name) | ('int', v) | (op, l, r)."""
    if depth == 0 or draw(st.integers(0, 2)) == 0:
        if draw(st.booleans()):
            return ("sym", draw(st.sampled_from(SYMBOLS)))
        return ("int", draw(st.integers(-3, 5)))
    op = draw(st.sampled_from(["+", "-", "*"]))
    return (op, draw(expressions(depth - 1)), draw(expressions(depth - 1)))


OPERATORS = {"+": operator.add, "-": operator.sub, "*": operator.mul}


def _build(tree, leaf):
    if tree[0] == "sym":
        return leaf(tree[1])
    if tree[0] == "int":
        return tree[1]
    return OPERATORS[tree[0]](_build(tree[1], leaf), _build(tree[2], leaf))


def _dim(tree):
    return _build(tree, SYMBOL_DIMS.__getitem__)


values = st.fixed_dictionaries({s: st.integers(-6, 9) for s in SYMBOLS})


@SETTINGS
@given(a=expressions(), b=expressions(), c=expressions())
def test_dim_arithmetic_laws(a, b, c) -> None:
    a, b, c = _dim(a), _dim(b), _dim(c)
    assert a + b == b + a
    assert a * b == b * a
    assert (a + b) + c == a + (b + c)
    assert (a * b) * c == a * (b * c)
    assert a * (b + c) == a * b + a * c
    assert (a + b) * c == a * c + b * c
    assert a - a == 0
    assert a + 0 == a and a * 1 == a and a * 0 == 0
    assert 0 - (0 - a) == a
    assert a * -1 + a == 0
    assert hash(a + b) == hash(b + a)


def _exact(a, b):
    """a / b for dims and ints alike: Python's int / int would give a float."""
    if isinstance(a, int) and isinstance(b, int):
        if a % b:
            raise ShapeError(f"{a} is not divisible by {b}")
        return a // b
    return a / b


@SETTINGS
@given(a=expressions(depth=2), b=expressions(depth=2))
def test_division_undoes_multiplication(a, b) -> None:
    a, b = _dim(a), _dim(b)
    assume(b != 0)
    assert _exact(a * b, b) == a
    if isinstance(b, int) and b > 0:
        assert (a * b) // b == a


@SETTINGS
@given(a=expressions(depth=2), b=expressions(depth=2), vals=values)
def test_exact_division_is_exact_or_refused(a, b, vals) -> None:
    a, b = _dim(a), _dim(b)
    assume(b != 0)
    try:
        q = _exact(a, b)
    except ShapeError:
        return
    assert q * b == a
    assert evaluate(q, vals) * evaluate(b, vals) == evaluate(a, vals)


@SETTINGS
@given(tree=expressions(depth=4), vals=values, divisor=st.integers(1, 4))
def test_evaluate_matches_integer_arithmetic(tree, vals, divisor) -> None:
    expr = _dim(tree)
    expected = _build(tree, vals.__getitem__)
    assert evaluate(expr, vals) == expected
    assert evaluate(expr // divisor, vals) == expected // divisor
    assert evaluate(expr * 3 - 1, vals) == expected * 3 - 1


@FEW
@given(
    trees=st.lists(expressions(depth=2), min_size=1, max_size=3),
    vals=st.fixed_dictionaries({s: st.integers(1, 4) for s in SYMBOLS}),
    seed=st.integers(0, 2**32 - 1),
)
def test_symbolic_specs_agree_with_concrete_runs(trees, vals, seed) -> None:
    """A program checked with symbols gives, for given values, the shape the concrete run gives."""
    shape = tuple(_dim(t) for t in trees)
    sizes = tuple(evaluate(d, vals) for d in shape)
    assume(all(s >= 0 for s in sizes) and math.prod(sizes) <= 200)

    def program(x):
        y = x.reshape(-1) if x.ndim else x.reshape(1)
        z = (x * 2.0).sum(axis=0, keepdim=True) if x.ndim else x
        return y, z, verigrad.concat(y, y)

    out = verigrad.check(program, verigrad.spec(shape))
    ran = program(_t(_values(seed, sizes, np.float32)))
    for s, t in zip(out, ran):
        assert tuple(evaluate(d, vals) for d in s.shape) == t.shape


def test_reduce_of_products_is_the_product_dim() -> None:
    total = reduce(operator.mul, (n_, m_, 2), 1)
    assert verigrad.check(lambda x: x.reshape(-1), verigrad.spec([n_, m_, 2])).shape == (total,)

"""PyTorch's special functions, NaN-skipping reductions, quantiles and NumPy-style joining and
splitting, against torch: values, dtypes and gradients in f64."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gradients import check_values_and_gradients

import verigrad

RNG = np.random.default_rng(3)
X = RNG.uniform(-2.0, 2.0, (3, 4))
POS = RNG.uniform(0.2, 5.0, (3, 4))
UNIT = RNG.uniform(-0.95, 0.95, (3, 4))
PROB = RNG.uniform(0.05, 0.95, (3, 4))
DTYPE_NAMES = {torch.float64: "f64", torch.float32: "f32", torch.int64: "i64", torch.bool: "bool"}
WITH_NAN = np.array([[1.0, np.nan, 3.0, -2.0], [np.nan, np.nan, np.nan, np.nan], [0.5, 2.0, np.nan, 7.0]])


def _same(ours, theirs, rtol: float = 1e-12) -> None:
    if isinstance(theirs, tuple | list):
        assert isinstance(ours, tuple | list) and len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            _same(a, b, rtol)
        return
    assert ours.shape == tuple(theirs.shape), (ours.shape, tuple(theirs.shape))
    assert ours.dtype.name == DTYPE_NAMES[theirs.dtype], (ours.dtype.name, theirs.dtype)
    np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), rtol=rtol, atol=1e-300, equal_nan=True)


# one input, element-wise: (name, inputs, how torch spells it)
UNARY = [
    ("erfc", X, lambda t, x: t.erfc(x)),
    ("erfinv", UNIT, lambda t, x: t.erfinv(x)),
    ("lgamma", POS, lambda t, x: t.lgamma(x)),
    ("i0", X, lambda t, x: t.i0(x)),
    ("sinc", X, lambda t, x: t.sinc(x)),
    ("logit", PROB, lambda t, x: t.logit(x)),
    ("reciprocal", POS, lambda t, x: t.reciprocal(x)),
    ("sgn", X, lambda t, x: t.sgn(x)),
    ("negative", X, lambda t, x: t.negative(x)),
    ("absolute", X, lambda t, x: t.absolute(x)),
    ("arctan", X, lambda t, x: t.arctan(x)),
    ("fix", X * 3, lambda t, x: t.fix(x)),
]


@pytest.mark.parametrize(("name", "x", "fn"), UNARY, ids=[u[0] for u in UNARY])
def test_unary_special_functions(name, x, fn) -> None:
    if name == "sgn":  # PyTorch's gradient of sgn is a ZeroTensor, which has no NumPy view
        _same(fn(verigrad, verigrad.tensor(x)), fn(torch, torch.tensor(x)))
        return
    check_values_and_gradients({"x": x}, lambda x: fn(verigrad, x), lambda x: fn(torch, x))


# PyTorch's trigamma (polygamma(1), digamma's gradient) sums a short series: 4.4e-10 from the exact
# value at x = 1.6 (0.8584318931245798); verigrad's is within 1e-15 of the exact values below.
TRIGAMMA_RTOL = {1: 1e-9, 2: 1e-12, 3: 1e-12}


@pytest.mark.parametrize("n", [1, 2, 3])
def test_polygamma(n) -> None:
    ours, theirs = verigrad.polygamma(n, verigrad.tensor(POS)), torch.polygamma(n, torch.tensor(POS))
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=TRIGAMMA_RTOL[n])
    np.testing.assert_allclose(
        verigrad.tensor(POS).polygamma(n).numpy(), theirs.numpy(), rtol=TRIGAMMA_RTOL[n]
    )


def test_digamma_and_trigamma_exact_values() -> None:
    euler = 0.5772156649015329
    x = verigrad.tensor([1.0, 0.5, 2.0], dtype=verigrad.float64)
    np.testing.assert_allclose(
        verigrad.digamma(x).numpy(), [-euler, -euler - 2 * np.log(2), 1 - euler], rtol=4e-15
    )
    pi2 = np.pi**2
    np.testing.assert_allclose(verigrad.polygamma(1, x).numpy(), [pi2 / 6, pi2 / 2, pi2 / 6 - 1], rtol=1e-15)
    ours, theirs = verigrad.tensor(POS), torch.tensor(POS)
    np.testing.assert_allclose(verigrad.digamma(ours).numpy(), torch.digamma(theirs).numpy(), rtol=1e-12)
    ours.requires_grad_(True)
    theirs.requires_grad_(True)
    verigrad.digamma(ours).sum().backward()
    torch.digamma(theirs).sum().backward()
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=TRIGAMMA_RTOL[1])


def test_special_functions_at_their_edges() -> None:
    edges = np.array([0.0, -0.0, -1.0, -2.5, 1e-300, 50.0, 171.5, np.inf, -np.inf, np.nan])
    for name in ("lgamma", "digamma", "erfc", "i0", "sinc"):
        ours = getattr(verigrad, name)(verigrad.tensor(edges)).numpy()
        theirs = getattr(torch, name)(torch.tensor(edges)).numpy()
        np.testing.assert_allclose(ours, theirs, rtol=1e-13, equal_nan=True, err_msg=name)
    ends = np.array([-1.0, 1.0, 1.5, -0.0, np.nan])
    np.testing.assert_array_equal(
        verigrad.erfinv(verigrad.tensor(ends)).numpy(), torch.erfinv(torch.tensor(ends)).numpy()
    )
    signs = np.array([-0.0, 0.0, -1.0, 2.0, -np.inf, np.nan])
    np.testing.assert_array_equal(
        verigrad.signbit(verigrad.tensor(signs)).numpy(), torch.signbit(torch.tensor(signs)).numpy()
    )


def test_torch_special_namespace() -> None:
    x = verigrad.tensor(X)
    t = torch.tensor(X)
    for name in ("expit", "erf", "erfc", "ndtr", "log_ndtr", "i0", "i1", "sinc", "gammaln", "psi", "entr"):
        arg, targ = (x.abs() + 0.1, t.abs() + 0.1) if name in ("gammaln", "psi", "entr") else (x, t)
        ours = getattr(verigrad.special, name)(arg)
        theirs = getattr(torch.special, name)(targ)
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-12, err_msg=name)


BINARY = [
    ("xlogy", lambda t, x, y: t.xlogy(x, y)),
    ("fmax", lambda t, x, y: t.fmax(x, y)),
    ("fmin", lambda t, x, y: t.fmin(x, y)),
    ("logaddexp2", lambda t, x, y: t.logaddexp2(x, y)),
    ("arctan2", lambda t, x, y: t.arctan2(x, y)),
]


@pytest.mark.parametrize(("name", "fn"), BINARY, ids=[b[0] for b in BINARY])
def test_binary_special_functions(name, fn) -> None:
    x = X.copy()
    x[0, 0] = 0.0
    y = POS if name == "xlogy" else X[::-1].copy()
    check_values_and_gradients(
        {"x": x, "y": y}, lambda x, y: fn(verigrad, x, y), lambda x, y: fn(torch, x, y)
    )


def test_nan_rules_of_xlogy_fmax_and_logical_xor() -> None:
    a = np.array([0.0, 0.0, 1.0, np.nan, 2.0])
    b = np.array([0.0, np.nan, np.nan, 1.0, np.inf])
    for name in ("xlogy", "fmax", "fmin"):
        ours = getattr(verigrad, name)(verigrad.tensor(a), verigrad.tensor(b)).numpy()
        np.testing.assert_array_equal(ours, getattr(torch, name)(torch.tensor(a), torch.tensor(b)).numpy())
    i, j = np.array([0, 1, 2, 0]), np.array([0.0, 0.0, 3.0, -1.0])
    ours = verigrad.logical_xor(verigrad.tensor(i), verigrad.tensor(j))
    theirs = torch.logical_xor(torch.tensor(i), torch.tensor(j))
    assert ours.dtype.name == "bool"
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_heaviside_ldexp_mvlgamma() -> None:
    x = np.array([-1.5, 0.0, 2.0, 0.0])
    v = np.array([0.5, 0.25, 9.0, 1.0])
    _same(
        verigrad.heaviside(verigrad.tensor(x), verigrad.tensor(v)),
        torch.heaviside(torch.tensor(x), torch.tensor(v)),
    )
    e = np.array([1, -2, 3, 0])
    _same(
        verigrad.ldexp(verigrad.tensor(x), verigrad.tensor(e)), torch.ldexp(torch.tensor(x), torch.tensor(e))
    )
    check_values_and_gradients(
        {"x": POS + 2}, lambda x: verigrad.mvlgamma(x, 3), lambda x: torch.mvlgamma(x, 3)
    )
    with pytest.raises(ValueError):
        verigrad.mvlgamma(verigrad.tensor([0.5]), 3)


@pytest.mark.parametrize("dim", [None, 0, 1, -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_nansum_and_nanmean(dim, keepdim) -> None:
    for name in ("nansum", "nanmean"):
        ours = getattr(verigrad, name)(verigrad.tensor(WITH_NAN), dim=dim, keepdim=keepdim)
        theirs = getattr(torch, name)(torch.tensor(WITH_NAN), dim=dim, keepdim=keepdim)
        _same(ours, theirs)
    finite = np.nan_to_num(WITH_NAN, nan=0.5)
    check_values_and_gradients(
        {"x": finite},
        lambda x: verigrad.nanmean(x, dim=dim, keepdim=keepdim),
        lambda x: torch.nanmean(x, dim=dim, keepdim=keepdim),
    )


QUANTILE_CASES = [
    (0.3, None, False),
    (0.5, 1, False),
    (0.75, 0, True),
    ([0.0, 0.25, 0.9, 1.0], 1, False),
    ([0.1, 0.6], None, True),
    ([0.2, 0.5], -1, True),
]


@pytest.mark.parametrize("interpolation", ["linear", "lower", "higher", "midpoint", "nearest"])
@pytest.mark.parametrize(("q", "dim", "keepdim"), QUANTILE_CASES)
def test_quantile_and_nanquantile(q, dim, keepdim, interpolation) -> None:
    qv = q if isinstance(q, float) else verigrad.tensor(np.array(q))
    qt = q if isinstance(q, float) else torch.tensor(np.array(q))
    for name, data in (("quantile", X), ("quantile", WITH_NAN), ("nanquantile", WITH_NAN)):
        ours = getattr(verigrad, name)(
            verigrad.tensor(data), qv, dim=dim, keepdim=keepdim, interpolation=interpolation
        )
        theirs = getattr(torch, name)(
            torch.tensor(data), qt, dim=dim, keepdim=keepdim, interpolation=interpolation
        )
        _same(ours, theirs)
    check_values_and_gradients(
        {"x": X},
        lambda x: verigrad.quantile(x, qv, dim=dim, keepdim=keepdim, interpolation=interpolation),
        lambda x: torch.quantile(x, qt, dim=dim, keepdim=keepdim, interpolation=interpolation),
    )


def test_quantile_refusals() -> None:
    x = verigrad.tensor(X)
    for bad in (lambda: verigrad.quantile(x, 1.5), lambda: verigrad.quantile(x, 0.5, interpolation="cubic")):
        with pytest.raises(ValueError):
            bad()
    with pytest.raises(TypeError):
        verigrad.quantile(verigrad.tensor([1, 2, 3]), 0.5)


def test_take_indexes_the_flattened_tensor() -> None:
    idx = np.array([[0, 5], [11, 3]])
    check_values_and_gradients(
        {"x": X}, lambda x: verigrad.take(x, verigrad.tensor(idx)), lambda x: torch.take(x, torch.tensor(idx))
    )
    _same(verigrad.tensor(X).take(verigrad.tensor([2, 2])), torch.tensor(X).take(torch.tensor([2, 2])))


JOINING = [
    ("hstack", lambda t, a, b: t.hstack([a, b])),
    ("vstack", lambda t, a, b: t.vstack([a, b])),
    ("dstack", lambda t, a, b: t.dstack([a, b])),
    ("column_stack", lambda t, a, b: t.column_stack([a, b])),
    ("row_stack", lambda t, a, b: t.row_stack([a, b])),
    ("tile", lambda t, a, b: t.tile(a, (2, 1, 3)) + 0 * b.sum()),
    ("ravel", lambda t, a, b: t.ravel(a * b)),
    ("fliplr", lambda t, a, b: t.fliplr(a) * b),
    ("flipud", lambda t, a, b: t.flipud(a) * b),
    ("broadcast_to", lambda t, a, b: t.broadcast_to(a[:1], (5, 3, 4)) + 0 * b.sum()),
    ("swapaxes", lambda t, a, b: t.swapaxes(a, 0, 1) + 0 * b.sum()),
    ("moveaxis", lambda t, a, b: t.moveaxis(a, 0, -1) + 0 * b.sum()),
    ("msort", lambda t, a, b: t.msort(a) + b),
    ("block_diag", lambda t, a, b: t.block_diag(a, b[0], b[1, 0])),
    ("tensor_split", lambda t, a, b: t.tensor_split(a, 3, dim=1)[1] * t.tensor_split(b, [1, 2])[2].sum()),
    ("hsplit", lambda t, a, b: t.hsplit(a, 2)[1] + t.vsplit(b, [1])[0].sum()),
    ("atleast_3d", lambda t, a, b: t.atleast_3d(a) * t.atleast_2d(b.sum())),
]


@pytest.mark.parametrize(("name", "fn"), JOINING, ids=[j[0] for j in JOINING])
def test_joining_and_splitting(name, fn) -> None:
    check_values_and_gradients(
        {"a": X, "b": POS}, lambda a, b: fn(verigrad, a, b), lambda a, b: fn(torch, a, b)
    )


def test_index_results_of_joining_helpers() -> None:
    x = np.array([3, 1, 2])
    _same(
        verigrad.cartesian_prod(verigrad.tensor(x), verigrad.tensor(x[:2])),
        torch.cartesian_prod(torch.tensor(x), torch.tensor(x[:2])),
    )
    for r, rep in ((2, False), (3, False), (2, True)):
        _same(verigrad.combinations(verigrad.tensor(x), r, rep), torch.combinations(torch.tensor(x), r, rep))
    for n in (1, 2, 3, 7):
        _same(verigrad.tensor_split(verigrad.arange(5), n), torch.tensor_split(torch.arange(5), n))
    with pytest.raises(ValueError):
        verigrad.hsplit(verigrad.ones(3, 5), 2)

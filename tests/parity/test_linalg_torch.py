"""Matrix products' dtypes and verigrad.linalg (and the top-level linear algebra names) against PyTorch's:
values, dtypes, shapes and f64 gradients."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from gradients import check_values_and_gradients as _check

import verigrad
import verigrad.nn.functional as F

RNG = np.random.default_rng(23)


@pytest.mark.parametrize(
    "call",
    [
        lambda t, a, b: a @ b,
        lambda t, a, b: t.mm(a, b),
        lambda t, a, b: t.matmul(a, b),
        lambda t, a, b: t.bmm(a[None], b[None]),
        lambda t, a, b: t.nn.functional.linear(a, b),
        lambda t, a, b: a[0] @ b[0],
    ],
)
def test_products_of_two_dtypes_raise_as_torch(call) -> None:
    with pytest.raises(RuntimeError):
        call(torch, torch.ones(2, 2), torch.ones(2, 2, dtype=torch.float64))
    with pytest.raises(verigrad.DTypeError, match="same dtype"):
        call(verigrad, verigrad.ones(2, 2), verigrad.ones(2, 2, dtype="f64"))
    with pytest.raises(verigrad.DTypeError, match="same dtype"):
        call(verigrad, verigrad.ones(2, 2, dtype="i32"), verigrad.ones(2, 2, dtype="i64"))


@pytest.mark.parametrize("dtype", ["i64", "i32", "u8", "f32", "f64"])
def test_products_of_one_dtype_keep_it(dtype) -> None:
    a = RNG.integers(0, 4, (2, 3, 4))
    b = RNG.integers(0, 4, (4, 5))
    tdt = {
        "i64": torch.int64,
        "i32": torch.int32,
        "u8": torch.uint8,
        "f32": torch.float32,
        "f64": torch.float64,
    }
    expected = torch.from_numpy(a).to(tdt[dtype]) @ torch.from_numpy(b).to(tdt[dtype])
    out = verigrad.tensor(a, dtype=dtype) @ verigrad.tensor(b, dtype=dtype)
    assert out.dtype.name == dtype and out.shape == tuple(expected.shape)
    np.testing.assert_array_equal(out.numpy(), expected.numpy())


def test_bool_products_raise_as_torch() -> None:
    with pytest.raises(NotImplementedError):
        torch.ones(2, 2, dtype=torch.bool) @ torch.ones(2, 2, dtype=torch.bool)
    with pytest.raises(verigrad.DTypeError, match="bool"):
        verigrad.ones(2, 2, dtype="bool") @ verigrad.ones(2, 2, dtype="bool")


def test_linear_in_f64() -> None:
    x, w, b = RNG.standard_normal((3, 4)), RNG.standard_normal((5, 4)), RNG.standard_normal(5)
    _check(
        {"x": x, "w": w, "b": b},
        lambda x, w, b: F.linear(x, w, b),
        lambda x, w, b: torch.nn.functional.linear(x, w, b),
    )


def _spd(shape: tuple) -> np.ndarray:
    m = RNG.standard_normal(shape)
    return m @ np.swapaxes(m, -1, -2) + np.eye(shape[-1]) * shape[-1]


def _nonsymmetric_spd(shape: tuple) -> np.ndarray:
    """A positive-definite lower triangle under a different upper one: the decompositions read one."""
    a = _spd(shape)
    return a + np.triu(RNG.standard_normal(shape), 1)


TOP_LEVEL = [
    ("dot", lambda t, a, b: t.dot(a[0, :, 0], b[0, 0]), (2, 3, 3), (2, 3, 3)),
    ("vdot", lambda t, a, b: t.vdot(a[0, :, 0], b[0, 0]), (2, 3, 3), (2, 3, 3)),
    ("inner", lambda t, a, b: t.inner(a, b), (2, 3), (4, 3)),
    ("inner-0d", lambda t, a, b: t.inner(a[0, 0], b), (2, 3), (4, 3)),
    ("tensordot-int", lambda t, a, b: t.tensordot(a, b, 2), (2, 3, 4), (3, 4, 5)),
    ("tensordot-0", lambda t, a, b: t.tensordot(a, b, 0), (2, 3), (2,)),
    ("tensordot-lists", lambda t, a, b: t.tensordot(a, b, ([0, 2], [2, 0])), (4, 3, 2), (2, 5, 4)),
    ("matmul-vec", lambda t, a, b: t.matmul(a, b), (2, 3, 4), (4,)),
]


@pytest.mark.parametrize(("name", "fn", "sa", "sb"), TOP_LEVEL, ids=[c[0] for c in TOP_LEVEL])
def test_products(name, fn, sa, sb) -> None:
    _check(
        {"a": RNG.standard_normal(sa), "b": RNG.standard_normal(sb)},
        lambda a, b: fn(verigrad, a, b),
        lambda a, b: fn(torch, a, b),
    )


def test_product_refusals() -> None:
    with pytest.raises(verigrad.ShapeError, match="1D tensors expected"):
        verigrad.dot(verigrad.ones(3, 1), verigrad.ones(3, 1))
    with pytest.raises(verigrad.DTypeError, match="same dtype"):
        verigrad.dot(verigrad.ones(3), verigrad.ones(3, dtype="f64"))
    with pytest.raises(verigrad.ShapeError, match="contracted dimensions need to match"):
        verigrad.tensordot(verigrad.ones(2, 3), verigrad.ones(2, 3), 1)


@pytest.mark.parametrize("n", [0, 1, 2, 3, 5, 6, 7, -1, -3])
def test_matrix_power(n) -> None:
    a = RNG.standard_normal((2, 3, 3)) / 2 + np.eye(3)
    _check({"a": a}, lambda a: verigrad.linalg.matrix_power(a, n), lambda a: torch.linalg.matrix_power(a, n))
    _check({"a": a}, lambda a: verigrad.matrix_power(a, n), lambda a: torch.matrix_power(a, n))


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_logdet_and_slogdet(sign) -> None:
    a = _spd((2, 3, 3))
    a[:, 0] *= sign
    _check(
        {"a": a}, lambda a: verigrad.linalg.slogdet(a).logabsdet, lambda a: torch.linalg.slogdet(a).logabsdet
    )
    _check({"a": a}, lambda a: verigrad.slogdet(a)[1], lambda a: torch.slogdet(a)[1])
    ours, theirs = verigrad.linalg.slogdet(verigrad.tensor(a)), torch.linalg.slogdet(torch.tensor(a))
    np.testing.assert_array_equal(ours.sign.numpy(), theirs.sign.numpy())
    if sign > 0:
        _check({"a": a}, lambda a: verigrad.logdet(a), lambda a: torch.logdet(a))
    else:
        assert np.isnan(verigrad.logdet(verigrad.tensor(a)).numpy()).all()
        assert torch.isnan(torch.logdet(torch.tensor(a))).all()


def test_trace_is_torchs_for_a_tensor_and_the_tracer_for_a_function() -> None:
    a = RNG.standard_normal((3, 4))
    _check({"a": a}, lambda a: verigrad.trace(a), lambda a: torch.trace(a))
    ints = verigrad.trace(verigrad.tensor(np.arange(9).reshape(3, 3)))
    assert ints.dtype.name == "i64" and int(ints.item()) == int(torch.trace(torch.arange(9).reshape(3, 3)))
    with pytest.raises(verigrad.ShapeError, match="expected a matrix"):
        verigrad.trace(verigrad.ones(2, 2, 2))
    program = verigrad.trace(lambda x: x * 2, verigrad.spec([3]))
    assert isinstance(program, verigrad.Program)


def _signed(vectors):
    """Singular and eigen vectors (columns) with the sign that makes each column's sum positive: LAPACK
    builds differ in the signs they pick (both are right), so parity holds the vectors up to it."""
    return vectors * vectors.sum(-2, keepdim=True).detach().sign()


@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_reads_the_lower_triangle(upper) -> None:
    a = _nonsymmetric_spd((2, 4, 4))
    _check(
        {"a": a},
        lambda a: verigrad.linalg.cholesky(a, upper=upper),
        lambda a: torch.linalg.cholesky(a, upper=upper),
    )


@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh_and_eigvalsh(uplo) -> None:
    a = _spd((2, 4, 4))
    a = a + (
        np.triu(RNG.standard_normal(a.shape), 1) if uplo == "L" else np.tril(RNG.standard_normal(a.shape), -1)
    )
    _check({"a": a}, lambda a: verigrad.linalg.eigvalsh(a, uplo), lambda a: torch.linalg.eigvalsh(a, uplo))
    _check(
        {"a": a},
        lambda a: verigrad.linalg.eigh(a, uplo).eigenvalues,
        lambda a: torch.linalg.eigh(a, uplo).eigenvalues,
    )
    _check(
        {"a": a},
        lambda a: _signed(verigrad.linalg.eigh(a, UPLO=uplo)[1]),
        lambda a: _signed(torch.linalg.eigh(a, UPLO=uplo)[1]),
    )
    _check(
        {"a": a},
        lambda a: (lambda r: (r[1] * r[0].unsqueeze(-2)) @ r[1].mT)(verigrad.linalg.eigh(a, uplo)),
        lambda a: (lambda r: (r[1] * r[0].unsqueeze(-2)) @ r[1].mT)(torch.linalg.eigh(a, uplo)),
    )


@pytest.mark.parametrize("shape", [(3, 3), (2, 5, 3)])
def test_svd_svdvals_and_qr(shape) -> None:
    a = RNG.standard_normal(shape)
    _check(
        {"a": a},
        lambda a: _signed(verigrad.linalg.svd(a, False)[0]),
        lambda a: _signed(torch.linalg.svd(a, False)[0]),
    )
    _check({"a": a}, lambda a: verigrad.linalg.svd(a, False)[1], lambda a: torch.linalg.svd(a, False)[1])
    _check(
        {"a": a},
        lambda a: _signed(verigrad.linalg.svd(a, False)[2].mT),
        lambda a: _signed(torch.linalg.svd(a, False)[2].mT),
    )
    _check({"a": a}, lambda a: verigrad.linalg.svdvals(a), lambda a: torch.linalg.svdvals(a))
    for part in range(2):
        _check({"a": a}, lambda a: verigrad.linalg.qr(a)[part], lambda a: torch.linalg.qr(a)[part])
    full, theirs = verigrad.linalg.svd(verigrad.tensor(a)), torch.linalg.svd(torch.tensor(a))
    for o, t in zip(full, theirs):
        assert o.shape == tuple(t.shape)
        np.testing.assert_allclose(np.abs(o.numpy()), np.abs(t.numpy()), rtol=1e-12, atol=1e-12)
    complete, theirs = (
        verigrad.linalg.qr(verigrad.tensor(a), "complete"),
        torch.linalg.qr(torch.tensor(a), "complete"),
    )
    for o, t in zip(complete, theirs):
        np.testing.assert_allclose(o.numpy(), t.numpy(), rtol=1e-12, atol=1e-12)


def test_svd_of_a_wide_matrix_recomposes_and_its_values_match() -> None:
    a = RNG.standard_normal((2, 3, 5))
    _check({"a": a}, lambda a: verigrad.linalg.svdvals(a), lambda a: torch.linalg.svdvals(a))
    u, s, vh = verigrad.linalg.svd(verigrad.tensor(a), full_matrices=False)
    np.testing.assert_allclose(((u * s.unsqueeze(-2)) @ vh).numpy(), a, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("shape", [(3, 3), (2, 5, 3), (2, 3, 5)])
def test_pinv(shape) -> None:
    a = RNG.standard_normal(shape)
    _check({"a": a}, lambda a: verigrad.linalg.pinv(a), lambda a: torch.linalg.pinv(a))


def test_pinv_drops_small_singular_values() -> None:
    a = np.diag([3.0, 1e-3, 0.0])
    for kwargs in ({}, {"rtol": 1e-2}, {"atol": 0.5}):
        np.testing.assert_allclose(
            verigrad.linalg.pinv(verigrad.tensor(a), **kwargs).numpy(),
            torch.linalg.pinv(torch.tensor(a), **kwargs).numpy(),
            rtol=1e-12,
            atol=1e-12,
        )


VECTOR_NORMS = [
    (2, None, False),
    (1, -1, True),
    (math.inf, (0, 2), False),
    (-math.inf, 1, False),
    (0, None, False),
    (3.5, (1,), True),
]


@pytest.mark.parametrize(("ord", "dim", "keepdim"), VECTOR_NORMS)
def test_vector_norm(ord, dim, keepdim) -> None:
    x = RNG.standard_normal((2, 3, 4))
    if ord == 0:  # a count: its values (PyTorch gives it no gradient either)
        out = verigrad.linalg.vector_norm(verigrad.tensor(x), 0, dim, keepdim)
        expected = torch.linalg.vector_norm(torch.tensor(x), 0, dim, keepdim)
        assert out.dtype.name == "f64" and out.shape == tuple(expected.shape)
        np.testing.assert_array_equal(out.numpy(), expected.numpy())
        return
    _check(
        {"x": x},
        lambda x: verigrad.linalg.vector_norm(x, ord, dim, keepdim),
        lambda x: torch.linalg.vector_norm(x, ord, dim, keepdim),
    )


@pytest.mark.parametrize("ord", ["fro", "nuc", math.inf, -math.inf, 1, -1, 2, -2])
@pytest.mark.parametrize(("dim", "keepdim"), [((-2, -1), False), ((0, 2), True), ((2, 0), False)])
def test_matrix_norm(ord, dim, keepdim) -> None:
    x = RNG.standard_normal((3, 4, 5))
    _check(
        {"x": x},
        lambda x: verigrad.linalg.matrix_norm(x, ord, dim, keepdim),
        lambda x: torch.linalg.matrix_norm(x, ord, dim, keepdim),
    )


@pytest.mark.parametrize(
    ("shape", "ord", "dim"),
    [
        ((3, 4), None, None),
        ((3, 4), "fro", None),
        ((3, 4), "nuc", None),
        ((3, 4), 2, None),
        ((5,), 1, None),
        ((2, 3, 4), None, (0, 2)),
        ((2, 3, 4), 3, 1),
        ((2, 3, 4), math.inf, (1, 2)),
    ],
)
def test_linalg_norm(shape, ord, dim) -> None:
    x = RNG.standard_normal(shape)
    _check({"x": x}, lambda x: verigrad.linalg.norm(x, ord, dim), lambda x: torch.linalg.norm(x, ord, dim))


@pytest.mark.parametrize(("p", "dim"), [("fro", None), ("fro", (0, 1)), ("nuc", None), (2, 1), ("fro", 0)])
def test_torch_norm_strings(p, dim) -> None:
    x = RNG.standard_normal((3, 4))
    _check({"x": x}, lambda x: verigrad.norm(x, p=p, dim=dim), lambda x: torch.norm(x, p=p, dim=dim))
    _check({"x": x}, lambda x: x.norm(p, dim), lambda x: x.norm(p, dim))


def test_vecdot_cross_solve_inv_det() -> None:
    a, b = RNG.standard_normal((2, 3)), RNG.standard_normal((4, 1, 3))
    _check(
        {"a": a, "b": b}, lambda a, b: verigrad.linalg.vecdot(a, b), lambda a, b: torch.linalg.vecdot(a, b)
    )
    _check(
        {"a": a, "b": b[:2, 0]},
        lambda a, b: verigrad.linalg.cross(a, b),
        lambda a, b: torch.linalg.cross(a, b),
    )
    m = _spd((2, 3, 3))
    _check({"m": m}, lambda m: verigrad.linalg.inv(m), lambda m: torch.linalg.inv(m))
    _check({"m": m}, lambda m: verigrad.linalg.det(m), lambda m: torch.linalg.det(m))
    _check(
        {"m": m, "b": b[:2, 0]},
        lambda m, b: verigrad.linalg.solve(m, b),
        lambda m, b: torch.linalg.solve(m, b),
    )


def test_tensor_methods() -> None:
    a, v = _spd((3, 3)), RNG.standard_normal(3)
    _check({"a": a}, lambda a: a.matrix_power(3), lambda a: a.matrix_power(3))
    _check({"a": a}, lambda a: a.logdet(), lambda a: a.logdet())
    _check({"a": a}, lambda a: a.slogdet()[1], lambda a: a.slogdet()[1])
    _check({"a": a, "v": v}, lambda a, v: a[0].dot(v) + a[1].vdot(v), lambda a, v: a[0].dot(v) + a[1].vdot(v))
    _check({"a": a, "v": v}, lambda a, v: a.inner(v), lambda a, v: a.inner(v))


@pytest.mark.parametrize(
    ("sa", "sb"), [((5, 3), (5, 2)), ((2, 4, 4), (2, 4, 1)), ((5, 3), (5,)), ((3, 5), (3, 2))]
)
def test_lstsq(sa, sb) -> None:
    a, b = RNG.standard_normal(sa), RNG.standard_normal(sb)
    _check(
        {"a": a, "b": b},
        lambda a, b: verigrad.linalg.lstsq(a, b).solution,
        lambda a, b: torch.linalg.lstsq(a, b).solution,
    )
    ours, theirs = (
        verigrad.linalg.lstsq(verigrad.tensor(a), verigrad.tensor(b)),
        torch.linalg.lstsq(torch.tensor(a), torch.tensor(b)),
    )
    for o, t in zip(ours[1:], theirs[1:]):
        assert o.shape == tuple(t.shape) and o.dtype.np == t.numpy().dtype
    np.testing.assert_array_equal(ours.rank.numpy(), theirs.rank.numpy())

"""Functions PyTorch's OpInfo suite found missing from verigrad (`tools/opinfo_sweep.py --list-missing`),
against torch on the same inputs: values, dtypes and gradients in f64, and the dtypes of integer calls."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from gradients import check_values_and_gradients

import verigrad

RNG = np.random.default_rng(11)
X = RNG.standard_normal((3, 4))
MASK = np.array([[True, False, True, True], [False, False, False, False], [True, True, False, True]])
ROW_MASK = np.array([True, False, True, False])  # broadcast over rows

# (id, function of (module, x) written once for both libraries)
MASKED = [
    ("sum", lambda t, x: t.masked.sum(x, 1, mask=t.from_numpy(MASK))),
    ("sum_all_keepdim", lambda t, x: t.masked.sum(x, keepdim=True, mask=t.from_numpy(ROW_MASK))),
    ("prod", lambda t, x: t.masked.prod(x, 0, mask=t.from_numpy(MASK))),
    ("amax", lambda t, x: t.masked.amax(x, 1, mask=t.from_numpy(MASK))),
    ("amin", lambda t, x: t.masked.amin(x, (0, 1), keepdim=True, mask=t.from_numpy(MASK))),
    ("mean", lambda t, x: t.masked.mean(x, 1, mask=t.from_numpy(MASK))),
    ("var", lambda t, x: t.masked.var(x, 1, mask=t.from_numpy(MASK))),
    ("std_correction", lambda t, x: t.masked.std(x, 0, correction=0, keepdim=True, mask=t.from_numpy(MASK))),
    ("norm", lambda t, x: t.masked.norm(x, 3.0, 1, mask=t.from_numpy(MASK))),
    ("norm_ninf", lambda t, x: t.masked.norm(x, -math.inf, 1, mask=t.from_numpy(MASK))),
    ("logsumexp", lambda t, x: t.masked.logsumexp(x, 1, mask=t.from_numpy(MASK))),
    ("softmax", lambda t, x: t.masked.softmax(x, 0, mask=t.from_numpy(MASK))),
    ("log_softmax", lambda t, x: t.masked.log_softmax(x, 0, mask=t.from_numpy(MASK))),
    ("softmin", lambda t, x: t.masked.softmin(x, 0, mask=t.from_numpy(MASK))),
    ("normalize", lambda t, x: t.masked.normalize(x, 2.0, 1, mask=t.from_numpy(MASK))),
    ("cumsum", lambda t, x: t.masked.cumsum(x, 1, mask=t.from_numpy(MASK))),
    ("cumprod", lambda t, x: t.masked.cumprod(x, 1, mask=t.from_numpy(MASK))),
    ("median", lambda t, x: t.masked.median(x, 1, mask=t.from_numpy(MASK))),
    ("logaddexp", lambda t, x: t.masked.logaddexp(x, x.flip(0), input_mask=t.from_numpy(MASK))),
]


@pytest.mark.parametrize("fn", [f for _, f in MASKED], ids=[i for i, _ in MASKED])
def test_masked_reductions_against_torch(fn):
    # fully masked-out rows answer the identity (0, 1, -inf, nan, ...), as PyTorch's
    check_values_and_gradients({"x": X}, lambda x: fn(verigrad, x), lambda x: fn(torch, x))


@pytest.mark.parametrize("name", ["sum", "prod", "amax", "argmax", "argmin"])
@pytest.mark.parametrize("dtype", ["int32", "uint8", "bool"])
def test_masked_integer_dtypes_against_torch(name, dtype):
    # sum and prod of small integers answer int64, argmax and argmin the input's dtype (PyTorch's)
    if dtype == "bool" and name in ("amax", "argmax", "argmin"):
        return
    x = RNG.integers(0, 5, (3, 4)).astype(dtype)
    for shape in [(3, 4), ()]:
        a = x.reshape(-1)[:1].reshape(()) if shape == () else x
        m = MASK if shape else np.array(True)
        ours = getattr(verigrad.masked, name)(verigrad.from_numpy(a.copy()), mask=verigrad.from_numpy(m))
        theirs = getattr(torch.masked, name)(torch.from_numpy(a.copy()), mask=torch.from_numpy(m))
        assert ours.dtype == getattr(verigrad, str(theirs.dtype).removeprefix("torch.")), (ours.dtype, theirs)
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_masked_errors():
    x = verigrad.from_numpy(X)
    with pytest.raises(ValueError, match=r"masked\.mean"):
        verigrad.masked.mean(x.to(verigrad.int64), mask=verigrad.from_numpy(MASK))
    with pytest.raises(verigrad.ShapeError, match=r"masked\.sum"):
        verigrad.masked.sum(x, mask=verigrad.from_numpy(MASK[None]))


def _triangular(rng: np.random.Generator, *shape: int) -> np.ndarray:
    """Well-conditioned matrices: any entries, a dominant diagonal."""
    return rng.standard_normal(shape) + 4 * np.eye(shape[-1])


A3 = _triangular(RNG, 2, 3, 3)
B32 = RNG.standard_normal((3, 2))
B23 = RNG.standard_normal((2, 3))
L3 = np.linalg.cholesky(A3 @ A3.transpose(0, 2, 1))

# (id, arrays, function of (module, **arrays) written once for both libraries)
LINALG = [
    (
        "solve_triangular_upper",
        {"a": A3, "b": B32},
        lambda t, a, b: t.linalg.solve_triangular(a, b, upper=True),
    ),
    (
        "solve_triangular_lower_right_unit",
        {"a": A3, "b": B23},
        lambda t, a, b: t.linalg.solve_triangular(a, b, upper=False, left=False, unitriangular=True),
    ),
    ("triangular_solve", {"a": A3, "b": B32}, lambda t, a, b: t.triangular_solve(b, a, transpose=True)[0]),
    ("cholesky_solve", {"f": L3, "b": B32}, lambda t, f, b: t.cholesky_solve(b, f)),
    ("cholesky_solve_upper", {"f": L3, "b": B32}, lambda t, f, b: t.cholesky_solve(b, f.mT, upper=True)),
    ("cholesky_inverse", {"f": L3}, lambda t, f: t.cholesky_inverse(f)),
    ("multi_dot", {"v": X[0], "a": X.T, "b": B32}, lambda t, v, a, b: t.linalg.multi_dot([v, a, b[:, 0]])),
    ("vander_at_zero", {"x": np.array([0.0, 1.5, -2.0])}, lambda t, x: t.linalg.vander(x, N=4)),
    (
        "solve_ex_right",
        {"a": A3, "b": RNG.standard_normal((2, 4, 3))},
        lambda t, a, b: t.linalg.solve_ex(a, b, left=False)[0],
    ),
    ("mv", {"a": X, "v": X[0]}, lambda t, a, v: t.mv(a, v)),
    ("addmv", {"x": X[:, 0], "a": X, "v": X[0]}, lambda t, x, a, v: t.addmv(x, a, v, beta=0.5, alpha=2)),
    ("addr", {"x": X, "u": X[:, 0], "v": X[0]}, lambda t, x, u, v: t.addr(x, u, v, beta=2, alpha=-1)),
    ("addbmm", {"x": X[:3, :3], "a": A3, "b": A3}, lambda t, x, a, b: t.addbmm(x, a, b, alpha=0.5)),
    # sign-free functions of the singular vectors; full U of a tall matrix: the extra columns get none
    ("svd_some", {"a": X.T}, lambda t, a: (t.svd(a)[0] ** 2).sum(0) + (t.svd(a)[2] ** 2).sum(0)),
    ("svd_full", {"a": X.T}, lambda t, a: (t.svd(a, some=False)[0] ** 2 * t.from_numpy(W44)).sum(0)),
    ("linalg_svd_full_wide", {"a": X}, lambda t, a: (t.linalg.svd(a)[2] ** 2 * t.from_numpy(W44)).sum(0)),
]
W44 = RNG.standard_normal((4, 4))


@pytest.mark.parametrize("case", LINALG, ids=[c[0] for c in LINALG])
def test_linalg_functions_against_torch(case):
    _, arrays, fn = case
    check_values_and_gradients(arrays, lambda **a: fn(verigrad, **a), lambda **a: fn(torch, **a))


def test_addmv_beta_zero_ignores_nan_and_addr_of_bools():
    x = np.full(3, np.nan)
    for t in (verigrad, torch):
        out = t.addmv(t.from_numpy(x), t.from_numpy(X), t.from_numpy(X[0]), beta=0)
        np.testing.assert_allclose(out.numpy(), X @ X[0])
    u, v = np.array([True, False]), np.array([True, True, False])
    m = np.array([[False, False, True], [False, True, False]])
    ours = verigrad.addr(verigrad.from_numpy(m), verigrad.from_numpy(u), verigrad.from_numpy(v))
    theirs = torch.addr(torch.from_numpy(m), torch.from_numpy(u), torch.from_numpy(v))
    assert ours.dtype == verigrad.bool and ours.numpy().tolist() == theirs.numpy().tolist()


def test_matrix_rank_vander_and_svd_without_vectors_against_torch():
    a = X[:2].T @ X[:2]  # rank 2
    for kwargs in ({}, {"atol": 1.0}, {"rtol": 0.5}, {"hermitian": True}):
        ours = verigrad.linalg.matrix_rank(verigrad.from_numpy(a), **kwargs)
        theirs = torch.linalg.matrix_rank(torch.from_numpy(a), **kwargs)
        assert ours.dtype == verigrad.int64 and int(ours) == int(theirs), kwargs
    x = np.array([2, -3, 1], dtype=np.int32)
    ours = verigrad.linalg.vander(verigrad.from_numpy(x))
    assert ours.dtype == verigrad.int64
    assert ours.numpy().tolist() == torch.linalg.vander(torch.from_numpy(x)).tolist()
    assert verigrad.linalg.vander(verigrad.tensor(2.0), N=3).numpy().tolist() == [[1.0, 2.0, 4.0]]
    with pytest.raises(ValueError, match="N must be greater than 1"):
        verigrad.linalg.vander(verigrad.from_numpy(X), N=1)
    u, s, v = verigrad.svd(verigrad.from_numpy(X), compute_uv=False)
    tu, ts, tv = torch.svd(torch.from_numpy(X), compute_uv=False)
    assert u.shape == tuple(tu.shape) and v.shape == tuple(tv.shape) and not u.numpy().any()
    np.testing.assert_allclose(s.numpy(), ts.numpy())

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


Y = RNG.standard_normal((2, 3, 4))
SRC_DIAG = RNG.standard_normal((4, 2))  # the shape of diagonal(Y, -1, 1, 0)

# (id, arrays, function of (module, **arrays)); the copies, scatters and small functions
FUNCTIONS = [
    ("unfold_copy", {"y": Y}, lambda t, y: t.unfold_copy(y, 2, 2, 1)),
    ("diagonal_copy", {"y": Y}, lambda t, y: t.diagonal_copy(y, 1, 1, 2)),
    ("unbind_copy", {"y": Y}, lambda t, y: t.unbind_copy(y, 1)[2]),
    ("split_with_sizes", {"y": Y}, lambda t, y: t.split_with_sizes(y, [1, 3], 2)[1]),
    ("select_scatter", {"y": Y, "s": Y[:, 1]}, lambda t, y, s: t.select_scatter(y, s * 2, 1, -2)),
    ("slice_scatter", {"y": Y, "s": Y[..., :2]}, lambda t, y, s: t.slice_scatter(y, s, 2, 1, None, 2)),
    ("diagonal_scatter", {"y": Y, "s": SRC_DIAG}, lambda t, y, s: t.diagonal_scatter(y, s, -1, 1, 0)),
    ("diag_embed", {"y": Y}, lambda t, y: t.diag_embed(y, 1, 0, 2)),
    ("diag_embed_negative", {"y": Y}, lambda t, y: t.diag_embed(y, -2)),
    ("diagflat", {"y": Y[0]}, lambda t, y: t.diagflat(y, -1)),
    ("constant_pad_nd", {"y": Y}, lambda t, y: t.constant_pad_nd(y, [1, -2, 0, 1], 2.5)),
    ("put", {"y": Y, "s": Y[0, 0]}, lambda t, y, s: t.put(y, t.from_numpy(np.array([0, -1, 5, 0])), s)),
    (
        "put_acc",
        {"y": Y, "s": Y[0, 0]},
        lambda t, y, s: t.put(y, t.from_numpy(np.array([0, -1, 5, 0])), s, True),
    ),
    ("dist", {"a": X, "b": X[1]}, lambda t, a, b: t.dist(a, b, 3)),
    ("rsub", {"a": X, "b": X[0]}, lambda t, a, b: t.rsub(a, b, alpha=2)),
    ("rdiv", {"a": X}, lambda t, a: a.__rdiv__(3.0)),
    ("float_power", {"a": np.abs(X)}, lambda t, a: t.float_power(a, 1.5)),
    ("cov_weights", {"a": X}, lambda t, a: t.cov(a, fweights=t.from_numpy(np.array([1, 2, 0, 3])))),
    (
        "cov_aweights",
        {"a": X, "w": np.array([0.2, 1.5, 0.7, 1.0])},
        lambda t, a, w: t.cov(a, correction=2, aweights=w),
    ),
    ("corrcoef", {"a": X}, lambda t, a: t.corrcoef(a)),
    ("trapezoid_x", {"y": Y, "x": np.array([0.0, 0.5, 2.0])}, lambda t, y, x: t.trapezoid(y, x, dim=1)),
    ("trapz_dx", {"y": Y}, lambda t, y: t.trapz(y, dx=0.25)),
    ("cumulative_trapezoid", {"y": Y, "x": Y}, lambda t, y, x: t.cumulative_trapezoid(y, x, dim=0)),
    ("fill", {"y": Y, "v": np.array(1.5)}, lambda t, y, v: t.fill(y, v) * y),
    ("fftshift", {"y": Y}, lambda t, y: t.fft.fftshift(y, dim=(0, 2))),
    ("ifftshift", {"y": Y}, lambda t, y: t.fft.ifftshift(y)),
]


@pytest.mark.parametrize("case", FUNCTIONS, ids=[c[0] for c in FUNCTIONS])
def test_functions_against_torch(case):
    _, arrays, fn = case
    check_values_and_gradients(arrays, lambda **a: fn(verigrad, **a), lambda **a: fn(torch, **a))


def test_diag_embed_keeps_inf_off_the_diagonal_zero():
    y = np.array([np.inf, 1.0, np.nan])
    ours = verigrad.diag_embed(verigrad.from_numpy(y)).numpy()
    np.testing.assert_array_equal(ours, torch.diag_embed(torch.from_numpy(y)).numpy())


def _same_exactly(ours, theirs) -> None:
    if isinstance(theirs, tuple | list):
        assert len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            _same_exactly(a, b)
        return
    assert ours.dtype == getattr(verigrad, str(theirs.dtype).removeprefix("torch.")), (
        ours.dtype,
        theirs.dtype,
    )
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


INTEGER_CALLS = [
    ("nonzero_static_pad", lambda t: t.nonzero_static(t.from_numpy(MASK), size=9, fill_value=-4)),
    ("nonzero_static_cut", lambda t: t.nonzero_static(t.from_numpy(MASK), size=2)),
    ("unravel_index", lambda t: t.unravel_index(t.from_numpy(np.array([[0, 7], [-1, 23]])), (2, 3, 4))),
    ("isin", lambda t: t.isin(t.from_numpy(np.arange(6)), t.from_numpy(np.array([4, 1, 9])), invert=True)),
    ("isposinf", lambda t: t.isposinf(t.from_numpy(np.array([np.inf, -np.inf, np.nan, 1.0])))),
    ("isneginf", lambda t: t.isneginf(t.from_numpy(np.array([np.inf, -np.inf, np.nan, 1.0])))),
    ("scalar_tensor_wraps", lambda t: t.scalar_tensor(-5, dtype=t.uint8)),
    ("float_power_ints", lambda t: t.float_power(t.from_numpy(np.arange(4)), 2)),
    ("cov_ints", lambda t: t.cov(t.from_numpy(np.array([[1, 5, 2], [0, 3, 9]])))),
    ("trapezoid_ints", lambda t: t.trapezoid(t.from_numpy(np.array([[1, 5, 2], [0, 3, 9]])))),
]


@pytest.mark.parametrize("fn", [f for _, f in INTEGER_CALLS], ids=[i for i, _ in INTEGER_CALLS])
def test_integer_calls_against_torch(fn):
    _same_exactly(fn(verigrad), fn(torch))


def test_shapes_and_empty_permuted():
    assert verigrad.broadcast_shapes((3, 1), (4,), 1) == torch.broadcast_shapes((3, 1), (4,), 1)
    out = verigrad.empty_permuted((2, 3, 4), (2, 0, 1), dtype=verigrad.float64)
    assert out.shape == (2, 3, 4) and out.dtype == verigrad.float64
    with pytest.raises(ValueError, match="permutation"):
        verigrad.empty_permuted((2, 3), (0, 0))
    with pytest.raises(IndexError, match="out of range"):
        verigrad.put(
            verigrad.from_numpy(X), verigrad.from_numpy(np.array([12])), verigrad.from_numpy(X[0, :1])
        )


def test_memory_formats_are_accepted_and_change_no_value():
    x = RNG.standard_normal((2, 3, 4, 5))
    for name in ("channels_last", "contiguous_format", "preserve_format"):
        ours = verigrad.from_numpy(x).to(verigrad.float32, memory_format=getattr(verigrad, name))
        theirs = torch.from_numpy(x).to(torch.float32, memory_format=getattr(torch, name))
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
        assert verigrad.from_numpy(x).double(memory_format=getattr(verigrad, name)).dtype == verigrad.float64
    assert repr(verigrad.channels_last) == repr(torch.channels_last)
    with pytest.raises(TypeError, match="memory_format"):
        verigrad.from_numpy(x).to(memory_format="channels_last")


def test_unique_consecutive_of_empty_tensors_against_torch():
    for shape, dim in [((0,), None), ((0, 3), 0), ((2, 0), 1)]:
        x = np.zeros(shape)
        ours = verigrad.unique_consecutive(
            verigrad.from_numpy(x), return_inverse=True, return_counts=True, dim=dim
        )
        theirs = torch.unique_consecutive(
            torch.from_numpy(x), return_inverse=True, return_counts=True, dim=dim
        )
        for a, b in zip(ours, theirs):
            assert a.shape == tuple(b.shape), (shape, dim, a.shape, b.shape)
    for shape, dim in [((2, 0), 0), ((0, 3), 1), ((0, 0), 0)]:  # an empty axis that is not dim: refused
        for name in ("unique", "unique_consecutive"):
            with pytest.raises(RuntimeError):
                getattr(torch, name)(torch.zeros(shape), dim=dim)
            with pytest.raises(RuntimeError, match=name):
                getattr(verigrad, name)(verigrad.zeros(shape), dim=dim)


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_of_a_0d_tensor_against_torch(reduce, include_self):
    def fn(t, x, s):
        return t.scatter_reduce(x, 0, t.tensor(0), s, reduce, include_self=include_self)

    check_values_and_gradients(
        {"x": np.array(1.5), "s": np.array(-2.0)}, lambda **a: fn(verigrad, **a), lambda **a: fn(torch, **a)
    )


IMAGE = RNG.standard_normal((1, 2, 4, 5))
RAISED_BEFORE = [
    (
        "unfold_bool",
        lambda t: t.nn.functional.unfold(t.from_numpy(IMAGE > 0), (2, 3), padding=1, stride=(1, 2)),
    ),
    ("prelu_0d_weight", lambda t: t.nn.functional.prelu(t.from_numpy(X), t.tensor(0.25, dtype=t.float64))),
    (
        "feature_alpha_dropout_eval_1d",
        lambda t: t.nn.functional.feature_alpha_dropout(t.from_numpy(X[0]), 0.5),
    ),
    ("prod_dtype_int32", lambda t: t.prod(t.from_numpy(np.arange(1, 7).reshape(2, 3)), 1, dtype=t.int32)),
    ("sum_dtype_int16", lambda t: t.from_numpy(np.arange(6, dtype=np.int8)).sum(dtype=t.int16)),
    ("isclose_bool", lambda t: t.isclose(t.from_numpy(MASK), t.from_numpy(MASK[::-1].copy()))),
    (
        "conv2d_int64",
        lambda t: t.nn.functional.conv2d(
            t.from_numpy(np.arange(40).reshape(1, 2, 4, 5)),
            t.from_numpy(np.arange(12).reshape(1, 2, 2, 3)),
            padding=1,
        ),
    ),
    (
        "conv3d_int64",
        lambda t: t.nn.functional.conv3d(
            t.from_numpy(np.arange(48).reshape(1, 1, 3, 4, 4)),
            t.from_numpy(np.ones((2, 1, 2, 2, 2), dtype=np.int64)),
        ),
    ),
]


@pytest.mark.parametrize("fn", [f for _, f in RAISED_BEFORE], ids=[i for i, _ in RAISED_BEFORE])
def test_calls_that_raised_against_torch(fn):
    _same_exactly(fn(verigrad), fn(torch))


@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_index_reduce_against_torch(reduce, include_self):
    index = np.array([2, 0, 2, 3, 0])

    def fn(t, x, s):
        return t.index_reduce(x, 1, t.from_numpy(index), s, reduce, include_self=include_self)

    check_values_and_gradients(
        {"x": RNG.standard_normal((3, 4)), "s": RNG.standard_normal((3, 5))},
        lambda **a: fn(verigrad, **a),
        lambda **a: fn(torch, **a),
    )


WINDOWS = [
    ("bartlett", {}),
    ("blackman", {}),
    ("cosine", {}),
    ("exponential", {"tau": 0.7}),
    ("gaussian", {"std": 1.3}),
    ("general_cosine", {"a": [0.4, 0.35, 0.25]}),
    ("general_hamming", {"alpha": 0.6}),
    ("hamming", {}),
    ("hann", {}),
    ("kaiser", {"beta": 4.0}),
    ("nuttall", {}),
]


@pytest.mark.parametrize("name, kwargs", WINDOWS, ids=[w[0] for w in WINDOWS])
@pytest.mark.parametrize("M", [0, 1, 2, 7])
@pytest.mark.parametrize("sym", [True, False])
def test_signal_windows_against_torch(name, kwargs, M, sym):
    ours = getattr(verigrad.signal.windows, name)(M, sym=sym, dtype=verigrad.float64, **kwargs)
    theirs = getattr(torch.signal.windows, name)(M, sym=sym, dtype=torch.float64, **kwargs)
    assert ours.dtype == verigrad.float64 and ours.shape == tuple(theirs.shape)
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-12, atol=1e-15)


def test_signal_window_errors():
    with pytest.raises(ValueError, match="non-negative window length"):
        verigrad.signal.windows.hann(-1)
    with pytest.raises(ValueError, match="float32 or float64"):
        verigrad.signal.windows.hann(4, dtype=verigrad.int64)
    assert verigrad.signal.windows.hann(4).dtype == verigrad.float32


def test_gcd_lcm_and_xlog1py_against_torch():
    a, b = np.array([[-12, 0, 7], [18, 5, 0]]), np.array([8, 0, -21])
    for name in ("gcd", "lcm"):
        _same_exactly(
            getattr(verigrad, name)(verigrad.from_numpy(a), verigrad.from_numpy(b)),
            getattr(torch, name)(torch.from_numpy(a), torch.from_numpy(b)),
        )
    x, y = np.array([0.0, 0.0, 1.5, -2.0, 3.0]), np.array([-1.0, np.nan, 0.5, 2.0, -0.5])
    check_values_and_gradients(
        {"x": x, "y": np.abs(y) - 0.5 * (x == 0)},
        lambda x, y: verigrad.special.xlog1py(x, y),
        lambda x, y: torch.special.xlog1py(x, y),
    )


HISTOGRAMS = [
    ("bins", lambda t, x: t.histogram(x, 4)),
    ("range_weight", lambda t, x: t.histogram(x, 3, range=(-1.0, 1.0), weight=x.abs())),
    (
        "edges_density",
        lambda t, x: t.histogram(x, t.tensor([-2.0, -0.5, 0.0, 1.5], dtype=x.dtype), density=True),
    ),
    ("one_value", lambda t, x: t.histogram(x[:1, :1], 2)),
    ("empty", lambda t, x: t.histogram(x[:0], 2)),
    ("dd_bins", lambda t, x: t.histogramdd(x, [2, 3, 1, 2])),
    (
        "dd_edges_weight",
        lambda t, x: t.histogramdd(x[:, :2], [x[0, :2].sort()[0], x[1].sort()[0]], weight=x[:, 0].abs()),
    ),
    ("dd_range_density", lambda t, x: t.histogramdd(x[:, :2], 2, range=[-1.0, 1.0, 0.0, 2.0], density=True)),
]


@pytest.mark.parametrize("fn", [f for _, f in HISTOGRAMS], ids=[i for i, _ in HISTOGRAMS])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_histograms_against_torch(fn, dtype):
    x = X.astype(dtype)
    ours, theirs = fn(verigrad, verigrad.from_numpy(x)), fn(torch, torch.from_numpy(x))
    hist, edges = ours
    assert hist.dtype == getattr(verigrad, str(theirs[0].dtype).removeprefix("torch."))
    np.testing.assert_allclose(hist.numpy(), theirs[0].numpy(), rtol=1e-6)
    ours_edges = edges if isinstance(edges, tuple) else (edges,)
    their_edges = theirs[1] if isinstance(theirs[1], tuple | list) else (theirs[1],)
    for a, b in zip(ours_edges, their_edges, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_histogram_errors():
    with pytest.raises(ValueError, match="not finite"):
        verigrad.histogram(verigrad.from_numpy(np.array([1.0, np.inf])), 2)
    with pytest.raises(verigrad.DTypeError, match="histogram"):
        verigrad.histogram(verigrad.from_numpy(np.arange(3)), 2)
    with pytest.raises(verigrad.DTypeError, match="bin edges"):
        verigrad.histogram(
            verigrad.from_numpy(X.astype(np.float32)), verigrad.from_numpy(np.array([0.0, 1.0]))
        )


LU_CASES = [
    (
        "lu_square",
        {"a": _triangular(RNG, 2, 4, 4) - 4 * np.eye(4)},
        lambda t, a: t.linalg.lu(a)[1] * 2 + t.linalg.lu(a)[2],
    ),
    ("lu_wide", {"a": X}, lambda t, a: t.linalg.lu(a)[2] + t.linalg.lu(a)[1].sum()),
    ("lu_tall", {"a": X.T}, lambda t, a: t.linalg.lu(a)[1] + t.linalg.lu(a)[2].sum()),
    ("lu_factor", {"a": X.T}, lambda t, a: t.linalg.lu_factor(a)[0]),
]
for _left in (True, False):
    for _adjoint in (True, False):
        LU_CASES.append(
            (
                f"lu_solve_left{_left}_adjoint{_adjoint}",
                {"a": A3 - 4 * np.eye(3), "b": B32 if _left else B23},
                lambda t, a, b, left=_left, adjoint=_adjoint: t.linalg.lu_solve(
                    *t.linalg.lu_factor(a), b, left=left, adjoint=adjoint
                ),
            )
        )


@pytest.mark.parametrize("case", LU_CASES, ids=[c[0] for c in LU_CASES])
def test_lu_against_torch(case):
    # P is a permutation (no gradient); L and U carry A's through the factorization's VJP
    _, arrays, fn = case
    check_values_and_gradients(arrays, lambda **a: fn(verigrad, **a), lambda **a: fn(torch, **a))


def test_lu_pivots_info_unpack_and_errors_against_torch():
    singular = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [0.0, 1.0, 1.0]])
    ours = verigrad.linalg.lu_factor_ex(verigrad.from_numpy(singular))
    theirs = torch.linalg.lu_factor_ex(torch.from_numpy(singular))
    _same_exactly(ours[1:], theirs[1:])
    a = X.T
    lu_v, piv_v = verigrad.linalg.lu_factor(verigrad.from_numpy(a))
    lu_t, piv_t = torch.linalg.lu_factor(torch.from_numpy(a))
    _same_exactly(piv_v, piv_t)
    for flags in [(True, True), (False, True), (True, False)]:
        ours, theirs = verigrad.lu_unpack(lu_v, piv_v, *flags), torch.lu_unpack(lu_t, piv_t, *flags)
        for x, y in zip(ours, theirs):
            assert x.shape == tuple(y.shape)
            np.testing.assert_allclose(x.numpy(), y.numpy(), rtol=1e-12, atol=1e-14)
    with pytest.raises(NotImplementedError, match="without pivoting"):
        verigrad.linalg.lu_factor(verigrad.from_numpy(a), pivot=False)


SPECIALS = [
    ("ndtri", np.array([0.001, 0.2, 0.5, 0.93, 0.999])),
    ("erfcx", np.array([-3.0, -0.5, 0.0, 1.2, 8.0])),
    ("i0e", np.array([-12.0, -1.0, 0.0, 0.7, 30.0])),
    ("i1e", np.array([-12.0, -1.0, 0.0, 0.7, 30.0])),
    ("spherical_bessel_j0", np.array([-7.0, -0.3, 0.0, 0.3, 11.0])),
]


@pytest.mark.parametrize("name, x", SPECIALS, ids=[s[0] for s in SPECIALS])
def test_special_functions_against_torch(name, x):
    if name == "spherical_bessel_j0":  # PyTorch's has no gradient: values only
        ours = verigrad.special.spherical_bessel_j0(verigrad.from_numpy(x))
        np.testing.assert_allclose(
            ours.numpy(), torch.special.spherical_bessel_j0(torch.from_numpy(x)).numpy(), rtol=1e-14
        )
        return
    check_values_and_gradients(
        {"x": x}, lambda x: getattr(verigrad.special, name)(x), lambda x: getattr(torch.special, name)(x)
    )


def test_native_dropout_backward_against_torch():
    mask = MASK
    check_values_and_gradients(
        {"g": X},
        lambda g: verigrad.native_dropout_backward(g, verigrad.from_numpy(mask), 2.0),
        lambda g: torch.ops.aten.native_dropout_backward(g, torch.from_numpy(mask), 2.0),
    )
    with pytest.raises(verigrad.DTypeError, match="mask"):
        verigrad.native_dropout_backward(verigrad.from_numpy(X), verigrad.from_numpy(X), 2.0)

"""Regression tests of the silent differences from PyTorch that its OpInfo suite (tools/opinfo_sweep.py)
found: each case runs on PyTorch and on verigrad with the same inputs and must give the same answer."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import verigrad


def _same(ours: verigrad.Tensor, theirs: torch.Tensor) -> None:
    assert ours.dtype == getattr(verigrad, str(theirs.dtype).removeprefix("torch."))
    assert tuple(ours.shape) == tuple(theirs.shape)
    torch.testing.assert_close(torch.from_numpy(np.array(ours.detach().numpy(), copy=True)), theirs.detach())


def _both(fn, *args, **kwargs) -> None:
    """fn(lib, *args, **kwargs) on both libraries, dtypes given by name."""
    theirs = fn(torch, *args, **{k: getattr(torch, v) if k == "dtype" else v for k, v in kwargs.items()})
    ours = fn(verigrad, *args, **{k: getattr(verigrad, v) if k == "dtype" else v for k, v in kwargs.items()})
    _same(ours, theirs)


SPACES = [
    (0, 1.2, 2),  # an integer dtype truncates end: 10 ** 1, not 10 ** 1.2
    (-3, 4, 7),
    (-2.5, 10.7, 50),
    (4.3, -3, 50),
    (1.2, 1.2, 1),
    (-3, 2, 1),
    (0, 0, 0),
]


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int32", "int16"])
@pytest.mark.parametrize(("start", "end", "steps"), SPACES)
def test_linspace_rounds_as_pytorch(dtype, start, end, steps):
    _both(lambda t, *a, **k: t.linspace(*a, **k), start, end, steps, dtype=dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int32"])
@pytest.mark.parametrize("base", [10.0, 2.0, 1.1, 5.0])
@pytest.mark.parametrize(("start", "end", "steps"), SPACES)
def test_logspace_rounds_as_pytorch(dtype, base, start, end, steps):
    _both(lambda t, *a, **k: t.logspace(*a, **k), start, end, steps, base, dtype=dtype)


def test_linspace_and_logspace_take_0d_tensors():
    for fn in ("linspace", "logspace"):
        theirs = getattr(torch, fn)(torch.tensor(-2.0), torch.tensor(2.2), 9, dtype=torch.float64)
        ours = getattr(verigrad, fn)(verigrad.tensor(-2.0), verigrad.tensor(2.2), 9, dtype=verigrad.float64)
        _same(ours, theirs)


def test_diff_n0_is_a_copy_without_prepend_and_bool_diff_is_inequality():
    x = np.random.default_rng(0).standard_normal((5, 5))
    pre, app = np.ones((1, 5)), np.zeros((2, 5))
    for n in (0, 1, 3):
        t = torch.tensor(x, requires_grad=True)
        v = verigrad.tensor(x, requires_grad=True)
        theirs = torch.diff(t, n, 0, torch.tensor(pre), torch.tensor(app))
        ours = verigrad.diff(v, n, 0, verigrad.tensor(pre), verigrad.tensor(app))
        _same(ours, theirs)
        theirs.sum().backward()
        ours.sum().backward()
        _same(v.grad, t.grad)
    b = np.array([[True, False, False, True], [False, False, True, True]])
    _same(verigrad.diff(verigrad.tensor(b)), torch.diff(torch.tensor(b)))
    _same(verigrad.diff(verigrad.tensor(b), dim=0), torch.diff(torch.tensor(b), dim=0))


@pytest.mark.parametrize("dtype", ["uint8", "bool", "int64", "float32"])
def test_all_and_any_answer_in_pytorchs_dtype(dtype):
    x = np.array([[0, 2, 1], [1, 1, 3]]).astype(dtype)
    for fn in ("all", "any"):
        _same(getattr(verigrad, fn)(verigrad.tensor(x)), getattr(torch, fn)(torch.tensor(x)))
        _same(getattr(verigrad, fn)(verigrad.tensor(x), 1), getattr(torch, fn)(torch.tensor(x), 1))
        _same(getattr(verigrad.tensor(x), fn)(0, True), getattr(torch.tensor(x), fn)(0, True))


@pytest.mark.parametrize("weights", [None, "int64", "uint8", "bool", "float32", "float64"])
def test_bincount_weights_dtype(weights):
    x = np.array([0, 1, 1, 3, 6])
    w = None if weights is None else np.array([1, 2, 0, 4, 1]).astype(weights)
    theirs = torch.bincount(torch.tensor(x), None if w is None else torch.tensor(w), 8)
    _same(verigrad.bincount(verigrad.tensor(x), None if w is None else verigrad.tensor(w), 8), theirs)


@pytest.mark.parametrize("dtype", ["int64", "int32", "int8", "uint8", "float32"])
@pytest.mark.parametrize(("low", "high"), [(-1.0, 1.0), (-2.5, 3.5), (0.0, 6.0), (1.5, 1.7)])
def test_hardtanh_and_relu6_keep_integer_dtypes(dtype, low, high):
    x = np.array([-7, -3, -2, 0, 1, 2, 3, 5, 9]).astype(dtype)
    if dtype == "uint8" and low < 0:
        with pytest.raises(RuntimeError):
            torch.nn.functional.hardtanh(torch.tensor(x), low, high)
        with pytest.raises(ValueError, match="negative limits"):
            verigrad.nn.functional.hardtanh(verigrad.tensor(x), low, high)
        return
    theirs = torch.nn.functional.hardtanh(torch.tensor(x), low, high)
    _same(verigrad.nn.functional.hardtanh(verigrad.tensor(x), low, high), theirs)
    _same(verigrad.nn.functional.relu6(verigrad.tensor(x)), torch.nn.functional.relu6(torch.tensor(x)))


def test_hardtanh_refuses_bool_as_pytorch():
    with pytest.raises(RuntimeError):
        torch.nn.functional.hardtanh(torch.tensor([True, False]))
    with pytest.raises(TypeError, match="bool"):
        verigrad.nn.functional.hardtanh(verigrad.tensor([True, False]))


def test_square_of_bool_is_i64():
    b = np.array([True, False, True])
    _same(verigrad.square(verigrad.tensor(b)), torch.square(torch.tensor(b)))
    _same(verigrad.tensor(b).square(), torch.tensor(b).square())


@pytest.mark.parametrize(("beta", "alpha"), [(0.2, 0.6), (1.7, 2.6), (-1.5, 2.6), (0, 2), (1, 1)])
def test_addmm_and_baddbmm_truncate_float_scales_for_integers(beta, alpha):
    rng = np.random.default_rng(0)
    x, a, b = (rng.integers(-5, 6, s) for s in ((2, 3, 4), (2, 3, 5), (2, 5, 4)))
    theirs = torch.baddbmm(torch.tensor(x), torch.tensor(a), torch.tensor(b), beta=beta, alpha=alpha)
    ours = verigrad.baddbmm(
        verigrad.tensor(x), verigrad.tensor(a), verigrad.tensor(b), beta=beta, alpha=alpha
    )
    _same(ours, theirs)
    theirs = torch.addmm(torch.tensor(x[0]), torch.tensor(a[0]), torch.tensor(b[0]), beta=beta, alpha=alpha)
    ours = verigrad.addmm(
        verigrad.tensor(x[0]), verigrad.tensor(a[0]), verigrad.tensor(b[0]), beta=beta, alpha=alpha
    )
    _same(ours, theirs)


@pytest.mark.parametrize("dtype", ["bool", "int64", "uint8", "float32"])
def test_writes_keep_the_dtype_written_into(dtype):
    x = np.array([[1, 0, 1], [0, 0, 1]]).astype(dtype)
    src = np.array([[0, 1, 1]]).astype(dtype)
    t, v = torch.tensor(x), verigrad.tensor(x)
    _same(
        v.index_copy(0, verigrad.tensor([1]), verigrad.tensor(src)),
        t.index_copy(0, torch.tensor([1]), torch.tensor(src)),
    )
    _same(
        v.scatter(0, verigrad.tensor([[1, 0, 1]]), verigrad.tensor(src)),
        t.scatter(0, torch.tensor([[1, 0, 1]]), torch.tensor(src)),
    )
    _same(v.scatter(1, verigrad.tensor([[2], [0]]), 2.5), t.scatter(1, torch.tensor([[2], [0]]), 2.5))
    mask = np.array([[True, False, True], [False, False, True]])
    _same(
        v.masked_scatter(verigrad.tensor(mask), verigrad.tensor(src.reshape(-1))),
        t.masked_scatter(torch.tensor(mask), torch.tensor(src.reshape(-1))),
    )
    _same(
        verigrad.index_put(v, (verigrad.tensor([0, 1]),), verigrad.tensor(src)),
        torch.index_put(t, (torch.tensor([0, 1]),), torch.tensor(src)),
    )


@pytest.mark.parametrize("dtype", ["uint8", "int64", "bool", "float64"])
@pytest.mark.parametrize("fn", ["ndtr", "log_ndtr", "entr", "sinc"])
def test_special_functions_of_integers_compute_in_float(dtype, fn):
    x = np.array([0, 1, 2, 3, 200, 7]).astype(dtype)
    _same(getattr(verigrad.special, fn)(verigrad.tensor(x)), getattr(torch.special, fn)(torch.tensor(x)))


@pytest.mark.parametrize("dtype", ["uint8", "int64", "float32"])
def test_softmin_with_dtype_negates_before_the_cast(dtype):
    x = np.array([[0, 1, 2, 200], [5, 3, 3, 9]]).astype(dtype)
    for dim in (0, 1):
        theirs = torch.nn.functional.softmin(torch.tensor(x), dim, dtype=torch.float64)
        _same(verigrad.nn.functional.softmin(verigrad.tensor(x), dim, dtype=verigrad.float64), theirs)


def test_hinge_embedding_loss_of_targets_other_than_plus_minus_one():
    rng = np.random.default_rng(0)
    x, target = rng.standard_normal(6), np.array([1.0, -1.0, 0.5, -1.7, 0.0, 1.0])
    for reduction in ("mean", "sum", "none"):
        t, v = torch.tensor(x, requires_grad=True), verigrad.tensor(x, requires_grad=True)
        theirs = torch.nn.functional.hinge_embedding_loss(t, torch.tensor(target), 0.8, reduction=reduction)
        loss = verigrad.nn.functional.hinge_embedding_loss
        ours = loss(v, verigrad.tensor(target), 0.8, reduction=reduction)
        _same(ours, theirs)
        theirs.sum().backward()
        ours.sum().backward()
        _same(v.grad, t.grad)


@pytest.mark.parametrize(("xs", "ys"), [((4,), (4,)), ((2, 3), (3,)), ((3,), (2, 3))])
def test_nextafter_has_pytorchs_gradient(xs, ys):
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal(xs), rng.standard_normal(ys)
    g = rng.standard_normal(np.broadcast_shapes(xs, ys))
    t, u = torch.tensor(x, requires_grad=True), torch.tensor(y, requires_grad=True)
    a, b = verigrad.tensor(x, requires_grad=True), verigrad.tensor(y, requires_grad=True)
    theirs, ours = torch.nextafter(t, u), verigrad.nextafter(a, b)
    _same(ours, theirs)
    assert ours.requires_grad
    (theirs * torch.tensor(g)).sum().backward()
    (ours * verigrad.tensor(g)).sum().backward()
    _same(a.grad, t.grad)
    _same(b.grad, u.grad)


@pytest.mark.parametrize("r", [0, 1, 2, 3, 4])
def test_combinations_keep_the_graph_when_empty(r):
    x = [1.5, -2.0, 0.5]
    t, v = torch.tensor(x, requires_grad=True), verigrad.tensor(x, requires_grad=True)
    theirs, ours = torch.combinations(t, r), verigrad.combinations(v, r)
    _same(ours, theirs)
    assert ours.requires_grad == theirs.requires_grad


@pytest.mark.parametrize("dtype", ["int64", "int32", "int16", "float32", "float64"])
@pytest.mark.parametrize(
    ("start", "end", "step"),
    [(0.0, -8.000001, -4.0), (1.0, 5.000001, 2.0), (-0.9, 2.1, 2.0), (0, 10, 3.5), (2.5, -7, -1.5)],
)
def test_arange_of_float_bounds_in_an_integer_dtype(dtype, start, end, step):
    _same(
        verigrad.arange(start, end, step, dtype=getattr(verigrad, dtype)),
        torch.arange(start, end, step, dtype=getattr(torch, dtype)),
    )


@pytest.mark.parametrize("shape", [(), (4,), (2, 3), (2, 3, 4)])
def test_prelu_of_one_weight_keeps_the_input_shape(shape):
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal(shape), np.array([0.3])
    t, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    v, vw = verigrad.tensor(x, requires_grad=True), verigrad.tensor(w, requires_grad=True)
    theirs, ours = torch.nn.functional.prelu(t, tw), verigrad.nn.functional.prelu(v, vw)
    _same(ours, theirs)
    theirs.sum().backward()
    ours.sum().backward()
    _same(v.grad, t.grad)
    _same(vw.grad, tw.grad)


# searchsorted, bucketize and cdist with PyTorch's keywords (they raised TypeError) --------------------
@pytest.mark.parametrize(
    "kw",
    [{}, {"out_int32": True}, {"right": True}, {"side": "right"}, {"side": "left"}, {"sorter": True}],
)
@pytest.mark.parametrize("shape", [(6,), (2, 6), (2, 0)])
def test_searchsorted_keywords(kw, shape):
    rng = np.random.default_rng(0)
    seq = rng.integers(0, 5, shape).astype(np.float32)
    values = rng.integers(-1, 6, (*shape[:-1], 4)).astype(np.float32)
    outs = []
    for lib in (torch, verigrad):
        given = dict(kw)
        if given.pop("sorter", False):
            order = np.argsort(seq, axis=-1, kind="stable")
            given["sorter"] = lib.tensor(order)
            s = lib.tensor(seq)
        else:
            s = lib.tensor(np.sort(seq, axis=-1))
        out = lib.searchsorted(s, lib.tensor(values), **given)
        outs.append((out.numpy(), str(out.dtype).split(".")[-1]))
    np.testing.assert_array_equal(outs[1][0], outs[0][0])
    assert {"int64": "i64", "int32": "i32"}[outs[0][1]] == outs[1][1]


def test_searchsorted_scalar_and_bucketize_out_int32():
    for lib in (torch, verigrad):
        seq = lib.tensor([1.0, 2.0, 4.0])
        assert lib.searchsorted(seq, 3.0).item() == 2 and lib.searchsorted(seq, 3.0).ndim == 0
        got = lib.bucketize(lib.tensor([0.5, 2.0, 9.0]), seq, out_int32=True, right=True)
        assert got.tolist() == [0, 2, 3] and "32" in str(got.dtype)
    with pytest.raises(RuntimeError, match="opposites"):
        verigrad.searchsorted(verigrad.tensor([1.0]), verigrad.tensor([1.0]), right=True, side="left")


@pytest.mark.parametrize("mode", ["use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist"])
@pytest.mark.parametrize("p", [0.0, 1.0, 2.0])
def test_cdist_compute_mode_and_p0_history(mode, p):
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((5, 4))
    results = []
    for lib in (torch, verigrad):
        x = lib.tensor(a, requires_grad=True)
        out = lib.cdist(x, lib.tensor(b), p, mode)
        assert out.requires_grad
        out.sum().backward()
        results.append((out.detach().numpy(), x.grad.numpy()))
    np.testing.assert_allclose(results[1][0], results[0][0], rtol=1e-12)
    np.testing.assert_allclose(results[1][1], results[0][1], rtol=1e-9, atol=1e-12)

"""More functions PyTorch's OpInfo suite found missing from verigrad (`tools/opinfo_sweep.py --list-missing`),
against torch on the same inputs: values, dtypes and gradients in f64."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from gradients import check_values_and_gradients

import verigrad

RNG = np.random.default_rng(12)

SEGMENTS = [
    # (reduce, data shape, axis, lengths, initial): empty runs, ties, a batch of lengths per row
    ("sum", (6,), 0, [2, 0, 3, 1], None),
    ("mean", (6, 2), 0, [2, 0, 3, 1], None),
    ("mean", (6,), 0, [2, 0, 3, 1], 1.5),
    ("max", (6, 2), 0, [2, 0, 3, 1], None),
    ("min", (6,), 0, [2, 0, 3, 1], 0.25),
    ("prod", (6,), 0, [2, 0, 3, 1], 2.0),
    ("sum", (2, 5, 3), 1, [[1, 4, 0], [0, 2, 3]], None),
    ("max", (2, 5), 1, [[1, 4, 0], [0, 2, 3]], 0.5),
]


@pytest.mark.parametrize("reduce,shape,axis,lengths,initial", SEGMENTS)
@pytest.mark.parametrize("by", ["lengths", "offsets"])
def test_segment_reduce_against_torch(reduce, shape, axis, lengths, initial, by):
    x = np.random.default_rng(3).permutation(np.prod(shape)).reshape(shape) / 4 - 1  # no ties: see below
    runs = np.array(lengths)
    starts = np.zeros((*runs.shape[:-1], 1), int)
    given = runs if by == "lengths" else np.concatenate([starts, runs.cumsum(-1)], -1)

    def call(t, x):
        return t._segment_reduce(x, reduce, **{by: t.from_numpy(given)}, axis=axis, initial=initial)

    check_values_and_gradients({"x": x}, lambda x: call(verigrad, x), lambda x: call(torch, x))


@pytest.mark.parametrize("reduce", ["max", "min"])
def test_segment_reduce_shares_a_positive_gradient_among_ties_as_torch(reduce):
    # PyTorch divides a run's gradient among its tied entries only where it is positive (README)
    x = np.array([2.0, -3.0, -2.0, -2.0, -2.0, 2.0, 2.0])
    ours = verigrad.from_numpy(x.copy()).requires_grad_()
    theirs = torch.from_numpy(x.copy()).requires_grad_()
    verigrad.segment_reduce(ours, reduce, lengths=verigrad.tensor([2, 0, 3, 2])).sum().backward()
    torch.segment_reduce(theirs, reduce, lengths=torch.tensor([2, 0, 3, 2])).sum().backward()
    np.testing.assert_array_equal(ours.grad.numpy(), theirs.grad.numpy())


def test_segment_reduce_refuses_lengths_not_covering_the_axis():
    x = verigrad.from_numpy(np.ones(4))
    with pytest.raises(verigrad.ShapeError, match="sum to the 4 entries"):
        verigrad.segment_reduce(x, "sum", lengths=verigrad.tensor([1, 2]))
    with pytest.raises(ValueError, match="non-negative"):
        verigrad.segment_reduce(x, "sum", lengths=verigrad.tensor([5, -1]))
    with pytest.raises(ValueError, match="reduce must be one of"):
        verigrad.segment_reduce(x, "median", lengths=verigrad.tensor([4]))
    with pytest.raises(verigrad.ShapeError, match="last axis"):
        verigrad.segment_reduce(x.reshape(2, 2), "sum", lengths=verigrad.tensor([1, 1]), axis=1)


@pytest.mark.parametrize(
    "shapes,dim,chunks",
    [
        ([(2, 5), (2, 3)], 1, 2),
        ([(1, 2, 3), (1, 2, 3)], -1, 5),
        ([(3, 3, 2), (1, 4, 2)], 0, 2),
        ([(4, 2, 3)], 1, 3),
    ],
)
def test_chunk_cat_against_torch(shapes, dim, chunks):
    arrays = [RNG.standard_normal(s) for s in shapes]
    ours = verigrad._chunk_cat([verigrad.from_numpy(a) for a in arrays], dim, chunks)
    theirs = torch._chunk_cat([torch.from_numpy(a) for a in arrays], dim, chunks)
    assert ours.shape == tuple(theirs.shape)
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_chunk_cat_refuses_mismatched_leading_sizes():
    with pytest.raises(verigrad.ShapeError, match="before dim 1"):
        verigrad._chunk_cat([verigrad.zeros(2, 3), verigrad.zeros(3, 3)], 1, 2)
    with pytest.raises(ValueError, match="num_chunks"):
        verigrad._chunk_cat([verigrad.zeros(2, 3)], 1, 0)


def _outputs_against_torch(ours, theirs, differentiable):
    """Each output's values, shape and dtype, and whether it carries a gradient, as PyTorch's."""
    assert len(ours) == len(theirs)
    for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
        assert (
            a.shape == tuple(b.shape) and a.dtype.name == {"float64": "f64", "uint8": "u8"}[str(b.dtype)[6:]]
        )
        np.testing.assert_allclose(
            a.numpy(), b.detach().numpy(), rtol=1e-12, atol=1e-12, err_msg=f"output {i}"
        )
        assert b.requires_grad == (i in differentiable) == a.requires_grad, f"output {i}"


@pytest.mark.parametrize("eps", [1e-5, -0.5])  # aten takes a negative eps (a NaN where var + eps < 0)
def test_native_layer_norm_against_torch(eps):
    x, w, b = RNG.standard_normal((2, 3, 4)), RNG.standard_normal((3, 4)), RNG.standard_normal((3, 4))
    check_values_and_gradients(
        {"x": x, "w": w, "b": b},
        lambda x, w, b: verigrad.native_layer_norm(x, (3, 4), w, b, eps)[0],
        lambda x, w, b: torch.native_layer_norm(x, (3, 4), w, b, eps)[0],
    )
    ours = verigrad.native_layer_norm(verigrad.from_numpy(x).requires_grad_(), [4], None, None, eps)
    theirs = torch.native_layer_norm(torch.from_numpy(x).requires_grad_(), [4], None, None, eps)
    _outputs_against_torch(ours, theirs, {0})


@pytest.mark.parametrize("n", [2, 0])  # an empty batch too
def test_native_group_norm_against_torch(n):
    x, w, b = RNG.standard_normal((n, 6, 5)), RNG.standard_normal(6), RNG.standard_normal(6)
    check_values_and_gradients(
        {"x": x, "w": w, "b": b},
        lambda x, w, b: verigrad.native_group_norm(x, w, b, n, 6, 5, 3, 1e-5)[0],
        lambda x, w, b: torch.native_group_norm(x, w, b, n, 6, 5, 3, 1e-5)[0],
    )
    leaves = verigrad.from_numpy(x.copy()).requires_grad_(), torch.from_numpy(x.copy()).requires_grad_()
    ours = verigrad.native_group_norm(leaves[0], None, None, n, 6, 5, 3, 1e-5)
    theirs = torch.native_group_norm(leaves[1], None, None, n, 6, 5, 3, 1e-5)
    cotangent = RNG.standard_normal(x.shape)
    for t, out in zip((verigrad, torch), (ours, theirs), strict=True):
        (out[0] * t.from_numpy(cotangent) + out[1].sum() + out[2].sum()).sum().backward()
    assert ours[1].requires_grad and ours[2].requires_grad  # the statistics are differentiable
    for a, b in zip(ours, theirs, strict=True):
        assert a.shape == tuple(b.shape)
        np.testing.assert_allclose(a.numpy(), b.detach().numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(leaves[0].grad.numpy(), leaves[1].grad.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("name", ["native_batch_norm", "_native_batch_norm_legit", "_batch_norm_with_update"])
def test_native_batch_norm_against_torch(name, training):
    x, w, b = RNG.standard_normal((4, 3, 5)), RNG.standard_normal(3), RNG.standard_normal(3)
    mean, var = RNG.standard_normal(3), RNG.random(3) + 0.5
    if name == "_batch_norm_with_update" and not training:
        return
    stats = [(t.from_numpy(mean.copy()), t.from_numpy(var.copy())) for t in (verigrad, torch)]
    extra = () if name == "_batch_norm_with_update" else (training,)
    ours = getattr(verigrad, name)(
        verigrad.from_numpy(x).requires_grad_(),
        verigrad.from_numpy(w),
        verigrad.from_numpy(b),
        *stats[0],
        *extra,
        0.3,
        1e-5,
    )
    theirs = getattr(torch.ops.aten, name)(
        torch.from_numpy(x).requires_grad_(),
        torch.from_numpy(w),
        torch.from_numpy(b),
        *stats[1],
        *extra,
        0.3,
        1e-5,
    )
    _outputs_against_torch(ours, theirs, {0})
    for a, b in zip(stats[0], stats[1], strict=True):  # the running statistics moved alike
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12, atol=1e-12)


def test_native_batch_norm_legit_without_running_statistics_against_torch():
    x = RNG.standard_normal((4, 3, 5))
    ours = verigrad._native_batch_norm_legit(verigrad.from_numpy(x), None, None, True, 0.1, 1e-5)
    theirs = torch._native_batch_norm_legit(torch.from_numpy(x), None, None, True, 0.1, 1e-5)
    _outputs_against_torch(ours, theirs, set())


@pytest.mark.parametrize("shape", [(5, 3), (3, 3), (2, 4, 2)])
def test_geqrf_against_torch(shape):
    a = RNG.standard_normal(shape)
    ours, theirs = verigrad.geqrf(verigrad.from_numpy(a)), torch.geqrf(torch.from_numpy(a))
    for x, y in zip(ours, theirs, strict=True):
        assert x.shape == tuple(y.shape)
        np.testing.assert_allclose(x.numpy(), y.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("shape,k", [((5, 3), 3), ((4, 4), 2), ((2, 5, 3), 3)])
def test_householder_product_against_torch(shape, k):
    a, tau = RNG.standard_normal(shape), RNG.standard_normal((*shape[:-2], k))
    check_values_and_gradients(
        {"input": a, "tau": tau}, verigrad.linalg.householder_product, torch.linalg.householder_product
    )


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("transpose", [True, False])
def test_ormqr_against_torch(left, transpose):
    a, tau = RNG.standard_normal((2, 4, 3)), RNG.standard_normal((2, 3))
    c = RNG.standard_normal((2, 4, 5) if left else (2, 5, 4))
    check_values_and_gradients(
        {"a": a, "tau": tau, "c": c},
        lambda a, tau, c: verigrad.ormqr(a, tau, c, left=left, transpose=transpose),
        lambda a, tau, c: torch.ormqr(a, tau, c, left=left, transpose=transpose),
    )


def test_householder_functions_refuse_as_torch():
    a, tau = verigrad.zeros(4, 3, dtype=verigrad.f64), verigrad.zeros(4, dtype=verigrad.f64)
    with pytest.raises(verigrad.ShapeError, match="4 reflectors"):
        verigrad.linalg.householder_product(a, tau)
    with pytest.raises(verigrad.ShapeError, match="must have 4 rows"):
        verigrad.ormqr(a, tau[:3], verigrad.zeros(3, 3, dtype=verigrad.f64))
    with pytest.raises(verigrad.ShapeError, match="2 dimensions"):
        verigrad.geqrf(tau)


STRIDED = [((3, 3), (2, 2), (1, 2), 0), ((3, 3), (2, 2), (1, 2), 1), ((16,), (2, 1, 1, 2), (1, 7, 7, 1), 0)]


@pytest.mark.parametrize("shape,size,stride,offset", STRIDED)
def test_as_strided_against_torch(shape, size, stride, offset):
    # overlapping entries (stride 1 and 2 over a 3 x 3) share their gradients, as PyTorch's
    check_values_and_gradients(
        {"x": RNG.standard_normal(shape)},
        lambda x: verigrad.as_strided(x, size, stride, offset),
        lambda x: torch.as_strided(x, size, stride, offset),
    )


@pytest.mark.parametrize("shape,size,stride,offset", [((3, 3), (2, 2), (2, 1), 0), ((4,), (2,), (2,), 1)])
def test_as_strided_scatter_values_and_src_gradient_against_torch(shape, size, stride, offset):
    x = RNG.standard_normal(shape)
    check_values_and_gradients(
        {"src": RNG.standard_normal(size)},
        lambda src: verigrad.as_strided_scatter(verigrad.from_numpy(x), src, size, stride, offset),
        lambda src: torch.as_strided_scatter(torch.from_numpy(x), src, size, stride, offset),
    )


def test_as_strided_scatter_input_gradient_is_zero_where_src_was_written():
    # PyTorch's fails its own gradcheck here (README): the entries replaced by src pass no gradient back
    x = verigrad.from_numpy(np.arange(4.0)).requires_grad_()
    verigrad.as_strided_scatter(x, verigrad.zeros(2, dtype=verigrad.f64), (2,), (2,), 1).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 0.0, 1.0, 0.0])


def test_as_strided_of_views_reads_the_base_storage_as_torch():
    """A view's storage is its base's: as_strided of a slice, a transpose, a reshape of a view reads there,
    from the view's own start by default or from an explicit offset counted from the base's start, and its
    gradient reaches the view's elements among those read (they answered from the view's own elements, or
    refused). as_strided_scatter's result is a new tensor in PyTorch: a view with an explicit offset is
    refused there."""
    base, tbase = verigrad.arange(20.0), torch.arange(20.0)
    cases = [
        (lambda b: b[5:15], ((2, 2), (1, 2))),
        (lambda b: b[5:15], ((2, 2), (1, 2), 0)),
        (lambda b: b[5:15], ((2, 2), (1, 2), 10)),
        (lambda b: b[5:15], ((3,), (3,), 12)),
        (lambda b: b.reshape(4, 5)[:, 1:3], ((3,), (2,))),
        (lambda b: b.reshape(4, 5).T, ((2, 3), (3, 1), 1)),
        (lambda b: b.reshape(4, 5)[1:][:, ::2], ((2, 2), (5, 1))),
    ]
    for make, args in cases:
        theirs = torch.as_strided(make(tbase), *args)
        np.testing.assert_array_equal(verigrad.as_strided(make(base), *args).numpy(), theirs.numpy())
        x = make(verigrad.arange(20.0)).requires_grad_(True)
        tx = make(torch.arange(20.0)).requires_grad_(True)
        cot = torch.arange(1.0, 1.0 + theirs.numel()).reshape(theirs.shape)
        out = verigrad.as_strided(x, *args)
        (ours,) = verigrad.autograd.grad([out], [x], [verigrad.from_numpy(cot.numpy())])
        want = torch.autograd.grad(torch.as_strided(tx, *args), tx, cot)[0]
        np.testing.assert_array_equal(ours.numpy(), want.numpy())
    with pytest.raises(verigrad.ShapeError, match="out of bounds for the view's storage"):
        verigrad.as_strided(base[5:15], (2,), (1,), 19)
    with pytest.raises(NotImplementedError, match="storage_offset=1 of a view that starts inside its base"):
        verigrad.as_strided_scatter(base[1:], verigrad.zeros(2), (2,), (1,), 1)


def test_as_strided_refuses_positions_out_of_bounds_and_negative_strides():
    x = verigrad.zeros(3, 3)
    with pytest.raises(verigrad.ShapeError, match="out of bounds"):
        verigrad.as_strided(x, (2, 2), (1, 2), 6)
    with pytest.raises(verigrad.ShapeError, match="negative"):
        verigrad.as_strided(x, (2,), (-1,))
    with pytest.raises(verigrad.ShapeError, match="same length"):
        verigrad.as_strided_copy(x, (2, 2), (1,))


GRADIENTS = [
    ((5,), {}),
    ((5,), {"spacing": 2.0}),
    ((5, 4), {"edge_order": 2}),
    ((5, 4), {"spacing": [2.0, 0.5], "dim": (0, 1)}),
    ((4, 3, 4), {"spacing": [2.0, 1.0], "dim": (0, -1), "edge_order": 2}),
    ((3, 4), {"spacing": "coords", "dim": (0, 1), "edge_order": 1}),
    ((3, 4), {"spacing": "coords", "dim": (0, 1), "edge_order": 2}),
]


@pytest.mark.parametrize("shape,kwargs", GRADIENTS)
def test_gradient_against_torch(shape, kwargs):
    coords = [np.array([1.1, 2.0, 3.5]), np.array([4.0, 2.0, 6.0, 6.5])]  # not increasing: as PyTorch takes

    def call(t, x):
        kw = dict(kwargs)
        if kw.get("spacing") == "coords":
            kw["spacing"] = [t.from_numpy(c) for c in coords]
        return t.stack(t.gradient(x, **kw))

    check_values_and_gradients(
        {"x": RNG.standard_normal(shape)}, lambda x: call(verigrad, x), lambda x: call(torch, x)
    )


def test_gradient_of_integers_and_its_errors_as_torch():
    ours = verigrad.gradient(verigrad.tensor([1, 4, 9, 16]), spacing=2)
    assert ours[0].dtype == verigrad.f32 and ours[0].tolist() == [1.5, 2.0, 3.0, 3.5]
    with pytest.raises(verigrad.ShapeError, match="at least edge_order"):
        verigrad.gradient(verigrad.zeros(2, 4), edge_order=2)
    with pytest.raises(ValueError, match="edge_order=1 and edge_order=2"):
        verigrad.gradient(verigrad.zeros(4), edge_order=3)
    with pytest.raises(ValueError, match="list of length 2"):
        verigrad.gradient(verigrad.zeros(4, 4), spacing=[1.0, 2.0, 3.0])


def test_zeta_against_torch():
    # the direct sum (q > 9 leaves at once), the Euler-Maclaurin tail, q below 0 at whole x, the poles
    x = np.array([1.5, 2.0, 3.0, 7.5, 40.0, 2.0, 4.0, 1.0, 0.5, 2.0, 2.5])
    q = np.array([0.5, 1.0, 12.0, 0.1, 2.0, -1.5, -2.5, 3.0, 3.0, -2.0, -1.5])
    ours = verigrad.special.zeta(verigrad.from_numpy(x), verigrad.from_numpy(q)).numpy()
    theirs = torch.special.zeta(torch.from_numpy(x), torch.from_numpy(q)).numpy()
    np.testing.assert_allclose(ours, theirs, rtol=1e-14, atol=0)
    check_values_and_gradients(
        {"q": RNG.uniform(0.5, 4.0, (3, 4))},
        lambda q: verigrad.special.zeta(verigrad.from_numpy(x[:4].copy()), q),
        lambda q: torch.special.zeta(torch.from_numpy(x[:4].copy()), q),
    )
    with pytest.raises(NotImplementedError, match="zeta with respect to x"):
        a = verigrad.from_numpy(x[:4].copy()).requires_grad_()
        verigrad.special.zeta(a, verigrad.from_numpy(q[:4].copy())).sum().backward()


@pytest.mark.parametrize("shape,ind", [((4, 6, 8, 3), 2), ((6, 2, 3), 1)])
def test_tensorinv_against_torch(shape, ind):
    check_values_and_gradients(
        {"a": RNG.standard_normal(shape)},
        lambda a: verigrad.linalg.tensorinv(a, ind),
        lambda a: torch.linalg.tensorinv(a, ind),
    )


@pytest.mark.parametrize("a_shape,b_shape,dims", [((2, 3, 6), (2, 3), None), ((6, 3, 2), (2, 3), (0,))])
def test_tensorsolve_against_torch(a_shape, b_shape, dims):
    check_values_and_gradients(
        {"a": RNG.standard_normal(a_shape), "b": RNG.standard_normal(b_shape)},
        lambda a, b: verigrad.linalg.tensorsolve(a, b, dims),
        lambda a, b: torch.linalg.tensorsolve(a, b, dims),
    )
    with pytest.raises(verigrad.ShapeError, match="tensorsolve"):
        verigrad.linalg.tensorsolve(verigrad.zeros(2, 3, 5), verigrad.zeros(2, 3))
    with pytest.raises(verigrad.ShapeError, match="tensorinv"):
        verigrad.linalg.tensorinv(verigrad.zeros(2, 3, 5))


@pytest.mark.parametrize("p,dim,maxnorm", [(2.0, 0, 1.0), (1.0, -1, 2.0), (3.0, 1, 0.5), (math.inf, 0, 1.0)])
def test_renorm_against_torch(p, dim, maxnorm):
    check_values_and_gradients(
        {"x": RNG.standard_normal((3, 4, 2))},
        lambda x: verigrad.renorm(x, p, dim, maxnorm),
        lambda x: torch.renorm(x, p, dim, maxnorm),
    )


def test_renorm_refuses_as_torch():
    x = verigrad.zeros(3, 4)
    with pytest.raises(ValueError, match="p must be positive"):
        verigrad.renorm(x, -1, 0, 1.0)
    with pytest.raises(ValueError, match="maxnorm to be >= 0"):
        verigrad.renorm(x, 2, 0, -1.0)
    with pytest.raises(verigrad.ShapeError, match="at least 2 dimensions"):
        verigrad.renorm(verigrad.zeros(3), 2, 0, 1.0)

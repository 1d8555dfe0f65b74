"""The PyTorch-named functions written with ops (verigrad/functions/) and the Tensor methods around
them: values against NumPy on both backends, symbolic shapes, compiled runs against eager ones, and the
refusals. Gradients and PyTorch's own values: tests/parity/test_derived_torch.py."""

from __future__ import annotations

import numpy as np
import pytest

import verigrad
from verigrad import ShapeError

VALUES = np.array([[1.5, -2.0, 0.0, 4.0], [np.nan, 3.0, -np.inf, -0.0], [2.0, 2.0, -1.0, np.inf]])


@pytest.fixture(params=["reference", "cpu"])
def backend(request):
    with verigrad.backend(request.param):
        yield request.param


def _eq(got: verigrad.Tensor, want: np.ndarray) -> None:
    np.testing.assert_array_equal(got.numpy(), want)


def test_clamp_is_numpys_clip_with_nan_and_crossed_bounds(backend) -> None:
    x = verigrad.tensor(VALUES)
    _eq(x.clamp(-1.0, 2.0), np.clip(VALUES, -1.0, 2.0))
    _eq(x.clamp(min=0.5), np.maximum(VALUES, 0.5))  # NaN stays NaN in both
    _eq(verigrad.clip(x, max=-0.5), np.minimum(VALUES, -0.5))
    _eq(x.clamp(2.0, -1.0), np.where(np.isnan(VALUES), np.nan, -1.0))  # min > max: every value is max
    ints = verigrad.tensor([[5, -7], [0, 2]])
    _eq(ints.clamp(-1, 3), np.array([[3, -1], [0, 2]]))
    assert ints.clamp(-1, 3).dtype is verigrad.i64


def test_tests_of_values(backend) -> None:
    x = verigrad.tensor(VALUES)
    _eq(x.isnan(), np.isnan(VALUES))
    _eq(x.isinf(), np.isinf(VALUES))
    _eq(verigrad.isfinite(x), np.isfinite(VALUES))
    for axis in (None, 0, 1):
        _eq(x.all(axis), np.all(VALUES, axis=axis))
        _eq(
            verigrad.any(x, dim=axis, keepdim=axis is not None),
            np.any(VALUES, axis=axis, keepdims=axis is not None),
        )
    _eq(verigrad.tensor(np.zeros((2, 0))).all(1), np.array([True, True]))  # empty: all holds, any does not
    _eq(verigrad.tensor(np.zeros((2, 0))).any(1), np.array([False, False]))


def test_var_std_and_logsumexp_against_numpy(backend) -> None:
    rng = np.random.default_rng(3)
    x64 = rng.standard_normal((4, 5, 6)) * 3 + 1
    for dtype, rtol in (("f64", 1e-13), ("f32", 2e-6)):
        x = verigrad.tensor(x64, dtype=dtype)
        data = x.numpy().astype(np.float64)
        for axis in (None, 1, (0, 2)):
            for correction in (0, 1):
                want = data.var(axis=axis, ddof=correction)
                np.testing.assert_allclose(x.var(axis, correction).numpy(), want, rtol=rtol)
                np.testing.assert_allclose(
                    x.std(dim=axis, correction=correction).numpy(), np.sqrt(want), rtol=rtol
                )
            top = data.max(axis=axis, keepdims=True)
            want = np.log(np.exp(data - top).sum(axis=axis, keepdims=True)) + top
            got = x.logsumexp(axis if axis is not None else (0, 1, 2), keepdim=True).numpy()
            np.testing.assert_allclose(got, want, rtol=rtol)
    huge = verigrad.tensor([[1000.0, 1000.0], [-np.inf, -np.inf], [np.inf, 0.0]])
    np.testing.assert_allclose(huge.logsumexp(1).numpy(), [1000.0 + np.log(2.0), -np.inf, np.inf], rtol=1e-7)


def test_argmin_of_floats_and_of_integer_extremes(backend) -> None:
    for axis in (None, 0, 1):
        _eq(verigrad.tensor(VALUES).argmin(axis), np.argmin(VALUES, axis=axis))  # the first NaN wins
    for dtype in (np.int64, np.int32):
        info = np.iinfo(dtype)
        ints = np.array([[3, info.min, info.max], [info.min, info.max, 0]], dtype)
        for axis in (None, 0, 1):
            _eq(verigrad.argmin(verigrad.tensor(ints), dim=axis), np.argmin(ints, axis=axis))
    with pytest.raises(TypeError, match="does not support bool"):  # as PyTorch's
        verigrad.tensor([[True, False, True], [True, True, True]]).argmin(1)


def test_triangles_and_movement_against_numpy(backend) -> None:
    x = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    t = verigrad.tensor(x)
    for k in (-1, 0, 2):
        _eq(t.tril(k), np.tril(x, k))
        _eq(verigrad.triu(t, k), np.triu(x, k))
    _eq(t.flip(0, 2), np.flip(x, (0, 2)))
    _eq(verigrad.flip(t, -1), np.flip(x, -1))
    _eq(t.repeat(2, 1, 3), np.tile(x, (2, 1, 3)))
    _eq(t.repeat((3, 1, 1, 2)), np.tile(x, (3, 1, 1, 2)))
    _eq(t.index_select(2, verigrad.tensor([3, 0, 3])), np.take(x, [3, 0, 3], axis=2))
    _eq(t.masked_fill(t > 10, -1.0), np.where(x > 10, -1.0, x))
    with np.errstate(divide="ignore"):
        _eq(t.reciprocal(), 1 / x)
    assert [p.shape for p in t.split(3, dim=2)] == [(2, 3, 3), (2, 3, 1)]
    assert [p.shape for p in t.split([1, 0, 2], 1)] == [(2, 1, 4), (2, 0, 4), (2, 2, 4)]
    assert [p.shape for p in verigrad.chunk(t, 3, -1)] == [(2, 3, 2), (2, 3, 2)]  # PyTorch's: fewer chunks
    assert [p.shape for p in t.chunk(2, 1)] == [(2, 2, 4), (2, 1, 4)]
    _eq(verigrad.concat(*t.split(3, 2), axis=2), x)


def test_dtype_shortcuts_views_and_clone() -> None:
    t = verigrad.tensor([[1.5, -2.5], [3.0, 0.0]])
    assert (t.long().dtype, t.int().dtype, t.bool().dtype, t.half().dtype) == (
        verigrad.i64,
        verigrad.i32,
        verigrad.bool_,
        verigrad.f16,
    )
    _eq(t.long(), np.array([[1, -2], [3, 0]]))
    assert t.dim() == t.ndimension() == 2
    assert t.type_as(verigrad.zeros(1, dtype="f64")).dtype is verigrad.f64
    assert verigrad.ones(3).expand_as(t[:, :1].expand(2, 3)).shape == (2, 3)
    assert verigrad.arange(0, 4).view_as(t).shape == (2, 2)
    copy = t.clone()
    assert not np.shares_memory(copy.numpy(), t.numpy())
    with verigrad.no_grad():
        copy.zero_()
    _eq(t, np.array([[1.5, -2.5], [3.0, 0.0]], np.float32))  # the original is untouched
    _eq(copy, np.zeros((2, 2), np.float32))


def test_in_place_methods(backend) -> None:
    x = verigrad.tensor(np.arange(6.0).reshape(2, 3))
    with verigrad.no_grad():
        assert x.fill_(2.0) is x
        x.add_(verigrad.tensor([1.0, 2.0, 3.0]), alpha=2).mul_(0.5).sub_(1.0).div_(2.0)
    _eq(x, (2.0 + 2 * np.array([[1.0, 2.0, 3.0]] * 2)) * 0.5 / 2.0 - 0.5)
    x.copy_(verigrad.tensor([[9.0], [-9.0]]))
    _eq(x, np.array([[9.0] * 3, [-9.0] * 3]))
    x.clamp_(-1.0, 1.0)
    _eq(x, np.array([[1.0] * 3, [-1.0] * 3]))
    w = verigrad.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
        w.mul_(2)


def test_symbolic_shapes() -> None:
    B, N = verigrad.dims("B N")
    spec = verigrad.spec([B, N])
    assert verigrad.check(lambda x: x.var(1, keepdim=True), spec) == verigrad.spec([B, 1])
    assert verigrad.check(lambda x: x.logsumexp(0), spec) == verigrad.spec([N])
    assert verigrad.check(lambda x: x.tril().flip(0), spec) == spec
    assert verigrad.check(lambda x: x.repeat(2, 1, 3), spec) == verigrad.spec([2, B, N * 3])
    assert verigrad.check(lambda x: x.argmin(1), spec) == verigrad.spec([B], "i64")
    assert verigrad.check(lambda x: x.split(2, 1), verigrad.spec([B, 5])) == (
        verigrad.spec([B, 2]),
        verigrad.spec([B, 2]),
        verigrad.spec([B, 1]),
    )
    with pytest.raises(ShapeError, match="chunk needs a concrete size along axis 0, got B"):
        verigrad.check(lambda x: x.chunk(2), spec)


def test_compiled_runs_match_eager_ones_for_each_batch(backend) -> None:
    """Traced with a symbolic batch: the counts var divides by and the flips' indices follow it."""

    def f(x):
        lead = x.var(0) + x.std(0, correction=0) + x.logsumexp(0) + x.flip(0)[0] + x.tril(-1).sum(0)
        return lead + x.cumsum(0)[-1] + verigrad.grad(lambda y: (y.cumsum(0) * y).sum())(x).sum(0)

    compiled = verigrad.compile(f)
    rng = np.random.default_rng(9)
    for batch in (5, 3, 5, 8):
        x = verigrad.tensor(rng.standard_normal((batch, 4)))
        _eq(compiled(x), f(x).numpy())


def test_refusals() -> None:
    x = verigrad.tensor(VALUES)
    with pytest.raises(ValueError, match="clamp needs min or max"):
        x.clamp()
    with pytest.raises(verigrad.DTypeError, match="var and std need an f16, f32 or f64 tensor, got i64"):
        verigrad.tensor([1, 2, 3]).var()
    with pytest.raises(ValueError, match=r"split sizes \[1, 1\] must be non-negative and add up to 3"):
        x.split([1, 1])
    with pytest.raises(ValueError, match="positive size"):
        x.split(0)
    with pytest.raises(ValueError, match="positive number of chunks"):
        x.chunk(0)
    with pytest.raises(ShapeError, match="repeat needs a count for each of the 2 axes"):
        x.repeat(2)
    with pytest.raises(ShapeError, match="tril needs a matrix"):
        verigrad.tensor([1.0, 2.0]).tril()
    with pytest.raises(ShapeError, match="1-D index"):
        x.index_select(0, verigrad.tensor([[0]]))
    with pytest.raises(verigrad.DTypeError, match="bool"):
        x.masked_fill(verigrad.tensor([1, 0, 1, 0]), 0.0)


def test_scaled_dot_product_attention_paths_and_refusals() -> None:
    import verigrad.nn.functional as F

    B, T = verigrad.dims("B T")
    q = verigrad.spec([B, 4, T, 8])
    causal = verigrad.trace(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), q, q, q)
    assert "attention" in str(causal)  # square and causal: the attention op and its kernel
    masked = verigrad.trace(lambda q, k, v: F.scaled_dot_product_attention(q, k, v), q, q, q)
    assert "attention" not in str(masked) and "softmax" in str(masked)
    assert verigrad.check(lambda q, k, v: F.scaled_dot_product_attention(q, k, v), q, q, q) == q
    x = verigrad.ones(1, 2, 3, 4)
    with pytest.raises(ValueError, match="dropout_p must be in"):
        F.scaled_dot_product_attention(x, x, x, dropout_p=1.5)
    with pytest.raises(ValueError, match="attn_mask should not be set when is_causal=True"):
        F.scaled_dot_product_attention(x, x, x, attn_mask=verigrad.ones(3, 3).bool(), is_causal=True)
    rows = F.scaled_dot_product_attention(x, x, x * verigrad.arange(0, 3).reshape(1, 1, 3, 1), is_causal=True)
    np.testing.assert_allclose(rows.numpy()[0, 0, :, 0], [0.0, 0.5, 1.0], rtol=1e-6)  # means of the visible


def test_sort_topk_and_gather_by_hand(backend) -> None:
    x = verigrad.tensor([[3.0, 1.0, np.nan, 1.0], [2.0, 2.0, -5.0, 0.0]])
    values, indices = x.sort(1)
    _eq(indices, np.array([[1, 3, 0, 2], [2, 3, 0, 1]]))  # stable, NaN last
    _eq(values, np.array([[1.0, 1.0, 3.0, np.nan], [-5.0, 0.0, 2.0, 2.0]]))
    _eq(verigrad.argsort(x, dim=1, descending=True), np.array([[2, 0, 1, 3], [0, 1, 3, 2]]))  # NaN first
    top = x.topk(2, dim=1, largest=False)
    _eq(top.indices, np.array([[1, 3], [2, 3]]))
    _eq(x.gather(0, verigrad.tensor([[1, 0, 0, 1]])), np.array([[2.0, 1.0, np.nan, 0.0]]))
    B = verigrad.dims("B")
    assert verigrad.check(lambda t: t.sort(1).values, verigrad.spec([B, 5])) == verigrad.spec([B, 5])
    assert verigrad.check(lambda t: t.topk(2).indices, verigrad.spec([B, 5])) == verigrad.spec([B, 2], "i64")
    with pytest.raises(ValueError, match="topk needs 0 <= k <= 4, got 5"):
        x.topk(5)
    with pytest.raises(ShapeError, match="gather needs indices shaped as the input but along axis 1"):
        x.gather(1, verigrad.tensor([[0], [1], [2]]))


def test_the_new_functions_compile_as_they_run_eagerly(backend) -> None:
    """A compiled step through each of them, over three batch sizes, against eager runs of the same."""
    import verigrad.nn.functional as F

    w = verigrad.tensor(np.random.default_rng(1).standard_normal((6, 4)))

    def f(x, y):
        h = verigrad.einsum("bi,ji->bj", x, w).clamp(-1.0, 1.5)
        top = h.topk(2, dim=1).values.sum(1) + h.sort(1, descending=True).values[:, 0]
        picked = h.gather(1, y.unsqueeze(1)).squeeze(1)
        loss = F.cross_entropy(h, y) + F.nll_loss(h.log_softmax(-1), y) + F.smooth_l1_loss(h, h.cumsum(1))
        soft = F.softplus(h).mean(0) + F.leaky_relu(h, 0.2).var(0) + h.logsumexp(1).mean()
        return loss + top.mean() + picked.mean() + soft.sum() + h.expm1().log1p().sum() / 100

    compiled = verigrad.compile(f)
    rng = np.random.default_rng(2)
    for batch in (5, 3, 8):
        x = verigrad.tensor(rng.standard_normal((batch, 4)))
        y = verigrad.tensor(rng.integers(0, 6, batch))
        np.testing.assert_allclose(compiled(x, y).numpy(), f(x, y).numpy(), rtol=1e-12)


def test_a_compiled_training_step_through_them_matches_eager(backend) -> None:
    import verigrad.nn.functional as F

    weights = []
    for compiled in (False, True):
        verigrad.manual_seed(4)
        w = verigrad.randn(6, 4, dtype="f64", requires_grad=True)
        opt = verigrad.optim.RMSprop([w], lr=0.01)
        schedule = verigrad.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)

        def step(x, y, w=w, opt=opt):
            h = verigrad.einsum("bi,ji->bj", x, w)
            loss = F.nll_loss(F.log_softmax(h.clamp(-3.0, 3.0), -1), y) + h.topk(2, dim=1).values.mean()
            loss = (
                loss + h.gather(1, y.unsqueeze(1)).mean() + h.cumsum(1).var() + F.elu(h).logsumexp(1).mean()
            )
            opt.zero_grad()
            loss.backward()
            verigrad.nn.utils.clip_grad_norm_([w], 1.0)
            opt.step()
            return loss

        run = verigrad.compile(step) if compiled else step
        rng = np.random.default_rng(5)
        for batch in (5, 5, 3, 5):
            x = verigrad.tensor(rng.standard_normal((batch, 4)))
            run(x, verigrad.tensor(rng.integers(0, 6, batch)))
            schedule.step()
        weights.append(w.numpy().copy())
    np.testing.assert_allclose(weights[1], weights[0], rtol=1e-10, atol=1e-12)


def test_repeat_interleave_by_hand_and_symbolic(backend) -> None:
    _eq(verigrad.tensor([[1, 2], [3, 4]]).repeat_interleave(2, dim=1), np.array([[1, 1, 2, 2], [3, 3, 4, 4]]))
    _eq(verigrad.tensor([1, 2]).repeat_interleave(3), np.array([1, 1, 1, 2, 2, 2]))
    B = verigrad.dims("B")
    assert verigrad.check(lambda t: t.repeat_interleave(2, 0), verigrad.spec([B, 3])) == verigrad.spec(
        [B * 2, 3]
    )
    counts = verigrad.tensor([1, 2]).repeat_interleave(verigrad.tensor([1, 2]))  # a tensor of counts
    assert counts.tolist() == [1, 2, 2]


def test_max_min_mode_and_aminmax_by_hand(backend) -> None:
    """Along a dim, PyTorch's (values, indices): the first extreme's index, NaN counting as the extreme."""
    x = verigrad.tensor(VALUES)
    found = x.max(1)
    assert isinstance(found, tuple) and found._fields == ("values", "indices")
    _eq(found.values, [4.0, np.nan, np.inf])
    _eq(found[1], [3, 0, 3])
    _eq(verigrad.min(x, 0, keepdim=True).indices, [[1, 0, 1, 1]])
    _eq(x.min(dim=0).values, [np.nan, -2.0, -np.inf, -0.0])
    assert x.max().shape == () and np.isnan(x.max().item())
    _eq(x.amax(1), [4.0, np.nan, np.inf])  # values only, several dims too
    _eq(verigrad.amin(x, (0, 1)), np.nan)
    modes = verigrad.tensor([[1.0, 2.0, 2.0, 1.0, 3.0], [4.0, 4.0, 4.0, 0.0, 0.0]]).mode(1)
    _eq(modes.values, [1.0, 4.0])  # the smallest of the most frequent, at its last occurrence
    _eq(modes.indices, [3, 2])
    low, high = verigrad.aminmax(verigrad.tensor([[3, -1], [0, 7]]), dim=0)
    _eq(low, [0, -1])
    _eq(high, [3, 7])


def test_scatter_keeps_the_last_write_by_hand(backend) -> None:
    written = verigrad.zeros(1, 4).scatter(
        1, verigrad.tensor([[0, 0, 1, 1]]), verigrad.tensor([[1.0, 2, 3, 4]])
    )
    _eq(written, [[2.0, 4.0, 0.0, 0.0]])
    x = verigrad.zeros(1, 4, requires_grad=True)
    src = verigrad.tensor([[1.0, 2, 3, 4]], requires_grad=True)
    (x.scatter(1, verigrad.tensor([[0, 0, 1, 1]]), src) * verigrad.tensor([1.0, 2, 3, 4])).sum().backward()
    _eq(x.grad, [[0.0, 0.0, 3.0, 4.0]])  # none where written
    _eq(src.grad, [[1.0, 1.0, 2.0, 2.0]])  # each src the gradient at its position, as PyTorch's


def test_var_with_no_degrees_of_freedom_left_by_hand(backend) -> None:
    x = verigrad.tensor([[1.0, 2.0, 3.0], [5.0, 5.0, 5.0]])
    _eq(x.var(1, correction=2), [2.0, 0.0])
    _eq(x.var(1, correction=3), [np.inf, np.nan])  # a sum over 0 degrees of freedom, not below 0
    _eq(x.std(1, correction=4), [np.inf, np.nan])


def test_bool_extremes_and_triangles_stay_bool(backend) -> None:
    a, b = verigrad.tensor([True, False, True]), verigrad.tensor([False, False, True])
    assert verigrad.maximum(a, b).dtype is verigrad.bool_ and verigrad.minimum(a, b).dtype is verigrad.bool_
    _eq(verigrad.maximum(a, b), [True, False, True])
    _eq(a.minimum(b), [False, False, True])
    ones = verigrad.ones(2, 3, dtype="bool")
    _eq(ones.tril(), [[True, False, False], [True, True, False]])
    assert verigrad.triu(ones, 1).dtype is verigrad.bool_


def test_pytorch_style_results_compile_with_symbolic_sizes(backend) -> None:
    B, N = verigrad.dims("B N")
    spec = verigrad.spec([B, N])
    assert verigrad.check(lambda x: x.max(1), spec) == (verigrad.spec([B]), verigrad.spec([B], "i64"))
    assert verigrad.check(lambda x: x.mode(0), spec).values == verigrad.spec([N])
    assert verigrad.check(lambda x: x.aminmax(dim=1, keepdim=True), spec).max == verigrad.spec([B, 1])

    def f(x, i):
        picked = x.max(1).values + x.min(0, keepdim=True).indices.sum() + x.mode(1).values
        return picked + x.scatter(1, i, x * 2).sum(1), x.var(1, correction=5)

    compiled = verigrad.compile(f)
    rng = np.random.default_rng(3)
    for batch in (5, 3, 5):
        x = verigrad.tensor(rng.integers(0, 3, (batch, 4)).astype(float))
        i = verigrad.tensor(rng.integers(0, 4, (batch, 4)))
        for got, want in zip(compiled(x, i), f(x, i)):
            _eq(got, want.numpy())


def test_refused_as_pytorch_refuses() -> None:
    with pytest.raises(verigrad.DTypeError, match="bool"):
        verigrad.linspace(0, 1, 3, dtype="bool")
    for name in ("cummax", "cummin", "max", "sort", "mode"):
        with pytest.raises(ShapeError, match="dim 1 is out of range for the 0-d"):
            getattr(verigrad, name)(verigrad.tensor(2.0), 1)
        _eq(getattr(verigrad, name)(verigrad.tensor(2.0), -1).indices, 0)
    with pytest.raises(TypeError, match="amax takes several"):
        verigrad.tensor(VALUES).max((0, 1))


def test_mode_refuses_nan_whose_pytorch_answer_follows_its_sort() -> None:
    with pytest.raises(ValueError, match="NaN"):
        verigrad.tensor([np.nan, 1.0, np.nan]).mode()

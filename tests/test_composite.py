"""Composite ops: hand-computed examples, declared VJPs against their decompositions, symbolic shapes,
errors, and the functional wrappers. (The registry suites check every sample against the definition,
finite differences and PyTorch.)"""

from __future__ import annotations

import math

import numpy as np
import pytest

import verigrad
from verigrad import DTypeError, ShapeError, f64, ops
from verigrad.nn import functional as F
from verigrad.ops import REGISTRY
from verigrad.ops.composite._common import window_out
from verigrad.shapes import evaluate


def _t(a, grad: bool = False) -> verigrad.Tensor:
    t = verigrad.from_numpy(np.array(a, dtype=np.float64))
    return t.requires_grad_(True) if grad else t


def _grads(fn, *arrays, cotangent_seed: int = 0):
    """Gradients of sum(fn(*xs) * G) with respect to each float array, G fixed by the seed."""
    leaves = [_t(a, grad=True) for a in arrays]
    out = fn(*leaves)
    g = np.random.default_rng(cotangent_seed).uniform(-1, 1, out.shape)
    (out * _t(g)).sum().backward()
    return [leaf.grad.numpy() for leaf in leaves]


# softmax family --------------------------------------------------------------------------------
def test_softmax_of_huge_equal_logits_is_uniform() -> None:
    for dtype in ("f32", "f64"):
        x = verigrad.tensor([1000.0, 1000.0], dtype=dtype)
        np.testing.assert_array_equal(ops.softmax(x).numpy(), [0.5, 0.5])
        np.testing.assert_allclose(ops.log_softmax(x).numpy(), [-math.log(2)] * 2, rtol=1e-7)
    x = _t([[-np.inf, 0.0], [1.0, 1.0 + math.log(3.0)]])
    np.testing.assert_allclose(ops.softmax(x, axis=-1).numpy(), [[0.0, 1.0], [0.25, 0.75]], rtol=1e-15)


def test_softmax_gradient_of_a_nearly_one_hot_f32_row_is_rounded_once() -> None:
    # scores up to 81 make each row nearly one-hot and g large: out * (g - sum(g * out)) cancels, so a sum
    # rounded to f32 first leaves ~1e-5 of error; computed in f64 and rounded once, the gradient is the
    # exact one rounded to f32 (within an ulp), eagerly and compiled
    rng = np.random.default_rng(4)
    x = rng.uniform(-1.0, 1.0, (4, 6)).astype(np.float32) * np.float32(20.0)
    x[:, 0] = np.float32(81.0)
    x[:, 1] = np.float32(75.0)
    g = rng.uniform(-46.0, 46.0, (4, 6)).astype(np.float32)
    p64 = verigrad.tensor(x).softmax(-1).numpy().astype(np.float64)
    want = (p64 * (g - (g * p64).sum(-1, keepdims=True))).astype(np.float32)

    def grad_of(xv: verigrad.Tensor) -> verigrad.Tensor:
        leaf = xv.detach().requires_grad_()
        (ops.softmax(leaf, axis=-1) * verigrad.tensor(g)).sum().backward()
        return leaf.grad

    got = grad_of(verigrad.tensor(x)).numpy()
    np.testing.assert_allclose(got, want, rtol=2e-7, atol=1e-12)
    compiled = verigrad.compile(grad_of)
    for _ in range(3):  # traced, planned, then replayed
        np.testing.assert_array_equal(compiled(verigrad.tensor(x)).numpy(), got)


def test_softmax_axis_and_method() -> None:
    a = np.array([[1.0, 2.0], [3.0, 5.0]])
    e = np.exp(a - a.max(axis=0))
    np.testing.assert_allclose(_t(a).softmax(0).numpy(), e / e.sum(axis=0), rtol=1e-15)
    np.testing.assert_allclose(F.log_softmax(_t(a), dim=0).numpy(), np.log(e / e.sum(axis=0)), rtol=1e-14)


def test_cross_entropy_by_hand() -> None:
    logits = _t([[0.0, 0.0], [1.0, 2.0]])
    target = verigrad.tensor([1, 0])
    second = -math.log(math.e / (math.e + math.e**2))
    per = [math.log(2.0), second]
    np.testing.assert_allclose(ops.cross_entropy(logits, target, reduction="none").numpy(), per, rtol=1e-15)
    np.testing.assert_allclose(
        ops.cross_entropy(logits, target, reduction="sum").item(), sum(per), rtol=1e-15
    )
    np.testing.assert_allclose(F.cross_entropy(logits, target).item(), sum(per) / 2, rtol=1e-15)
    # the gradient of the mean is (softmax - onehot) / N
    (g,) = _grads(lambda x: ops.cross_entropy(x, target) * 1.0, [[0.0, 0.0], [1.0, 2.0]])
    p = 1 / (1 + math.e)
    assert g.shape == (2, 2)
    scale = np.random.default_rng(0).uniform(-1, 1, ())
    np.testing.assert_allclose(g, scale * np.array([[0.5, -0.5], [p - 1, 1 - p]]) / 2, rtol=1e-14)


def test_cross_entropy_ignores_masked_logits() -> None:
    """A -inf logit at a class that is not the target gives a finite loss (no 0 * inf)."""
    loss = ops.cross_entropy(_t([[-np.inf, 0.0, 0.0]]), verigrad.tensor([1]))
    np.testing.assert_allclose(loss.item(), math.log(2.0), rtol=1e-15)


def test_cross_entropy_refuses_bad_inputs() -> None:
    logits, target = _t(np.zeros((3, 4))), verigrad.tensor([0, 1, 2])
    with pytest.raises(ShapeError, match="N = 3 rows but target has 2"):
        ops.cross_entropy(logits, verigrad.tensor([0, 1]))
    with pytest.raises(ShapeError, match=r"logits must be \[N, C\]"):
        ops.cross_entropy(_t(np.zeros((3, 4, 2))), target)
    with pytest.raises(DTypeError, match="integer class indices"):
        ops.cross_entropy(logits, _t([0.0, 1.0, 2.0]))
    with pytest.raises(DTypeError, match="logits must be f16, f32 or f64"):
        ops.cross_entropy(verigrad.tensor([[1, 2]]), verigrad.tensor([0]))
    with pytest.raises(ValueError, match="reduction"):
        ops.cross_entropy(logits, target, reduction="avg")
    with pytest.raises(IndexError, match="target 4 is out of range for 4 classes"):
        F.cross_entropy(logits, verigrad.tensor([0, 4, 1]))


# declared VJPs against the decomposition's --------------------------------------------------------
_VJP_CASES = [
    ("softmax", lambda r: ((r.uniform(-2, 2, (3, 5)),), {"axis": -1})),
    ("softmax", lambda r: ((r.uniform(-2, 2, (2, 3, 4)),), {"axis": 1})),
    ("log_softmax", lambda r: ((r.uniform(-2, 2, (3, 5)),), {"axis": 0})),
    ("cross_entropy", lambda r: ((r.uniform(-2, 2, (4, 6)), r.integers(0, 6, 4)), {"reduction": "mean"})),
    ("cross_entropy", lambda r: ((r.uniform(-2, 2, (4, 6)), r.integers(0, 6, 4)), {"reduction": "none"})),
    ("max_pool2d", lambda r: ((r.uniform(-2, 2, (2, 3, 6, 7)),), {"kernel": 3, "stride": 2, "padding": 1})),
    (
        "max_pool2d",
        lambda r: ((r.uniform(-2, 2, (2, 6, 6, 3)),), {"kernel": 2, "stride": 1, "layout": "NHWC"}),
    ),
]


@pytest.mark.parametrize(("name", "make"), _VJP_CASES, ids=[c[0] for c in _VJP_CASES])
def test_declared_vjp_equals_decomposition_vjp(name: str, make) -> None:
    op = REGISTRY[name]
    args, params = make(np.random.default_rng(3))
    floats = [i for i, a in enumerate(args) if np.asarray(a).dtype.kind == "f"]
    grads = {}
    for how in ("vjp", "decompose"):
        leaves = [_t(a, grad=True) if i in floats else verigrad.from_numpy(a) for i, a in enumerate(args)]
        if how == "vjp":
            out = op(*leaves, **params)
            assert out._node.op is op  # one tape node, differentiated by the declared VJP
        else:
            canonical = op.canonical_params(*(t.spec for t in leaves), **params)
            out = op.decompose(*leaves, **canonical)
            assert out._node.op is not op
        g = np.random.default_rng(0).uniform(-1, 1, out.shape)
        (out * _t(g)).sum().backward()
        grads[how] = [leaves[i].grad.numpy() for i in floats]
    for a, b in zip(grads["vjp"], grads["decompose"]):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


# norms and embedding ---------------------------------------------------------------------------
def test_layer_norm_and_rms_norm_by_hand() -> None:
    x = _t([[1.0, 2.0, 3.0, 6.0]])  # mean 3, biased variance 3.5, mean square 12.5
    w, b = _t([1.0, 2.0, 1.0, 1.0]), _t([0.0, 0.0, 0.0, 1.0])
    expected = (np.array([-2.0, -1.0, 0.0, 3.0]) / math.sqrt(3.5 + 1e-5)) * [1, 2, 1, 1] + [0, 0, 0, 1]
    np.testing.assert_allclose(ops.layer_norm(x, w, b).numpy()[0], expected, rtol=1e-14)
    np.testing.assert_allclose(F.layer_norm(x).numpy()[0], [-2, -1, 0, 3] / np.sqrt(3.5 + 1e-5), rtol=1e-14)
    expected = np.array([1.0, 4.0, 3.0, 6.0]) / math.sqrt(12.5 + 1e-6)
    np.testing.assert_allclose(ops.rms_norm(x, _t([1.0, 2.0, 1.0, 1.0])).numpy()[0], expected, rtol=1e-14)
    np.testing.assert_allclose(
        F.rms_norm(x, x.shape[-1:], eps=0.5).numpy()[0], [1, 2, 3, 6] / np.sqrt(13.0), rtol=1e-14
    )
    with pytest.raises(ShapeError, match=r"weight must be \[4\]"):
        ops.layer_norm(x, _t([1.0, 2.0]), b)


def test_embedding_picks_rows() -> None:
    table = _t(np.arange(12.0).reshape(4, 3))
    idx = verigrad.tensor([[3, 0], [3, 3]])
    out = ops.embedding(table, idx)
    assert out.shape == (2, 2, 3)
    np.testing.assert_array_equal(out.numpy()[0], [[9, 10, 11], [0, 1, 2]])
    np.testing.assert_array_equal(F.embedding(idx, table).numpy(), out.numpy())  # PyTorch's order too
    (g,) = _grads(lambda w: ops.embedding(w, idx), np.arange(12.0).reshape(4, 3))
    cot = np.random.default_rng(0).uniform(-1, 1, (2, 2, 3))
    np.testing.assert_allclose(g[3], cot[0, 0] + cot[1, 0] + cot[1, 1], rtol=1e-15)
    np.testing.assert_array_equal(g[1], 0.0)
    with pytest.raises(DTypeError, match="indices must be an integer tensor"):
        ops.embedding(table, _t([0.0]))


# convolution -----------------------------------------------------------------------------------
def test_conv2d_one_channel_3x3_by_hand() -> None:
    x = np.arange(16.0).reshape(1, 1, 4, 4)  # x[r, c] = 4r + c
    ones = np.ones((1, 1, 3, 3))
    # each 3x3 window sums to 36i + 9j + 45 at output position (i, j)
    np.testing.assert_array_equal(ops.conv2d(_t(x), _t(ones)).numpy()[0, 0], [[45, 54], [81, 90]])
    corner = np.zeros((1, 1, 3, 3))
    corner[0, 0, 0, 0] = 1.0  # cross-correlation: output (i, j) reads x[i, j], unflipped
    np.testing.assert_array_equal(ops.conv2d(_t(x), _t(corner)).numpy()[0, 0], [[0, 1], [4, 5]])
    # padding 1, stride 2: windows centred on (0, 0), (0, 2), (2, 0), (2, 2)
    padded = ops.conv2d(_t(x), _t(ones), stride=2, padding=1).numpy()[0, 0]
    by_hand = [[0 + 1 + 4 + 5, 1 + 2 + 3 + 5 + 6 + 7], [4 + 5 + 8 + 9 + 12 + 13, 90]]
    np.testing.assert_array_equal(padded, by_hand)
    x_nhwc, w_hwio = _t(x.transpose(0, 2, 3, 1)), _t(ones.transpose(2, 3, 1, 0))
    nhwc = ops.conv2d(x_nhwc, w_hwio, stride=2, padding=1, layout="NHWC")
    np.testing.assert_array_equal(nhwc.numpy()[0, :, :, 0], padded)
    with_bias = F.conv2d(_t(x), _t(ones), bias=_t([0.5]))
    np.testing.assert_array_equal(with_bias.numpy()[0, 0], [[45.5, 54.5], [81.5, 90.5]])


def test_conv2d_dilation_by_hand() -> None:
    x = np.arange(25.0).reshape(1, 1, 5, 5)  # x[r, c] = 5r + c
    w = np.zeros((1, 1, 2, 2))
    w[0, 0, 1, 1] = 1.0  # with dilation 2, tap (1, 1) reads x[i + 2, j + 2]
    out = ops.conv2d(_t(x), _t(w), dilation=2).numpy()[0, 0]
    np.testing.assert_array_equal(out, x[0, 0, 2:, 2:])


def test_im2col_and_col2im_are_adjoint() -> None:
    rng = np.random.default_rng(5)
    for layout, shape in (("NCHW", (2, 3, 7, 6)), ("NHWC", (2, 7, 6, 3))):
        params = {"kernel": (3, 2), "stride": (2, 1), "padding": (1, 1), "dilation": (1, 2), "layout": layout}
        x = rng.uniform(-1, 1, shape)
        cols = ops.im2col(_t(x), **params)
        y = rng.uniform(-1, 1, cols.shape)
        hw = shape[2:] if layout == "NCHW" else shape[1:3]
        back = ops.col2im(_t(y), **params, size=hw)
        np.testing.assert_allclose((cols.numpy() * y).sum(), (x * back.numpy()).sum(), rtol=1e-13)


def test_im2col_pads_with_its_value() -> None:
    x = _t(np.ones((1, 1, 2, 2)))
    cols = ops.im2col(x, kernel=2, padding=1, pad_value=-np.inf).numpy()
    assert cols.shape == (1, 1, 2, 2, 3, 3)
    assert np.isneginf(cols[0, 0, 0, 0, 0, 0]) and cols[0, 0, 1, 1, 0, 0] == 1.0


def test_conv2d_refuses_bad_shapes() -> None:
    x = _t(np.zeros((1, 3, 5, 5)))
    with pytest.raises(ShapeError, match="3 channels but the weight expects 2"):
        ops.conv2d(x, _t(np.zeros((4, 2, 3, 3))))
    with pytest.raises(ShapeError, match="window covers 7 positions"):
        ops.conv2d(x, _t(np.zeros((4, 3, 7, 7))))
    with pytest.raises(ShapeError, match="stride must be at least 1"):
        ops.conv2d(x, _t(np.zeros((4, 3, 3, 3))), stride=0)
    with pytest.raises(ShapeError, match="layout"):
        ops.conv2d(x, _t(np.zeros((4, 3, 3, 3))), layout="NCWH")


# pooling ---------------------------------------------------------------------------------------
def test_max_pool_routes_ties_to_the_first_maximum() -> None:
    x = np.zeros((1, 1, 4, 4))  # every window is a tie (as after a ReLU)
    x[0, 0, 3, 3] = 1.0
    g = np.array([[[[1.0, 2.0], [3.0, 4.0]]]])
    leaf = _t(x, grad=True)
    out = ops.max_pool2d(leaf, kernel=2)
    np.testing.assert_array_equal(out.numpy()[0, 0], [[0, 0], [0, 1]])
    (out * _t(g)).sum().backward()
    expected = np.zeros((4, 4))
    expected[0, 0], expected[0, 2], expected[2, 0], expected[3, 3] = 1.0, 2.0, 3.0, 4.0
    np.testing.assert_array_equal(leaf.grad.numpy()[0, 0], expected)


def test_avg_pool_counts_padding() -> None:
    x = _t(np.ones((1, 1, 2, 2)))
    out = ops.avg_pool2d(x, kernel=2, stride=1, padding=1).numpy()[0, 0]
    np.testing.assert_array_equal(out, [[0.25, 0.5, 0.25], [0.5, 1.0, 0.5], [0.25, 0.5, 0.25]])
    with pytest.raises(ShapeError, match="at most half the kernel"):
        ops.avg_pool2d(x, kernel=2, padding=2)


# dropout ---------------------------------------------------------------------------------------
def test_dropout_is_deterministic_and_scaled() -> None:
    x = _t(np.ones((100, 100)))
    a, b = ops.dropout(x, p=0.25, seed=11).numpy(), ops.dropout(x, p=0.25, seed=11).numpy()
    np.testing.assert_array_equal(a, b)
    assert set(np.unique(a)) == {0.0, 1.0 / 0.75}
    assert abs((a == 0).mean() - 0.25) < 0.02
    assert not np.array_equal(a, ops.dropout(x, p=0.25, seed=12).numpy())
    f32 = ops.dropout(x.float(), p=0.25, seed=11).numpy()
    np.testing.assert_array_equal(f32 == 0, a == 0)  # the same mask in every dtype
    np.testing.assert_array_equal(ops.dropout(x, p=1.0, seed=1).numpy(), 0.0)
    assert F.dropout(x, 0.5, training=False) is x
    verigrad.manual_seed(3)
    first = F.dropout(x, 0.5).numpy()
    verigrad.manual_seed(3)
    np.testing.assert_array_equal(F.dropout(x, 0.5).numpy(), first)
    (g,) = _grads(lambda t: ops.dropout(t, p=0.25, seed=11), np.ones((100, 100)))
    cot = np.random.default_rng(0).uniform(-1, 1, (100, 100))
    np.testing.assert_allclose(g, cot * a, rtol=1e-15)


# rope ------------------------------------------------------------------------------------------
def test_rope_on_a_tiny_vector() -> None:
    x = _t([[1.0, 2.0, 3.0, 4.0]])  # T = 1, D = 4
    cos, sin = _t([[1.0, 1.0], [0.0, 1.0]]), _t([[0.0, 0.0], [1.0, 0.0]])  # row 1: 90 and 0 degrees
    # interleaved pairs (1, 2) turn by 90 degrees to (-2, 1); (3, 4) stays
    np.testing.assert_array_equal(ops.rope(x, cos, sin, offset=1).numpy(), [[-2, 1, 3, 4]])
    # half-split pairs (x0, x2) = (1, 3) turn to (-3, 1); (x1, x3) = (2, 4) stays
    np.testing.assert_array_equal(ops.rope(x, cos, sin, offset=1, interleaved=False).numpy(), [[-3, 2, 1, 4]])
    np.testing.assert_array_equal(ops.rope(x, cos, sin, offset=0).numpy(), x.numpy())  # row 0: 0 degrees
    with pytest.raises(ShapeError, match="need 3 table rows, but the tables have 2"):
        ops.rope(x, cos, sin, offset=2)


def test_rope_keeps_norms_and_matches_llama_tables() -> None:
    rng = np.random.default_rng(2)
    t, d = 5, 8
    freqs = 10000.0 ** (-np.arange(0, d, 2) / d)
    angles = np.arange(t)[:, None] * freqs[None, :]
    x = rng.standard_normal((2, t, d))
    out = F.rope(_t(x), _t(np.cos(angles)), _t(np.sin(angles))).numpy()
    pairs_in, pairs_out = x.reshape(2, t, d // 2, 2), out.reshape(2, t, d // 2, 2)
    np.testing.assert_allclose(
        np.hypot(*np.moveaxis(pairs_out, -1, 0)), np.hypot(*np.moveaxis(pairs_in, -1, 0))
    )
    z = (pairs_in[..., 0] + 1j * pairs_in[..., 1]) * np.exp(1j * angles)
    np.testing.assert_allclose(pairs_out[..., 0], z.real, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(pairs_out[..., 1], z.imag, rtol=1e-13, atol=1e-15)


# symbolic shapes -------------------------------------------------------------------------------
def test_symbolic_shapes() -> None:
    n, c, h, w, t, d, v = verigrad.dims("cn cc ch cw ct cd cv")
    spec = verigrad.spec
    assert verigrad.check(ops.softmax, spec([n, c])) == spec([n, c])
    assert verigrad.check(lambda x, y: ops.cross_entropy(x, y), spec([n, c]), spec([n], "i64")) == spec([])
    assert verigrad.check(
        lambda x, k: ops.conv2d(x, k, padding=1), spec([n, 3, h, w]), spec([c, 3, 3, 3])
    ) == (spec([n, c, h, w]))
    pooled = verigrad.check(lambda x: ops.max_pool2d(x, kernel=2), spec([n, c, h * 2, w * 2], "f64"))
    assert pooled == spec([n, c, h, w], "f64")
    odd = verigrad.check(lambda x: ops.avg_pool2d(x, kernel=2, layout="NHWC"), spec([n, h, w, c]))
    assert odd.shape[1] == h // 2 and odd.shape[2] == w // 2  # (h - 2)//2 + 1 is written h//2
    assert verigrad.check(lambda a, i: ops.embedding(a, i), spec([v, d]), spec([n, t], "i64")) == spec(
        [n, t, d]
    )
    assert verigrad.check(F.rope, spec([n, 4, t, d * 2]), spec([t, d]), spec([t, d])) == spec(
        [n, 4, t, d * 2]
    )
    assert verigrad.check(
        lambda x, a, b: F.layer_norm(x, a, b), spec([n, t, d]), spec([d]), spec([d])
    ) == spec([n, t, d])
    assert verigrad.check(lambda x: F.rms_norm(x, x.shape[-1:]), spec([n, t, d])) == spec([n, t, d])
    assert verigrad.check(lambda x: ops.dropout(x, p=0.1, seed=1), spec([n, d])) == spec([n, d])
    with pytest.raises(ShapeError, match="last axis must be 2"):
        verigrad.check(F.rope, spec([n, t, d]), spec([t, d]), spec([t, d]))
    with pytest.raises(ShapeError, match="weight expects"):
        verigrad.check(lambda x, k: ops.conv2d(x, k), spec([n, c, h, w]), spec([c, d, 3, 3]))


def test_symbolic_window_sizes_evaluate_like_concrete_ones() -> None:
    h = verigrad.dims("wh")
    for kernel, stride, padding, dilation in ((3, 2, 1, 1), (2, 2, 0, 1), (3, 3, 0, 2), (5, 4, 2, 1)):
        size = window_out(h, kernel, stride, padding, dilation, "height")
        for value in range(dilation * (kernel - 1) + 1, 30):
            assert evaluate(size, {"wh": value}) == window_out(value, kernel, stride, padding, dilation, "h")


def test_a_small_cnn_checks_symbolically_and_runs() -> None:
    n = verigrad.dims("cnn_n")

    def net(x, k1, k2, fc, y):
        a = F.max_pool2d(F.relu(F.conv2d(x, k1, padding=1)), 2)
        b = F.avg_pool2d(F.relu(F.conv2d(a, k2, padding=1)), 2)
        return F.cross_entropy(F.log_softmax(b.reshape(b.shape[0], -1) @ fc), y)

    shapes = ([1, 8, 8], [4, 1, 3, 3], [6, 4, 3, 3], [6 * 2 * 2, 3])
    specs = [verigrad.spec([n, *shapes[0]], "f64"), *(verigrad.spec(s, "f64") for s in shapes[1:])]
    assert verigrad.check(net, *specs, verigrad.spec([n], "i64")) == verigrad.spec([], f64)
    rng = np.random.default_rng(0)
    arrays = [rng.uniform(-1, 1, (5, *shapes[0])), *(rng.uniform(-1, 1, s) for s in shapes[1:])]
    leaves = [_t(a, grad=True) for a in arrays]
    loss = net(*leaves, verigrad.tensor(rng.integers(0, 3, 5)))
    loss.backward()
    assert all(leaf.grad is not None and leaf.grad.shape == leaf.shape for leaf in leaves)


# functional ------------------------------------------------------------------------------------
def test_functional_activations() -> None:
    x = _t([-1.0, 0.0, 2.0])
    np.testing.assert_array_equal(F.relu(x).numpy(), [0, 0, 2])
    np.testing.assert_allclose(F.sigmoid(x).numpy(), 1 / (1 + np.exp([1.0, 0.0, -2.0])), rtol=1e-15)
    np.testing.assert_allclose(F.tanh(x).numpy(), np.tanh([-1.0, 0.0, 2.0]), rtol=1e-15)
    np.testing.assert_allclose(F.silu(x).numpy(), [-1 / (1 + math.e), 0, 2 / (1 + math.exp(-2))], rtol=1e-15)
    np.testing.assert_allclose(F.gelu(x).numpy()[2], 2 * 0.5 * (1 + math.erf(2 / math.sqrt(2))), rtol=1e-15)
    assert F.gelu(x, approximate="tanh").numpy()[2] != F.gelu(x).numpy()[2]
    with pytest.raises(ValueError, match="approximate"):
        F.gelu(x, approximate="fast")
